// Inspect a prompt directly on the model (no engine): raw last-position logits, the MTP
// head's logits at the last prompt position, and the layer-0 recurrent state norm.
// Used by `generate --dump-logits` and the golden tests.
import { forwardHidden, lmHeadInto, mtpForward, readNow } from './forward.js';
import type { Tensor } from '../kernels/types.js';
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

/** One read-back the probe waits on: the first n elements of t. */
interface ProbeRead { readonly t: Tensor; readonly n: number }

/** The probe's steps; each yielded read is answered with a host copy of it (the caller
 * picks synchronous or awaited read-backs). A read is answered before the next kernel call,
 * so the shared head output buffer can be reused by the MTP head. */
function* probeSteps(model: AnyModel, promptIds: readonly number[], firstToken?: number): Generator<ProbeRead, PromptProbe, Float32Array> {
  const ws = new StepArena(model);
  const p = promptIds.length;
  const mem = allocSequenceMemory(model, p + 1);
  const fw = forwardHidden(model, ws, [{ tokens: promptIds, start: 0, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: true }]);
  const hidden = fw.hidden; // the MTP head below writes only its own arena fields
  const V = model.weights.lmHead.rows;
  const lastLogits = yield { t: lmHeadInto(model, ws, hidden, [p - 1], ws.head.out.rows(1)), n: V };
  let mtpLogits: Float32Array | null = null;
  const mtpKv = mem.mtpKv[0];
  if (mtpKv) {
    const next = firstToken ?? argmax(lastLogits);
    const out = mtpForward(model, ws, [{ tokens: [...promptIds.slice(1), next], hidden, start: 0, pageTable: mem.pageTable, kv: mtpKv }]);
    mtpLogits = yield { t: lmHeadInto(model, ws, out, [p - 1], ws.head.out.rows(1)), n: V };
  }
  const s0 = mem.state[0];
  let norm: number | null = null;
  if (s0) {
    let ss = 0;
    for (const x of yield { t: s0.ssm, n: s0.ssm.length }) ss += x * x;
    norm = Math.sqrt(ss);
  }
  return { lastLogits, mtpLogits, layer0StateNorm: norm };
}

/** `firstToken` is the token generated after the prompt (default: the argmax). Needs a
 * backend whose read-back is synchronous (ref, wasm); probePromptAsync serves every backend. */
export function probePrompt(model: AnyModel, promptIds: readonly number[], firstToken?: number): PromptProbe {
  const steps = probeSteps(model, promptIds, firstToken);
  for (let r = steps.next(); ; ) {
    if (r.done) return r.value;
    r = steps.next(readNow(model, r.value.t, r.value.n).slice());
  }
}

/** probePrompt on any backend: each read-back awaited (webgpu's is a Promise). */
export async function probePromptAsync(model: AnyModel, promptIds: readonly number[], firstToken?: number): Promise<PromptProbe> {
  const steps = probeSteps(model, promptIds, firstToken);
  for (let r = steps.next(); ; ) {
    if (r.done) return r.value;
    const back = await model.kernels.readBack([{ t: r.value.t, offset: 0, length: r.value.n }]);
    r = steps.next(back[0]!.slice());
  }
}

/** Top-n [id, logit] pairs, highest first (ties by id). */
export function topLogits(logits: Float32Array, n: number): [number, number][] {
  const ids = Array.from({ length: logits.length }, (_, i) => i);
  ids.sort((a, b) => logits[b]! - logits[a]! || a - b);
  return ids.slice(0, n).map((i) => [i, logits[i]!]);
}
