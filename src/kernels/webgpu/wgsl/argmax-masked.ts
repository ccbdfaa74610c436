// Greedy pick per row under an id mask (Kernels.argmaxRowsMasked): the argmax shader of
// dense.ts with the mask (ids whose bit is clear count as −∞). params: PARAMS.argmax_masked.
// GATHER_PICKED (Kernels.gatherPicked): OUT[outOff + i] = X[xOff + i·stride + IDS[idsOff + i]]
// for i < m, one thread a row (a copy: exact). An id outside [0, stride) writes nothing: the
// host checks its ids (they come from argmaxRows* over n ≤ stride). params: PARAMS.gather_picked.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { argmaxShader } from './dense.js';

export const ARGMAX_MASKED = argmaxShader(true);

export const GATHER_PICKED = /* wgsl */ `${HEADER}
${paramConsts('gather_picked')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDS: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = group_id(wid, nwg) * 64u + t;
  if (i >= pu(P_m)) { return; }
  let id = IDS[pu(P_idsOff) + i];
  if (id < 0 || u32(id) >= pu(P_stride)) { return; }
  OUT[pu(P_outOff) + i] = X[pu(P_xOff) + i * pu(P_stride) + u32(id)];
}`;
