// Greedy pick per row under an id mask (Kernels.argmaxRowsMasked): ids whose mask bit is clear
// count as −∞ (not skipped: an all-masked or all-NaN row picks as the host's masked row does),
// then the ARGMAX rule of dense.ts — the lowest index of the maximum, NaN never wins, nothing
// found → 0. Row r's mask: words [mask off + r·words, + words), bit i & 31 of word i >> 5.
// params: PARAMS.argmax_masked (params.ts); negInf is −∞.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';

export const ARGMAX_MASKED = /* wgsl */ `${HEADER}
${paramConsts('argmax_masked')}
@group(0) @binding(1) var<storage, read_write> OUT: array<i32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> MASK: array<u32>;
var<workgroup> bv: array<f32, 64>;
var<workgroup> bi: array<i32, 64>;
fn better(v: f32, i: i32, w: f32, j: i32) -> bool {
  // does (w, j) beat (v, i)?  index −1 = nothing yet
  if (j < 0) { return false; }
  if (i < 0) { return true; }
  return w > v || (w == v && j < i);
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let n = pu(P_n);
  let base = pu(P_xOff) + row * pu(P_stride);
  let mbase = pu(P_maskOff) + row * pu(P_words);
  var v = 0.0;
  var i = -1;
  for (var p = t; p < n; p += 64u) {
    let allowed = ((MASK[mbase + (p >> 5u)] >> (p & 31u)) & 1u) == 1u;
    let x = select(pf(P_negInf), X[base + p], allowed);
    if (x == x && better(v, i, x, i32(p))) { v = x; i = i32(p); }
  }
  bv[t] = v;
  bi[t] = i;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s && better(bv[t], bi[t], bv[t + s], bi[t + s])) { bv[t] = bv[t + s]; bi[t] = bi[t + s]; }
    workgroupBarrier();
  }
  if (t == 0u) { OUT[pu(P_outOff) + row] = max(bi[0], 0); }
}`;
