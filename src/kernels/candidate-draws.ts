// Kernels.candidateDraws for host-memory rows (ref and wasm: one implementation, the definition
// the webgpu shader wgsl/candidate-draws.ts matches): one draft step of sampled MTP chains drawn
// from each row's top candidates (Kernels.topCandidates' sets: ascending ids, raw values, id −1
// padding). The pick is a PROPOSAL in f32 arithmetic: the host replays the exact f64 draw
// (engine/sampled-candidates.ts) and redrafts where it differs (engine/speculative/
// draft-device.ts), so only agreement, not correctness, rests on it.
// Per row i < m with rows[i] non-null, over its entries j (id ≥ 0), f = round to f32, every sum
// an f32 sum in ascending id order:
//   M = max value (NaN ignored); M not finite: the first entry of value M (none: id 0);
//   w_j = exp32(f(f(v_j − M)·invT)) (the reference's polynomial: 0 for a NaN), 0 where
//     w_j < f(minP); rank_j = #{i : w_i > w_j, or w_i = w_j and id_i < id_j};
//   kept: w_j > 0 and (topK = 0 or rank_j < topK); then, when topP < 1, with T = Σ kept w,
//     only the kept j whose kept mass ranked before it is < f(topP·T);
//   the pick: with K = Σ kept w and target = f(u·K), the first kept id whose running sum
//     exceeds target, else the last kept id (none kept: the first entry's id).
// The pick goes to out[outOffset + i]; a null row leaves its slot as it is (a greedy chain's
// argmaxRows pick).
import type { CandidateDraw } from './kernel-operands.js';
import { exp32 } from './ref/sampling.js';

/** The most candidates per row a draw reads (the webgpu shader's workgroup arrays: 8 KiB of
 * weights, 4 KiB of u16 indices its bitonic sort orders): top-k up to 1024 (candidateCount's
 * 2k). A power of two (the sort's positions). */
export const MAX_DRAW_CANDIDATES = 2048;

const f = Math.fround;

/** A row's entries and weights by the header's definition: its entry count and w_j, or the
 * pick itself when no weight is defined (no entries: id 0; M not finite: the first entry of
 * value M). Shared by drawRow and the tests' O(c²) oracle (test/candidate-draw-definition.ts). */
export function drawWeights(ids: Int32Array, vals: Float32Array, o: number, c: number, r: CandidateDraw): { count: number; w: Float32Array } | number {
  let count = 0;
  while (count < c && ids[o + count]! >= 0) count++;
  if (count === 0) return 0;
  let m = -Infinity;
  for (let j = 0; j < count; j++) if (vals[o + j]! > m) m = vals[o + j]!;
  if (!(m > -Infinity && m < Infinity)) {
    for (let j = 0; j < count; j++) if (vals[o + j] === m) return ids[o + j]!;
    return ids[o]!;
  }
  const invT = f(r.invTemperature);
  const minP = f(r.minP);
  const w = new Float32Array(count);
  for (let j = 0; j < count; j++) {
    const e = exp32(f(f(vals[o + j]! - m) * invT));
    w[j] = e < minP ? 0 : e;
  }
  return { count, w };
}

/** The proposal of one row (its entries: ids[o, o + c), vals[o, o + c)), O(c log c): the
 * positive entries sorted by the definition's order (weight descending, index ascending) give
 * every rank; top-p's kept ranks are a prefix [0, R) — mass(r), the f32 sum in id order of the
 * weights of rank < r, never decreases as r grows (a nonnegative term added anywhere in an f32
 * sum never lowers it: rounding is monotone) — so R, the first rank whose mass reaches
 * f(topP·T), is found by bisection over the same id-order sums the definition compares
 * (test/candidate-draw-definition.ts writes the definition out, O(c²): the tests' oracle). */
function drawRow(ids: Int32Array, vals: Float32Array, o: number, c: number, r: CandidateDraw): number {
  const weighted = drawWeights(ids, vals, o, c, r);
  if (typeof weighted === 'number') return weighted;
  const { count, w } = weighted;
  const rank = ranks(w);
  const positives = rank.reduce((n, x) => n + (x >= 0 ? 1 : 0), 0);
  // ranked(j, r): rank_j < r (an entry of weight ≤ 0 has none)
  const ranked = (j: number, lim: number): boolean => rank[j]! >= 0 && rank[j]! < lim;
  const massBelow = (lim: number, stop: number): number => {
    let mass = 0;
    for (let j = 0; j < count && mass < stop; j++) if (ranked(j, lim)) mass = f(mass + w[j]!);
    return mass;
  };
  let kept = r.topK === 0 ? positives : Math.min(r.topK, positives);
  if (r.topP < 1) {
    const target = f(f(r.topP) * massBelow(kept, Infinity));
    let [lo, hi] = [0, kept];
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (massBelow(mid, target) < target) lo = mid + 1;
      else hi = mid;
    }
    kept = lo;
  }
  const target = f(f(r.u) * massBelow(kept, Infinity));
  let cum = 0;
  let last = -1;
  for (let j = 0; j < count; j++) {
    if (!ranked(j, kept)) continue;
    cum = f(cum + w[j]!);
    last = ids[o + j]!;
    if (cum > target) return last;
  }
  return last >= 0 ? last : ids[o]!;
}

/** Each entry's rank among the entries of positive weight (weight descending, index
 * ascending: the definition's `before`), −1 for an entry of weight ≤ 0. */
function ranks(w: Float32Array): Int32Array {
  const order: number[] = [];
  w.forEach((x, j) => { if (x > 0) order.push(j); });
  order.sort((a, b) => (w[a]! > w[b]! ? -1 : w[a]! < w[b]! ? 1 : a - b));
  const rank = new Int32Array(w.length).fill(-1);
  order.forEach((j, i) => { rank[j] = i; });
  return rank;
}

/** candidateDraws over host rows (see the header): row i's candidates at [candOffset + i·c, + c). */
export function candidateDraws(out: Int32Array, outOffset: number, ids: Int32Array, vals: Float32Array, candOffset: number, c: number,
  rows: readonly (CandidateDraw | null)[]): void {
  checkCandidateDraws(out.length, outOffset, ids.length, vals.length, candOffset, c, rows.length);
  rows.forEach((r, i) => {
    if (r) out[outOffset + i] = drawRow(ids, vals, candOffset + i * c, c, r);
  });
}

/** The bounds every backend checks (RangeError naming the call). */
export function checkCandidateDraws(outLength: number, outOffset: number, idsLength: number, valsLength: number, candOffset: number, c: number, m: number): void {
  if (!(Number.isInteger(c) && c >= 1 && c <= MAX_DRAW_CANDIDATES)) throw new RangeError(`candidateDraws: c = ${c} must be an integer in [1, ${MAX_DRAW_CANDIDATES}]`);
  if (outOffset < 0 || outOffset + m > outLength) throw new RangeError(`candidateDraws: ${m} picks at ${outOffset} past the output`);
  if (candOffset < 0 || candOffset + m * c > idsLength || candOffset + m * c > valsLength) {
    throw new RangeError(`candidateDraws: ${m} rows of ${c} candidates at ${candOffset} past the candidates`);
  }
}
