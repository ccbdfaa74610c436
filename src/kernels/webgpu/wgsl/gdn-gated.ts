// The recurrent Gated DeltaNet of a batch's sequences with its gates and its gated RMSNorm
// in one dispatch (Kernels.gdnRecurrentGatedSeqs): per (value head, sequence) one
// workgroup holding every state column of the head, so the output row of a token can be
// normed inside the workgroup. Per token i and column c:
//   g = gate_g(A_log, a, dt_bias), β = σ(b)                       (GDN_GATES' expression)
//   kv = Σ_a S[a,c]·e^g·k̂[a];  δ = β(v_c − kv);  S' = S·e^g + k̂ δ;  o_c = Σ_a S'[a,c] q̂[a]
//   out_c = o_c · rsqrt(mean(o²) + eps) · w_c · silu(z_c)            (NORM's order: thread t
//   of the first 64 sums columns ≡ t mod 64 in order, then a fixed tree)
// Each column's chain is the unfused recurrence's, so a row's bits do not depend on the
// batch: a sequence alone or in any batch, decode or verify, gets the same output.
// params: PARAMS.gdn_gated_seqs; the descriptor DS is seqs.ts's (i32, 5 words per sequence
// at seqTable: first row, t, state off, scratch off, mode 0 in place / 1 to scratch).
// With gating.perm, OUT is the permuted rows' tensor (the un-normed o is never stored) and
// row (i, h) lands in head block dest_head(h).
// Bindings: 1 OUT, 2 QKV, 3 A, 4 B, 5 S, 6 SCR, 7 DS, 8 AL (f32 [HV]), 9 DB (f32 [HV]),
// 10 Z [rows, HV·dv], 11 NW (f32 [dv]).
import { HEADER } from './common.js';
import { GATE_FNS, GDN_SEQ_OPENING, deltaRuleColumn, normQkRow } from './gdn.js';
import { paramConsts } from '../params.js';

/** Storage bindings the fused kernel needs (the adapter must allow this many per stage). */
export const GDN_GATED_BINDINGS = 11;

/** Threads per workgroup for value dim dv (one per state column, a multiple of 64). */
export function gdnGatedThreads(dv: number): number {
  return 64 * Math.ceil(dv / 64);
}

/** WGSL: the head block the normed row of head h is written to: h, or with P_perm ≠ 0 the
 * entry h of the destination table at DS[seqTable + perm] (the inverse of out_proj's head
 * order: Kernels.gdnRecurrentGatedSeqs' gating.perm). */
export const DEST_HEAD_FN = `fn dest_head(h: u32) -> u32 {
  if (pu(P_perm) == 0u) { return h; }
  return u32(DS[pu(P_seqTable) + pu(P_perm) + h]);
}`;

/** dest_head's table for out_proj's head order (entry h: the block j with order[j] = h),
 * appended to the sequence descriptor. */
export function destHeads(order: Int32Array): number[] {
  const dest = new Array<number>(order.length).fill(-1);
  order.forEach((h, j) => { dest[h] = j; });
  if (dest.some((j) => j < 0)) throw new RangeError('gdnRecurrentGatedSeqs: the head order is not a permutation');
  return dest;
}

/** WGSL: the gated RMSNorm of output row (i, h), held in ov[0..dv), written to `target` at
 * `base` + its row (i, dest_head(h)) (NORM's order: thread t of the first 64 sums columns ≡ t
 * mod 64 in order, then a fixed tree). In scope: t, c, i, h, hv, dv, zo, ov, red, Z, NW,
 * dest_head. One text for the fused kernel and the column launch's norm pass
 * (wgsl/gdn-columns.ts, wgsl/gated-norm.ts), so all compute the same bits; where the row
 * lands moves no bit (`at`: the index in `target` instead of base + the row's). */
export function gatedNormRow(target: string, base: string, at = `${base} + (i * hv + dest_head(h)) * dv + c`): string {
  return `    // the gated RMSNorm of output row (i, h)
    if (t < 64u) {
      var sq2 = 0.0;
      for (var p = t; p < dv; p += 64u) { let v = ov[p]; sq2 = sq2 + v * v; }
      red[t] = sq2;
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
      if (t < s) { red[t] = red[t] + red[t + s]; }
      workgroupBarrier();
    }
    let inv = 1.0 / sqrt(red[0] / f32(dv) + pf(P_eps));
    if (c < dv) {
      let r = (i * hv + h) * dv + c;
      ${target}[${at}] = ov[c] * inv * NW[c] * silu(Z[zo + r]);
    }
`;
}

/** The shader for workgroups of `wg` threads (gdnGatedThreads; ≤ 256). */
export function gdnGatedShader(wg: number): string {
  return `${HEADER}
${paramConsts('gdn_gated_seqs')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QKV: array<f32>;
@group(0) @binding(3) var<storage, read_write> A: array<f32>;
@group(0) @binding(4) var<storage, read_write> B: array<f32>;
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
@group(0) @binding(6) var<storage, read_write> SCR: array<f32>;
@group(0) @binding(7) var<storage, read> DS: array<i32>;
@group(0) @binding(8) var<storage, read_write> AL: array<f32>;
@group(0) @binding(9) var<storage, read_write> DB: array<f32>;
@group(0) @binding(10) var<storage, read_write> Z: array<f32>;
@group(0) @binding(11) var<storage, read_write> NW: array<f32>;
const WG = ${wg}u;
var<workgroup> qn: array<f32, 256>;
var<workgroup> kn: array<f32, 256>;
var<workgroup> ov: array<f32, ${wg}>;
var<workgroup> red: array<f32, 64>;
${GATE_FNS}
${DEST_HEAD_FN}
fn sget(mode: u32, i: u32, idx: u32, ss: u32, sto: u32, sco: u32) -> f32 {
  if (mode == 0u || i == 0u) { return S[sto + idx]; }
  return SCR[sco + (i - 1u) * ss + idx];
}
fn sset(mode: u32, i: u32, idx: u32, ss: u32, v: f32, sto: u32, sco: u32) {
  if (mode == 0u) { S[sto + idx] = v; } else { SCR[sco + i * ss + idx] = v; }
}
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${GDN_SEQ_OPENING}
  let ao = pu(P_aOff) + row0 * hv; let bo = pu(P_bOff) + row0 * hv;
  let oo = pu(P_outOff) + row0 * hv * dv; let zo = pu(P_zOff) + row0 * hv * dv;
  let h = wid.x;
  let c = t;
  let kh = h / (hv / hk);
  let ss = hv * dk * dv;
  let so = h * dk * dv;
  for (var i = 0u; i < T; i++) {
${normQkRow('WG')}
    if (c < dv) {
${deltaRuleColumn('exp(gate_g(AL[h], A[ao + i * hv + h], DB[h]))', 'sigmoid(B[bo + i * hv + h])')}
      ov[c] = acc;
    }
    workgroupBarrier();
${gatedNormRow('OUT', 'oo')}    workgroupBarrier();
  }
}`;
}
