// Row-wise and element-wise shaders: norms, activations, RoPE, embedding, argmax, MoE
// routing. Reductions over a row use one workgroup of 64 threads: thread t sums indices
// ≡ t (mod 64) in order, then a fixed tree — the same order for a row whatever the batch.
import type { QuantType } from '../../quant/formats.js';
import { BYTES, HEADER, floatWeightReader, rmsRowOpening, treeSum } from './common.js';
import { paramConsts } from '../params.js';
import { hasOffsetType, subBlockDecoder } from './quant.js';

const TREE_SUM = `
${treeSum()}`;

// RMSNorm (gated = 0) and gated RMSNorm (gated = 1), one workgroup per row.
// params: 0 d, 1 rows, 2 out off, 3 x off, 4 z off, 5 zeroCentered, 6 gated, 7 eps (f32).
// Bindings: 1 OUT, 2 X, 3 Z (gated: the gate; else unused but bound), 4 WV (f32 [d]).
export const NORM = /* wgsl */ `${HEADER}
${paramConsts('norm')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> Z: array<f32>;
@group(0) @binding(4) var<storage, read_write> WV: array<f32>;
${TREE_SUM}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${rmsRowOpening('P_rows', 'P_d')}
  let zo = pu(P_zOff) + row * d;
  for (var p = t; p < d; p += 64u) {
    var y: f32;
    if (pu(P_gated) == 1u) {
      y = X[xo + p] * inv * WV[p] * silu(Z[zo + p]);
    } else {
      y = X[xo + p] * inv * select(WV[p], 1.0 + WV[p], pu(P_zeroCentered) == 1u);
    }
    OUT[oo + p] = y;
  }
}`;

// Element-wise: op 0 add, 1 a·silu(b), 2 a·sigmoid(b). params: 0 n, 1 op, 2 out, 3 a, 4 b offsets.
export const ELEMENTWISE = /* wgsl */ `${HEADER}
${paramConsts('elementwise')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> A: array<f32>;
@group(0) @binding(3) var<storage, read_write> B: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = group_id(wid, nwg) * 64u + t;
  if (i >= pu(P_n)) { return; }
  let a = A[pu(P_aOff) + i];
  let b = B[pu(P_bOff) + i];
  var y: f32;
  switch (pu(P_op)) {
    case 0u: { y = a + b; }
    case 1u: { y = a * silu(b); }
    default: { y = a * sigmoid(b); }
  }
  OUT[pu(P_outOff) + i] = y;
}`;

// Partial NeoX RoPE in place with a host-computed cos/sin table CS [T, rotaryDim/2, 2]
// (f64 angles rounded once, any inverse-frequency table / YaRN attention factor folded in).
// params: 0 T, 1 heads, 2 headDim, 3 half, 4 stride, 5 x offset, 6 table offset. Thread per (token, head, f).
export const ROPE = /* wgsl */ `${HEADER}
${paramConsts('rope')}
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> CS: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let half = pu(P_half);
  let heads = pu(P_heads);
  if (g >= pu(P_t) * heads * half) { return; }
  let f = g % half;
  let h = (g / half) % heads;
  let i = g / (half * heads);
  let b = pu(P_xOff) + i * pu(P_stride) + h * pu(P_headDim);
  let c = CS[pu(P_csOff) + (i * half + f) * 2u];
  let s = CS[pu(P_csOff) + (i * half + f) * 2u + 1u];
  let x1 = X[b + f];
  let x2 = X[b + f + half];
  X[b + f] = x1 * c - x2 * s;
  X[b + f + half] = x2 * c + x1 * s;
}`;

// Embedding: out[i, e] = W[ids[i], e]. A part of a split table (part = true; Kernels.embedIds
// over a table past the binding limit, see embed-ids.ts) runs over all T ids and writes only the
// rows whose id falls in its range [row0, row0 + rows): the parts together write each row once,
// with the same readers and dequantisation as the whole table.
// params: PARAMS.embed_float / embed_quant, or embed_part_float / embed_part_quant (params.ts).

/** The table row of token i: its id, or (a part) the id relative to the part, returning from
 * main when another part holds it. */
function tableRow(part: boolean): string {
  return part
    ? `let local = IDS[pu(P_idsOff) + i] - pi(P_row0);
  if (local < 0 || local >= pi(P_rows)) { return; }
  let id = u32(local);`
    : 'let id = u32(IDS[pu(P_idsOff) + i]);';
}

export function embedFloatShader(dtype: 'f32' | 'bf16' | 'f16', part = false): string {
  return `${HEADER}
${paramConsts(part ? 'embed_part_float' : 'embed_float')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;
${floatWeightReader(dtype, 3)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let D = pu(P_d);
  if (g >= pu(P_t) * D) { return; }
  let i = g / D;
  let e = g % D;
  ${tableRow(part)}
  OUT[pu(P_outOff) + g] = wf(id * D + e);
}`;
}

// Quantized tables, GGML's dequantisation: thread per (token, sub-block).
export function embedQuantShader(type: QuantType, part = false): string {
  const value = quantEmbedValue(type);
  return `${HEADER}
${paramConsts(part ? 'embed_part_quant' : 'embed_quant')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;
@group(0) @binding(3) var<storage, read_write> W: array<u32>;
${BYTES}
${subBlockDecoder(type)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let D = pu(P_d);
  let nsb = D / 32u;
  if (g >= pu(P_t) * nsb) { return; }
  let i = g / nsb;
  let j = g % nsb;
  ${tableRow(part)}
  let sb = sub_block(id * pu(P_rowBytes), j);
  let o = pu(P_outOff) + i * D + j * 32u;
  for (var l = 0u; l < 32u; l++) { OUT[o + l] = ${value}; }
}`;
}

