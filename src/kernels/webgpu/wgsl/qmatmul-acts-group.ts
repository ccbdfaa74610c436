// Quantized matmuls of few rows (M ≤ ACTS_TILE) over one input, one quant type, in ONE
// dispatch that quantizes its own activations — and, with `norm`, RMS-norms them first
// (Kernels.matmulGroup's norm; issue #47: the norm_quant_acts dispatch before in_proj,
// q/k/v and gate/up folded away). Segments as wgsl/qmatmul-group.ts (up to GROUP_SEGMENTS
// weight parts, each its own output; the workgroup's segment from its column, uniform).
// The body is wgsl/qmatmul-acts.ts actsColumnBody (the lone activation-quantizing matmul's:
// the bits of quant_acts then qmatmul), written once: only its weight reads (seg_packed_*)
// and its store branch on the workgroup's segment (a body per segment multiplied the shader,
// and a driver's compile time, by the segments: lavapipe 56 → 13 s for a 4-part Q8_0 group
// of 8 columns). Its input element act_at(e, r, p):
// - plain: x; gated: x ⊙ act(g) (QUANT_ACTS' gated product);
// - norm: NORM's y = (x·inv)·w' (w' = w or 1 + w, zero-centred), where every workgroup first
//   forms inv of each of its rows exactly as NORM / norm_quant_acts do (common.ts
//   rmsRowOpening: thread t sums x² over p ≡ t mod 64 in order, the same tree_sum, then
//   1 / √(Σ / K + eps)), so y — and the quantized blocks, made from y as QUANT_ACTS makes
//   them from norm_quant_acts' stored row — are the same bits. The normed rows are not
//   stored (Kernels.matmulGroup lets a folded norm leave norm.out unwritten).
// Cost: each workgroup reads its rows of x once more for inv (K f32 per row, L1/L2-resident
// across the dispatch's workgroups), and x (and the norm weight) twice in the passes, as the
// lone kernel does — once for its C output columns (`cols`: consecutive rows of one segment).
// - headnorm (out_proj after the GDN column launch, whose norm pass it replaces): x is the
//   recurrence's un-normed o [M, HV·dv]; column p of the input is GDN_GATED_NORM's
//   o·inv·w·silu(z) of head ORD[p / dv]'s element p mod dv (out_proj's head order), inv
//   formed per (row, head) as that pass forms it — the bits of the norm pass then the
//   plain kernel (kernels/webgpu/gated-norm.ts outProjHeadNorm's quantized twin).
// params: PARAMS.qmatmul_acts_group. Bindings: 1 + s: OUT_s, 1 + S: X (f32 [M, K] from xOff),
// 2 + S + s: W_s (S = segments of the variant), then norm: 2 + 2S WV (f32 [K]) or gate:
// 2 + 2S GB (f32 [M, K] from gateOff), or headnorm: 2 + 2S GB (z), 3 + 2S NW (f32 [dv]),
// 4 + 2S ORD (i32 [HV] from orderOff); with the conv fold its WC, WIN, CT, COUT (and SCR)
// after X, the weights and the norm weight (wgsl/conv-fold.ts; PARAMS.qmatmul_acts_group_conv).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER, headInvDecls, rowHeadInvs, rowInvs, treeSum } from './common.js';
import { convFoldDecls, convSegment, type ConvFoldShape } from './conv-fold.js';
import { GROUP_SEGMENTS } from './matmul-group.js';
import { ACTS_TILE, actsColumnSums, actsInputDecls, actsStore, actsWorkgroupDecls, plainOrGatedAct, plainOrGatedAct4 } from './qmatmul-acts.js';
import { forSegment, throughSegments } from './qmatmul-group.js';
import { PACKED_BLOCK_STATE, dot4Source, packedBlockFns } from './quant.js';

/** The input of the group: plain x, x ⊙ act(g), RMS-normed x, or Gated DeltaNet's gated norm
 * of x per head in out_proj's head order ('headnorm'). */
export type ActsInput = 'plain' | 'norm' | 'silu' | 'sigmoid' | 'headnorm';

/** Each tile row's inv as NORM forms it (rmsRowOpening's loop, tree and expression). */
const ROW_INVS = `  ${rowInvs('xs(pu(P_xOff) + (m0 + r) * K + p)')}`;

