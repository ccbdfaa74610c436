// Float matmuls of one input, one or several in one dispatch (Kernels.matmul, matmulGroup):
// up to GROUP_SEGMENTS segments, each one weight part with its own output tensor. Workgroup
// `col` of the dispatch belongs to the segment whose column range holds it; per output
// element the loads, products, order and reduction are the same in every variant, so a
// group gives the bits of one matmul per weight.
// One workgroup per (output column, tile of `tm` rows of x; wgsl/matmul.ts matmulTile).
// Weight loads (`FloatLoads`, chosen per dispatch from K and the offsets, never from M):
// 'vec4' / 'vec4w' read the weight row in units of 4 elements (wgsl/float-chunks.ts: a
// vec2<u32> of bf16 / f16, a vec4<u32> of f32; K a multiple of 4), thread t taking units
// u ≡ t (mod 64) in order, two an iteration — a warp's lanes read 32 consecutive units per
// load — and adding each unit's 4 products into each row's sum in element order. x (and the
// norm weight, the gate) are read as the unit's vec4<f32> ('vec4': x and the gate at
// 4-aligned offsets) or as 4 scalars ('vec4w': the same values). 'element' (K not a
// multiple of 4): thread t sums k ≡ t (mod 64) in order
// through wf. Then either way a fixed tree (or, with `subgroups`, subgroupAdd within each subgroup and the
// subgroups' sums in subgroup order — subgroups of a 1-D workgroup are runs of consecutive
// invocations, so subgroup = t / size). Either way the order does not depend on M.
// `norm`: the input rows are RMS-normed first (Kernels.matmulGroup's norm): the workgroup
// sums each of its rows' squares as the NORM kernel does (thread t: indices ≡ t mod 64 in
// order, then the same tree) and scales x[k] by (x[k]·inv)·w'[k] as NORM writes it — the
// bits of NORM then the matmul, without the normed rows' round trip or a dispatch.
// params: PARAMS.matmul_group (params.ts): per segment s, seg<s>Start (its first workgroup
//   column), seg<s>Rows (rows in the part), seg<s>OutOff, seg<s>OutStride (N), seg<s>Col0;
//   norm: eps, zeroCentered; gate: gateOff; moe: expert, experts (E).
// `gate`: the input element is x ⊙ act(g) (a·silu(b) or a·sigmoid(b), the element-wise
// kernel's expression), g read at the same element as x.
// Bindings: 1 X, 2 + s: OUT_s, 2 + S + s: W_s (S = segments of the variant), norm: 2 + 2S NW,
// gate: 2 + 2S GB, moe: then PLAN (2 + 2S, or 3 + 2S after GB); `conv` (wgsl/conv-fold.ts): its
// CONV_FOLD_BINDINGS after X, the segments and NW / GB.
import { paramConsts, type ParamValues } from '../params.js';
import { HEADER, floatWeightReader, rowInvs, sideBySideTrees, treeSum } from './common.js';
import { headNormInvs, chunkSumLoop, chunkSumLoopHeadNorm, chunkWholeLoads, f32Input, floatChunkReader, floatMatmulEntry, headNormDecls, type FloatDType,
  type FloatLoads } from './float-chunks.js';
import { convFoldDecls, convFoldStore, type ConvFoldShape } from './conv-fold.js';
import { MATMUL_TILES, TM, moeExpertLine, moeOutRow, moePlanBinding, moeRowsPrelude, moeTileStart, moeWeightRow, type MoeRows } from './matmul.js';

export const GROUP_SEGMENTS = 4;

/** fn seg_<name>(sg, params) -> ret: segment sg's own reader `readerOf(s)` called with `args`
 * (a branch on the workgroup's uniform segment; a group's one body reads weights through it). */
export function segmentReader(name: string, params: string, args: string, ret: string, segments: number, readerOf: (s: number) => string): string {
  const arms = Array.from({ length: segments - 1 }, (_, s) => `if (sg == ${s}u) { return ${readerOf(s)}(${args}); }`).join('\n  ');
  return `fn seg_${name}(sg: u32, ${params}) -> ${ret} {
  ${arms}
  return ${readerOf(segments - 1)}(${args});
}`;
}