/** WGSL of element l of a decoded sub-block `sb` (GGML's dequantisation). */
export function quantEmbedValue(type: QuantType): string {
  return type === 'q6_k' ? '(sb.scale * f32(select(sb.q6a, sb.q6b, l >= 16u))) * f32(Q[l])'
    : hasOffsetType(type) ? 'sb.scale * f32(Q[l]) + sb.offset' : 'sb.scale * f32(Q[l])';
}

/** The argmax order of one workgroup of 64 (shared by every argmax-like shader): `better`
 * says whether (w, j) beats (v, i) — the larger value, the lower id among equal values, NaN
 * never (callers skip x != x), index −1 = nothing yet; `reduceBest(t, v, i)` leaves the
 * workgroup's best in bv[0], bi[0] (call it in uniform control flow: it has barriers). */
export const ARGMAX_WORKGROUP = /* wgsl */ `var<workgroup> bv: array<f32, 64>;
var<workgroup> bi: array<i32, 64>;
fn better(v: f32, i: i32, w: f32, j: i32) -> bool {
  if (j < 0) { return false; }
  if (i < 0) { return true; }
  return w > v || (w == v && j < i);
}
fn reduceBest(t: u32, v: f32, i: i32) {
  bv[t] = v;
  bi[t] = i;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s && better(bv[t], bi[t], bv[t + s], bi[t + s])) { bv[t] = bv[t + s]; bi[t] = bi[t + s]; }
    workgroupBarrier();
  }
}`;

// Greedy pick per row: the lowest index of the maximum; NaN never wins; all-NaN → 0.
// One workgroup of 64 per row; (value, index) pairs combined by a fixed tree.
// Masked (Kernels.argmaxRowsMasked): ids whose mask bit is clear count as −∞ (negInf) — not
// skipped, so an all-masked row picks as the host's masked row does. Row r's mask: words
// [maskOff + r·words, + words), bit i & 31 of word i >> 5.
// params: PARAMS.argmax / PARAMS.argmax_masked (params.ts).
export function argmaxShader(masked: boolean): string {
  const value = masked
    ? `let allowed = ((MASK[mbase + (p >> 5u)] >> (p & 31u)) & 1u) == 1u;
    let x = select(pf(P_negInf), X[base + p], allowed);`
    : 'let x = X[base + p];';
  return /* wgsl */ `${HEADER}
${paramConsts(masked ? 'argmax_masked' : 'argmax')}
@group(0) @binding(1) var<storage, read_write> OUT: array<i32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
${masked ? '@group(0) @binding(3) var<storage, read_write> MASK: array<u32>;' : ''}
${ARGMAX_WORKGROUP}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let n = pu(P_n);
  let base = pu(P_xOff) + row * pu(P_stride);
  ${masked ? 'let mbase = pu(P_maskOff) + row * pu(P_words);' : ''}
  var v = 0.0;
  var i = -1;
  for (var p = t; p < n; p += 64u) {
    ${value}
    if (x == x && better(v, i, x, i32(p))) { v = x; i = i32(p); }
  }
  reduceBest(t, v, i);
  if (t == 0u) { OUT[pu(P_outOff) + row] = max(bi[0], 0); }
}`;
}

export const ARGMAX = argmaxShader(false);

// MoE router, thread per row: softmax over E (f32), top-k by logit (ties → lower id),
// optional renormalisation. params: 0 M, 1 E, 2 topK, 3 renormalize, 4 ids, 5 weights,
// 6 logits offsets. E ≤ 1024. route_row(i): row i (also wgsl/moe.ts's fused route + plan).
export const MOE_ROUTE_ROW = /* wgsl */ `fn route_row(i: u32) {
  let E = pu(P_e);
  let K = pu(P_topK);
  let lo = pu(P_logitsOff) + i * E;
  var mx = L[lo];
  for (var x = 1u; x < E; x++) { mx = max(mx, L[lo + x]); }
  var sum = 0.0;
  for (var x = 0u; x < E; x++) { sum = sum + exp(L[lo + x] - mx); }
  var taken: array<u32, 32>;
  for (var w = 0u; w < 32u; w++) { taken[w] = 0u; }
  var picked = 0.0;
  for (var s = 0u; s < K; s++) {
    var best = 0u;
    var found = false;
    for (var x = 0u; x < E; x++) {
      if ((taken[x / 32u] & (1u << (x % 32u))) != 0u) { continue; }
      if (!found || L[lo + x] > L[lo + best]) { best = x; found = true; }
    }
    taken[best / 32u] |= 1u << (best % 32u);
    let p = exp(L[lo + best] - mx) / sum;
    IDS[pu(P_idsOff) + i * K + s] = i32(best);
    WTS[pu(P_wOff) + i * K + s] = p;
    picked = picked + p;
  }
  if (pu(P_renormalize) == 1u) { for (var s = 0u; s < K; s++) { WTS[pu(P_wOff) + i * K + s] = WTS[pu(P_wOff) + i * K + s] / picked; } }
}`;

/** Bindings of the router's outputs and logits (MOE_ROUTE, and the fused route + plan). */
export function moeRouteBindings(ids: number, wts: number, logits: number): string {
  return `@group(0) @binding(${ids}) var<storage, read_write> IDS: array<i32>;
@group(0) @binding(${wts}) var<storage, read_write> WTS: array<f32>;
@group(0) @binding(${logits}) var<storage, read_write> L: array<f32>;`;
}

export const MOE_ROUTE = /* wgsl */ `${HEADER}
${paramConsts('moe_route')}
${moeRouteBindings(1, 2, 3)}
${MOE_ROUTE_ROW}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = group_id(wid, nwg) * 64u + t;
  if (i >= pu(P_m)) { return; }
  route_row(i);
}`;
