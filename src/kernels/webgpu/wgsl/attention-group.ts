// Causal GQA attention with each KV row read once per query block: workgroup per (KV head,
// block) where a block is up to QMAX queries = consecutive rows of ONE sequence × every
// query head of the KV head's group (decode: one row, G heads; verify: k + 1 rows). Thread
// t takes positions ≡ t mod 64: it reads a K row once and scores every query of the block
// against it; the output thread of element d reads V[p, d] once and adds it to every
// query's sum. Each query keeps ATTENTION_BATCH's chains (score Σ_d q·k in order, max and
// Σ exp by the same 64-wide tree, output Σ_p in position order), so a query's bits do not
// depend on its block; scores go to SC at ATTENTION_BATCH's places.
// params: PARAMS.attention_group. Block table BT (i32, 2 words per block at blockTable:
// first row, rows); TB the step table (wgsl/batch.ts), both read only (uniform loop bounds).
// Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 TB (i32), 6 SC, 7 BT (i32).
// The per-query sums `s` and `acc` are declared inside loops and zeroed by explicit stores:
// WGSL zeroes a var without initializer on every execution of its declaration, but Dawn on
// lavapipe kept the previous iteration's values (wrong scores past 64 positions, wrong
// outputs for head dims over 64; test/webgpu-batch.test.ts has both).
import { HEADER } from './common.js';
import { paramConsts } from '../params.js';

/** Queries per block (private arrays of the shader). */
export const ATTENTION_QMAX = 16;

/** The grouped and the tile kernels' parameter block and bindings (one layout, one call site). */
export const ATTENTION_GROUP_BINDINGS = `${paramConsts('attention_group')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read> TB: array<i32>;
@group(0) @binding(6) var<storage, read_write> SC: array<f32>;
@group(0) @binding(7) var<storage, read> BT: array<i32>;
`;

export const ATTENTION_GROUP = /* wgsl */ `${HEADER}
${ATTENTION_GROUP_BINDINGS}const QMAX = ${ATTENTION_QMAX}u;
var<workgroup> red: array<f32, 64>;
fn tree(t: u32, v: f32, isMax: bool) -> f32 {
  red[t] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] = select(red[t] + red[t + s], max(red[t], red[t + s]), isMax); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let kh = wid.x;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let hd = pu(P_hd); let ps = pu(P_pageSize);
  let G = nH / nKV;
  let kvDim = nKV * hd;
  let r0 = u32(BT[pu(P_blockTable) + 2u * wid.y]);
  let nq = u32(BT[pu(P_blockTable) + 2u * wid.y + 1u]) * G;
  let rt = pu(P_rowTable);
  let seq = u32(TB[rt + 4u * r0]);
  let pt = rt + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  // per query j: row r0 + j / G, head kh·G + j % G; n = its positions, qo its query, sb its scores
  var n: array<u32, QMAX>;
  var qo: array<u32, QMAX>;
  var sb: array<u32, QMAX>;
  var nmax = 0u;
  for (var j = 0u; j < nq; j++) {
    let r = r0 + j / G;
    let h = kh * G + j % G;
    n[j] = u32(TB[rt + 4u * r + 1u]) + 1u;
    qo[j] = pu(P_qOff) + r * pu(P_qStride) + h * hd;
    sb[j] = nH * u32(TB[rt + 4u * r + 2u]) + h * n[j];
    nmax = max(nmax, n[j]);
  }
  var mx: array<f32, QMAX>;
  for (var j = 0u; j < nq; j++) { mx[j] = -3.40282346e38; }
  for (var p = t; p < nmax; p += 64u) {
    let kb = pu(P_kcOff) + (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * hd;
    var s: array<f32, QMAX>;
    for (var j = 0u; j < nq; j++) { s[j] = 0.0; }
    for (var d = 0u; d < hd; d++) {
      let kd = KC[kb + d];
      for (var j = 0u; j < nq; j++) { s[j] = s[j] + Q[qo[j] + d] * kd; }
    }
    for (var j = 0u; j < nq; j++) {
      if (p < n[j]) {
        let v = s[j] * pf(P_scale);
        SC[sb[j] + p] = v;
        mx[j] = max(mx[j], v);
      }
    }
  }
  var tot: array<f32, QMAX>;
  for (var j = 0u; j < nq; j++) {
    let m = tree(t, mx[j], true);
    var sum = 0.0;
    for (var p = t; p < n[j]; p += 64u) { let e = exp(SC[sb[j] + p] - m); SC[sb[j] + p] = e; sum = sum + e; }
    tot[j] = tree(t, sum, false);
  }
  storageBarrier();
  workgroupBarrier();
  for (var d = t; d < hd; d += 64u) {
    var acc: array<f32, QMAX>;
    for (var j = 0u; j < nq; j++) { acc[j] = 0.0; }
    for (var p = 0u; p < nmax; p++) {
      let v = VC[pu(P_vcOff) + (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * hd + d];
      for (var j = 0u; j < nq; j++) {
        if (p < n[j]) { acc[j] = acc[j] + (SC[sb[j] + p] / tot[j]) * v; }
      }
    }
    for (var j = 0u; j < nq; j++) {
      let r = r0 + j / G;
      let h = kh * G + j % G;
      OUT[pu(P_outOff) + (r * nH + h) * hd + d] = acc[j];
    }
  }
}`;