/** put_out(sg, o, v): OUT<sg>[o] = v (`accumulate`: += v), segment sg's output binding. */
export function segmentPut(segments: number, accumulate: boolean): string {
  return `fn put_out(sg: u32, o: u32, v: f32) {
  ${Array.from({ length: segments }, (_, s) => `${s === 0 ? '' : 'else '}if (sg == ${s}u) { OUT${s}[o] = ${accumulate ? `OUT${s}[o] + ` : ''}v; }`).join(' ')}
}`;
}

/** `whole` MoE GEMMs: the largest K whose weight row slice fits a thread's registers. */
export const WHOLE_K = 2048;

/** `accumulate`: out += the sum (Kernels.matmulAdd: the bits of matmul then add). */
/** `moe` (grouped MoE, wgsl/moe.ts's plan): the rows are expert P_expert's run of the
 * gathered input (count and first position from PLAN; E = P_experts); a tile past the count
 * exits before reading a weight. 'gather': output row = the gathered position; 'scatter':
 * output row = the position's entry i·topK + s. `whole` (K ≤ WHOLE_K): one workgroup runs
 * all of the expert's row tiles (grid z = 1), its weight row read once: thread t keeps the
 * elements k ≡ t (mod 64) it multiplies in registers — the same values in the same order,
 * so the bits of the per-tile grid. */
/** `tm`: rows per tile (floatTileBytes sizes its workgroup memory). `loads`: FloatLoads
 * (float-chunks.ts; the dispatcher's floatLoadsFor). `headNorm` (HV; 0: none): the input is
 * Gated DeltaNet's gated RMSNorm of x per head, head blocks in out_proj's order
 * (float-chunks.ts chunkSumLoopHeadNorm; 'vec4' / 'vec4w' loads, no other input mode). */
