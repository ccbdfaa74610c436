// Gated DeltaNet shaders: causal conv (+SiLU, window update or per-step scratch), the
// gates, and the recurrence. Math: kernels/ref/gdn.ts (the oracle).
import { HEADER } from './common.js';
import { paramConsts } from '../params.js';

// Causal depthwise conv, thread per channel. One sequence (CAUSAL_CONV) or a batch's
// sequences, one per workgroup row y (CAUSAL_CONV_SEQS), from the same body.
// params: PARAMS.causal_conv / causal_conv_seqs (kernels/webgpu/params.ts); batched: T,
// window, scratch and use-scratch come from the descriptor DS (i32, 5 words per sequence at
// seqTable: first row, t, window off, scratch off, use scratch), out and x offsets are the
// batch's plus the sequence's rows.
// Bindings: 1 OUT [T, C], 2 X [T, C], 3 WIN [K-1, C], 4 WC (f32 [C, K]), 5 SCR [T, K-1, C], 6 DS.
function convShader(batched: boolean): string {
  const seq = batched
    ? `let ch = wid.x * 64u + t;
  let sd = pu(P_seqTable) + 5u * wid.y;
  let row = u32(DS[sd]);
  let T = u32(DS[sd + 1u]); let oo = pu(P_outOff) + row * pu(P_c); let xo = pu(P_xOff) + row * pu(P_c);
  let wo = u32(DS[sd + 2u]); let so = u32(DS[sd + 3u]); let scr = u32(DS[sd + 4u]);`
    : `let ch = group_id(wid, nwg) * 64u + t;
  let T = pu(P_t); let oo = pu(P_outOff); let xo = pu(P_xOff); let wo = pu(P_windowOff); let so = pu(P_scratchOff); let scr = pu(P_useScratch);`;
  return `${HEADER}
${paramConsts(batched ? 'causal_conv_seqs' : 'causal_conv')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> WIN: array<f32>;
@group(0) @binding(4) var<storage, read_write> WC: array<f32>;
@group(0) @binding(5) var<storage, read_write> SCR: array<f32>;
${batched ? '@group(0) @binding(6) var<storage, read> DS: array<i32>;' : ''}
fn at(r: u32, ch: u32, C: u32, hist: u32, wo: u32, xo: u32) -> f32 {
  if (r < hist) { return WIN[wo + r * C + ch]; }
  return X[xo + (r - hist) * C + ch];
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  ${seq}
  let C = pu(P_c);
  if (ch >= C) { return; }
  let K = pu(P_taps);
  let hist = K - 1u;
  for (var i = 0u; i < T; i++) {
    var acc = 0.0;
    for (var j = 0u; j < K; j++) { acc = acc + WC[ch * K + j] * at(i + j, ch, C, hist, wo, xo); }
    OUT[oo + i * C + ch] = silu(acc);
    if (scr == 1u) {
      for (var r = 0u; r < hist; r++) { SCR[so + (i * hist + r) * C + ch] = at(i + 1u + r, ch, C, hist, wo, xo); }
    }
  }
  if (scr == 0u) {
    // row r of the new window is virtual row T + r ≥ r: rows are overwritten in order,
    // each read before any write can reach it.
    for (var r = 0u; r < hist; r++) { WIN[wo + r * C + ch] = at(T + r, ch, C, hist, wo, xo); }
  }
}`;
}
export const CAUSAL_CONV = convShader(false);
export const CAUSAL_CONV_SEQS = convShader(true);

/** Threads per workgroup of the channel launch: one warp, so C = 8192 channels are 256
 * workgroups (every SM of a 132-SM GPU busy) instead of 128. */
export const CONV_CHANNEL_THREADS = 32;
/** Taps the channel launch holds in registers; more take the thread launch. */
export const CONV_CHANNELS_MAX_TAPS = 8;

/** CAUSAL_CONV_SEQS as the channel launch (kernels/webgpu/conv-launch.ts): same params,
 * bindings and grid rows, CONV_CHANNEL_THREADS consecutive channels per workgroup, `taps`
 * compiled in so the tap loops unroll: a thread loads its taps' weights and the window
 * rows at once (all independent), then slides a register window of the virtual rows
 * [window; x] over the tokens. Each output is the same expression over the same values in
 * the same order as CAUSAL_CONV_SEQS (acc = acc + w·v, j = 0..K-1, then silu): same bits
 * (test/webgpu-conv-channels.test.ts). The window is written only after every read of it. */
