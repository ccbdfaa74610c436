// Token sampling: penalties → temperature → top-k / top-p / min-p → draw.
// `targetDistribution` exposes the final distribution p (needed by lossless speculative
// rejection sampling); `sampleToken` draws from it (or takes the argmax when greedy).
import type { Rng } from '../util/rng.js';
import { DeltaserveError } from '../util/errors.js';

export interface SamplingParams {
  /** 0 ⇒ greedy (argmax). */
  readonly temperature: number;
  /** ≤ 0 ⇒ off. */
  readonly topK: number;
  /** 1 ⇒ off. */
  readonly topP: number;
  /** 0 ⇒ off. */
  readonly minP: number;
  /** 1 ⇒ off; applies to prompt and generated tokens (logit/rp if > 0, else ·rp). */
  readonly repetitionPenalty: number;
  /** OpenAI semantics over generated tokens: −presence·[count>0] − frequency·count. */
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
}

export const GREEDY: SamplingParams = Object.freeze({
  temperature: 0, topK: 0, topP: 1, minP: 0, repetitionPenalty: 1, presencePenalty: 0, frequencyPenalty: 0,
});

/** Token history a request's penalties read: counts of generated ids, ids of the prompt. */
export class TokenHistory {
  readonly outputCounts = new Map<number, number>();
  readonly promptIds: Set<number>;
  constructor(promptIds: Iterable<number>) {
    this.promptIds = new Set(promptIds);
  }
  push(id: number): void {
    this.outputCounts.set(id, (this.outputCounts.get(id) ?? 0) + 1);
  }
}

export function validateSampling(p: SamplingParams): void {
  const bad = (field: string, why: string): never => {
    throw new DeltaserveError('bad_request', `${field} ${why}`);
  };
  if (!(p.temperature >= 0 && p.temperature <= 100)) bad('temperature', `must be in [0, 100] (got ${p.temperature})`);
  if (!Number.isInteger(p.topK)) bad('top_k', `must be an integer (got ${p.topK})`);
  if (!(p.topP > 0 && p.topP <= 1)) bad('top_p', `must be in (0, 1] (got ${p.topP})`);
  if (!(p.minP >= 0 && p.minP <= 1)) bad('min_p', `must be in [0, 1] (got ${p.minP})`);
  if (!(p.repetitionPenalty > 0 && p.repetitionPenalty <= 10)) bad('repetition_penalty', `must be in (0, 10] (got ${p.repetitionPenalty})`);
  if (!(Math.abs(p.presencePenalty) <= 2)) bad('presence_penalty', `must be in [-2, 2] (got ${p.presencePenalty})`);
  if (!(Math.abs(p.frequencyPenalty) <= 2)) bad('frequency_penalty', `must be in [-2, 2] (got ${p.frequencyPenalty})`);
}

export function isGreedy(p: SamplingParams): boolean {
  return p.temperature === 0;
}

/** Copy logits[0..vocab) with penalties applied and ids ≥ vocab excluded. */
function penalized(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number): Float64Array {
  const out = new Float64Array(vocab);
  for (let i = 0; i < vocab; i++) out[i] = logits[i]!;
  if (!hist) return out;
  if (p.repetitionPenalty !== 1) {
    const seen = new Set<number>([...hist.promptIds, ...hist.outputCounts.keys()]);
    for (const id of seen) {
      if (id >= vocab) continue;
      const l = out[id]!;
      out[id] = l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty;
    }
  }
  if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
    for (const [id, n] of hist.outputCounts) {
      if (id < vocab) out[id] = out[id]! - p.presencePenalty - p.frequencyPenalty * n;
    }
  }
  return out;
}

function argmax(v: ArrayLike<number>, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** The distribution a request samples from, over ids [0, vocab): penalties, temperature,
 * then top-k, min-p and top-p truncation, renormalised. Greedy ⇒ one-hot on the argmax. */
export function targetDistribution(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number): Float64Array {
  const l = penalized(logits, p, hist, vocab);
  const probs = new Float64Array(vocab);
  if (isGreedy(p)) {
    probs[argmax(l, vocab)] = 1;
    return probs;
  }
  let max = -Infinity;
  for (let i = 0; i < vocab; i++) max = Math.max(max, l[i]!);
  let sum = 0;
  for (let i = 0; i < vocab; i++) {
    const e = Math.exp((l[i]! - max) / p.temperature);
    probs[i] = e;
    sum += e;
  }
  for (let i = 0; i < vocab; i++) probs[i] = probs[i]! / sum;
  truncate(probs, p);
  return probs;
}

/** Zero every id outside the top-k / min-p / top-p sets, then renormalise. The argmax
 * always survives. Ties are ordered by id. */
function truncate(probs: Float64Array, p: SamplingParams): void {
  const n = probs.length;
  const needSort = (p.topK > 0 && p.topK < n) || p.topP < 1;
  let pmax = 0;
  for (let i = 0; i < n; i++) pmax = Math.max(pmax, probs[i]!);
  if (p.minP > 0) {
    const cut = p.minP * pmax;
    for (let i = 0; i < n; i++) if (probs[i]! < cut) probs[i] = 0;
  }
  if (needSort) {
    const order = Array.from({ length: n }, (_, i) => i).filter((i) => probs[i]! > 0);
    order.sort((a, b) => probs[b]! - probs[a]! || a - b);
    let keep = p.topK > 0 ? Math.min(p.topK, order.length) : order.length;
    if (p.topP < 1) {
      let total = 0;
      for (let i = 0; i < keep; i++) total += probs[order[i]!]!;
      let cum = 0;
      for (let i = 0; i < keep; i++) {
        cum += probs[order[i]!]! / total;
        if (cum >= p.topP) {
          keep = i + 1;
          break;
        }
      }
    }
    for (let i = keep; i < order.length; i++) probs[order[i]!] = 0;
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += probs[i]!;
  for (let i = 0; i < n; i++) probs[i] = probs[i]! / sum;
}

/** Draw an id from a normalised distribution with one uniform from rng. */
export function drawFrom(probs: Float64Array, rng: Rng): number {
  const u = rng.next();
  let cum = 0;
  let last = 0;
  for (let i = 0; i < probs.length; i++) {
    const q = probs[i]!;
    if (q <= 0) continue;
    cum += q;
    last = i;
    if (u < cum) return i;
  }
  return last;
}

/** Pick the next token: argmax of penalised logits when greedy, else a draw. */
export function sampleToken(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number, rng: Rng): number {
  if (isGreedy(p)) return argmax(penalized(logits, p, hist, vocab), vocab);
  return drawFrom(targetDistribution(logits, p, hist, vocab), rng);
}