export function floatMatmulGroupShader(dtype: FloatDType, segments: number, subgroups = false, accumulate = false,
  norm = false, gate: 'silu' | 'sigmoid' | null = null, moe: MoeRows | null = null, whole = false, tm = TM, loads: FloatLoads = 'vec4',
  headNorm = 0, conv: ConvFoldShape | null = null): string {
  if (!(MATMUL_TILES as readonly number[]).includes(tm)) throw new RangeError(`matmul group: a tile of ${tm} rows`);
  if (conv?.steps) throw new Error('matmul group: the conv fold\'s steps variant is for the multi-column kernel');
  if (conv && (moe || accumulate || headNorm > 0)) throw new Error('matmul group: the conv fold is for a plain (not accumulating, not MoE) group');
  if (headNorm > 0 && (norm || gate || moe || loads === 'element')) throw new Error('matmul group: the head norm input is alone, over 4-element units');
  if (whole && !moe) throw new Error('matmul group: whole-expert tiles are for MoE groups');
  if (norm && gate) throw new Error('matmul group: a norm and a gated input together');
  if (moe && norm) throw new Error('matmul group: a MoE group has no norm');
  const xAt = (i: string): string => norm ? `((X[${i}] * inv[r]) * nw)` : gate ? `(X[${i}] * ${gate}(GB[pu(P_gateOff) + ${i} - pu(P_xOff)]))` : `X[${i}]`;
  // One body for every segment (the segment is uniform: from workgroup_id, so the barriers stay
  // in uniform control flow): its column and fields hoisted (col, segRows, segOutOff, …), its
  // weight reads through seg_wf / seg_wu (segment sg's reader of its own binding), its store
  // through put_out — a body per segment multiplied the shader, and a driver's compile, by S.
  const one = (text: string): string => text.replace(/\b(wf|wu)\(/g, 'seg_$1(sg, ')
    .replace(/pu\(SEG_(Rows|OutOff|OutStride|Col0)\)/g, (_, f: string) => `seg${f}`);
  const plainPut = (v: string): string => `let o = pu(SEG_OutOff) + ${moeOutRow(moe)} * pu(SEG_OutStride) + pu(SEG_Col0) + col; put_out(sg, o, ${v});`;
  // a conv segment stores the conv of its value instead (wgsl/conv-fold.ts)
  const put = (v: string): string => conv ? `if (((${conv.mask}u >> sg) & 1u) == 1u) {
        ${convFoldStore(v, moeOutRow(null), conv.taps)}
      } else { ${plainPut(v)} }` : plainPut(v);
  const chunked = loads !== 'element';
  const reader = chunked ? { name: 'wu', param: 'u', ret: 'vec4<f32>' } : { name: 'wf', param: 'i', ret: 'f32' };
  const readers = Array.from({ length: segments }, (_, s) =>
    (chunked ? floatChunkReader(dtype, 2 + segments + s) : floatWeightReader(dtype, 2 + segments + s)).replace(/\bW\b/g, `W${s}`).replace(/\b(wf|wu)\(/g, `$1${s}(`)).join('\n');
  const segReader = segmentReader(reader.name, `${reader.param}: u32`, reader.param, reader.ret, segments, (s) => `${reader.name}${s}`);
  const outs = Array.from({ length: segments }, (_, s) => `@group(0) @binding(${2 + s}) var<storage, read_write> OUT${s}: array<f32>;`).join('\n');
  const store = one(subgroups ? `
    if (t < rows) {
      var sum = 0.0;
      for (var g = 0u; g < 64u / sgs; g++) { sum = sum + red[t * 64u + g]; }
      ${put('sum')}
    }` : `
    if (t < rows) { ${put('red[t * 64u]')} }`);
  const reduce = subgroups ? `
  for (var r = 0u; r < rows; r++) {
    let v = subgroupAdd(acc[r]);
    if (sgi == 0u) { red[r * 64u + t / sgs] = v; }
  }
  workgroupBarrier();` : `
  for (var r = 0u; r < TM; r++) { red[r * 64u + t] = acc[r]; }
  workgroupBarrier();
  ${sideBySideTrees('red', 'rows')}`;
  const fields = `var col = 0u;
  var segRows = 0u;
  var segOutOff = 0u;
  var segOutStride = 0u;
  var segCol0 = 0u;
  ${Array.from({ length: segments }, (_, s) => `${s === 0 ? '' : 'else '}if (sg == ${s}u) {
    col = gcol - pu(P_seg${s}Start); segRows = pu(P_seg${s}Rows); segOutOff = pu(P_seg${s}OutOff); segOutStride = pu(P_seg${s}OutStride); segCol0 = pu(P_seg${s}Col0);
  }`).join(' ')}`;
  const sums = one(headNorm > 0 ? chunkSumLoopHeadNorm() : chunked ? chunkSumLoop(dtype, norm, gate, whole, moeWeightRow(moe, 'col', 'pu(SEG_Rows)')) : `for (var k = t; k < K; k += 64u) {
      let w = ${whole ? 'wreg[k / 64u]' : `wf(${moeWeightRow(moe, 'col', 'pu(SEG_Rows)')} * K + k)`};
      ${norm ? 'let nw = select(NW[k], 1.0 + NW[k], pu(P_zeroCentered) == 1u);' : ''}
      for (var r = 0u; r < rows; r++) { acc[r] = acc[r] + w * ${xAt('xb + r * K + k')}; }
    }`);
  return `${subgroups ? 'enable subgroups;' : ''}
${HEADER}
${paramConsts(headNorm > 0 ? 'matmul_head_norm' : 'matmul_group')}
${chunked ? f32Input('X', 'x', 1, loads === 'vec4') : '@group(0) @binding(1) var<storage, read_write> X: array<f32>;'}
${outs}
${readers}
${segReader}
${segmentPut(segments, accumulate)}
${moe ? moePlanBinding(2 + 2 * segments + (gate ? 1 : 0)) : ''}
${gate ? chunked ? f32Input('GB', 'g', 2 + 2 * segments, loads === 'vec4') : `@group(0) @binding(${2 + 2 * segments}) var<storage, read_write> GB: array<f32>;` : ''}
${norm ? `@group(0) @binding(${2 + 2 * segments}) var<storage, read_write> NW: array<${chunked ? 'vec4<f32>' : 'f32'}>;
${treeSum('nred')}` : ''}${headNorm > 0 ? `
${headNormDecls(headNorm, tm, 2 + 2 * segments, loads === 'vec4')}` : ''}${conv ? `
${convFoldDecls(2 + 2 * segments + (norm || gate ? 1 : 0))}` : ''}
const TM = ${tm}u;
var<workgroup> red: array<f32, ${tm * 64}>;
${floatMatmulEntry(subgroups)}
  ${whole ? moeExpertLine(moe) : moeTileStart(moe)}
  var sg = ${segments}u;
  ${segmentOf(segments)}
  if (sg == ${segments}u) { return; }
  ${fields}
  ${whole ? `${wholePrelude(one(chunked ? chunkWholeLoads(dtype, moeWeightRow('gather', 'col', 'pu(SEG_Rows)'))
    : `for (var k = t; k < K; k += 64u) { wreg[k / 64u] = wf(${moeWeightRow('gather', 'col', 'pu(SEG_Rows)')} * K + k); }`))}
  for (var m0 = 0u; m0 < cnt; m0 += TM) {
  let rows = min(TM, cnt - m0);` : moeRowsPrelude(moe, 'pex', 'pu(P_experts)', 'pu(P_m)')}
  var acc: array<f32, ${tm}>;
  for (var r = 0u; r < TM; r++) { acc[r] = 0.0; }
  let xb = pu(P_xOff) + (rb + m0) * K;${norm ? `
  var inv: array<f32, ${tm}>;
  ${rowInvs(chunked ? 'xs(xb + r * K + p)' : 'X[xb + r * K + p]')}` : ''}${headNorm > 0 ? `
  ${headNormInvs(headNorm)}` : ''}
  ${sums}${reduce}
  ${store}${whole ? `
  workgroupBarrier();
  }` : ''}
}`;
}

/** The expert's count and first row from the plan (a count of 0 returns before any weight
 * read) and this thread's weight elements of the workgroup's column (`loads`: k ≡ t (mod 64),
 * or chunked, its units u ≡ t (mod 64)). */
function wholePrelude(loads: string): string {
  return `let cnt = u32(PLAN[pex]);
  if (cnt == 0u) { return; }
  let rb = u32(PLAN[pu(P_experts) + pex]);
  let pe = 2u * pu(P_experts);
  var wreg: array<f32, ${WHOLE_K / 64}>;
  ${loads}`;
}

/** sg = the segment whose workgroup columns hold gcol (the last such of the first
 * P_segments; none: stays `segments`). */
export function segmentOf(segments: number): string {
  return Array.from({ length: segments }, (_, s) =>
    `if (${s}u < pu(P_segments) && gcol >= pu(P_seg${s}Start) && gcol < pu(P_seg${s}Start) + pu(P_seg${s}Rows)) { sg = ${s}u; }`).join('\n  ');
}

type SegmentParams = Omit<ParamValues<'matmul_group'>, 'k' | 'm' | 'xOff' | 'segments' | 'eps' | 'zeroCentered' | 'gateOff' | 'expert' | 'experts' | 'tiles'>;

/** The matmul_group fields of up to GROUP_SEGMENTS segments (those past the group's: 0);
 * the segments' workgroup columns are consecutive, so segment s starts after the
 * workgroups of the ones before it: one a row, or ceil(rows / columns) where a workgroup
 * computes `columns` output columns (wgsl/matmul-columns.ts). */
export function groupSegmentParams(segs: readonly { rows: number; outOff: number; outStride: number; col0: number }[], columns = 1): SegmentParams {
  if (segs.length > GROUP_SEGMENTS) throw new RangeError(`matmul group: ${segs.length} segments > ${GROUP_SEGMENTS}`);
  const p: Record<string, number> = {};
  let start = 0;
  for (let s = 0; s < GROUP_SEGMENTS; s++) {
    const seg = segs[s] ?? { rows: 0, outOff: 0, outStride: 0, col0: 0 };
    Object.assign(p, { [`seg${s}Start`]: segs[s] ? start : 0, [`seg${s}Rows`]: seg.rows, [`seg${s}OutOff`]: seg.outOff, [`seg${s}OutStride`]: seg.outStride,
      [`seg${s}Col0`]: seg.col0 });
    start += Math.ceil(seg.rows / columns);
  }
  return p as SegmentParams;
}
