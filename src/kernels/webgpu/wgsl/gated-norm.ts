// The gated RMSNorm with out_proj's head order (Kernels.gatedRmsNorm with headOrder): row
// i·HV + j of OUT is the normed row i·HV + order[j] — NORM's gated rows (wgsl/dense.ts: the
// same opening, sum, tree and products), each written at its head block of out_proj's
// stored order, so no gather follows. One workgroup of 64 per output row.
// params: PARAMS.gated_norm_perm. Bindings: 1 OUT, 2 X, 3 Z, 4 WV (f32 [d]), 5 ORD (i32, the
// order at orderOff).
import { HEADER, rmsRowOpening, treeSum } from './common.js';
import { paramConsts } from '../params.js';

export const GATED_NORM_PERM = /* wgsl */ `${HEADER}
${paramConsts('gated_norm_perm')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> Z: array<f32>;
@group(0) @binding(4) var<storage, read_write> WV: array<f32>;
@group(0) @binding(5) var<storage, read> ORD: array<i32>;
${treeSum()}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${rmsRowOpening('P_rows', 'P_d', 'row - row % pu(P_hv) + u32(ORD[pu(P_orderOff) + row % pu(P_hv)])')}
  let zo = pu(P_zOff) + (xo - pu(P_xOff));
  for (var p = t; p < d; p += 64u) {
    OUT[oo + p] = X[xo + p] * inv * WV[p] * silu(Z[zo + p]);
  }
}`;