export function convChannelsShader(taps: number): string {
  if (!Number.isInteger(taps) || taps < 1 || taps > CONV_CHANNELS_MAX_TAPS) throw new RangeError(`convChannelsShader: ${taps} taps (1..${CONV_CHANNELS_MAX_TAPS})`);
  const hist = taps - 1;
  return `${HEADER}
${paramConsts('causal_conv_seqs')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> WIN: array<f32>;
@group(0) @binding(4) var<storage, read_write> WC: array<f32>;
@group(0) @binding(5) var<storage, read_write> SCR: array<f32>;
@group(0) @binding(6) var<storage, read> DS: array<i32>;
@compute @workgroup_size(${CONV_CHANNEL_THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let ch = wid.x * ${CONV_CHANNEL_THREADS}u + t;
  let sd = pu(P_seqTable) + 5u * wid.y;
  let row = u32(DS[sd]);
  let T = u32(DS[sd + 1u]); let oo = pu(P_outOff) + row * pu(P_c); let xo = pu(P_xOff) + row * pu(P_c);
  let wo = u32(DS[sd + 2u]); let so = u32(DS[sd + 3u]); let scr = u32(DS[sd + 4u]);
  let C = pu(P_c);
  if (ch >= C) { return; }
  var w: array<f32, ${taps}>;
  // v[j]: virtual row i + j while token i is computed (rows < ${hist} are the window's)
  var v: array<f32, ${taps}>;
  for (var j = 0u; j < ${taps}u; j++) { w[j] = WC[ch * ${taps}u + j]; }
  for (var r = 0u; r < ${hist}u; r++) { v[r] = WIN[wo + r * C + ch]; }
  for (var i = 0u; i < T; i++) {
    v[${hist}] = X[xo + i * C + ch];
    var acc = 0.0;
    for (var j = 0u; j < ${taps}u; j++) { acc = acc + w[j] * v[j]; }
    OUT[oo + i * C + ch] = silu(acc);
    if (scr == 1u) {
      for (var r = 0u; r < ${hist}u; r++) { SCR[so + (i * ${hist}u + r) * C + ch] = v[r + 1u]; }
    }
    for (var r = 0u; r < ${hist}u; r++) { v[r] = v[r + 1u]; }
  }
  // v[r] is now virtual row T + r: the new window
  if (scr == 0u) {
    for (var r = 0u; r < ${hist}u; r++) { WIN[wo + r * C + ch] = v[r]; }
  }
}`;
}

/** The gate g of one (token, value head), shared by GDN_GATES and the fused recurrence
 * (gdn-gated.ts), so both compute it by the same expression. */
export const GATE_FNS = /* wgsl */ `
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let e = exp(x);
  // log1p without cancellation for small e
  if (e < 1e-4) { return e - 0.5 * e * e; }
  return log(1.0 + e);
}
fn gate_g(al: f32, a: f32, db: f32) -> f32 { return -exp(al) * softplus(a + db); }`;

// Gates, thread per (token, value head): g = −exp(A_log)·softplus(a + dt_bias), β = σ(b).
// params: 0 T·HV, 1 HV, 2 g off, 3 beta off, 4 a off, 5 b off.
// Bindings: 1 G, 2 BETA, 3 A, 4 B, 5 AL (f32 [HV]), 6 DB (f32 [HV]).
export const GDN_GATES = /* wgsl */ `${HEADER}
${paramConsts('gdn_gates')}
@group(0) @binding(1) var<storage, read_write> G: array<f32>;
@group(0) @binding(2) var<storage, read_write> BETA: array<f32>;
@group(0) @binding(3) var<storage, read_write> A: array<f32>;
@group(0) @binding(4) var<storage, read_write> B: array<f32>;
@group(0) @binding(5) var<storage, read_write> AL: array<f32>;
@group(0) @binding(6) var<storage, read_write> DB: array<f32>;
${GATE_FNS}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let o = group_id(wid, nwg) * 64u + t;
  if (o >= pu(P_n)) { return; }
  let h = o % pu(P_hv);
  G[pu(P_gOff) + o] = gate_g(AL[h], A[pu(P_aOff) + o], DB[h]);
  BETA[pu(P_betaOff) + o] = sigmoid(B[pu(P_bOff) + o]);
}`;

