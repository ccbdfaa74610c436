/// <reference types="@webgpu/types" />
// Kernels.topCandidates on the GPU (wgsl/top-candidates.ts), so a sampled step reads back c
// (id, value) pairs per row instead of the row. A long row is split into S segments so the
// rows × S workgroups spread over a GPU's cores: pass 1 selects each segment's top c, pass 2
// (one workgroup per row) merges the row's S·c survivors into the exact set. S = 1 (short
// rows, or many of them): pass 1 alone, straight into the outputs.
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { TOP_CANDIDATES, TOP_MERGE } from './wgsl/top-candidates.js';

/** Workgroups a call aims at: two per SM of a 132-SM GPU (H100 / H200). */
export const TOP_TARGET_WORKGROUPS = 264;
/** The shortest segment: 8 ids per thread of the 256 (shorter rows are not split). */
export const TOP_MIN_SEGMENT = 2048;

/** Segments per row for m rows of n ids and c candidates: enough for m·S to reach
 * TOP_TARGET_WORKGROUPS, at most √(n/c) (pass 1's n/S ids per workgroup then outweigh pass
 * 2's S·c: their sum, the critical path, is least there) and segments of ≥ TOP_MIN_SEGMENT. */
export function topSegments(m: number, n: number, c: number): number {
  const s = Math.min(Math.ceil(TOP_TARGET_WORKGROUPS / Math.max(1, m)), Math.floor(Math.sqrt(n / c)), Math.floor(n / TOP_MIN_SEGMENT));
  return segmentsCovering(n, Math.max(1, s)).segments;
}

/** S segments of ⌈n/S⌉ ids, less the ones that would be empty. */
function segmentsCovering(n: number, s: number): { segments: number; segLen: number } {
  const segLen = Math.max(1, Math.ceil(n / s));
  return { segments: Math.max(1, Math.ceil(n / segLen)), segLen };
}

/** The candidate sets of rows [0, m) of x into ids / vals at [outOffset + i·c, + c).
 * `segments`: override topSegments (tests: segment boundaries through ties). */
export function topCandidatesOn(g: WebGpuKernels, enc: StepEncoder,
  a: { ids: GpuTensor; vals: GpuTensor; outOffset: number; x: GpuTensor; m: number; n: number; stride: number; c: number; segments?: number }): void {
  const { ids, vals, outOffset, x, m, n, stride, c } = a;
  if (!(Number.isInteger(c) && c >= 1)) throw new RangeError(`topCandidates: c = ${c} must be an integer ≥ 1`);
  if (m <= 0) return;
  if (n > stride || (m - 1) * stride + n > x.length) throw new RangeError(`topCandidates: ${m} rows of ${n} (stride ${stride}) past the logits`);
  if (outOffset < 0 || outOffset + m * c > ids.length || outOffset + m * c > vals.length) {
    throw new RangeError(`topCandidates: ${m} rows of ${c} candidates at ${outOffset} past the outputs`);
  }
  const { segments, segLen } = segmentsCovering(n, a.segments ?? topSegments(m, n, c));
  const pass1 = (out: { ids: GpuTensor; vals: GpuTensor; idsOff: number; valsOff: number }): void => {
    const params = packParams('top_candidates', { m, n, stride, c, xOff: x.offset, idsOff: out.idsOff, valsOff: out.valsOff, segments, segLen });
    g.run(enc, 'top_candidates', () => TOP_CANDIDATES, params, null, [out.ids.buffer, out.vals.buffer, x.buffer], grid(m * segments), 'top_candidates');
  };
  if (segments === 1) {
    pass1({ ids, vals, idsOff: ids.offset + outOffset, valsOff: vals.offset + outOffset });
    return;
  }
  const sIds = g.scratchTensor('top_survivor_ids', m * segments * c, 'i32');
  const sVals = g.scratchTensor('top_survivor_vals', m * segments * c);
  pass1({ ids: sIds, vals: sVals, idsOff: sIds.offset, valsOff: sVals.offset });
  const params = packParams('top_merge', { m, c, segments, srcIdsOff: sIds.offset, srcValsOff: sVals.offset, idsOff: ids.offset + outOffset,
    valsOff: vals.offset + outOffset });
  g.run(enc, 'top_merge', () => TOP_MERGE, params, null, [ids.buffer, vals.buffer, sIds.buffer, sVals.buffer], grid(m), 'top_merge');
}
