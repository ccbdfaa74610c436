// The timed steps of `deltaserve bench` (decode / verify / prefill): the model forward
// directly (no scheduler), one read-back per step carrying the greedy ids (the argmax on the
// kernels, as the engine's greedy step) — shared by the mtp bench's verify timing.
import type { Tensor } from '../kernels/types.js';
import { DEVICE_TOKEN, forwardHidden, lmHeadInto, type SeqInput } from '../model/forward.js';
import { GDN_CHUNK } from '../kernels/types.js';
import { StepArena } from '../model/arena.js';
import { type AnyModel, allocBatchMemory, type SequenceMemory } from '../model/model.js';
import type { Rng } from '../util/rng.js';

/** ms: wall time of the timed steps; recordMs: the part spent before each step's read-back
 * (on a GPU backend the host's cost of recording the step's dispatches); threadCpuMs: this
 * thread's CPU time recording each step and in the synchronous part of its read-back call
 * (on webgpu: encoding and submitting) — the host's cost, unaffected by other processes'
 * load and excluding the wait for the device (Dawn polls on this thread while waiting);
 * null where Node lacks process.threadCpuUsage (before 23.9); it advances in scheduler ticks
 * (~ms on Linux), so only a run of many steps gives a per-dispatch figure worth reading. */
export interface Run { tokens: number; ms: number; steps: number; recordMs: number; threadCpuMs: number | null }

const threadCpu = (process as { threadCpuUsage?: () => { user: number; system: number } }).threadCpuUsage;

/** This thread's CPU time in ms, or null. */
export function threadCpuNow(): number | null {
  if (!threadCpu) return null;
  const u = threadCpu.call(process);
  return (u.user + u.system) / 1000;
}

const since = (c0: number | null): number | null => {
  const c1 = threadCpuNow();
  return c0 === null || c1 === null ? null : c1 - c0;
};

const plus = (a: number | null, b: number | null): number | null => (a === null || b === null ? null : a + b);

function seqs(mems: SequenceMemory<Tensor>[], tokens: ArrayLike<number>[], start: number[], chunked: boolean): SeqInput<Tensor>[] {
  return mems.map((m, i) => ({ tokens: tokens[i]!, start: start[i]!, pageTable: m.pageTable, kv: m.kv, state: m.state, chunked }));
}

/** The step's one read-back (a GPU backend runs the step's recorded work here). */
async function readLogits(model: AnyModel, logits: Tensor, n: number): Promise<void> {
  const r = model.kernels.readBack([{ t: logits, offset: 0, length: n }]);
  if (r instanceof Promise) await r;
}

/** A greedy engine step's pick and read-back (engine/runner.ts): the argmax of `rows` logits
 * rows on the kernels, their ids read back. */
async function readPicks(model: AnyModel, ids: Tensor, logits: Tensor, rows: number): Promise<void> {
  const v = model.config.vocabSize;
  model.kernels.argmaxRows(ids, 0, logits, rows, v, v);
  await readLogits(model, ids, rows);
}

/** One timed run; `onTimed` is called right before the timed steps (after the prompt), and
 * `timing` (the profiler's switch) is on exactly while the clock runs. `overlap` (decode on a
 * GPU backend, as the engine's overlapped decode: engine/overlap.ts): step s + 1 is recorded
 * and submitted before step s's read-back is awaited, its tokens step s's picks on the device. */
export async function benchOnce(model: AnyModel, mode: string, batch: number, prompt: number, gen: number, verify: number, rng: Rng,
  onTimed?: () => void, timing: (on: boolean) => void = () => {}, overlap = false): Promise<Run> {
  const ws = new StepArena(model);
  const vocab = model.config.vocabSize;
  const randomIds = (n: number): number[] => Array.from({ length: n }, () => Math.floor(rng.next() * Math.min(vocab, 990)));
  const steps = mode === 'prefill' ? 1 : gen;
  const per = mode === 'verify' ? verify : 1;
  // the batch's memory shares each layer's buffers, as the engine's pools (one dispatch per
  // layer on a GPU, whatever the batch)
  const mems: SequenceMemory<Tensor>[] = allocBatchMemory(model, batch, prompt + steps * per + 2);
  const prompts = mems.map(() => randomIds(prompt));
  if (mode === 'prefill') {
    onTimed?.();
    timing(true);
    const t0 = performance.now();
    const c0 = threadCpuNow();
    const fw = forwardHidden(model, ws, seqs(mems, prompts, mems.map(() => 0), true));
    const out = lmHeadInto(model, ws, fw.hidden, fw.offsets.map((o) => o + prompt - 1), ws.head.out.rows(batch));
    const recordMs = performance.now() - t0;
    const read = readLogits(model, out, batch * vocab); // runs to its first await: the submit
    const threadCpuMs = since(c0);
    await read;
    const ms = performance.now() - t0;
    timing(false);
    return { tokens: batch * prompt, ms, steps: 1, recordMs, threadCpuMs };
  }
  // the untimed prompt: chunked from one GDN chunk up, as the engine's prefill; a shorter
  // one token by token (a chunk's algebra costs a whole chunk, however few its tokens)
  const pre = forwardHidden(model, ws, seqs(mems, prompts, mems.map(() => 0), prompt >= GDN_CHUNK));
  await readLogits(model, pre.hidden, 1);
  const logits = ws.logits.rows(batch * per);
  const ids = model.kernels.allocI32(batch * per);
  let pos = prompt;
  onTimed?.();
  timing(true);
  const t0 = performance.now();
  let recordMs = 0;
  let threadCpuMs: number | null = 0;
  const chained = overlap && mode === 'decode';
  let previous: Promise<void> | null = null; // the step whose read-back is pending (overlap)
  for (let s = 0; s < steps; s++) {
    const toks = mems.map(() => (chained && s > 0 ? DEVICE_TOKEN : randomIds(per)));
    const r0 = performance.now();
    const c0 = threadCpuNow();
    const fw = forwardHidden(model, ws, seqs(mems, toks, mems.map(() => pos), false), chained && s > 0 ? { ids, offset: 0 } : null);
    lmHeadInto(model, ws, fw.hidden, Array.from({ length: batch * per }, (_, r) => r), logits);
    recordMs += performance.now() - r0;
    const read = readPicks(model, ids, logits, batch * per); // runs to its first await: the submit
    threadCpuMs = plus(threadCpuMs, since(c0));
    if (chained) {
      await previous;
      previous = read;
    } else await read;
    pos += per;
  }
  await previous;
  const ms = performance.now() - t0;
  timing(false);
  return { tokens: batch * steps * per, ms, steps, recordMs, threadCpuMs };
}