// Recurrence. Workgroup (value head h, block of 64 state columns[, sequence z]);
// thread = state column c, owning S[:, c] (no other thread touches it, so the update is
// in place). Per token: q̂, k̂ of the key head (L2 norms summed in index order by every
// thread alike) go to workgroup memory, then
//   kv = Σ_a S[a,c]·decay·k̂[a];  δ = β(v_c − kv);  S' = S·decay + k̂ δ;  o_c = Σ_a S'[a,c] q̂[a].
// Without scratch (mode 0) S is the state, updated per token. With scratch (mode 1) the
// state is read only and the state after token i is written to SCR[i].
// One sequence (GDN_RECURRENT) or a batch's, one per workgroup z (GDN_RECURRENT_SEQS), from
// the same body.
// params: PARAMS.gdn_recurrent / gdn_recurrent_seqs (kernels/webgpu/params.ts); batched: T,
// state, scratch and mode from the descriptor DS (i32, 5 words per sequence at seqTable:
// first row, t, state off, scratch off, mode), the row offsets the batch's plus the
// sequence's rows.
// Bindings: 1 OUT, 2 QKV, 3 G, 4 BETA, 5 S, 6 SCR, 7 DS (read only: T is uniform per
// workgroup, as the barriers in the token loop need).
/** WGSL: the offsets (qo, ko) of head kh's query and key in the input row starting at `row`.
 * In scope: hk, kh, dk. */
export function qkOffsets(row: string): string {
  return `let row = ${row};
    let qo = row + kh * dk;
    let ko = row + hk * dk + kh * dk;
`;
}

/** WGSL: the L2-norm scales (qs, ks) of the query and key at qo, ko: q also by 1/√dk, ε 1e-6,
 * sums in position order. In scope: dk, qo, ko and QKV. */
export const QK_SCALE_SUMS = `var sq = 0.0;
    var sk = 0.0;
    for (var d = 0u; d < dk; d++) { sq = sq + QKV[qo + d] * QKV[qo + d]; sk = sk + QKV[ko + d] * QKV[ko + d]; }
    let qs = 1.0 / sqrt(sq + 1e-6) / sqrt(f32(dk));
    let ks = 1.0 / sqrt(sk + 1e-6);
`;

/** WGSL: qkOffsets and QK_SCALE_SUMS. In scope: hk, kh, dk and QKV. One text for every
 * recurrence shader. */
export function qkNormScales(row: string): string {
  return `${qkOffsets(row)}    ${QK_SCALE_SUMS}`;
}

/** One input row's L2-normed query and key of head h into workgroup memory (qn, kn): q
 * also scaled by 1/√dk, ε 1e-6, sums in position order. In scope: i, qkvo, width, kh, hk, dk,
 * t, QKV, qn, kn; `stride` is the workgroup size expression. Shared by every recurrence shader. */
export function normQkRow(stride: string): string {
  return `
    ${qkNormScales('qkvo + i * width')}    for (var d = t; d < dk; d += ${stride}) { qn[d] = QKV[qo + d] * qs; kn[d] = QKV[ko + d] * ks; }
    workgroupBarrier();
`;
}

/** Where a recurrence shader keeps state column c while it updates it: WGSL text reading
 * and writing row `a` of the column. */
export interface ColumnState {
  get(a: string): string;
  set(a: string, v: string): string;
}

/** The column in the state buffers: S in place (mode 0), or token i's scratch (mode 1, read
 * from the previous token's scratch). In scope: i, c, so, dv, ss, sto, sco, mode. */
export const GLOBAL_COLUMN: ColumnState = {
  get: (a) => `sget(mode, i, so + ${a} * dv + c, ss, sto, sco)`,
  set: (a, v) => `sset(mode, i, so + ${a} * dv + c, ss, ${v}, sto, sco)`,
};

/** Token i's delta-rule update of state column c of head h (held where `column` says),
 * leaving o_c = Σ_a S'[a,c]·q̂[a] in `acc`:
 *   kv = Σ_a S[a,c]·e^g·k̂[a];  δ = β(v_c − kv);  S' = S·e^g + k̂ δ.
 * `decay` and `beta` are WGSL expressions for e^g and β. In scope: i, c, h, row, hk, dk,
 * dv, QKV, qn, kn and what `column` needs. Shared by every recurrence shader, so each
 * column's chain is the same instructions in the same order wherever the column lives. */
