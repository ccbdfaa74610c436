// The definition of Kernels.candidateDraws (kernels/candidate-draws.ts's header) written out
// literally, O(c²): each entry's rank counts the entries before it, each entry's top-p mass
// sums the kept entries ranked before it in id order. The oracle the ref (sort-based, O(c log c))
// and the WGSL twin are compared with (candidate-draws.test.ts, webgpu-candidate-draws.test.ts).
import type { CandidateDraw } from '../src/kernels/types.js';
import { drawWeights } from '../src/kernels/candidate-draws.js';

const f = Math.fround;

/** The proposal of one row (its entries: ids[o, o + c), vals[o, o + c)), by the definition. */
export function drawRowByDefinition(ids: Int32Array, vals: Float32Array, o: number, c: number, r: CandidateDraw): number {
  const weighted = drawWeights(ids, vals, o, c, r);
  if (typeof weighted === 'number') return weighted;
  const { count, w } = weighted;
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

/** candidateDraws by the definition: row i's candidates at [candOffset + i·c, + c). */
export function candidateDrawsByDefinition(out: Int32Array, outOffset: number, ids: Int32Array, vals: Float32Array, candOffset: number, c: number,
  rows: readonly (CandidateDraw | null)[]): void {
  rows.forEach((r, i) => {
    if (r) out[outOffset + i] = drawRowByDefinition(ids, vals, candOffset + i * c, c, r);
  });
}
