// Streams a prefix-cache save to disk off the event loop. The engine thread only copies
// the body out of the pools, a bounded slice at a time between steps (engine/prefix-persist.ts);
// a worker thread hashes the body and does every write, fsync and rename (store-io.ts).
// DirectStoreWriter does the same work on the calling thread, for tests that inject a file
// system (FileIo) with short writes and failures.
import { Worker } from 'node:worker_threads';
import { NODE_IO, StoreFileWriter, type FileIo } from './store-io.js';

export interface SaveSpec {
  readonly file: string;
  readonly head: Uint8Array;
  readonly digestAt: number;
  readonly hashPrefix: string;
}

/** One save at a time: begin, append the body in order, then finish (or abort). Each call
 * resolves once its work is done in the writer; a failure rejects it and every later call
 * of that save, the temporary file removed and the old file kept. */
export interface StoreWriter {
  begin(spec: SaveSpec): Promise<void>;
  /** The writer takes ownership of `bytes` (its buffer is transferred to the worker) and
   * hands the buffer back once written, for the next piece. */
  append(bytes: Uint8Array): Promise<ArrayBuffer>;
  /** Moves the file into place; resolves to its size in bytes. */
  finish(): Promise<number>;
  abort(): Promise<void>;
  /** Stop the worker (after the last save). */
  close(): Promise<void>;
}

/** The operations a writer thread runs, shared by both writers. */
export class StoreOps {
  private w: StoreFileWriter | null = null;
  constructor(private readonly io: FileIo) {}

  begin(spec: SaveSpec): void {
    this.abort();
    this.w = new StoreFileWriter(this.io, spec.file, Buffer.from(spec.head.buffer, spec.head.byteOffset, spec.head.byteLength),
      spec.digestAt, spec.hashPrefix);
  }
  append(bytes: Uint8Array): void {
    this.current().append(bytes);
  }
  finish(): number {
    const w = this.current();
    this.w = null;
    return w.finish();
  }
  abort(): void {
    this.w?.abort();
    this.w = null;
  }
  private current(): StoreFileWriter {
    if (!this.w) throw new Error('no save in progress (an earlier step of this save failed)');
    return this.w;
  }
}

/** A failed step ends its save: the writer forgets it (later steps report that). */
function run<T>(ops: StoreOps, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    ops.abort();
    throw e;
  }
}

export class DirectStoreWriter implements StoreWriter {
  private readonly ops: StoreOps;
  constructor(io: FileIo = NODE_IO) {
    this.ops = new StoreOps(io);
  }
  async begin(spec: SaveSpec): Promise<void> { run(this.ops, () => this.ops.begin(spec)); }
  async append(bytes: Uint8Array): Promise<ArrayBuffer> {
    run(this.ops, () => this.ops.append(bytes));
    return bytes.buffer as ArrayBuffer;
  }
  async finish(): Promise<number> { return run(this.ops, () => this.ops.finish()); }
  async abort(): Promise<void> { this.ops.abort(); }
  async close(): Promise<void> { this.ops.abort(); }
}

export type StoreRequest =
  | { readonly seq: number; readonly op: 'begin'; readonly spec: SaveSpec }
  | { readonly seq: number; readonly op: 'append'; readonly bytes: Uint8Array }
  | { readonly seq: number; readonly op: 'finish' | 'abort' };
export type StoreReply =
  | { readonly seq: number; readonly ok: true; readonly value?: number; readonly buffer?: ArrayBuffer }
  | { readonly seq: number; readonly ok: false; readonly message: string };

/** Runs a request on `ops` (in the worker). */
export function handleStoreRequest(ops: StoreOps, m: StoreRequest): StoreReply {
  try {
    switch (m.op) {
      case 'begin': run(ops, () => ops.begin(m.spec)); return { seq: m.seq, ok: true };
      case 'append': run(ops, () => ops.append(m.bytes)); return { seq: m.seq, ok: true, buffer: m.bytes.buffer as ArrayBuffer };
      case 'finish': return { seq: m.seq, ok: true, value: run(ops, () => ops.finish()) };
      case 'abort': ops.abort(); return { seq: m.seq, ok: true };
    }
  } catch (e) {
    return { seq: m.seq, ok: false, message: (e as Error).message };
  }
}

interface Pending {
  resolve(r: { value?: number; buffer?: ArrayBuffer }): void;
  reject(e: Error): void;
}

export class WorkerStoreWriter implements StoreWriter {
  private worker: Worker | null = null;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();

  /** Starts the thread now (at engine start), so a save does not wait for it. */
  constructor() {
    this.worker = this.start();
  }

  begin(spec: SaveSpec): Promise<void> {
    return this.send({ seq: 0, op: 'begin', spec }).then(() => undefined);
  }
  append(bytes: Uint8Array): Promise<ArrayBuffer> {
    return this.send({ seq: 0, op: 'append', bytes }, [bytes.buffer as ArrayBuffer]).then((r) => r.buffer!);
  }
  finish(): Promise<number> {
    return this.send({ seq: 0, op: 'finish' }).then((r) => r.value ?? 0);
  }
  abort(): Promise<void> {
    return this.worker ? this.send({ seq: 0, op: 'abort' }).then(() => undefined) : Promise.resolve();
  }
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate();
  }

  private start(): Worker {
    // no inherited node flags: some (--input-type, --eval's) are invalid for a worker file
    const w = new Worker(new URL('./store-worker.js', import.meta.url), { execArgv: [] });
    w.on('message', (r: StoreReply) => {
      const p = this.pending.get(r.seq);
      this.pending.delete(r.seq);
      if (this.pending.size === 0) w.unref();
      if (r.ok) p?.resolve(r);
      else p?.reject(new Error(r.message));
    });
    const fail = (e: Error): void => {
      if (this.worker === w) this.worker = null;
      for (const p of this.pending.values()) p.reject(new Error(`prefix-cache writer thread failed: ${e.message}`));
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`exited with code ${code}`)));
    // after the listeners (adding a 'message' listener refs it): referenced only while a
    // request is pending (see send), so an idle writer never keeps the process alive
    w.unref();
    return w;
  }

  private send(m: StoreRequest, transfer: ArrayBuffer[] = []): Promise<{ value?: number; buffer?: ArrayBuffer }> {
    this.worker ??= this.start();
    const seq = ++this.seq;
    if (this.pending.size === 0) this.worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      this.worker!.postMessage({ ...m, seq }, transfer);
    });
  }
}
