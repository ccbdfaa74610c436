// Token sampling: penalties → temperature → min-p → top-k → top-p → draw.
// Greedy picks are argmax of the penalised logits (f64 penalties, as ever). Sampled rows run
// on the kernels' `sample` (one batched call per step: ./sample-batch.ts); the exact
// definition of the distribution and the draw is kernels/ref/sampling.ts, with the penalised
// logits of the touched ids rounded to f32 (penaltyPatches). `targetDistribution` exposes
// the final distribution p (lossless speculative rejection sampling needs it).
import type { Rng } from '../util/rng.js';
import type { Kernels, SampleResult, SampleRow } from '../kernels/types.js';
import { sample as refSample } from '../kernels/ref/sampling.js';

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

/** What penalties read of a request's history (read-only: the scheduler alone pushes). */
export interface HistoryView {
  readonly outputCounts: ReadonlyMap<number, number>;
  readonly promptIds: ReadonlySet<number>;
}

/** Token history a request's penalties read: counts of generated ids, ids of the prompt. */
export class TokenHistory implements HistoryView {
  readonly outputCounts = new Map<number, number>();
  readonly promptIds: Set<number>;
  constructor(promptIds: Iterable<number>) {
    this.promptIds = new Set(promptIds);
  }
  push(id: number): void {
    this.outputCounts.set(id, (this.outputCounts.get(id) ?? 0) + 1);
  }
}

export function isGreedy(p: SamplingParams): boolean {
  return p.temperature === 0;
}

function hasPenalties(p: SamplingParams, hist: HistoryView | null): hist is HistoryView {
  return hist !== null && (p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0);
}

/** The penalised logit of every id a penalty touches (ids < vocab), in f64. `extra`: ids
 * generated after the history (counted as outputs; speculative verify positions). */
function penaltyAdjustments(logits: ArrayLike<number>, p: SamplingParams, hist: HistoryView, vocab: number,
  extra: readonly number[] = []): Map<number, number> {
  const adj = new Map<number, number>();
  let counts: ReadonlyMap<number, number> = hist.outputCounts;
  if (extra.length > 0) {
    const c = new Map(hist.outputCounts);
    for (const id of extra) c.set(id, (c.get(id) ?? 0) + 1);
    counts = c;
  }
  if (p.repetitionPenalty !== 1) {
    for (const id of [...hist.promptIds, ...counts.keys()]) {
      if (id >= vocab || adj.has(id)) continue;
      const l = logits[id]!;
      adj.set(id, l > 0 ? l / p.repetitionPenalty : l * p.repetitionPenalty);
    }
  }
  if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
    for (const [id, n] of counts) {
      if (id < vocab) adj.set(id, (adj.get(id) ?? logits[id]!) - p.presencePenalty - p.frequencyPenalty * n);
    }
  }
  return adj;
}

/** Penalised logits of the touched ids as kernel patches (values rounded to f32), or
 * null without penalties. Only the ids a penalty touches: never vocabulary-sized. */
export function penaltyPatches(logits: ArrayLike<number>, p: SamplingParams, hist: HistoryView | null, vocab: number,
  extra: readonly number[] = []): { ids: Int32Array; vals: Float32Array } | null {
  if (!hasPenalties(p, hist)) return null;
  const adj = penaltyAdjustments(logits, p, hist, vocab, extra);
  const ids = new Int32Array(adj.size);
  const vals = new Float32Array(adj.size);
  let j = 0;
  for (const [id, v] of adj) {
    ids[j] = id;
    vals[j++] = v;
  }
  return { ids, vals };
}

/** Reused by penalized() (the greedy fallback): a fresh 2 MB array per token costs page faults. */
let penalizedScratch = new Float64Array(0);

/** logits[0..vocab) with penalties applied and ids ≥ vocab excluded, in a scratch array
 * that the next call overwrites (callers read it before sampling again). */
