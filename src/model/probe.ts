// Inspect a prompt directly on the model (no engine): raw last-position logits, the MTP
// head's logits at the last prompt position, and the layer-0 recurrent state norm.
// Used by `generate --dump-logits` and the golden tests.
import { forwardHidden, lmHead, mtpForward, readNow } from './forward.js';
import { StepArena } from './arena.js';
import { type AnyModel, allocSequenceMemory } from './model.js';

export interface PromptProbe {
  /** [vocab_size] raw logits at the last prompt position. */
  readonly lastLogits: Float32Array;
  /** [vocab_size] MTP logits at position P−1 fed `firstToken`; null without an MTP head. */
  readonly mtpLogits: Float32Array | null;
  /** Frobenius norm of layer 0's Gated DeltaNet state after the prompt (null if the first
   * linear layer is absent). */
  readonly layer0StateNorm: number | null;
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** `firstToken` is the token generated after the prompt (default: the argmax). */
export function probePrompt(model: AnyModel, promptIds: readonly number[], firstToken?: number): PromptProbe {
  const ws = new StepArena(model);
  const p = promptIds.length;
  const mem = allocSequenceMemory(model, p + 1);
  const fw = forwardHidden(model, ws, [{ tokens: promptIds, start: 0, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: true }]);
  const hidden = fw.hidden; // the MTP head below writes only its own arena fields
  const lastLogits = lmHead(model, ws, hidden, [p - 1]);
  let mtpLogits: Float32Array | null = null;
  const mtpKv = mem.mtpKv[0];
  if (mtpKv) {
    const next = firstToken ?? argmax(lastLogits);
    const out = mtpForward(model, ws, [{ tokens: [...promptIds.slice(1), next], hidden, start: 0, pageTable: mem.pageTable, kv: mtpKv }]);
    mtpLogits = lmHead(model, ws, out, [p - 1]);
  }
  const s0 = mem.state[0];
  let norm: number | null = null;
  if (s0) {
    let ss = 0;
    for (const x of readNow(model, s0.ssm, s0.ssm.length)) ss += x * x;
    norm = Math.sqrt(ss);
  }
  return { lastLogits, mtpLogits, layer0StateNorm: norm };
}

/** Top-n [id, logit] pairs, highest first (ties by id). */
export function topLogits(logits: Float32Array, n: number): [number, number][] {
  const ids = Array.from({ length: logits.length }, (_, i) => i);
  ids.sort((a, b) => logits[b]! - logits[a]! || a - b);
  return ids.slice(0, n).map((i) => [i, logits[i]!]);
}