/** NORM's normed element (wgsl/dense.ts, normQuantActsShader: y = x · inv · w'). */
const NORMED_AT = `var y: f32;
  y = X[pu(P_xOff) + e] * inv[r] * select(WV[p], 1.0 + WV[p], pu(P_zeroCentered) == 1u);
  return y;`;

/** …elements e..e+3 over vec4 bindings (p ≡ 0 mod 4): the same expression per component. */
const NORMED_AT4 = `let wv = WV[p >> 2u];
  var y: vec4<f32>;
  y = x4(pu(P_xOff) + e) * inv[r] * select(wv, 1.0 + wv, pu(P_zeroCentered) == 1u);
  return y;`;

/** The gated norm's bindings from `binding` (GB, the gate z, comes with the input's): NW (f32
 * [dv]), ORD (i32 [HV]: out_proj's head order at orderOff), its inverses per (tile row, head)
 * and the side-by-side trees. head_src(p): the element of o (and z) column p of out_proj's
 * input reads. */
function headNormDecls(heads: number, binding: number, vec: boolean): string {
  return `@group(0) @binding(${binding}) var<storage, read_write> NW: array<${vec ? 'vec4<f32>' : 'f32'}>;
@group(0) @binding(${binding + 1}) var<storage, read> ORD: array<i32>;
const GH = ${heads}u;
${headInvDecls(heads, ACTS_TILE)}
fn head_of(p: u32, gdv: u32) -> u32 { return u32(ORD[pu(P_orderOff) + p / gdv]); }`;
}

/** The gated norm's element of out_proj's input column p (GDN_GATED_NORM's o·inv·w·silu(z),
 * in its order, from head head_of(p)'s element). */
const HEAD_NORMED_AT = `let gdv = pu(P_k) / GH;
  let h = head_of(p, gdv);
  let src = e - p + h * gdv + p % gdv;
  var y: f32;
  y = X[pu(P_xOff) + src] * ginv[r * GH + h] * NW[p % gdv] * silu(GB[pu(P_gateOff) + src]);
  return y;`;

/** …elements e..e+3 over vec4 bindings (dv ≡ 0 mod 4: the 4 lie in one head). */
const HEAD_NORMED_AT4 = `let gdv = pu(P_k) / GH;
  let h = head_of(p, gdv);
  let src = e - p + h * gdv + p % gdv;
  let a = x4(pu(P_xOff) + src);
  let z = g4(pu(P_gateOff) + src);
  let nw = NW[(p % gdv) >> 2u];
  let inv = ginv[r * GH + h];
  var y: vec4<f32>;
  for (var l = 0u; l < 4u; l++) { y[l] = a[l] * inv * nw[l] * silu(z[l]); }
  return y;`;

/** Segment s owns workgroup columns [seg<s>Start, seg<s>Start + ceil(seg<s>Rows / C)). */
function segmentOfColumns(segments: number): string {
  return Array.from({ length: segments }, (_, s) => `if (${s}u < pu(P_segments) && gcol >= pu(P_seg${s}Start) && `
    + `gcol < pu(P_seg${s}Start) + (pu(P_seg${s}Rows) + C - 1u) / C) { sg = ${s}u; }`).join('\n  ');
}

/** `cols`: output columns a workgroup (C; the segments' starts in workgroups, groupSegmentParams'
 * `columns`); `vec`: vec4<f32> input loads (xOff, gateOff ≡ 0 mod 4; the norm weight too). */
/** `heads` (HV; 'headnorm' only): the gated norm's heads, K = HV · dv. */
/** `conv`: the GDN causal conv folded into its segments' stores (wgsl/conv-fold.ts; a plain or
 * normed input, not accumulating): its bindings after the input's; `tm` rows a workgroup
 * (ACTS_TILE; the steps variant may take CONV_STEPS_TILE). */
