// Rejection sampling (accept.ts) on (id, probability) lists instead of vocabulary-sized rows,
// computing the same bits and consuming the same uniforms. A sampled request's p_i and q_i
// come as lists when their rows were certified from top candidates (sampled-candidates.ts):
// every id absent from a list has probability exactly 0 in the full row.
// Why the ids equal the full-row walk's (acceptDrafts, drawFrom, residual) for every seed:
//  - p(d), q(d): a lookup; an absent id is the row's +0.
//  - drawFrom skips ids of probability ≤ 0 and sums the others in id order: a list in
//    ascending id order holding every positive id visits the same ids with the same f64 sums;
//    the fallback (no id crossed u) is the last positive id, or 0 when there is none.
//  - residual sums max(0, p − q) in id order: an id in neither list gives 0 − 0, and an id of
//    q alone gives −q ≤ 0, both skipped as the row skips them; so the union of the two lists
//    in ascending order gives the same sum and the same quotients.
//  - the walk draws a uniform exactly where acceptDrafts does (the test only when q(d) > 0).
import type { Rng } from '../../util/rng.js';

/** A distribution as the ids that may hold mass (ascending, unique) and their probabilities
 * (f64, ≥ 0); every id not listed has probability 0. */
export interface SparseDist {
  readonly ids: Int32Array;
  readonly p: Float64Array;
}

/** A draft's q or a verify position's p: a vocabulary-sized row, or a list. */
export type Dist = Float64Array | SparseDist;

export function isSparse(d: Dist): d is SparseDist {
  return !(d instanceof Float64Array);
}

/** The probability of `id` (0 when it is not listed). */
export function probAt(d: SparseDist, id: number): number {
  let lo = 0;
  let hi = d.ids.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = d.ids[mid]!;
    if (v === id) return d.p[mid]!;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}

/** The vocabulary-sized row of a distribution (a row itself is returned as is). */
export function denseOf(d: Dist, vocab: number): Float64Array {
  if (!isSparse(d)) return d;
  const row = new Float64Array(vocab);
  d.ids.forEach((id, j) => { row[id] = d.p[j]!; });
  return row;
}

/** sampler.ts drawFrom over a list: one uniform; the first positive id whose running sum
 * exceeds it, else the last positive id (0 when none). */
export function drawFromList(d: SparseDist, rng: Rng): number {
  const u = rng.next();
  let cum = 0;
  let last = 0;
  for (let j = 0; j < d.ids.length; j++) {
    const q = d.p[j]!;
    if (q <= 0) continue;
    cum += q;
    last = d.ids[j]!;
    if (u < cum) return last;
  }
  return last;
}

/** accept.ts residual over lists: norm(max(0, p − q)) on the union of the ids, or p itself
 * when nothing is left (p ≤ q everywhere). */
export function residualList(p: SparseDist, q: SparseDist): SparseDist {
  const ids: number[] = [];
  const vals: number[] = [];
  let sum = 0;
  let i = 0;
  let j = 0;
  while (i < p.ids.length || j < q.ids.length) {
    const a = i < p.ids.length ? p.ids[i]! : Infinity;
    const b = j < q.ids.length ? q.ids[j]! : Infinity;
    const id = Math.min(a, b);
    const v = (a === id ? p.p[i++]! : 0) - (b === id ? q.p[j++]! : 0);
    if (v > 0) {
      ids.push(id);
      vals.push(v);
      sum += v;
    }
  }
  if (sum <= 0) return p;
  return { ids: Int32Array.from(ids), p: Float64Array.from(vals, (v) => v / sum) };
}

/** acceptDrafts' sampled walk on lists: `drafts` d_1..d_k, `qs` their q_i, `pAt(i)` the
 * target's p_i (i = 0..k). `emit` commits a token and returns false when the request just
 * finished. Returns the number of accepted drafts (the bonus is emitted after them).
 * `bonus` false: p_k is not the chain's (deferred-rejection.ts: d_k redrawn on the host), so
 * when every draft is accepted the walk ends there, emitting no bonus. */
export function acceptDraftLists(drafts: readonly number[], qs: readonly SparseDist[], pAt: (i: number) => SparseDist, rng: Rng,
  emit: (token: number) => boolean, bonus = true): number {
  const k = drafts.length;
  for (let i = 0; i <= k; i++) {
    if (i === k && !bonus) return k;
    const p = pAt(i);
    if (i === k) {
      emit(drawFromList(p, rng));
      return k;
    }
    const draft = drafts[i]!;
    const q = qs[i]!;
    const qd = probAt(q, draft);
    const accept = qd > 0 && rng.next() * qd < probAt(p, draft);
    if (!accept) {
      emit(drawFromList(residualList(p, q), rng));
      return i;
    }
    if (!emit(draft)) return i + 1;
  }
  return k;
}
