// Sampled picks from a row's top candidates (Kernels.topCandidates) instead of the
// vocabulary-sized row, computing the reference's bits exactly (kernels/ref/sampling.ts).
//
// Why the candidates suffice: the reference's draw core runs on entries (ids, weights), and
// an id that is absent from the entries is an id of weight 0 that no cut keeps — every sum
// over the full row would add +0 for it, which changes no f64 bit, and no select, block or
// draw step looks at it otherwise. So a row reduced to its candidates gives the same kept
// cut, kept mass and pick as the full row whenever every id OUTSIDE the candidates ends up
// unkept. The certificate proves that per row, from the candidates alone:
//   Every outside id is NaN (weight 0) or has s ≤ s_C, the candidates' smallest value; the
//   weight w = exp32(f(f(s − m)·invT)) is then ≤ w_C (the weight at s_C), because rounding,
//   the product by invT > 0 and exp32 are monotone — exp32 checked over every f32 of
//   [−87, 0] by scripts/exp32-monotone.mjs (no inversion; below −87 it is 0). Hence an
//   outside id is unkept when
//   (a) w_C = 0 or w_C < f(minP): min-p zeroes it; or
//   (b) top-k applies and its cut τ (the k-th kept weight's bits) is > w_C's bits: every id
//       of weight ≥ the k-th is a candidate, so the top-k cut — and top-p over it — are the
//       full row's, and the outside id lies below τ.
//   A candidate set smaller than c holds every non-NaN id (nothing outside can be kept).
// A row that fails the certificate, or whose max is not finite, takes the full-row path.
//
// Adjustments (logit bias, a constraint's mask, penalties) change a few known ids: the
// touched ids (bias keys, penalised ids: greedy-finish.ts touchedIds) come with their raw
// logits and are adjusted here exactly as adjustInPlace and penaltyPatches adjust them (the
// biased sum rounded to f32, masked ids −∞, the penalised value rounded to f32); masked
// candidates count as −∞. The kernel selects over the raw row, so an untouched id outside
// the candidates still holds a raw logit ≤ s_C (or −∞ when masked): the certificate is
// unchanged, with m the entries' max (it is the row's when s_C ≤ m; else refused).
import { exp32, keptCut, keptDraw, topKCut, weighEntries, type Cut, type Entries } from '../kernels/ref/sampling.js';
import { penaltyPatches, type SamplingParams } from './sampler.js';
import type { GreedyAdjust } from './greedy-finish.js';
import type { SparseDist } from './speculative/sparse-accept.js';

const f = Math.fround;

/** The largest candidate count a row asks for (top-k beyond it takes the full row). */
export const MAX_CANDIDATES = 4096;
/** Candidates of a min-p row without top-k (its kept ids must all fit: else the full row). */
export const MIN_P_CANDIDATES = 256;

/** How many candidates a sampled request's row reads back (0: it needs the full row):
 * top-k on: the next power of two ≥ 2k, at least 64 (room past the k-th for the
 * certificate's strict margin); else min-p on: MIN_P_CANDIDATES; else 0 (top-p alone keeps
 * ids down to any weight). */
export function candidateCount(p: SamplingParams, vocab: number): number {
  const k = topKOf(p, vocab);
  if (k > 0) {
    const c = Math.max(64, 2 ** Math.ceil(Math.log2(2 * k)));
    return c <= MAX_CANDIDATES ? c : 0;
  }
  return p.minP > 0 ? MIN_P_CANDIDATES : 0;
}

/** The top-k the sampler applies (sampleRowOf's: 0 = off). */
function topKOf(p: SamplingParams, vocab: number): number {
  return p.topK > 0 && p.topK < vocab ? p.topK : 0;
}

/** A row the certificate admits: its candidates weighed, and the top-k cut. */
export interface CertifiedRow {
  readonly entries: Entries;
  readonly kCut: Cut;
}

const bitsOf = (v: number): number => new Uint32Array(Float32Array.of(v).buffer)[0]!;

/** A row's adjustment and its touched ids' raw logits (raw[i] is touched[i]'s). */
export interface TouchedLogits {
  readonly a: GreedyAdjust;
  readonly touched: readonly number[];
  readonly raw: ArrayLike<number>;
}

