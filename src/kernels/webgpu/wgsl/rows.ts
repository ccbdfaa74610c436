// Row moves and the shared-expert gate: strided copies, gathers, out += σ(g)·y.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { moeCombineShader } from './moe.js';

// Row moves. COPY_ROWS params: 0 rows, 1 width, 2 dst off, 3 dst stride, 4 src off,
// 5 src stride. GATHER_ROWS params: 0 rows, 1 width, 2 dst off, 3 src off, 4 row-list off.
// ADD_SIGMOID_SCALED (out[i, :] += σ(g[i])·y[i, :]) params: 0 m, 1 d, 2 out, 3 y, 4 g offsets.
export const COPY_ROWS = /* wgsl */ `${HEADER}
${paramConsts('copy_rows')}
@group(0) @binding(1) var<storage, read_write> DST: array<f32>;
@group(0) @binding(2) var<storage, read_write> SRC: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let w = pu(P_width);
  if (g >= pu(P_rows) * w) { return; }
  let r = g / w;
  let j = g % w;
  DST[pu(P_dstOff) + r * pu(P_dstStride) + j] = SRC[pu(P_srcOff) + r * pu(P_srcStride) + j];
}`;

// FILL: DST[off + i] = value for i < n. params: 0 n, 1 dst off, 2 value (f32 bits).
export const FILL = /* wgsl */ `${HEADER}
${paramConsts('fill')}
@group(0) @binding(1) var<storage, read_write> DST: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  if (g >= pu(P_n)) { return; }
  DST[pu(P_dstOff) + g] = pf(P_value);
}`;

export const GATHER_ROWS = /* wgsl */ `${HEADER}
${paramConsts('gather_rows')}
@group(0) @binding(1) var<storage, read_write> DST: array<f32>;
@group(0) @binding(2) var<storage, read_write> SRC: array<f32>;
@group(0) @binding(3) var<storage, read_write> ROWS: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let w = pu(P_width);
  if (g >= pu(P_rows) * w) { return; }
  let i = g / w;
  let j = g % w;
  DST[pu(P_dstOff) + i * w + j] = SRC[pu(P_srcOff) + u32(ROWS[pu(P_rowsOff) + i]) * w + j];
}`;

export const ADD_SIGMOID_SCALED = /* wgsl */ `${HEADER}
${paramConsts('add_sigmoid_scaled')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<storage, read_write> GT: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let d = pu(P_d);
  if (g >= pu(P_m) * d) { return; }
  let i = g / d;
  OUT[pu(P_outOff) + g] = OUT[pu(P_outOff) + g] + sigmoid(GT[pu(P_gOff) + i]) * Y[pu(P_yOff) + g];
}`;

// MoE experts. MOE_SCATTER parks expert e's outputs Y [M, H] at the (row, slot)s routed to
// it: SLOT[(i·topK + s), :] = Y[i, :] where IDS[i, s] = e. MOE_COMBINE sums a row's slots
// in slot order: OUT[i, d] = Σ_s W[i, s]·SLOT[(i·topK + s), d] (f32, from 0; wgsl/moe.ts
// moeCombineShader). params: PARAMS.moe_scatter, PARAMS.moe_combine (params.ts).
export const MOE_SCATTER = /* wgsl */ `${HEADER}
${paramConsts('moe_scatter')}
@group(0) @binding(1) var<storage, read_write> SLOT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDS: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let h = pu(P_h);
  let k = pu(P_topK);
  if (g >= pu(P_m) * k * h) { return; }
  let is = g / h;
  let d = g % h;
  if (IDS[pu(P_idsOff) + is] != i32(pu(P_e))) { return; }
  SLOT[pu(P_slotOff) + is * h + d] = Y[pu(P_yOff) + (is / k) * h + d];
}`;

export const MOE_COMBINE = moeCombineShader(null);
