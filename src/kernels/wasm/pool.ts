// Main-thread side of the worker pool. The Kernels interface is synchronous, so a command
// is: write arguments + command into the control block, open its chunks (CLAIM), bump GEN
// (notify only if a worker sleeps), claim and run chunks on the main thread too, then wait
// until every chunk has completed (spinning first, then Atomics.wait with MAIN_WAITING).
import { Worker, MessageChannel, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import {
  ARENA, ARGS, ARGS_OFFSET, BGEN, CHUNKS_DONE, CLAIM, CMD, CTL_BYTES, CTL_INTS, Cmd, DONE, ERROR, GEN, MAIN_WAITING, NCHUNKS,
  NO_CLAIM, SLEEPERS, claim, claimTag, executeChunk,
} from './exec.js';
import type { KernelExports, WasmMemory, WasmModule } from './module.js';

const SPIN_MS = 0.1; // workers' spin budget before sleeping on GEN
const MAIN_SPIN_MS = 0.5; // main thread's spin budget before sleeping (it only waits for chunks in flight)
// A worker that died holding a chunk cannot report it (its 'error' event needs the event
// loop this synchronous wait blocks): give up after this long rather than hang forever.
const WATCHDOG_MS = 120_000;

export class Pool {
  readonly ctl: Int32Array;
  readonly args: Float64Array;
  private readonly workers: Worker[] = [];
  private readonly ports: MessagePort[] = [];
  private failure: Error | null = null;
  /** The command between `start` and `join` (its claim tag and chunk count). */
  private current: { cmd: number; tag: number; chunks: number } | null = null;

  private constructor(readonly threads: number) {
    const sab = new SharedArrayBuffer(CTL_BYTES);
    this.ctl = new Int32Array(sab, 0, CTL_INTS);
    this.args = new Float64Array(sab, ARGS_OFFSET, ARGS);
  }

  /** Start threads − 1 workers on `memories` (the arenas existing now). */
  static async start(threads: number, module: WasmModule, memories: WasmMemory[]): Promise<Pool> {
    const pool = new Pool(threads);
    const url = new URL('./worker.js', import.meta.url);
    const ready: Promise<void>[] = [];
    for (let tid = 1; tid < threads; tid++) {
      const { port1, port2 } = new MessageChannel();
      const w = new Worker(url, {
        workerData: { module, memories, ctl: pool.ctl.buffer, tid, threads, port: port2, spinMs: SPIN_MS, gen: Atomics.load(pool.ctl, GEN) },
        transferList: [port2],
      });
      ready.push(new Promise((resolve, reject) => {
        w.once('online', () => resolve());
        w.once('error', reject);
      }));
      w.on('error', (e) => {
        pool.failure = e instanceof Error ? e : new Error(String(e));
      });
      pool.workers.push(w);
      pool.ports.push(port1);
    }
    await Promise.all(ready);
    // Only now: an unref'd worker would not keep the process alive until it is online.
    for (const w of pool.workers) w.unref();
    for (const p of pool.ports) p.unref();
    return pool;
  }

  /** Run `cmd` (arguments already in `args`) as `chunks` chunks claimed dynamically by
   * all threads, against arena `arena` (`ex`: the main thread's instance of it). */
  run(cmd: number, arena: number, ex: KernelExports, chunks: number): void {
    this.start(cmd, arena, chunks);
    this.join(ex);
  }

  /** Publish `cmd` to the workers and return at once: the main thread may do other work
   * (not touching the command's memory or `args`) before it calls `join`. Exactly one
   * `join` must follow before the next command. */
  start(cmd: number, arena: number, chunks: number): void {
    if (this.failure) throw this.failure;
    if (this.current) throw new Error('wasm pool: a command is still running (join it first)');
    if (chunks < 1 || chunks > 0xffff) throw new RangeError(`wasm pool: ${chunks} chunks`);
    const ctl = this.ctl;
    const g = (Atomics.load(ctl, GEN) + 1) | 0;
    // Close the previous command to stragglers first (a worker that saw an older GEN
    // must not claim with fields of this one), then publish this one.
    Atomics.store(ctl, CLAIM, NO_CLAIM);
    Atomics.store(ctl, CMD, cmd);
    Atomics.store(ctl, ARENA, arena);
    Atomics.store(ctl, NCHUNKS, chunks);
    Atomics.store(ctl, CHUNKS_DONE, 0);
    Atomics.store(ctl, CLAIM, claimTag(g));
    Atomics.store(ctl, GEN, g);
    if (Atomics.load(ctl, SLEEPERS) > 0) Atomics.notify(ctl, GEN);
    this.current = { cmd, tag: claimTag(g), chunks };
  }

  /** Claim and run the started command's remaining chunks on the main thread, then wait
   * until every chunk has completed; rethrows the first failure. */
  join(ex: KernelExports): void {
    const cur = this.current;
    if (!cur) throw new Error('wasm pool: join without a started command');
    this.current = null;
    const { cmd, tag, chunks } = cur;
    const ctl = this.ctl;
    let err: unknown = null;
    for (let c = claim(ctl, tag, chunks); c >= 0; c = claim(ctl, tag, chunks)) {
      try {
        executeChunk(ex, cmd, this.args, 0, c, chunks);
      } catch (e) {
        err ??= e;
      }
      Atomics.add(ctl, CHUNKS_DONE, 1);
    }
    this.await(CHUNKS_DONE, chunks);
    if (err) throw err;
    const bad = Atomics.exchange(ctl, ERROR, 0);
    if (bad) throw new Error(`wasm kernels: worker ${bad} failed on command ${cmd} (see stderr)`);
  }

  /** Wait until ctl[slot] ≥ target: spin briefly (workers usually finish within
   * microseconds of us), then sleep — when the machine is oversubscribed, spinning only
   * steals the core a worker needs. */
  private await(slot: number, target: number): void {
    const ctl = this.ctl;
    let spins = 0;
    let t0 = 0;
    for (;;) {
      const d = Atomics.load(ctl, slot);
      if (d >= target) return;
      if ((++spins & 63) !== 0) continue;
      if (t0 === 0) t0 = performance.now();
      else if (performance.now() - t0 > MAIN_SPIN_MS) {
        Atomics.store(ctl, MAIN_WAITING, 1);
        Atomics.wait(ctl, slot, d, 20);
        Atomics.store(ctl, MAIN_WAITING, 0);
        if (this.failure) throw this.failure;
        if (performance.now() - t0 > WATCHDOG_MS) {
          throw new Error(`wasm kernels: workers unresponsive for ${WATCHDOG_MS / 1000} s (command ${Atomics.load(ctl, CMD)})`);
        }
      }
    }
  }

  /** A command every worker must execute itself; returns when all acknowledged. */
  private barrier(cmd: number): void {
    const ctl = this.ctl;
    const g = (Atomics.load(ctl, GEN) + 1) | 0;
    Atomics.store(ctl, CLAIM, NO_CLAIM);
    Atomics.store(ctl, DONE, 0);
    Atomics.store(ctl, BGEN, g);
    Atomics.store(ctl, CMD, cmd);
    Atomics.store(ctl, GEN, g);
    Atomics.notify(ctl, GEN);
    this.await(DONE, this.workers.length);
    const bad = Atomics.exchange(ctl, ERROR, 0);
    if (bad) throw new Error(`wasm kernels: worker ${bad} failed on command ${cmd} (see stderr)`);
  }

  /** Give a new arena's memory to every worker (they instantiate the module on it). */
  addMemory(memory: WasmMemory): void {
    for (const p of this.ports) p.postMessage(memory);
    if (this.workers.length > 0) this.barrier(Cmd.ADD_ARENA);
  }

  dispose(): void {
    if (this.workers.length === 0) return;
    try {
      const ctl = this.ctl;
      Atomics.store(ctl, CLAIM, NO_CLAIM);
      Atomics.store(ctl, CMD, Cmd.EXIT);
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
    } finally {
      for (const w of this.workers) void w.terminate();
      for (const p of this.ports) p.close();
      this.workers.length = 0;
    }
  }
}
