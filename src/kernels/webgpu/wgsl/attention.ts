// Paged KV cache shaders: the KV write and causal GQA attention over the page table.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { ONLINE_BLOCK, ONLINE_SOFTMAX } from './attention-online.js';

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

// Causal GQA attention over the paged cache, one sequence; workgroup per (head, query), the
// online softmax of wgsl/attention-online.ts. A query's result depends only on its position.
/** WGSL expressions that place one attention row in its shader. */
export interface AttendRowExprs {
  /** The cache row of position `p` (an expression in p). */
  readonly kvRow: (p: string) => string;
  readonly kcOff: string;
  readonly vcOff: string;
  /** Element index of output element d of this (row, head). */
  readonly outAt: string;
}

/** Head dims up to this run per (head, row): a thread keeps hd / 64 accumulators. */
export const ROW_MAX_HEAD_DIM = 512;

/** Module-scope declarations attendRow needs: the block's scores `w`, the state the block's
 * thread 0 hands the others, the online-softmax helpers. */
export const ATTEND_ROW_DECLS = `var<workgroup> w: array<f32, ${2 * ONLINE_BLOCK}>;
var<workgroup> st: array<f32, 2>;
${ONLINE_SOFTMAX}`;

/** The body every per-(head, row) shader shares: the online softmax over blocks of OB
 * positions (thread i < cnt scores position b0 + i; thread 0 folds the block; thread t holds
 * output elements t + 64·a). Blocks alternate halves of w, so two barriers a block do. In
 * scope: t, n (uniform), hd, kvDim, ko (the KV head's offset), qo, Q, KC, VC, OUT. One text,
 * so every per-row kernel rounds alike. */
export function attendRow(o: AttendRowExprs): string {
  return `
  var acc: array<f32, ${ROW_MAX_HEAD_DIM / 64}>;
  for (var a = 0u; a < ${ROW_MAX_HEAD_DIM / 64}u; a++) { acc[a] = 0.0; }
  var ml = vec2<f32>(OB_MIN, 0.0);
  for (var b0 = 0u; b0 < n; b0 += OB) {
    let cnt = min(OB, n - b0);
    let wo = ((b0 / OB) % 2u) * OB;
    for (var i = t; i < cnt; i += 64u) {
      let kb = ${o.kcOff} + ${o.kvRow('(b0 + i)')} * kvDim + ko;
      var s = 0.0;
      for (var d = 0u; d < hd; d++) { s = ob_dot(s, Q[qo + d], KC[kb + d]); }
      w[wo + i] = ob_scale(s);
    }
    workgroupBarrier();
    if (t == 0u) {
      let r = ob_block(wo, cnt, ml);
      ml = r.xy;
      st[0] = r.z;
      st[1] = r.y;
    }
    workgroupBarrier();
    let alpha = st[0];
    for (var a = 0u; t + 64u * a < hd; a++) {
      let d = t + 64u * a;
      var x = ob_rescale(acc[a], alpha);
      for (var i = 0u; i < cnt; i++) { x = ob_acc(x, w[wo + i], VC[${o.vcOff} + ${o.kvRow('(b0 + i)')} * kvDim + ko + d]); }
      acc[a] = x;
    }
  }
  let l = st[1];
  for (var a = 0u; t + 64u * a < hd; a++) { let d = t + 64u * a; OUT[${o.outAt}] = ob_out(acc[a], l); }
`;
}

// params: PARAMS.attention (params.ts). Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 PT.
export const ATTENTION = /* wgsl */ `${HEADER}
${paramConsts('attention')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read_write> PT: array<i32>;
${ATTEND_ROW_DECLS}
fn kv_row(p: u32) -> u32 { let ps = pu(P_pageSize); return u32(PT[pu(P_ptOff) + p / ps]) * ps + p % ps; }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let h = wid.x;
  let i = wid.y;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let hd = pu(P_hd);
  let n = pu(P_start) + i + 1u;
  let kvDim = nKV * hd;
  let ko = (h / (nH / nKV)) * hd;
  let qo = pu(P_qOff) + i * pu(P_qStride) + h * hd;
${attendRow({ kvRow: (p) => `kv_row(${p})`, kcOff: 'pu(P_kcOff)', vcOff: 'pu(P_vcOff)', outAt: 'pu(P_outOff) + (i * nH + h) * hd + d' })}
}`;
