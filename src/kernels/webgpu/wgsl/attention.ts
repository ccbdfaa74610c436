// Paged KV cache shaders: the KV write and causal GQA attention over the page table.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';

// KV write, thread per (token, element). params: PARAMS.kv_write (params.ts; K and V
// caches may share a buffer). Bindings: 1 KC, 2 VC, 3 K, 4 V, 5 PT (i32).
export const KV_WRITE = /* wgsl */ `${HEADER}
${paramConsts('kv_write')}
@group(0) @binding(1) var<storage, read_write> KC: array<f32>;
@group(0) @binding(2) var<storage, read_write> VC: array<f32>;
@group(0) @binding(3) var<storage, read_write> K: array<f32>;
@group(0) @binding(4) var<storage, read_write> V: array<f32>;
@group(0) @binding(5) var<storage, read_write> PT: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let kvDim = pu(P_kvDim);
  if (g >= pu(P_t) * kvDim) { return; }
  let i = g / kvDim;
  let e = g % kvDim;
  let pos = pu(P_start) + i;
  let ps = pu(P_pageSize);
  let row = u32(PT[pu(P_ptOff) + pos / ps]) * ps + pos % ps;
  KC[pu(P_kcOff) + row * kvDim + e] = K[pu(P_kOff) + g];
  VC[pu(P_vcOff) + row * kvDim + e] = V[pu(P_vOff) + g];
}`;

// Causal GQA attention over the paged cache, one sequence; workgroup per (head, query).
// Scores go to SC ([T, nH, start+T]); max and Σ exp by the fixed tree; the output element
// d sums over positions in order. A query's result depends only on its position.
/** WGSL expressions that place one attention row in its shader. */
export interface AttendRowExprs {
  /** The cache row of position `p` (an expression in p). */
  readonly kvRow: (p: string) => string;
  readonly kcOff: string;
  readonly vcOff: string;
  readonly scale: string;
  /** Element index of output element d of this (row, head). */
  readonly outAt: string;
}

/** The body every attention shader shares: one (row, head)'s scaled scores over cache
 * positions [0, n), a max-subtracted softmax (64-thread trees in `red`), and the weighted sum
 * of V rows. In scope: t, n, hd, kvDim, ko (the KV head's offset), qo, sb (its score row in
 * SC), red, Q, KC, VC, SC, OUT. One text, so every attention kernel rounds alike. */
export function attendRow(o: AttendRowExprs): string {
  return `
  var mx = -3.40282346e38;
  for (var p = t; p < n; p += 64u) {
    let kb = ${o.kcOff} + ${o.kvRow('p')} * kvDim + ko;
    var s = 0.0;
    for (var d = 0u; d < hd; d++) { s = s + Q[qo + d] * KC[kb + d]; }
    s = s * ${o.scale};
    SC[sb + p] = s;
    mx = max(mx, s);
  }
  red[t] = mx;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) { if (t < s) { red[t] = max(red[t], red[t + s]); } workgroupBarrier(); }
  let m = red[0];
  workgroupBarrier();
  var sum = 0.0;
  for (var p = t; p < n; p += 64u) { let e = exp(SC[sb + p] - m); SC[sb + p] = e; sum = sum + e; }
  red[t] = sum;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) { if (t < s) { red[t] = red[t] + red[t + s]; } workgroupBarrier(); }
  let total = red[0];
  storageBarrier();
  workgroupBarrier();
  for (var d = t; d < hd; d += 64u) {
    var acc = 0.0;
    for (var p = 0u; p < n; p++) { acc = acc + (SC[sb + p] / total) * VC[${o.vcOff} + ${o.kvRow('p')} * kvDim + ko + d]; }
    OUT[${o.outAt}] = acc;
  }
`;
}

// params: PARAMS.attention (params.ts). Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 PT, 6 SC.
export const ATTENTION = /* wgsl */ `${HEADER}
${paramConsts('attention')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read_write> PT: array<i32>;
@group(0) @binding(6) var<storage, read_write> SC: array<f32>;
var<workgroup> red: array<f32, 64>;
fn kv_row(p: u32) -> u32 { let ps = pu(P_pageSize); return u32(PT[pu(P_ptOff) + p / ps]) * ps + p % ps; }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let h = wid.x;
  let i = wid.y;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let hd = pu(P_hd); let T = pu(P_t);
  let n = pu(P_start) + i + 1u;
  let kvDim = nKV * hd;
  let ko = (h / (nH / nKV)) * hd;
  let qo = pu(P_qOff) + i * pu(P_qStride) + h * hd;
  let sb = (i * nH + h) * (pu(P_start) + T);
${attendRow({ kvRow: (p) => `kv_row(${p})`, kcOff: 'pu(P_kcOff)', vcOff: 'pu(P_vcOff)', scale: 'pf(P_scale)', outAt: 'pu(P_outOff) + (i * nH + h) * hd + d' })}
}`;
