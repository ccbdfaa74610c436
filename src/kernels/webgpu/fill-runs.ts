// Kernels.fillRuns on the GPU: every run of one tensor filled by one dispatch. The runs go
// up as a descriptor (i32 pairs: absolute element offset, length); workgroup row y fills
// run y, its threads striding over the run (the grid's x is capped, so a run of any length
// fits the dispatch limits).
import type { FillRun } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { HEADER } from './wgsl/common.js';
import { paramConsts } from './params.js';

/** Workgroups per run at most (each thread then fills every (64·X)-th element). */
const MAX_X = 256;

// params: PARAMS.fill_runs. Bindings: 1 DST, 2 RT (i32 [runs, 2] at runTable).
export const FILL_RUNS = /* wgsl */ `${HEADER}
${paramConsts('fill_runs')}
@group(0) @binding(1) var<storage, read_write> DST: array<f32>;
@group(0) @binding(2) var<storage, read> RT: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = pu(P_runTable) + 2u * wid.y;
  let off = u32(RT[r]);
  let n = u32(RT[r + 1u]);
  for (var i = wid.x * 64u + t; i < n; i += nwg.x * 64u) { DST[off + i] = pf(P_value); }
}`;

export function fillRunsDispatch(g: WebGpuKernels, enc: StepEncoder, put: (data: number[]) => GpuTensor, dst: GpuTensor,
  runs: readonly FillRun[], value: number): void {
  const live = runs.filter((r) => r.length > 0);
  for (const r of live) {
    if (r.offset < 0 || r.offset + r.length > dst.length) throw new RangeError(`fillRuns: ${r.length} elements at ${r.offset} past ${dst.length}`);
  }
  const limit = g.adapter.limits.maxComputeWorkgroupsPerDimension;
  for (let first = 0; first < live.length; first += limit) {
    const part = live.slice(first, first + limit);
    const longest = Math.max(...part.map((r) => r.length));
    const rt = put(part.flatMap((r) => [dst.offset + r.offset, r.length]));
    g.run(enc, 'fill_runs', () => FILL_RUNS, packParams('fill_runs', { runTable: rt.offset, value }), null, [dst.buffer, rt.buffer],
      [Math.min(MAX_X, Math.ceil(longest / 64)), part.length, 1], 'fill');
  }
}
