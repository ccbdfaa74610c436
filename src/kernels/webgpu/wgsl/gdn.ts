// Gated DeltaNet shaders: causal conv (+SiLU, window update or per-step scratch), the
// gates, and the recurrence. Math: kernels/ref/gdn.ts (the oracle).
import { HEADER } from './common.js';

// Causal depthwise conv, thread per channel, one sequence.
// params: 0 T, 1 C, 2 K (taps), 3 out off, 4 x off, 5 window off, 6 scratch off, 7 use scratch.
// Bindings: 1 OUT [T, C], 2 X [T, C], 3 WIN [K-1, C], 4 WC (f32 [C, K]), 5 SCR [T, K-1, C].
export const CAUSAL_CONV = /* wgsl */ `${HEADER}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> WIN: array<f32>;
@group(0) @binding(4) var<storage, read_write> WC: array<f32>;
@group(0) @binding(5) var<storage, read_write> SCR: array<f32>;
fn at(r: u32, ch: u32, C: u32, hist: u32) -> f32 {
  if (r < hist) { return WIN[pu(5u) + r * C + ch]; }
  return X[pu(4u) + (r - hist) * C + ch];
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let ch = group_id(wid, nwg) * 64u + t;
  let C = pu(1u);
  if (ch >= C) { return; }
  let T = pu(0u);
  let K = pu(2u);
  let hist = K - 1u;
  for (var i = 0u; i < T; i++) {
    var acc = 0.0;
    for (var j = 0u; j < K; j++) { acc = acc + WC[ch * K + j] * at(i + j, ch, C, hist); }
    OUT[pu(3u) + i * C + ch] = silu(acc);
    if (pu(7u) == 1u) {
      for (var r = 0u; r < hist; r++) { SCR[pu(6u) + (i * hist + r) * C + ch] = at(i + 1u + r, ch, C, hist); }
    }
  }
  if (pu(7u) == 0u) {
    // row r of the new window is virtual row T + r ≥ r: rows are overwritten in order,
    // each read before any write can reach it.
    for (var r = 0u; r < hist; r++) { WIN[pu(5u) + r * C + ch] = at(T + r, ch, C, hist); }
  }
}`;

// Gates, thread per (token, value head): g = −exp(A_log)·softplus(a + dt_bias), β = σ(b).
// params: 0 T·HV, 1 HV, 2 g off, 3 beta off, 4 a off, 5 b off.
// Bindings: 1 G, 2 BETA, 3 A, 4 B, 5 AL (f32 [HV]), 6 DB (f32 [HV]).
export const GDN_GATES = /* wgsl */ `${HEADER}
@group(0) @binding(1) var<storage, read_write> G: array<f32>;
@group(0) @binding(2) var<storage, read_write> BETA: array<f32>;
@group(0) @binding(3) var<storage, read_write> A: array<f32>;
@group(0) @binding(4) var<storage, read_write> B: array<f32>;
@group(0) @binding(5) var<storage, read_write> AL: array<f32>;
@group(0) @binding(6) var<storage, read_write> DB: array<f32>;
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let e = exp(x);
  // log1p without cancellation for small e
  if (e < 1e-4) { return e - 0.5 * e * e; }
  return log(1.0 + e);
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let o = group_id(wid, nwg) * 64u + t;
  if (o >= pu(0u)) { return; }
  let h = o % pu(1u);
  G[pu(2u) + o] = -exp(AL[h]) * softplus(A[pu(4u) + o] + DB[h]);
  BETA[pu(3u) + o] = sigmoid(B[pu(5u) + o]);
}`;

// Recurrence for one sequence. Workgroup (value head h, block of 64 state columns);
// thread = state column c, owning S[:, c] (no other thread touches it, so the update is
// in place). Per token: q̂, k̂ of the key head (L2 norms summed in index order by every
// thread alike) go to workgroup memory, then
//   kv = Σ_a S[a,c]·decay·k̂[a];  δ = β(v_c − kv);  S' = S·decay + k̂ δ;  o_c = Σ_a S'[a,c] q̂[a].
// Without scratch (mode 0) S is the state, updated per token. With scratch (mode 1) the
// state is read only and the state after token i is written to SCR[i].
// params: 0 T, 1 HK, 2 HV, 3 dk, 4 dv, 5 qkv off, 6 g/beta off, 7 out off, 8 state off,
//         9 scratch off, 10 mode, 11 beta off. Bindings: 1 OUT, 2 QKV, 3 G, 4 BETA, 5 S, 6 SCR.
export const GDN_RECURRENT = /* wgsl */ `${HEADER}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QKV: array<f32>;
@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> BETA: array<f32>;
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
@group(0) @binding(6) var<storage, read_write> SCR: array<f32>;
var<workgroup> qn: array<f32, 256>;
var<workgroup> kn: array<f32, 256>;
fn sget(mode: u32, i: u32, idx: u32, ss: u32) -> f32 {
  if (mode == 0u || i == 0u) { return S[pu(8u) + idx]; }
  return SCR[pu(9u) + (i - 1u) * ss + idx];
}
fn sset(mode: u32, i: u32, idx: u32, ss: u32, v: f32) {
  if (mode == 0u) { S[pu(8u) + idx] = v; } else { SCR[pu(9u) + i * ss + idx] = v; }
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let T = pu(0u); let hk = pu(1u); let hv = pu(2u); let dk = pu(3u); let dv = pu(4u);
  let mode = pu(10u);
  let h = wid.x;
  let c = wid.y * 64u + t;
  let kh = h / (hv / hk);
  let width = 2u * hk * dk + hv * dv;
  let ss = hv * dk * dv;
  let so = h * dk * dv;
  for (var i = 0u; i < T; i++) {
    let row = pu(5u) + i * width;
    let qo = row + kh * dk;
    let ko = row + hk * dk + kh * dk;
    var sq = 0.0;
    var sk = 0.0;
    for (var d = 0u; d < dk; d++) { sq = sq + QKV[qo + d] * QKV[qo + d]; sk = sk + QKV[ko + d] * QKV[ko + d]; }
    let qs = 1.0 / sqrt(sq + 1e-6) / sqrt(f32(dk));
    let ks = 1.0 / sqrt(sk + 1e-6);
    for (var d = t; d < dk; d += 64u) { qn[d] = QKV[qo + d] * qs; kn[d] = QKV[ko + d] * ks; }
    workgroupBarrier();
    if (c < dv) {
      let decay = exp(G[pu(6u) + i * hv + h]);
      let bt = BETA[pu(11u) + i * hv + h];
      var kv = 0.0;
      for (var a = 0u; a < dk; a++) { kv = kv + sget(mode, i, so + a * dv + c, ss) * decay * kn[a]; }
      let delta = bt * (QKV[row + 2u * hk * dk + h * dv + c] - kv);
      var acc = 0.0;
      for (var a = 0u; a < dk; a++) {
        let s = sget(mode, i, so + a * dv + c, ss) * decay + kn[a] * delta;
        sset(mode, i, so + a * dv + c, ss, s);
        acc = acc + s * qn[a];
      }
      OUT[pu(7u) + (i * hv + h) * dv + c] = acc;
    }
    workgroupBarrier();
  }
}`;
