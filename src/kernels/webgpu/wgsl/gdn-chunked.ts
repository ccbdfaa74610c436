// Chunked Gated DeltaNet (prefill): chunks of at most 64 tokens. A chunk ends at every
// absolute position multiple of 64 and, in the batched form, at each of the sequence's
// split points. Workgroup of 256 per (value head, block of 64 state columns[, sequence z]);
// per chunk, with Γ the cumulative log decay:
//   A[i][j] = β_i (k̂_i·k̂_j) e^{Γ_i−Γ_j} (j < i);  T = (I + A)⁻¹ (forward substitution, by rows)
//   U = T·(β⊙V);  W = T·(β⊙e^Γ⊙K̂);  Vnew = U − W·S
//   O = (Q̂⊙e^Γ)·S + (Q̂K̂ᵀ ⊙ e^{Γ_i−Γ_j}, j ≤ i)·Vnew;  S ← S·e^{Γ_last} + (K̂⊙e^{Γ_last−Γ})ᵀ·Vnew
// (the algebra of ref/gdn.ts gdnChunked), every product a fixed-order sum, matrices in the
// workgroup's scratch region. A chunk depends only on its tokens and the incoming f32 state,
// so any split at the same chunk ends gives the same bits: a sequence of GDN_CHUNKED_SEQS
// computes what GDN_CHUNKED computes called once per segment between its split points.
// One sequence (GDN_CHUNKED) or a batch's chunked prefills, one per workgroup z
// (GDN_CHUNKED_SEQS), from the same body.
// params: PARAMS.gdn_chunked / gdn_chunked_seqs (kernels/webgpu/params.ts). Batched: the
// descriptor DS (i32) holds 6 words per sequence at seqTable (first row, t, state offset,
// pos0, index of its splits from seqTable, split count); its splits are token offsets in (0, t),
// ascending. The row offsets are the batch's plus the sequence's rows; the scratch region
// of a workgroup is indexed by (z, y, x).
// Bindings: 1 OUT, 2 QKV, 3 G, 4 BETA, 5 S, 6 SC (scratch), 7 DS (batched; read only, so
// T and the chunk ends are uniform per workgroup, as the barriers in the chunk loop need).
import { HEADER } from './common.js';
import { qkNormScales } from './gdn.js';
import { paramConsts } from '../params.js';

/** Descriptor words per sequence of GDN_CHUNKED_SEQS. */
export const CHUNKED_SEQ_WORDS = 6;

