// Greedy decoding straight on the model (no engine): chunked prefill of the prompt, then
// one token per step, argmax of the LM head (lowest index on ties).
import { allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden, lmHead } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** The first n greedy ids after promptIds. */
export function greedy(m: Model, promptIds: number[], n: number): number[] {
  const ws = new StepArena(m);
  const mem = allocSequenceMemory(m, promptIds.length + n + 8);
  const seq = { pageTable: mem.pageTable, kv: mem.kv, state: mem.state };
  const p = promptIds.length;
  const fw = forwardHidden(m, ws, [{ ...seq, tokens: promptIds, start: 0, chunked: true }]);
  const out = [argmax(lmHead(m, ws, fw.hidden.slice(), [p - 1]))];
  while (out.length < n) {
    const step = forwardHidden(m, ws, [{ ...seq, tokens: [out[out.length - 1]!], start: p + out.length - 1, chunked: false }]);
    out.push(argmax(lmHead(m, ws, step.hidden, [0])));
  }
  return out;
}
