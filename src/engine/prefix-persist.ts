// --prefix-cache-dir: load the saved prefix cache at start, save it periodically (when it
// changed and the engine is idle) and at close. The file is tied to a hash of the model's
// files and of every engine option that can change numerics (see prefix-store.ts for the
// format and the checks).
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadStore, saveStore, STORE_VERSION } from '../cache/prefix-store.js';
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
}

/** Options that never change a snapshot's bits (scheduling, sizes, this;
 * the kernel backend actually used and whether the MTP head runs are hashed on their own).
 * Any other option — including ones added later — is part of the identity. */
const NUMERICS_FREE = new Set(['model', 'kernels', 'specTokens', 'prefixCacheGenerationSnapshots', 'threads', 'maxRunning', 'maxPrefillTokens', 'kvCacheTokens', 'maxContext', 'specAdaptive',
  'draftVocab', 'stateTrackInterval', 'cacheStateSlots', 'prefixCache', 'prefixCacheDir', 'prefixCacheDiskBytes',
  'prefixCacheSaveMs', 'log']);

/** First and last MiB of a file, with its name and size: cheap, and any regenerated or
 * re-quantized weights change it. */
function fileIdentity(path: string): string {
  const size = statSync(path).size;
  const h = createHash('sha256').update(`${size}:`);
  const fd = openSync(path, 'r');
  try {
    const n = Math.min(size, 1 << 20);
    const buf = Buffer.alloc(n);
    readSync(fd, buf, 0, n, 0);
    h.update(buf);
    readSync(fd, buf, 0, n, size - n);
    h.update(buf);
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

/** Hash naming the model files and the numerics configuration. */
export function modelIdentity(modelDir: string, kernels: string, mtp: boolean, opts: object): string {
  const h = createHash('sha256').update(`deltaserve-prefix-v${STORE_VERSION}\nkernels=${kernels}\nmtp=${mtp}\n`);
  const files = readdirSync(modelDir).filter((f) => /\.(json|safetensors|gguf)$/.test(f)).sort();
  for (const f of files) h.update(`${f}=${fileIdentity(join(modelDir, f))}\n`);
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
}

export class PrefixPersistence {
  private loads = 0;
  private loadedSnapshots = 0;
  private saves = 0;
  private savedSnapshots = 0;
  private bytes = 0;
  private rejected = 0;
  private savedVersion = -1;
  private lastSave = performance.now();

  constructor(
    private readonly ctx: PrefixContext,
    private readonly identity: string,
    private readonly hidden: number,
    private readonly o: PersistOptions,
    private readonly log: (msg: string) => void,
  ) {
    try {
      mkdirSync(o.dir, { recursive: true });
    } catch (e) {
      throw new DeltaserveError('bad_config', `--prefix-cache-dir ${o.dir}: cannot create the directory (${(e as Error).message})`);
    }
    if (!Number.isInteger(o.maxBytes) || o.maxBytes < 0) {
      throw new DeltaserveError('bad_config', `--prefix-cache-disk-bytes must be a non-negative integer (got ${o.maxBytes})`);
    }
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

  /** Milliseconds until unsaved changes are due for saving, or null when all is saved
   * (or periodic saving is off). */
  dueInMs(): number | null {
    if (this.o.saveMs <= 0 || this.version() === this.savedVersion) return null;
    return Math.max(0, this.o.saveMs - (performance.now() - this.lastSave));
  }

  /** Save if the cache changed and the interval passed (call when idle). */
  maybeSave(): void {
    if (this.o.saveMs <= 0 || performance.now() - this.lastSave < this.o.saveMs) return;
    this.save();
  }

  save(): void {
    this.lastSave = performance.now();
    const v = this.version();
    if (v === this.savedVersion) return;
    try {
      const { cache, kv, state } = this.ctx;
      const r = saveStore(this.o.dir, this.identity, cache, kv, state, this.hidden, this.o.maxBytes);
      this.saves++;
      this.savedSnapshots = r.snapshots;
      this.bytes = r.bytes;
      this.savedVersion = v;
    } catch (e) {
      this.log(`prefix cache: saving to ${this.o.dir} failed: ${(e as Error).message}`);
    }
  }

  stats(): DiskStats {
    return {
      loads: this.loads, loadedSnapshots: this.loadedSnapshots, saves: this.saves, savedSnapshots: this.savedSnapshots,
      bytes: this.bytes, rejected: this.rejected,
    };
  }
}