export function quantMatmulActsGroupShader(type: QuantType, segments: number, packedBuiltin: boolean, accumulate: boolean, input: ActsInput, cols = 1,
  vec = false, heads = 0, conv: ConvFoldShape | null = null, tm = ACTS_TILE): string {
  if (!Number.isInteger(segments) || segments < 1 || segments > GROUP_SEGMENTS) throw new RangeError(`quant acts group: ${segments} segments`);
  const headNorm = input === 'headnorm';
  if (headNorm !== heads > 0) throw new RangeError(`quant acts group: ${heads} heads for a ${input} input`);
  const norm = input === 'norm';
  const gate = input === 'silu' || input === 'sigmoid' ? input : null;
  if (conv && (gate || headNorm || accumulate)) throw new Error('quant acts group: the conv fold is for a plain or normed input, not accumulating');
  if (tm !== ACTS_TILE && !conv?.steps) throw new RangeError(`quant acts group: a tile of ${tm} rows is the conv fold's steps variant's (CONV_STEPS_TILE)`);
  // one body (the lone kernel's sums, its weight reads through seg_*: the segment's binding);
  // each segment's store (a conv segment's through the fold) behind a branch
  const { text: sums, readers } = throughSegments(actsColumnSums(type, packedBuiltin, true, cols, tm), segments);
  const store = (s: number): string => actsStore(accumulate, conv && convSegment(conv, s) ? conv : null);
  const seg = (s: number, text: string): string => forSegment(s, text).replace(/\bOUT\b/g, `OUT${s}`)
    .replace(/\bP_(outOff|outStride|col0)\b/g, (_, f: string) => `P_seg${s}${f[0]!.toUpperCase()}${f.slice(1)}`);
  const outs = Array.from({ length: segments }, (_, s) => `@group(0) @binding(${1 + s}) var<storage, read_write> OUT${s}: array<f32>;`).join('\n');
  const weights = Array.from({ length: segments }, (_, s) => `@group(0) @binding(${2 + segments + s}) var<storage, read_write> W${s}: array<u32>;
${forSegment(s, `${BYTES}\n${packedBlockFns(type)}`)}`).join('\n');
  const extra = norm ? `@group(0) @binding(${2 + 2 * segments}) var<storage, read_write> WV: array<${vec ? 'vec4<f32>' : 'f32'}>;` : '';
  // the segment is uniform (from workgroup_id), so the stores' barriers (the conv steps
  // variant's) stay in uniform control flow
  const branch = (text: (s: number) => string): string => Array.from({ length: segments }, (_, s) =>
    `${s === 0 ? '' : 'else '}if (sg == ${s}u) {\n${text(s)}  }`).join(' ');
  const bodies = `var cb = 0u;
  var last = 0u;
  ${branch((s) => `  cb = (gcol - pu(P_seg${s}Start)) * C;\n  last = pu(P_seg${s}Rows) - 1u;\n`)}
${sums}
  ${branch((s) => seg(s, store(s)))}`;
  return `${HEADER}
${paramConsts(conv ? 'qmatmul_acts_group_conv' : 'qmatmul_acts_group')}
${outs}
${actsInputDecls(1 + segments, gate || headNorm ? 2 + 2 * segments : null, vec)}
${extra}${headNorm ? headNormDecls(heads, 3 + 2 * segments, vec) : ''}${conv ? `
${convFoldDecls(2 + 2 * segments + (norm ? 1 : 0), conv.steps)}` : ''}
${PACKED_BLOCK_STATE}
${weights}
${readers}
${dot4Source(packedBuiltin)}
${actsWorkgroupDecls(type, cols, tm)}
${norm ? `${treeSum()}
var<private> inv: array<f32, ${tm}>;` : ''}
// elements e..e+3, e = (m0 + r)·K + p, of the input rows (past xOff)
${vec ? `fn act4(e: u32, r: u32, p: u32) -> vec4<f32> {
  ${norm ? NORMED_AT4 : headNorm ? HEAD_NORMED_AT4 : plainOrGatedAct4(gate)}
}` : `fn act_at(e: u32, r: u32, p: u32) -> f32 {
  ${norm ? NORMED_AT : headNorm ? HEAD_NORMED_AT : plainOrGatedAct(gate)}
}
fn act4(e: u32, r: u32, p: u32) -> vec4<f32> {
  return vec4<f32>(act_at(e, r, p), act_at(e + 1u, r, p + 1u), act_at(e + 2u, r, p + 2u), act_at(e + 3u, r, p + 3u));
}`}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let gcol = group_id(wid, nwg);
  if (gcol >= pu(P_rows)) { return; }
  let K = pu(P_k);
  let nb = K / 32u;
  var sg = ${segments}u;
  ${segmentOfColumns(segments)}
  if (sg == ${segments}u) { return; }
  let m0 = wid.z * TM;
  let rows = min(TM, pu(P_m) - m0);
${norm ? ROW_INVS : headNorm ? `  ${rowHeadInvs(heads, (o) => `xs(pu(P_xOff) + (m0 + r) * K + ${o})`)}` : ''}
  ${bodies}
}`;
}
