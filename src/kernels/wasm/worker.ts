// Worker thread of the wasm backend: instantiates the kernel module on every arena's
// shared memory and claims chunks of each command. Waiting: spin on the generation
// counter for SPIN_MS (a kernel launch then costs a few µs), then sleep in Atomics.wait
// (announced in SLEEPERS so the main thread notifies only when someone sleeps).
import { workerData, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { instantiate, type KernelExports, type WasmMemory, type WasmModule } from './module.js';
import {
  ARENA, ARGS, ARGS_OFFSET, BGEN, CHUNKS_DONE, CMD, CTL_INTS, Cmd, DONE, ERROR, GEN, MAIN_WAITING, NCHUNKS, SLEEPERS,
  claim, claimTag, executeChunk,
} from './exec.js';

interface WorkerInit {
  module: WasmModule;
  memories: WasmMemory[];
  ctl: SharedArrayBuffer;
  tid: number;
  threads: number;
  port: MessagePort;
  spinMs: number;
  gen: number; // GEN when the worker was created: commands after it are ours
}

const init = workerData as WorkerInit;
const ctl = new Int32Array(init.ctl, 0, CTL_INTS);
const shared = new Float64Array(init.ctl, ARGS_OFFSET, ARGS);
const args = new Float64Array(ARGS); // this command's arguments, read before claiming
const instances: KernelExports[] = init.memories.map((m) => instantiate(init.module, m));
const workers = init.threads - 1;

function waitForCommand(seen: number): number {
  let g = Atomics.load(ctl, GEN);
  if (g !== seen) return g;
  let t0 = performance.now();
  let spins = 0;
  for (;;) {
    g = Atomics.load(ctl, GEN);
    if (g !== seen) return g;
    if ((++spins & 1023) === 0 && performance.now() - t0 > init.spinMs) {
      Atomics.add(ctl, SLEEPERS, 1);
      Atomics.wait(ctl, GEN, seen);
      Atomics.sub(ctl, SLEEPERS, 1);
      t0 = performance.now();
    }
  }
}

/** Barrier commands (every worker must act): ADD_ARENA. Acknowledged through DONE. */
function barrier(cmd: number): void {
  try {
    if (cmd === Cmd.ADD_ARENA) {
      const msg = receiveMessageOnPort(init.port);
      if (!msg) throw new Error('ADD_ARENA without a memory message');
      instances.push(instantiate(init.module, msg.message as WasmMemory));
    }
  } catch (e) {
    fail(e);
  }
  if (Atomics.add(ctl, DONE, 1) === workers - 1 && Atomics.load(ctl, MAIN_WAITING)) Atomics.notify(ctl, DONE);
}

function fail(e: unknown): void {
  Atomics.store(ctl, ERROR, init.tid);
  process.stderr.write(`deltaserve wasm worker ${init.tid}: ${(e as Error).stack ?? String(e)}\n`);
}

let seen = init.gen;
let lastBarrier = init.gen;
for (;;) {
  seen = waitForCommand(seen);
  const cmd = Atomics.load(ctl, CMD);
  if (cmd === Cmd.EXIT) break;
  if (cmd === Cmd.ADD_ARENA) {
    const bg = Atomics.load(ctl, BGEN);
    if (bg !== lastBarrier) {
      lastBarrier = bg;
      barrier(cmd);
    }
    continue;
  }
  // Chunked command: read its fields and arguments, then claim chunks while it is current
  // (a successful claim proves what was read belongs to it, see exec.ts `claim`).
  const tag = claimTag(seen);
  const n = Atomics.load(ctl, NCHUNKS);
  const ex = instances[Atomics.load(ctl, ARENA)];
  args.set(shared);
  for (let c = claim(ctl, tag, n); c >= 0; c = claim(ctl, tag, n)) {
    try {
      if (!ex) throw new Error(`no instance for arena ${ctl[ARENA]}`);
      executeChunk(ex, cmd, args, init.tid, c, n);
    } catch (e) {
      fail(e);
    }
    if (Atomics.add(ctl, CHUNKS_DONE, 1) === n - 1 && Atomics.load(ctl, MAIN_WAITING)) Atomics.notify(ctl, CHUNKS_DONE);
  }
}
