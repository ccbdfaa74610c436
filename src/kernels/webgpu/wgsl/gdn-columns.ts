// The fused gated recurrence (wgsl/gdn-gated.ts) launched over column blocks: per (value
// head, block of GDN_COLUMNS state columns, sequence) one workgroup, so a decode step runs
// HV · dv / GDN_COLUMNS workgroups instead of HV. The gated RMSNorm of an output row needs
// every column of the head, so it is a second dispatch (GDN_GATED_NORM), one workgroup per
// (value head, token, sequence).
//
// Column c's update reads and writes only column c of S (the delta rule, MODEL-NOTES.md:
// kv_c = Σ_a S[a,c]·e^g·k̂[a], δ_c = β(v_c − kv_c), S'[:,c] = S[:,c]·e^g + k̂ δ_c,
// o_c = Σ_a S'[a,c]·q̂[a]); what columns share, q̂, k̂, e^g and β, every workgroup computes by
// the same text (qkNormScales' sums, by one thread per workgroup; gate_g). So a column's
// chain is the fused kernel's chain (deltaRuleColumn) on the same values, and the norm pass
// is the fused kernel's norm (gatedNormRow) on the same row: the bits equal the
// one-workgroup-per-head launch (test/webgpu-gdn-columns.test.ts).
//
// Memory: the workgroup stages its columns S[:, c0 .. c0 + CB) into workgroup memory with
// all GDN_COLUMN_THREADS threads (consecutive threads read consecutive columns of a row: a
// warp-load is 4 rows × CB · 4 = 32 contiguous bytes; GDN_STAGE_LOADS independent loads per
// thread in flight, a whole dk = 128 block in one go), runs each column's chain from there
// (thread t < CB owns column c0 + t), and writes the block back at the end (mode 0) or after
// every token to that token's scratch (mode 1, verify).
// The plain recurrence (gates given, no norm: GDN_RECURRENT_SEQS, which adapters under 11
// storage bindings run) has its column form from the same text (GDN_RECURRENT_COLUMNS).
// params: PARAMS.gdn_gated_seqs / gdn_recurrent_seqs; DS as gdn-gated.ts (i32, 5 words per
// sequence at seqTable: first row, t, state off, scratch off, mode).
import { HEADER } from './common.js';
import { GATE_FNS, GDN_SEQ_OPENING, QK_SCALE_SUMS, deltaRuleColumn, qkOffsets, type ColumnState } from './gdn.js';
import { DEST_HEAD_FN, gatedNormRow } from './gdn-gated.js';
import { paramConsts } from '../params.js';

/** State columns per workgroup of the column launch (the staged block is dk · 8 floats ≤ 8 KiB). */
export const GDN_COLUMNS = 8;
/** Threads per workgroup of the column launch's recurrence. */
export const GDN_COLUMN_THREADS = 64;
/** Loads each thread issues before it stores any (independent, so in flight together). */
export const GDN_STAGE_LOADS = 16;

const STAGED: ColumnState = { get: (a) => `st[${a} * CB + t]`, set: (a, v) => `st[${a} * CB + t] = ${v}` };

/** WGSL: element e = a·CB + j of the staged block is state element base + a·dv + c0 + j. */
const blockAt = (base: string): string => `${base} + (e / CB) * dv + c0 + e % CB`;

/** WGSL: stage the block from S at `base` (GDN_STAGE_LOADS loads per thread before its stores). */
function stageIn(base: string): string {
  return `for (var e0 = t; e0 < n; e0 += ${GDN_STAGE_LOADS}u * WG) {
    var v: array<f32, ${GDN_STAGE_LOADS}>;
    for (var j = 0u; j < ${GDN_STAGE_LOADS}u; j++) { let e = e0 + j * WG; if (e < n && c0 + e % CB < dv) { v[j] = S[${blockAt(base)}]; } }
    for (var j = 0u; j < ${GDN_STAGE_LOADS}u; j++) { let e = e0 + j * WG; if (e < n) { st[e] = v[j]; } }
  }`;
}

/** WGSL: write the staged block to `buf` at `base` (its columns below dv). */
function stageOut(buf: 'S' | 'SCR', base: string): string {
  return `for (var e = t; e < n; e += WG) { if (c0 + e % CB < dv) { ${buf}[${blockAt(base)}] = st[e]; } }`;
}

/** WGSL: normQkRow (gdn.ts) with the scales summed once per workgroup, by thread 0 (the
 * same text, so the same bits), and shared through workgroup memory. In scope: i, qkvo,
 * width, kh, hk, dk, t, QKV, qn, kn, qks. */
const NORM_QK_ONCE = `    ${qkOffsets('qkvo + i * width')}    if (t == 0u) {
      ${QK_SCALE_SUMS}      qks[0] = qs;
      qks[1] = ks;
    }
    workgroupBarrier();
    for (var d = t; d < dk; d += WG) { qn[d] = QKV[qo + d] * qks[0]; kn[d] = QKV[ko + d] * qks[1]; }
    workgroupBarrier();
`;

/** What differs between the fused (gated) and the plain recurrence of the column launch:
 * bindings 3, 4 (and 8, 9), the per-token gate offsets, e^g and β. */
