// Kernels.candidateDraws for host-memory rows (ref and wasm: one implementation, the definition
// the webgpu shader wgsl/candidate-draws.ts matches): one draft step of sampled MTP chains drawn
// from each row's top candidates (Kernels.topCandidates' sets: ascending ids, raw values, id −1
// padding). The pick is a PROPOSAL in f32 arithmetic: the host replays the exact f64 draw
// (engine/sampled-candidates.ts) and redrafts where it differs (engine/speculative/
// draft-device.ts), so only agreement, not correctness, rests on it.
// Per row i < m with rows[i] non-null, over its entries j (id ≥ 0), f = round to f32, every sum
// an f32 sum in ascending id order:
//   M = max value (NaN ignored); M not finite: the first entry of value M (none: id 0);
//   w_j = exp32(f(f(v_j − M)·invT)) (the reference's polynomial), 0 where w_j < f(minP) or v_j
//     is NaN; rank_j = #{i : w_i > w_j, or w_i = w_j and id_i < id_j};
//   kept: w_j > 0 and (topK = 0 or rank_j < topK); then, when topP < 1, with T = Σ kept w,
//     only the kept j whose kept mass ranked before it is < f(topP·T);
//   the pick: with K = Σ kept w and target = f(u·K), the first kept id whose running sum
//     exceeds target, else the last kept id (none kept: the first entry's id).
// The pick goes to out[outOffset + i]; a null row leaves its slot as it is (a greedy chain's
// argmaxRows pick).
import type { CandidateDraw } from './kernel-operands.js';
import { exp32 } from './ref/sampling.js';

/** The most candidates per row a draw reads (the webgpu shader's workgroup arrays: 8 KiB of
 * weights): top-k up to 1024 (candidateCount's 2k). A multiple of 32 (the kept bitsets). */
export const MAX_DRAW_CANDIDATES = 2048;

const f = Math.fround;

/** The proposal of one row (its entries: ids[o, o + c), vals[o, o + c)). */
function drawRow(ids: Int32Array, vals: Float32Array, o: number, c: number, r: CandidateDraw): number {
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
  const before = (j: number, i: number): boolean => w[i]! > w[j]! || (w[i] === w[j] && i < j);
  const kept = new Uint8Array(count);
  for (let j = 0; j < count; j++) {
    if (!(w[j]! > 0)) continue;
    let rank = 0;
    for (let i = 0; i < count; i++) if (before(j, i)) rank++;
    kept[j] = r.topK === 0 || rank < r.topK ? 1 : 0;
  }
  if (r.topP < 1) {
    let total = 0;
    for (let j = 0; j < count; j++) if (kept[j]) total = f(total + w[j]!);
    const target = f(f(r.topP) * total);
    const inP = new Uint8Array(count);
    for (let j = 0; j < count; j++) {
      if (!kept[j]) continue;
      let mass = 0;
      for (let i = 0; i < count; i++) if (kept[i] && before(j, i)) mass = f(mass + w[i]!);
      inP[j] = mass < target ? 1 : 0;
    }
    kept.set(inP);
  }
  let mass = 0;
  let last = -1;
  for (let j = 0; j < count; j++) if (kept[j]) mass = f(mass + w[j]!);
  const target = f(f(r.u) * mass);
  let cum = 0;
  for (let j = 0; j < count; j++) {
    if (!kept[j]) continue;
    cum = f(cum + w[j]!);
    last = ids[o + j]!;
    if (cum > target) return last;
  }
  return last >= 0 ? last : ids[o]!;
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
