/// <reference types="@webgpu/types" />
// Kernels.topCandidates on the GPU: one dispatch of wgsl/top-candidates.ts (a workgroup per
// row), so a sampled step reads back c (id, value) pairs per row instead of the row.
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { TOP_CANDIDATES } from './wgsl/top-candidates.js';

/** The candidate sets of rows [0, m) of x into ids / vals at [outOffset + i·c, + c). */
export function topCandidatesOn(g: WebGpuKernels, enc: StepEncoder,
  a: { ids: GpuTensor; vals: GpuTensor; outOffset: number; x: GpuTensor; m: number; n: number; stride: number; c: number }): void {
  const { ids, vals, outOffset, x, m, n, stride, c } = a;
  if (!(Number.isInteger(c) && c >= 1)) throw new RangeError(`topCandidates: c = ${c} must be an integer ≥ 1`);
  if (m <= 0) return;
  if (n > stride || (m - 1) * stride + n > x.length) throw new RangeError(`topCandidates: ${m} rows of ${n} (stride ${stride}) past the logits`);
  if (outOffset < 0 || outOffset + m * c > ids.length || outOffset + m * c > vals.length) {
    throw new RangeError(`topCandidates: ${m} rows of ${c} candidates at ${outOffset} past the outputs`);
  }
  const params = packParams('top_candidates', { m, n, stride, c, xOff: x.offset, idsOff: ids.offset + outOffset, valsOff: vals.offset + outOffset });
  g.run(enc, 'top_candidates', () => TOP_CANDIDATES, params, null, [ids.buffer, vals.buffer, x.buffer], grid(m), 'top_candidates');
}