const FORMS = {
  gated: {
    params: 'gdn_gated_seqs',
    bindings: `@group(0) @binding(3) var<storage, read_write> A: array<f32>;
@group(0) @binding(4) var<storage, read_write> B: array<f32>;`,
    extraBindings: `@group(0) @binding(8) var<storage, read_write> AL: array<f32>;
@group(0) @binding(9) var<storage, read_write> DB: array<f32>;
${GATE_FNS}`,
    offsets: 'let ao = pu(P_aOff) + row0 * hv; let bo = pu(P_bOff) + row0 * hv;',
    decay: 'exp(gate_g(AL[h], A[ao + i * hv + h], DB[h]))',
    beta: 'sigmoid(B[bo + i * hv + h])',
  },
  plain: {
    params: 'gdn_recurrent_seqs',
    bindings: `@group(0) @binding(3) var<storage, read_write> G: array<f32>;
@group(0) @binding(4) var<storage, read_write> BETA: array<f32>;`,
    extraBindings: '',
    offsets: 'let go = pu(P_gOff) + row0 * hv; let bo = pu(P_betaOff) + row0 * hv;',
    decay: 'exp(G[go + i * hv + h])',
    beta: 'BETA[bo + i * hv + h]',
  },
} as const;

/** The column launch's recurrence, the un-normed o to OUT: 'gated' computes the gates
 * (the fused kernel's expressions; its norm is GDN_GATED_NORM's pass), 'plain' reads them
 * (GDN_RECURRENT_SEQS' form, whose output is final). Bindings: 1 OUT, 2 QKV, 3 A / G,
 * 4 B / BETA, 5 S, 6 SCR, 7 DS; gated also 8 AL (f32 [HV]), 9 DB (f32 [HV]). */
function columnsShader(form: keyof typeof FORMS): string {
  const f = FORMS[form];
  return `${HEADER}
${paramConsts(f.params)}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QKV: array<f32>;
${f.bindings}
@group(0) @binding(5) var<storage, read_write> S: array<f32>;
@group(0) @binding(6) var<storage, read_write> SCR: array<f32>;
@group(0) @binding(7) var<storage, read> DS: array<i32>;
${f.extraBindings}
const WG = ${GDN_COLUMN_THREADS}u;
const CB = ${GDN_COLUMNS}u;
var<workgroup> qn: array<f32, 256>;
var<workgroup> kn: array<f32, 256>;
var<workgroup> st: array<f32, ${256 * GDN_COLUMNS}>;
var<workgroup> qks: array<f32, 2>;
@compute @workgroup_size(${GDN_COLUMN_THREADS})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${GDN_SEQ_OPENING}
  ${f.offsets}
  let oo = pu(P_outOff) + row0 * hv * dv;
  let h = wid.x;
  let c0 = wid.y * CB;
  let c = c0 + t;
  let kh = h / (hv / hk);
  let ss = hv * dk * dv;
  let so = h * dk * dv;
  let n = dk * CB;
  ${stageIn('sto + so')}
  for (var i = 0u; i < T; i++) {
${NORM_QK_ONCE}
    if (t < CB && c < dv) {
${deltaRuleColumn(f.decay, f.beta, STAGED)}
      OUT[oo + (i * hv + h) * dv + c] = acc;
    }
    workgroupBarrier();
    if (mode == 1u) {
      ${stageOut('SCR', 'sco + i * ss + so')}
    }
  }
  if (mode == 0u) {
    ${stageOut('S', 'sto + so')}
  }
}`;
}

export const GDN_GATED_COLUMNS = columnsShader('gated');
export const GDN_RECURRENT_COLUMNS = columnsShader('plain');

/** WGSL: the norm pass's opening — workgroup (h, i, sequence wid.z) loads output row (i, h)
 * of OUT into ov (returning past the sequence's T tokens); defines hv, dv, row0, T, i, oo, zo,
 * h, c for gatedNormRow. Shared with wgsl/gated-norm.ts's quantizing pass. */
export const GATED_NORM_PASS_OPENING = `  let hv = pu(P_hv); let dv = pu(P_dv);
  let sd = pu(P_seqTable) + 5u * wid.z;
  let row0 = u32(DS[sd]);
  let T = u32(DS[sd + 1u]);
  let i = wid.y;
  if (i >= T) { return; }
  let oo = pu(P_outOff) + row0 * hv * dv; let zo = pu(P_zOff) + row0 * hv * dv;
  let h = wid.x;
  let c = t;
  if (c < dv) { ov[c] = OUT[oo + (i * hv + h) * dv + c]; }
  workgroupBarrier();`;

/** The column launch's second pass: the gated RMSNorm of each recurrent output row of OUT,
 * to DST at dstOff (OUT itself, or gating.perm's tensor with the row in head block
 * dest_head(h)). Workgroup (value head, token, sequence); a token past its sequence's t
 * returns. Bindings: 1 OUT, 2 Z [rows, HV·dv], 3 NW (f32 [dv]), 4 DS, 5 DST. `wg`:
 * gdnGatedThreads(dv). */
export function gdnGatedNormShader(wg: number): string {
  return `${gatedNormPassHead(wg, `@group(0) @binding(5) var<storage, read_write> DST: array<f32>;`)}
${gatedNormRow('DST', 'pu(P_dstOff) + row0 * hv * dv')}}`;
}

/** A gated norm pass's text up to its main's opening (GATED_NORM_PASS_OPENING included):
 * header, params, bindings 1 OUT, 2 Z, 3 NW, 4 DS, then `bindings` (the pass's own), the
 * workgroup arrays and dest_head. */
export function gatedNormPassHead(wg: number, bindings: string): string {
  return `${HEADER}
${paramConsts('gdn_gated_seqs')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Z: array<f32>;
@group(0) @binding(3) var<storage, read_write> NW: array<f32>;
@group(0) @binding(4) var<storage, read> DS: array<i32>;
${bindings}
var<workgroup> ov: array<f32, ${wg}>;
var<workgroup> red: array<f32, 64>;
${DEST_HEAD_FN}
@compute @workgroup_size(${wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${GATED_NORM_PASS_OPENING}`;
}
