// Shaders over a whole step's batch (variable-length sequences in one dispatch), reading the
// step table the backend uploads once per forward (batch.ts): i32 words
//   rows [M × 4]: sequence index, position, 0, 0
//   seqs [S × 4]: first row, t, start, offset of its page table from the table's start
//   page tables, concatenated.
// Parameters by name: kernels/webgpu/params.ts. Each dispatch covers rows [rowBase, rowBase + rows) (all rows, or one sequence's when the
// sequences' caches differ). The arithmetic of every output element is the per-sequence
// kernel's (wgsl/attention.ts, dense.ts ROPE), only the indexing differs: same bits.
import { HEADER } from './common.js';
import { headInputsDecls, headNormRope, type HeadInputs } from './head-inputs.js';
import { paramConsts } from '../params.js';
import { ATTEND_ROW_DECLS, attendRow } from './attention.js';

// RoPE of rows, thread per (row, head, pair). params: PARAMS.rope_batch (csOff: the batch's
// [M, half, 2] cos/sin).
// Bindings: 1 X, 2 CS.
export const ROPE_BATCH = /* wgsl */ `${HEADER}
${paramConsts('rope_batch')}
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> CS: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let half = pu(P_half);
  let heads = pu(P_heads);
  if (g >= pu(P_rows) * heads * half) { return; }
  let f = g % half;
  let h = (g / half) % heads;
  let r = pu(P_rowBase) + g / (half * heads);
  let b = pu(P_xOff) + r * pu(P_stride) + h * pu(P_headDim);
  let c = CS[pu(P_csOff) + (r * half + f) * 2u];
  let s = CS[pu(P_csOff) + (r * half + f) * 2u + 1u];
  let x1 = X[b + f];
  let x2 = X[b + f + half];
  X[b + f] = x1 * c - x2 * s;
  X[b + f + half] = x2 * c + x1 * s;
}`;

// KV write of rows, thread per (row, element). params: PARAMS.kv_write_batch.
// Bindings: 1 KC, 2 VC, 3 K, 4 V, 5 TB (i32).
export const KV_WRITE_BATCH = /* wgsl */ `${HEADER}
${paramConsts('kv_write_batch')}
@group(0) @binding(1) var<storage, read_write> KC: array<f32>;
@group(0) @binding(2) var<storage, read_write> VC: array<f32>;
@group(0) @binding(3) var<storage, read_write> K: array<f32>;
@group(0) @binding(4) var<storage, read_write> V: array<f32>;
@group(0) @binding(5) var<storage, read_write> TB: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let kvDim = pu(P_kvDim);
  if (g >= pu(P_rows) * kvDim) { return; }
  let r = pu(P_rowBase) + g / kvDim;
  let e = g % kvDim;
  let seq = u32(TB[pu(P_rowTable) + 4u * r]);
  let pos = u32(TB[pu(P_rowTable) + 4u * r + 1u]);
  let pt = pu(P_rowTable) + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  let ps = pu(P_pageSize);
  let row = u32(TB[pt + pos / ps]) * ps + pos % ps;
  KC[pu(P_kcOff) + row * kvDim + e] = K[pu(P_kOff) + r * kvDim + e];
  VC[pu(P_vcOff) + row * kvDim + e] = V[pu(P_vOff) + r * kvDim + e];
}`;

// Causal GQA attention of rows over the paged cache; workgroup per (head, row). Row r
// (position pos of its sequence) attends to positions 0..pos by the online softmax of
// wgsl/attention-online.ts (attendRow: ATTENTION's text, the same chains). TB is read only:
// the block loop's bound n (encloses barriers) must be uniform.
// params: PARAMS.attention_batch.
// Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 TB (i32).
export const ATTENTION_BATCH = /* wgsl */ `${HEADER}
${paramConsts('attention_batch')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read> TB: array<i32>;
${ATTEND_ROW_DECLS}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let h = wid.x;
  let r = pu(P_rowBase) + wid.y;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let hd = pu(P_hd); let ps = pu(P_pageSize);
  let seq = u32(TB[pu(P_rowTable) + 4u * r]);
  let pos = u32(TB[pu(P_rowTable) + 4u * r + 1u]);
  let pt = pu(P_rowTable) + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  let n = pos + 1u;
  let kvDim = nKV * hd;
  let ko = (h / (nH / nKV)) * hd;
  let qo = pu(P_qOff) + r * pu(P_qStride) + h * hd;
${attendRow({ kvRow: (p) => `(u32(TB[pt + ${p} / ps]) * ps + ${p} % ps)`, kcOff: 'pu(P_kcOff)', vcOff: 'pu(P_vcOff)', outAt: 'pu(P_outOff) + (r * nH + h) * hd + d' })}
}`;