function allowed(mask: Uint32Array | null, id: number): boolean {
  return mask === null || (((mask[id >>> 5] ?? 0) >>> (id & 31)) & 1) === 1;
}

/** The touched ids' logits after bias, mask and penalties, as the full row has them when the
 * reference samples it (adjustInPlace, then sampleRowOf's patches). */
function adjustedTouched(t: TouchedLogits): Map<number, number> {
  const { a } = t;
  const adjusted = new Map<number, number>();
  const row: { [id: number]: number; length: number } = { length: a.vocab };
  t.touched.forEach((id, i) => {
    const b = a.bias?.get(id);
    const v = allowed(a.mask, id) ? (b === undefined ? t.raw[i]! : f(t.raw[i]! + b)) : -Infinity;
    adjusted.set(id, v);
    row[id] = v;
  });
  const patches = penaltyPatches(row, a.sampling, a.history, a.vocab, a.extra);
  if (patches) patches.ids.forEach((id, j) => adjusted.set(id, patches.vals[j]!));
  return adjusted;
}

/** The certified row of one topCandidates row (`ids`, `vals`: its c slots of raw logits), or
 * null when the candidates cannot decide it (see the header). `vocab`: the row's n.
 * `touched`: the row's adjustment (null: none). */
export function certify(ids: Int32Array, vals: Float32Array, p: SamplingParams, vocab: number, touched: TouchedLogits | null = null): CertifiedRow | null {
  let count = 0;
  while (count < ids.length && ids[count]! >= 0) count++;
  let sC = Infinity;
  const s = new Map<number, number>();
  for (let j = 0; j < count; j++) {
    sC = Math.min(sC, vals[j]!);
    s.set(ids[j]!, touched && !allowed(touched.a.mask, ids[j]!) ? -Infinity : vals[j]!);
  }
  if (touched) for (const [id, v] of adjustedTouched(touched)) s.set(id, v);
  const order = Int32Array.from(s.keys()).sort();
  const sv = Float32Array.from(order, (id) => s.get(id)!);
  let m = -Infinity;
  for (const v of sv) if (v > m) m = v;
  if (!(m > -Infinity && m < Infinity)) return null;
  if (count === ids.length && !(sC <= m)) return null;
  const invT = 1 / p.temperature;
  const entries = weighEntries(order, sv, vocab, m, invT, p.minP);
  const kCut = topKCut(entries, topKOf(p, vocab));
  if (count === ids.length) {
    const wC = exp32(f(f(sC - m) * f(invT)));
    const outsideZero = wC === 0 || wC < f(p.minP);
    if (!outsideZero && !(kCut.tau > bitsOf(wC))) return null;
  }
  return { entries, kCut };
}

/** The draw with uniform u over a certified row: the full row's token and kept mass. */
export function drawCertified(row: CertifiedRow, p: SamplingParams, u: number): { token: number; keptMass: number } {
  const cut = keptCut(row.entries, row.kCut, topKOf(p, row.entries.n), p.topP);
  return keptDraw(row.entries, cut, u, true);
}

/** A certified row's distribution as a list (sampled MTP: a verify position's p, a draft's
 * q; speculative/sparse-accept.ts): its kept ids, ascending, with w / kept mass — the bits
 * toProbs gives them from the full row's kept weights, every other id being 0 there. With
 * `u`, also the draw (drawCertified's token); else token −1. */
export function certifiedDist(row: CertifiedRow, p: SamplingParams, u: number | null): { token: number; dist: SparseDist } {
  const cut = keptCut(row.entries, row.kCut, topKOf(p, row.entries.n), p.topP);
  const { token, keptMass } = keptDraw(row.entries, cut, u ?? 0, u !== null);
  const { ids, w, bits } = row.entries;
  const kept: number[] = [];
  for (let j = 0; j < ids.length; j++) {
    if (w[j]! > 0 && (bits[j]! > cut.tau || (bits[j] === cut.tau && ids[j]! <= cut.lim))) kept.push(j);
  }
  return { token, dist: { ids: Int32Array.from(kept, (j) => ids[j]!), p: Float64Array.from(kept, (j) => w[j]! / keptMass) } };
}