function penalized(logits: Float32Array, p: SamplingParams, hist: HistoryView | null, vocab: number,
  extra: readonly number[] = []): Float64Array {
  if (penalizedScratch.length < vocab) penalizedScratch = new Float64Array(vocab);
  const out = penalizedScratch.subarray(0, vocab);
  out.set(logits.subarray(0, vocab));
  if (hasPenalties(p, hist)) for (const [id, l] of penaltyAdjustments(logits, p, hist, vocab, extra)) out[id] = l;
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

/** argmax of the penalised logits (f64 penalties; lowest id among equal maxima) without
 * copying the vocabulary: the raw argmax, unless a penalised id beats it (or it is
 * penalised itself, then the full copy decides). `extra`: ids generated after the history
 * (counted as outputs; speculative verify positions). */
export function greedyToken(logits: Float32Array, p: SamplingParams, hist: HistoryView | null, vocab: number, fast?: Argmax,
  extra: readonly number[] = []): number {
  const raw = fast ? fast(logits, vocab) : argmax(logits, vocab);
  if (!hasPenalties(p, hist)) return raw;
  const adj = penaltyAdjustments(logits, p, hist, vocab, extra);
  if (adj.has(raw)) return argmax(penalized(logits, p, hist, vocab, extra), vocab);
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

/** The kernel row of a sampled request (temperature, cuts, penalties as patches). */
export function sampleRowOf(logits: Float32Array, p: SamplingParams, hist: HistoryView | null, vocab: number,
  opts: { u?: number; extra?: readonly number[]; dist?: Float32Array | null; topN?: number } = {}): SampleRow {
  const patches = penaltyPatches(logits, p, hist, vocab, opts.extra);
  const topN = opts.topN ?? -1;
  return {
    logits, n: vocab, invTemperature: 1 / p.temperature, topK: p.topK > 0 && p.topK < vocab ? p.topK : 0, topP: p.topP, minP: p.minP,
    u: opts.u ?? 0, patchIds: patches?.ids ?? null, patchVals: patches?.vals ?? null, patchCount: patches?.ids.length ?? 0,
    draw: opts.u !== undefined, logprobs: topN >= 0, topN: Math.max(topN, 0), dist: opts.dist ?? null,
  };
}

export function emptyResult(topN = 0): SampleResult {
  return { token: -1, rawMax: 0, rawSumExp: 0, keptMass: 0, topIds: new Int32Array(topN), topVals: new Float32Array(topN) };
}

/** The kernels' sample function, or the reference twin (the definition) when none is given. */
type SampleFn = Kernels['sample'];

/** The distribution a request samples from, over ids [0, vocab), normalised in f64 (the
 * kept weights / their sum). Greedy ⇒ one-hot on the argmax. Allocates the vocabulary:
 * for tests and rare paths (the engine batches rows through BatchSampler). */
export function targetDistribution(logits: Float32Array, p: SamplingParams, hist: HistoryView | null, vocab: number,
  fast?: Argmax, sample: SampleFn = refSample, extra: readonly number[] = []): Float64Array {
  const probs = new Float64Array(vocab);
  if (isGreedy(p)) {
    probs[greedyToken(logits, p, hist, vocab, fast, extra)] = 1;
    return probs;
  }
  const w = new Float32Array(vocab);
  const res = emptyResult();
  sample([sampleRowOf(logits, p, hist, vocab, { dist: w, extra })], [res]);
  for (let i = 0; i < vocab; i++) probs[i] = w[i]! / res.keptMass;
  return probs;
}

/** Pick the next token: argmax of penalised logits when greedy, else a draw (one uniform
 * from rng). */
export function sampleToken(logits: Float32Array, p: SamplingParams, hist: HistoryView | null, vocab: number, rng: Rng,
  fast?: Argmax, sample: SampleFn = refSample): number {
  if (isGreedy(p)) return greedyToken(logits, p, hist, vocab, fast);
  const res = emptyResult();
  sample([sampleRowOf(logits, p, hist, vocab, { u: rng.next() })], [res]);
  return res.token;
}
