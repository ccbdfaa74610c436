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

function hasPenalties(p: SamplingParams, hist: TokenHistory | null): hist is TokenHistory {
  return hist !== null && (p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0);
}

/** The penalised logit of every id a penalty touches (ids < vocab), in f64. */
function penaltyAdjustments(logits: Float32Array, p: SamplingParams, hist: TokenHistory, vocab: number): Map<number, number> {
  const adj = new Map<number, number>();
  if (p.repetitionPenalty !== 1) {
    for (const id of [...hist.promptIds, ...hist.outputCounts.keys()]) {
      if (id >= vocab || adj.has(id)) continue;
      const l = logits[id]!;
      adj.set(id, l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty);
    }
  }
  if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
    for (const [id, n] of hist.outputCounts) {
      if (id < vocab) adj.set(id, (adj.get(id) ?? logits[id]!) - p.presencePenalty - p.frequencyPenalty * n);
    }
  }
  return adj;
}

/** Reused by penalized(): a fresh 2 MB array per token (248K ids) costs page faults. */
let penalizedScratch = new Float64Array(0);

/** logits[0..vocab) with penalties applied and ids ≥ vocab excluded, in a scratch array
 * that the next call overwrites (callers read it before sampling again). */
function penalized(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number): Float64Array {
  if (penalizedScratch.length < vocab) penalizedScratch = new Float64Array(vocab);
  const out = penalizedScratch.subarray(0, vocab);
  out.set(logits.subarray(0, vocab));
  if (hasPenalties(p, hist)) for (const [id, l] of penaltyAdjustments(logits, p, hist, vocab)) out[id] = l;
  return out;
}

/** Lowest id holding the maximum of v[0..n) (NaN never wins over a number). */
function argmax(v: ArrayLike<number>, n: number): number {
  let best = 0;
  let bv = v[0]!;
  for (let i = 1; i < n; i++) {
    const x = v[i]!;
    if (x > bv || (bv !== bv && x === x)) {
      bv = x;
      best = i;
    }
  }
  return best;
}

/** A fast argmax over logits[0..n) with the same contract (lowest index of the maximum,
 * NaN never wins): the engine passes the kernels' SIMD one. */
export type Argmax = (logits: Float32Array, n: number) => number;

/** argmax of the penalised logits without copying the vocabulary: the raw argmax, unless
 * a penalised id beats it (or it is penalised itself, then the full copy decides). */
function greedyPick(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number, fast?: Argmax): number {
  const raw = fast ? fast(logits, vocab) : argmax(logits, vocab);
  if (!hasPenalties(p, hist)) return raw;
  const adj = penaltyAdjustments(logits, p, hist, vocab);
  if (adj.has(raw)) return argmax(penalized(logits, p, hist, vocab), vocab);
  let best = raw;
  let bv = logits[raw]!;
  for (const [id, l] of adj) {
    if (l > bv || (l === bv && id < best)) {
      best = id;
      bv = l;
    }
  }
  return best;
}

/** The distribution a request samples from, over ids [0, vocab): penalties, temperature,
 * then top-k, min-p and top-p truncation, renormalised. Greedy ⇒ one-hot on the argmax. */
export function targetDistribution(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number,
  fast?: Argmax): Float64Array {
  if (isGreedy(p)) {
    const probs = new Float64Array(vocab);
    probs[greedyPick(logits, p, hist, vocab, fast)] = 1;
    return probs;
  }
  const l = penalized(logits, p, hist, vocab);
  const probs = new Float64Array(vocab);
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
    const keepIds = topOrder(probs, p.topK, p.topP, pmax); // min-p never removes the max
    const kept = keepIds.map((id) => probs[id]!);
    probs.fill(0);
    keepIds.forEach((id, j) => (probs[id] = kept[j]!));
  }
  let sum = 0;
  for (let i = 0; i < n; i++) sum += probs[i]!;
  for (let i = 0; i < n; i++) probs[i] = probs[i]! / sum;
}

/** The ids kept by top-k then top-p, in decreasing probability (ties: lower id first),
 * among ids with probability > 0. Top-p's mass is relative to the top-k set (all ids when
 * topK = 0). A heap pops only the ids it keeps: O(V + kept·log V), never a full sort. */
function topOrder(probs: Float64Array, topK: number, topP: number, pmax: number): number[] {
  // Ids far below the maximum (pmax) are almost never kept: try a heap of the ids
  // ≥ pmax·1e-7 first, and fall back to all ids when it runs out before the cut (same result).
  return selectTop(probs, topK, topP, pmax * 1e-7) ?? selectTop(probs, topK, topP, 0)!;
}

/** topOrder over the heap of ids with p ≥ floor (and p > 0); null when that heap cannot
 * decide (too few ids for top-k, or too little mass for top-p) and floor > 0. */
function selectTop(probs: Float64Array, topK: number, topP: number, floor: number): number[] | null {
  const heap = new MaxHeap(probs, floor);
  const all = floor === 0;
  if (!all && (topK > 0 ? heap.size < topK : topP >= 1)) return null;
  const limit = topK > 0 ? Math.min(topK, heap.size) : heap.size;
  const out: number[] = [];
  if (topP >= 1) {
    while (out.length < limit) out.push(heap.pop());
    return out;
  }
  let total = 0;
  if (topK > 0) {
    while (out.length < limit) out.push(heap.pop());
    for (const id of out) total += probs[id]!;
    let cum = 0;
    for (let i = 0; i < out.length; i++) {
      cum += probs[out[i]!]! / total;
      if (cum >= topP) return out.slice(0, i + 1);
    }
    return out;
  }
  for (let i = 0; i < probs.length; i++) if (probs[i]! > 0) total += probs[i]!;
  let cum = 0;
  while (out.length < limit) {
    const id = heap.pop();
    out.push(id);
    cum += probs[id]! / total;
    if (cum >= topP) return out;
  }
  return all ? out : null;
}

/** Binary max-heap of the ids with p > 0 and p ≥ floor, ordered by (p desc, id asc). */
class MaxHeap {
  private readonly ids: Int32Array;
  size = 0;

  constructor(private readonly p: Float64Array, floor: number) {
    const ids = new Int32Array(p.length);
    for (let i = 0; i < p.length; i++) if (p[i]! > 0 && p[i]! >= floor) ids[this.size++] = i;
    this.ids = ids;
    for (let i = (this.size >> 1) - 1; i >= 0; i--) this.down(i);
  }

  pop(): number {
    const top = this.ids[0]!;
    this.ids[0] = this.ids[--this.size]!;
    this.down(0);
    return top;
  }

  private before(a: number, b: number): boolean {
    const pa = this.p[a]!;
    const pb = this.p[b]!;
    return pa > pb || (pa === pb && a < b);
  }

  private down(i: number): void {
    const ids = this.ids;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= this.size) return;
      const r = l + 1;
      const c = r < this.size && this.before(ids[r]!, ids[l]!) ? r : l;
      if (!this.before(ids[c]!, ids[i]!)) return;
      const t = ids[i]!;
      ids[i] = ids[c]!;
      ids[c] = t;
      i = c;
    }
  }
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
export function sampleToken(logits: Float32Array, p: SamplingParams, hist: TokenHistory | null, vocab: number, rng: Rng,
  fast?: Argmax): number {
  if (isGreedy(p)) return greedyPick(logits, p, hist, vocab, fast);
  return drawFrom(targetDistribution(logits, p, hist, vocab), rng);
}