export function deltaRuleColumn(decay: string, beta: string, column: ColumnState = GLOBAL_COLUMN): string {
  return `      let decay = ${decay};
      let bt = ${beta};
      var kv = 0.0;
      for (var a = 0u; a < dk; a++) { kv = kv + ${column.get('a')} * decay * kn[a]; }
      let delta = bt * (QKV[row + 2u * hk * dk + h * dv + c] - kv);
      var acc = 0.0;
      for (var a = 0u; a < dk; a++) {
        let s = ${column.get('a')} * decay + kn[a] * delta;
        ${column.set('a', 's')};
        acc = acc + s * qn[a];
      }`;
}

/** A batched GDN shader's opening: the shapes, sequence wid.z's row of the step's sequence
 * table (row0, T tokens, state offset sto, scratch offset sco, mode: 0 in place, else the
 * per-token scratch) and its q/k/v row offset qkvo (width = 2·hk·dk + hv·dv per token). */
export const GDN_SEQ_OPENING = `  let hk = pu(P_hk); let hv = pu(P_hv); let dk = pu(P_dk); let dv = pu(P_dv);
  let width = 2u * hk * dk + hv * dv;
  let sd = pu(P_seqTable) + 5u * wid.z;
  let row0 = u32(DS[sd]);
  let T = u32(DS[sd + 1u]); let sto = u32(DS[sd + 2u]); let sco = u32(DS[sd + 3u]); let mode = u32(DS[sd + 4u]);
  let qkvo = pu(P_qkvOff) + row0 * width;`;

function recurrentShader(batched: boolean): string {
  const seq = batched
    ? `let sd = pu(P_seqTable) + 5u * wid.z;
  let row0 = u32(DS[sd]);
  let T = u32(DS[sd + 1u]); let sto = u32(DS[sd + 2u]); let sco = u32(DS[sd + 3u]); let mode = u32(DS[sd + 4u]);
  let qkvo = pu(P_qkvOff) + row0 * width; let go = pu(P_gOff) + row0 * hv; let bo = pu(P_betaOff) + row0 * hv; let oo = pu(P_outOff) + row0 * hv * dv;`
    : `let T = pu(P_t); let sto = pu(P_stateOff); let sco = pu(P_scratchOff); let mode = pu(P_mode);
  let qkvo = pu(P_qkvOff); let go = pu(P_gOff); let bo = pu(P_betaOff); let oo = pu(P_outOff);`;
  return `${HEADER}
${paramConsts(batched ? 'gdn_recurrent_seqs' : 'gdn_recurrent')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QKV: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> BETA: array<f32>;
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
@group(0) @binding(6) var<storage, read_write> SCR: array<f32>;
${batched ? '@group(0) @binding(7) var<storage, read> DS: array<i32>;' : ''}
var<workgroup> qn: array<f32, 256>;
var<workgroup> kn: array<f32, 256>;
fn sget(mode: u32, i: u32, idx: u32, ss: u32, sto: u32, sco: u32) -> f32 {
  if (mode == 0u || i == 0u) { return S[sto + idx]; }
  return SCR[sco + (i - 1u) * ss + idx];
}
fn sset(mode: u32, i: u32, idx: u32, ss: u32, v: f32, sto: u32, sco: u32) {
  if (mode == 0u) { S[sto + idx] = v; } else { SCR[sco + i * ss + idx] = v; }
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let hk = pu(P_hk); let hv = pu(P_hv); let dk = pu(P_dk); let dv = pu(P_dv);
  let width = 2u * hk * dk + hv * dv;
  ${seq}
  let h = wid.x;
  let c = wid.y * 64u + t;
  let kh = h / (hv / hk);
  let ss = hv * dk * dv;
  let so = h * dk * dv;
  for (var i = 0u; i < T; i++) {
${normQkRow('64u')}
    if (c < dv) {
${deltaRuleColumn('exp(G[go + i * hv + h])', 'BETA[bo + i * hv + h]')}
      OUT[oo + (i * hv + h) * dv + c] = acc;
    }
    workgroupBarrier();
  }
}`;
}
export const GDN_RECURRENT = recurrentShader(false);
export const GDN_RECURRENT_SEQS = recurrentShader(true);