// Attention inputs of rows (Kernels.attentionInputs), workgroup per (head slot, row): slots
// [0, nH) the query heads, [nH, nH + nKV) the key heads, then the value heads. A query or key
// head is RMS-normed as NORM does and rotated as ROPE_BATCH does (wgsl/head-inputs.ts, the
// text the folded attention runs too) and stored (q; k to K and through the page table to the cache); a gated query head also
// copies its gate half; a value head is copied to the cache. The bits of the separate calls.
// params: PARAMS.attention_inputs (qg row stride = nH·hd·(1 + gated)).
// The cos/sin are read from the table's buffer (csOff: the batch's angles, stored there as
// f32 bits). Bindings: 1 QG, 2 Q, 3 GATE, 4 K, 5 V, 6 KC, 7 VC, 8 TB (i32), 9 QW, 10 KW (f32 [hd]).
/** ATTENTION_INPUTS' row operands of headNormRope (cs: the row's angles in TB). */
const INPUTS_ROW: Omit<HeadInputs, 'src' | 'weight' | 'store'> = {
  cos: (f) => `bitcast<f32>(TB[cs + ${f} * 2u])`, sin: (f) => `bitcast<f32>(TB[cs + ${f} * 2u + 1u])`,
  hd: 'hd', half: 'half', eps: 'pf(P_eps)', threads: '64u',
};

export const ATTENTION_INPUTS = /* wgsl */ `${HEADER}
${paramConsts('attention_inputs')}
@group(0) @binding(1) var<storage, read_write> QG: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> GATE: array<f32>;
@group(0) @binding(4) var<storage, read_write> K: array<f32>;
@group(0) @binding(5) var<storage, read_write> V: array<f32>;
@group(0) @binding(6) var<storage, read_write> KC: array<f32>;
@group(0) @binding(7) var<storage, read_write> VC: array<f32>;
@group(0) @binding(8) var<storage, read_write> TB: array<i32>;
@group(0) @binding(9) var<storage, read_write> QW: array<f32>;
@group(0) @binding(10) var<storage, read_write> KW: array<f32>;
${headInputsDecls(512, '64u')}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let slot = wid.x;
  let r = wid.y;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let hd = pu(P_hd); let half = pu(P_half);
  let kvDim = nKV * hd;
  let seq = u32(TB[pu(P_rowTable) + 4u * r]);
  let pos = u32(TB[pu(P_rowTable) + 4u * r + 1u]);
  let pt = pu(P_rowTable) + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  let ps = pu(P_pageSize);
  let crow = u32(TB[pt + pos / ps]) * ps + pos % ps;
  if (slot >= nH + nKV) { // a value head: to the cache
    let e = (slot - nH - nKV) * hd;
    for (var p = t; p < hd; p += 64u) { VC[pu(P_vcOff) + crow * kvDim + e + p] = V[pu(P_vOff) + r * kvDim + e + p]; }
    return;
  }
  let gated = pu(P_gated) == 1u;
  let qgw = select(1u, 2u, gated); // qg's floats per head: query (and gate)
  let cs = pu(P_csOff) + r * half * 2u;
  if (slot < nH) {
    let src = pu(P_qgOff) + r * nH * hd * qgw + slot * hd * qgw;
    if (gated) {
      for (var p = t; p < hd; p += 64u) { GATE[pu(P_gateOff) + (r * nH + slot) * hd + p] = QG[src + hd + p]; }
    }
    ${headNormRope({ ...INPUTS_ROW, src: (p) => `QG[src + ${p}]`, weight: 'QW', store: (p, o) => `Q[pu(P_qOff) + (r * nH + slot) * hd + ${p}] = ${o};` })}
  } else {
    let kr = pu(P_kOff) + r * kvDim + (slot - nH) * hd;
    let kc = pu(P_kcOff) + crow * kvDim + (slot - nH) * hd;
    ${headNormRope({ ...INPUTS_ROW, src: (p) => `K[kr + ${p}]`, weight: 'KW', store: (p, o) => `K[kr + ${p}] = ${o}; KC[kc + ${p}] = ${o};` })}
  }
}`;