function chunkedShader(batched: boolean): string {
  const seq = batched
    ? `let sd = pu(P_seqTable) + ${CHUNKED_SEQ_WORDS}u * wid.z;
  let row0 = u32(DS[sd]);
  let T = u32(DS[sd + 1u]); let sto = u32(DS[sd + 2u]); let pos0 = u32(DS[sd + 3u]);
  let sp = pu(P_seqTable) + u32(DS[sd + 4u]); let ns = u32(DS[sd + 5u]);
  let qkvo = pu(P_qkvOff) + row0 * width; let go = pu(P_gOff) + row0 * hv; let bo = pu(P_betaOff) + row0 * hv; let oo = pu(P_outOff) + row0 * hv * dv;`
    : `let T = pu(P_t); let sto = pu(P_stateOff); let pos0 = pu(P_pos0);
  let qkvo = pu(P_qkvOff); let go = pu(P_gOff); let bo = pu(P_betaOff); let oo = pu(P_outOff);`;
  // the end of the chunk starting at c0: the next multiple of 64 (absolute), the next split
  const chunkEnd = batched
    ? `while (si < ns && u32(DS[sp + si]) <= c0) { si++; }
    let segEnd = select(T, u32(DS[sp + si]), si < ns);
    let n = min(64u - (pos0 + c0) % 64u, segEnd - c0);`
    : 'let n = min(64u - (pos0 + c0) % 64u, T - c0);';
  return `${HEADER}
${paramConsts(batched ? 'gdn_chunked_seqs' : 'gdn_chunked')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QKV: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> BETA: array<f32>;
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
@group(0) @binding(6) var<storage, read_write> SC: array<f32>;
${batched ? '@group(0) @binding(7) var<storage, read> DS: array<i32>;' : ''}
const NT = 256u;
var<workgroup> gam: array<f32, 64>;
var<workgroup> bet: array<f32, 64>;
fn sync() { storageBarrier(); workgroupBarrier(); }
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let hk = pu(P_hk); let hv = pu(P_hv); let dk = pu(P_dk); let dv = pu(P_dv);
  let width = 2u * hk * dk + hv * dv;
  ${seq}
  let h = wid.x;
  let c0col = wid.y * 64u;
  let ncol = min(64u, dv - c0col);
  let kh = h / (hv / hk);
  let so = sto + h * dk * dv;
  // scratch regions of this workgroup
  let base = ((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * pu(P_per);
  let QN = base;
  let KN = QN + 64u * dk;
  let WW = KN + 64u * dk;
  let TT = WW + 64u * dk;
  let QK = TT + 4096u;
  let UU = QK + 4096u;
  let VN = UU + 4096u;
  var c0 = 0u;
  var si = 0u;
  loop {
    if (c0 >= T) { break; }
    ${chunkEnd}
    // q̂, k̂ of the chunk's tokens; Γ and β
    for (var i = t; i < n; i += NT) {
      ${qkNormScales('qkvo + (c0 + i) * width')}      for (var d = 0u; d < dk; d++) { SC[QN + i * dk + d] = QKV[qo + d] * qs; SC[KN + i * dk + d] = QKV[ko + d] * ks; }
    }
    if (t == 0u) {
      var cum = 0.0;
      for (var i = 0u; i < n; i++) { cum = cum + G[go + (c0 + i) * hv + h]; gam[i] = cum; bet[i] = BETA[bo + (c0 + i) * hv + h]; }
    }
    sync();
    // A (strictly lower, into TT temporarily as a source) and the masked Q̂K̂ᵀ
    for (var p = t; p < n * n; p += NT) {
      let i = p / n;
      let j = p % n;
      var kk = 0.0;
      var qk = 0.0;
      for (var d = 0u; d < dk; d++) { kk = kk + SC[KN + i * dk + d] * SC[KN + j * dk + d]; qk = qk + SC[QN + i * dk + d] * SC[KN + j * dk + d]; }
      let e = exp(gam[i] - gam[j]);
      SC[UU + i * 64u + j] = select(0.0, bet[i] * kk * e, j < i); // A
      SC[QK + i * 64u + j] = select(0.0, qk * e, j <= i);
    }
    sync();
    // T = (I + A)⁻¹ by rows: T_i = e_i − Σ_{l<i} A_il T_l
    for (var i = 0u; i < n; i++) {
      for (var j = t; j < n; j += NT) {
        var v = select(0.0, 1.0, i == j);
        for (var l = 0u; l < i; l++) { v = v - SC[UU + i * 64u + l] * SC[TT + l * 64u + j]; }
        SC[TT + i * 64u + j] = v;
      }
      sync();
    }
    // W = T·(β e^Γ K̂)  [n, dk];  U = T·(β V)  [n, ncol] (U overwrites A, no longer needed)
    for (var p = t; p < n * dk; p += NT) {
      let i = p / dk;
      let d = p % dk;
      var w = 0.0;
      for (var l = 0u; l <= i; l++) { w = w + SC[TT + i * 64u + l] * (bet[l] * exp(gam[l]) * SC[KN + l * dk + d]); }
      SC[WW + i * dk + d] = w;
    }
    sync();
    for (var p = t; p < n * ncol; p += NT) {
      let i = p / ncol;
      let c = p % ncol;
      var u = 0.0;
      for (var l = 0u; l <= i; l++) { u = u + SC[TT + i * 64u + l] * (bet[l] * QKV[qkvo + (c0 + l) * width + 2u * hk * dk + h * dv + c0col + c]); }
      SC[UU + i * 64u + c] = u;
    }
    sync();
    // Vnew = U − W·S
    for (var p = t; p < n * ncol; p += NT) {
      let i = p / ncol;
      let c = p % ncol;
      var acc = SC[UU + i * 64u + c];
      for (var d = 0u; d < dk; d++) { acc = acc - SC[WW + i * dk + d] * S[so + d * dv + c0col + c]; }
      SC[VN + i * 64u + c] = acc;
    }
    sync();
    // O = (Q̂ e^Γ)·S + QK·Vnew
    for (var p = t; p < n * ncol; p += NT) {
      let i = p / ncol;
      let c = p % ncol;
      var a = 0.0;
      for (var d = 0u; d < dk; d++) { a = a + SC[QN + i * dk + d] * S[so + d * dv + c0col + c]; }
      a = a * exp(gam[i]);
      for (var j = 0u; j <= i; j++) { a = a + SC[QK + i * 64u + j] * SC[VN + j * 64u + c]; }
      OUT[oo + ((c0 + i) * hv + h) * dv + c0col + c] = a;
    }
    sync();
    // S ← S e^{Γ_last} + (K̂ e^{Γ_last − Γ})ᵀ·Vnew
    let gl = gam[n - 1u];
    for (var p = t; p < dk * ncol; p += NT) {
      let d = p / ncol;
      let c = p % ncol;
      var acc = S[so + d * dv + c0col + c] * exp(gl);
      for (var j = 0u; j < n; j++) { acc = acc + SC[KN + j * dk + d] * exp(gl - gam[j]) * SC[VN + j * 64u + c]; }
      S[so + d * dv + c0col + c] = acc;
    }
    sync();
    c0 += n;
  }
}`;
}

export const GDN_CHUNKED = chunkedShader(false);
export const GDN_CHUNKED_SEQS = chunkedShader(true);

/** Scratch floats per workgroup (QN, KN, WW of 64·dk; TT, QK, UU, VN of 64·64). */
export function chunkedScratchPer(dk: number): number {
  return 3 * 64 * dk + 4 * 4096;
}
