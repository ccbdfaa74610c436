// --prefix-cache-dir: load the saved prefix cache at start, save it periodically (when it
// changed and the engine is idle) and at close. The file is tied to a hash of the model's
// files and of every engine option that can change numerics (see prefix-store.ts for the
// format and the checks).
//
// A save never stalls the engine: this thread copies the body out of the pools in slices
// of at most SLICE_MS between engine steps and hands each piece to a writer thread, which
// hashes and writes it (store-writer.ts). A save whose snapshots are evicted while it is
// being copied is dropped (the next one starts over); a failed save keeps the old file.
import { createHash } from 'node:crypto';
import { closeSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { loadStore, planStore, STORE_FILE, STORE_VERSION, type StorePlan } from '../cache/prefix-store.js';
import { dirAccess, type DirAccess, removeStaleTemps, type FileIo } from '../cache/store-io.js';
import { DirectStoreWriter, WorkerStoreWriter, type StoreWriter } from '../cache/store-writer.js';
import type { PoolRange, PoolStorage, PoolTensor } from '../cache/pool-storage.js';
import { DeltaserveError } from '../util/errors.js';
import type { PrefixContext } from './prefix.js';

export interface DiskStats {
  readonly loads: number;
  readonly loadedSnapshots: number;
  readonly saves: number;
  readonly savedSnapshots: number;
  /** Size of the last file written or loaded. */
  readonly bytes: number;
  /** Files found but rejected (mismatched, truncated, corrupt). */
  readonly rejected: number;
  /** Saves that failed (the previous file was kept). */
  readonly saveErrors: number;
  /** Saves dropped because snapshots were evicted while being copied. */
  readonly savesOutdated: number;
}

/** Options that never change a snapshot's bits (scheduling, sizes, this;
 * the kernel backend actually used and whether the MTP head runs are hashed on their own).
 * Any other option — including ones added later — is part of the identity. */
const NUMERICS_FREE = new Set(['model', 'kernels', 'specTokens', 'prefixCacheGenerationSnapshots', 'threads', 'maxRunning', 'maxPrefillTokens', 'kvCacheTokens', 'maxContext', 'specAdaptive', 'specSampling', 'specRedrafts',
  'draftVocab', 'stateTrackInterval', 'cacheStateSlots', 'prefixCache', 'prefixCacheDir', 'prefixCacheDiskBytes',
  'prefixCacheSaveMs', 'memoryBudget', 'log']);

/** Longest a save holds the event loop at a time (then it yields to engine steps). */
const SLICE_MS = 4;
/** Body bytes per piece handed to the writer. */
const CHUNK_BYTES = 4 << 20;
/** Floats copied between two looks at the clock (~0.1 ms). */
const COPY_STEP = 1 << 16;
/** Body bytes handed to the writer and not yet written (memory bound of a save). */
const MAX_IN_FLIGHT = 64 << 20;
/** Pool bytes read back per call (a GPU backend: one transfer each). */
const READ_BATCH_BYTES = 16 << 20;

/** The plan's pieces as host rows, in order: pool ranges read back through `storage` in
 * batches (on a CPU backend views at once, on a GPU one awaited transfer per batch). */
async function* hostPieces<T extends PoolTensor>(pieces: Iterable<PoolRange<T> | Float32Array>, storage: PoolStorage<T>):
  AsyncGenerator<Float32Array> {
  let batch: PoolRange<T>[] = [];
  let bytes = 0;
  async function* flush(): AsyncGenerator<Float32Array> {
    if (batch.length === 0) return;
    const got = storage.readBack(batch);
    batch = [];
    bytes = 0;
    yield* got instanceof Promise ? await got : got;
  }
  for (const p of pieces) {
    if (p instanceof Float32Array) {
      yield* flush();
      yield p;
      continue;
    }
    batch.push(p);
    bytes += 4 * p.length;
    if (bytes >= READ_BATCH_BYTES) yield* flush();
  }
  yield* flush();
}

/** A usable --prefix-cache-dir, created (0700) if missing: writable, or read-only (its saved
 * cache is loaded and served, saves are off); anything else is a clear error now (never a
 * hang, never a failure at the first save). */
export function checkPrefixCacheDir(dir: string, io?: FileIo): Exclude<DirAccess, { kind: 'unusable' }> {
  const access = dirAccess(dir, io);
  if (access.kind === 'unusable') throw new DeltaserveError('bad_config', `--prefix-cache-dir ${dir} cannot be used: ${access.why}`);
  return access;
}

function readAt(fd: number, buf: Buffer, position: number, path: string): void {
  for (let done = 0; done < buf.length;) {
    const n = readSync(fd, buf, done, buf.length - done, position + done);
    if (n <= 0) throw new DeltaserveError('bad_config', `${path}: unexpected end of file while hashing it for the prefix cache`);
    done += n;
  }
}

/** First and last MiB of a file, with its name and size: cheap, and any regenerated or
 * re-quantized weights change it. */
function fileIdentity(path: string): string {
  const size = statSync(path).size;
  const h = createHash('sha256').update(`${size}:`);
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(Math.min(size, 1 << 20));
    readAt(fd, buf, 0, path);
    h.update(buf);
    readAt(fd, buf, size - buf.length, path);
    h.update(buf);
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

const SPLIT_PART = /^(.*)-\d{5}-of-(\d{5})\.gguf$/;

/** The files a model is read from: a directory's config, tokenizer and weight files; a
 * GGUF file (every part of a split GGUF). */
function modelFiles(modelPath: string): string[] {
  if (statSync(modelPath).isDirectory()) {
    return readdirSync(modelPath).filter((f) => /\.(json|safetensors|gguf)$/.test(f)).sort().map((f) => join(modelPath, f));
  }
  const m = SPLIT_PART.exec(basename(modelPath));
  if (!m) return [modelPath];
  const dir = dirname(modelPath);
  return readdirSync(dir).filter((f) => f.startsWith(`${m[1]}-`) && f.endsWith(`-of-${m[2]}.gguf`)).sort().map((f) => join(dir, f));
}

/** Hash naming the model files and the numerics configuration; `modelPath` is the resolved
 * model (a directory or a GGUF file; a hub name is resolved to its snapshot first). */
export function modelIdentity(modelPath: string, kernels: string, mtp: boolean, opts: object): string {
  const h = createHash('sha256').update(`deltaserve-prefix-v${STORE_VERSION}\nkernels=${kernels}\nmtp=${mtp}\n`);
  for (const f of modelFiles(modelPath)) h.update(`${basename(f)}=${fileIdentity(f)}\n`);
  const numeric = Object.entries(opts).filter(([k, v]) => !NUMERICS_FREE.has(k) && typeof v !== 'function').sort(([a], [b]) => (a < b ? -1 : 1));
  h.update(JSON.stringify(numeric));
  return h.digest('hex');
}

export interface PersistOptions {
  readonly dir: string;
  /** Bound on the file's size (least recently used snapshots are left out). */
  readonly maxBytes: number;
  /** Save at most this often while running (0 = only at close). */
  readonly saveMs: number;
  /** Test hook: write on this thread through this file system instead of a worker. */
  readonly io?: FileIo;
  /** Called when a save ends (the engine re-checks whether another one is due). */
  readonly onSaveEnd?: () => void;
}

/** The cache evicted snapshots while a save was copying them. */
class SaveOutdated extends Error {}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class PrefixPersistence {
  private loads = 0;
  private loadedSnapshots = 0;
  private saves = 0;
  private savedSnapshots = 0;
  private bytes = 0;
  private rejected = 0;
  private saveErrors = 0;
  private savesOutdated = 0;
  private savedVersion = -1;
  private lastSave = performance.now();
  private saving: Promise<void> | null = null;
  /** null: the directory is read-only, nothing is ever saved. */
  private readonly writer: StoreWriter | null;

  constructor(
    private readonly ctx: PrefixContext,
    private readonly identity: string,
    private readonly hidden: number,
    private readonly o: PersistOptions,
    private readonly log: (msg: string) => void,
  ) {
    if (!Number.isInteger(o.maxBytes) || o.maxBytes < 0) {
      throw new DeltaserveError('bad_config', `--prefix-cache-disk-bytes must be a non-negative integer (got ${o.maxBytes})`);
    }
    const access = checkPrefixCacheDir(o.dir, o.io);
    if (access.kind === 'read-only') {
      this.log(`prefix cache: warning: ${o.dir} is read-only (${access.why}): its saved cache is loaded and served, saves are off`);
      this.writer = null;
      return;
    }
    for (const name of removeStaleTemps(join(o.dir, STORE_FILE), o.io)) this.log(`prefix cache: removed ${name}, left by a save that never finished`);
    this.writer = o.io ? new DirectStoreWriter(o.io) : new WorkerStoreWriter();
  }

  /** Cache contents changed since the last save? (snapshots in and out). */
  private version(): number {
    return this.ctx.inserted + this.ctx.cache.stats().evictions;
  }

  load(): void {
    const { cache, kv, state } = this.ctx;
    const r = loadStore(this.o.dir, this.identity, cache, kv, state, this.hidden);
    if (r === null) return;
    if ('rejected' in r) {
      this.rejected++;
      this.log(`prefix cache: ignoring saved cache: ${r.rejected}`);
      return;
    }
    this.loads++;
    this.loadedSnapshots += r.snapshots;
    this.bytes = r.bytes;
    this.savedVersion = this.version();
    this.log(`prefix cache: loaded ${r.snapshots} snapshots (${r.bytes} bytes) from ${this.o.dir}`);
  }

  /** Milliseconds until unsaved changes are due for saving, or null when all is saved, a
   * save is under way (or periodic saving is off). */
  dueInMs(): number | null {
    if (this.writer === null || this.o.saveMs <= 0 || this.saving || this.version() === this.savedVersion) return null;
    return Math.max(0, this.o.saveMs - (performance.now() - this.lastSave));
  }

  /** Start a save if the cache changed and the interval passed (call when idle); it runs
   * in the background, between engine steps. */
  maybeSave(): void {
    if (this.writer === null || this.o.saveMs <= 0 || this.saving || performance.now() - this.lastSave < this.o.saveMs) return;
    this.saving = this.save().finally(() => {
      this.saving = null;
      this.o.onSaveEnd?.();
    });
  }

  /** Finish any save under way, save what changed since, stop the writer. The pools must
   * stay alive until this resolves. */
  async close(): Promise<void> {
    await this.saving;
    await this.save();
    await this.writer?.close();
  }

  /** Save now if anything changed; failures are logged (the previous file stays). */
  async save(): Promise<void> {
    this.lastSave = performance.now();
    const v = this.version();
    const writer = this.writer;
    if (v === this.savedVersion || writer === null) return;
    const { cache, kv, state } = this.ctx;
    const plan = planStore(this.o.dir, this.identity, cache, kv, state, this.hidden, this.o.maxBytes);
    const evictions = cache.stats().evictions;
    try {
      await writer.begin({ file: plan.file, head: plan.head, digestAt: plan.digestAt, hashPrefix: plan.hashPrefix });
      await this.copyBody(writer, plan, kv.storage, () => cache.stats().evictions === evictions);
      this.bytes = await writer.finish();
      this.saves++;
      this.savedSnapshots = plan.snapshots;
      this.savedVersion = v;
    } catch (e) {
      await writer.abort().catch(() => {});
      if (e instanceof SaveOutdated) {
        this.savesOutdated++;
        return;
      }
      this.saveErrors++;
      this.log(`prefix cache: saving to ${this.o.dir} failed: ${(e as Error).message}`);
    }
  }

  /** Copy the plan's body into pieces for the writer, yielding to the event loop every
   * SLICE_MS; throws SaveOutdated when `valid()` turns false after any wait (the views may
   * then point at reused pages and slots), or the writer's first error. */
  private async copyBody<T extends PoolTensor>(writer: StoreWriter, plan: StorePlan<T>, storage: PoolStorage<T>, valid: () => boolean): Promise<void> {
    let failure: unknown = null;
    const inFlight: Promise<void>[] = [];
    const resume = (): void => {
      if (failure !== null) throw failure;
      if (!valid()) throw new SaveOutdated();
    };
    // buffers the writer handed back (reused: a fresh 4 MiB buffer costs page faults)
    const spare: ArrayBuffer[] = [];
    const nextChunk = (): Float32Array => new Float32Array(spare.pop() ?? new ArrayBuffer(CHUNK_BYTES));
    let chunk = nextChunk();
    let fill = 0;
    let copied = 0;
    const send = async (): Promise<void> => {
      // handled at once (never an unhandled rejection); reported by resume()
      inFlight.push(writer.append(new Uint8Array(chunk.buffer, 0, fill * 4))
        .then((b) => { if (b.byteLength === CHUNK_BYTES) spare.push(b); }, (e: unknown) => { failure ??= e; }));
      copied += fill * 4;
      chunk = nextChunk();
      fill = 0;
      while (inFlight.length * CHUNK_BYTES > MAX_IN_FLIGHT) await inFlight.shift();
      resume();
    };
    resume();
    let sliceStart = performance.now();
    for await (const view of hostPieces(plan.pieces(), storage)) {
      resume(); // a GPU read-back awaited: the pieces still hold the snapshots?
      for (let at = 0; at < view.length;) {
        const n = Math.min(view.length - at, chunk.length - fill, COPY_STEP);
        chunk.set(view.subarray(at, at + n), fill);
        fill += n;
        at += n;
        if (fill === chunk.length) await send();
        if (performance.now() - sliceStart >= SLICE_MS) {
          await nextTurn();
          resume();
          sliceStart = performance.now();
        }
      }
    }
    if (fill > 0) await send();
    await Promise.all(inFlight);
    if (failure !== null) throw failure;
    if (copied !== plan.bodyBytes) throw new Error(`copied ${copied} body bytes, the header says ${plan.bodyBytes}`);
  }

  stats(): DiskStats {
    return {
      loads: this.loads, loadedSnapshots: this.loadedSnapshots, saves: this.saves, savedSnapshots: this.savedSnapshots,
      bytes: this.bytes, rejected: this.rejected, saveErrors: this.saveErrors, savesOutdated: this.savesOutdated,
    };
  }
}
