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
//   (c) top-k is off, top-p is on (p < 1) and the nucleus lies above w_C: select's top-p walk
//       (kernels/ref/sampling.ts walkCut) is replayed with its level-0 buckets at or below
//       w_C's unknown (outside ids may add to them) and the row's total mass T bounded:
//       T ≥ T_C, the candidates' own total (every f64 step of the sum is monotone, and an
//       outside id adds +0 or more), and T ≤ (T_C + (n − #entries)·w_C) widened by the
//       summation's rounding bound. When every comparison of the walk is decided the same
//       for p·T_lo and p·T_hi (f64 products are monotone too) and it never reaches an
//       unknown bucket, the cut is the full row's and lies above w_C: no outside id is kept.
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
import { exp32, keptCut, keptDraw, levelZero, massTotal, NONZERO, topKCut, walkCut, weighEntries, type Cut, type Entries } from '../kernels/ref/sampling.js';
import { penaltyPatches, type SamplingParams } from './sampler.js';
import type { GreedyAdjust } from './greedy-finish.js';
import type { SparseDist } from './speculative/sparse-accept.js';
import type { CandidateDraw } from '../kernels/types.js';

const f = Math.fround;

/** The largest candidate count a row asks for (top-k beyond it takes the full row). */
export const MAX_CANDIDATES = 4096;
/** Candidates of a min-p row without top-k or top-p (its kept ids must all fit: else the
 * full row). */
export const MIN_P_CANDIDATES = 256;
/** Candidates of a top-p row without top-k (min-p or not): its nucleus must lie above the
 * last candidate's weight with room for the unknown tail's mass (certificate (c)). */
export const NUCLEUS_CANDIDATES = 1024;

/** How many candidates a sampled request's row reads back (0: it needs the full row):
 * top-k on: the next power of two ≥ 2k, at least 64 (room past the k-th for the
 * certificate's strict margin); else top-p on: NUCLEUS_CANDIDATES; else min-p on:
 * MIN_P_CANDIDATES; else 0 (every id of nonzero weight is kept). */
export function candidateCount(p: SamplingParams, vocab: number): number {
  const k = topKOf(p, vocab);
  if (k > 0) {
    const c = Math.max(64, 2 ** Math.ceil(Math.log2(2 * k)));
    return c <= MAX_CANDIDATES ? c : 0;
  }
  if (p.topP < 1) return NUCLEUS_CANDIDATES;
  return p.minP > 0 ? MIN_P_CANDIDATES : 0;
}

/** Candidates a draft pass on the kernels reads back for a sampled draft row
 * (speculative/draft-device.ts): candidateCount's, but 0 (its logits row) for top-p without
 * top-k or min-p — a pass keeps no backoff, and a refused row there costs a read-back and a
 * recompute, so a flat nucleus would pay them every pass. */
export function draftCandidateCount(p: SamplingParams, vocab: number): number {
  return nucleusOnly(p, vocab) ? 0 : candidateCount(p, vocab);
}

/** Top-p without top-k or min-p: its candidates certify only through (c), a nucleus above
 * the last candidate (a flat one never does: candidate-step.ts backs such requests off). */
export function nucleusOnly(p: SamplingParams, vocab: number): boolean {
  return topKOf(p, vocab) === 0 && !(p.minP > 0) && p.topP < 1;
}

/** The Kernels.candidateDraws row of a draw under `p` with uniform u (sampleRowOf's cut): an
 * f32 proposal the host's exact draw with the same u then confirms (MTP drafts, overlapped
 * sampled decode). */
export function candidateDrawOf(p: SamplingParams, u: number, vocab: number): CandidateDraw {
  return { invTemperature: 1 / p.temperature, topK: topKOf(p, vocab), topP: p.topP, minP: p.minP, u };
}

/** The top-k the sampler applies (sampleRowOf's: 0 = off). */
function topKOf(p: SamplingParams, vocab: number): number {
  return p.topK > 0 && p.topK < vocab ? p.topK : 0;
}

/** A row the certificate admits: its candidates weighed, the top-k cut, and the kept cut
 * (top-k then top-p: the full row's). */
export interface CertifiedRow {
  readonly entries: Entries;
  readonly kCut: Cut;
  readonly cut: Cut;
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
  const k = topKOf(p, vocab);
  const kCut = topKCut(entries, k);
  const admitted = (): CertifiedRow => ({ entries, kCut, cut: keptCut(entries, kCut, k, p.topP) });
  if (count < ids.length) return admitted();
  const wC = exp32(f(f(sC - m) * f(invT)));
  if (wC === 0 || wC < f(p.minP) || (k > 0 && kCut.tau > bitsOf(wC))) return admitted();
  if (k > 0 || !(p.topP < 1)) return null;
  const cut = nucleusCut(entries, p.topP, wC, vocab - order.length);
  return cut ? { entries, kCut, cut } : null;
}

/** Certificate (c): the top-p cut (no top-k) of a row known through its entries, the
 * `others` ids outside them each of weight ≤ wC (> 0); null when the unknown tail could
 * change any comparison of the walk. */
export function nucleusCut(entries: Entries, topP: number, wC: number, others: number): Cut | null {
  const { cnt, mass } = levelZero(entries, NONZERO, null);
  const lo = massTotal(mass);
  // every sum of select's total is a chain of at most n/4 + 1026 f64 additions of
  // nonnegative terms: relative error ≤ d·2^-53·1.01; widened twice over (and for the
  // few operations here) by the factor 1 + 2γ each way
  const gamma = 2 * (entries.n + 2048) * 2 ** -53;
  const hi = (lo * (1 + 2 * gamma) + others * wC) * (1 + 2 * gamma);
  const tLo = topP * lo;
  const tHi = topP * hi;
  // buckets at or below wC's may hold outside ids: any look at one is undecided
  for (let b = 0; b <= bitsOf(wC) >>> 20; b++) {
    cnt[b] = 1;
    mass[b] = NaN;
  }
  let decided = true;
  const all = Array.from({ length: entries.ids.length }, (_, j) => j);
  const cut = walkCut(entries, NONZERO, all, cnt, mass, (_c, x) => {
    const reached = x >= tLo;
    if (reached !== x >= tHi || x !== x) decided = false;
    return reached;
  });
  return decided ? cut : null;
}

/** The draw with uniform u over a certified row: the full row's token and kept mass.
 * (`_sampling`: the row's request's; its cut is fixed by certify.) */
export function drawCertified(row: CertifiedRow, _sampling: SamplingParams, u: number): { token: number; keptMass: number } {
  return keptDraw(row.entries, row.cut, u, true);
}

/** A certified row's distribution as a list (sampled MTP: a verify position's p, a draft's
 * q; speculative/sparse-accept.ts): its kept ids, ascending, with w / kept mass — the bits
 * toProbs gives them from the full row's kept weights, every other id being 0 there. With
 * `u`, also the draw (drawCertified's token); else token −1. */
export function certifiedDist(row: CertifiedRow, _sampling: SamplingParams, u: number | null): { token: number; dist: SparseDist } {
  const { cut } = row;
  const { token, keptMass } = keptDraw(row.entries, cut, u ?? 0, u !== null);
  const { ids, w, bits } = row.entries;
  const kept: number[] = [];
  for (let j = 0; j < ids.length; j++) {
    if (w[j]! > 0 && (bits[j]! > cut.tau || (bits[j] === cut.tau && ids[j]! <= cut.lim))) kept.push(j);
  }
  return { token, dist: { ids: Int32Array.from(kept, (j) => ids[j]!), p: Float64Array.from(kept, (j) => w[j]! / keptMass) } };
}
