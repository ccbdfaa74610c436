// Gated DeltaNet's gated norm where out_proj reads it, on the GPU. Kernels.gatedRmsNorm with
// a head order (wgsl/gated-norm.ts): the normed rows land in out_proj's stored head order in
// the norm's own dispatch (no gather_rows after it). outProjHeadNorm: the column launch's
// norm formed inside out_proj's float matmul (the one-column kernel, or the multi-column one at
// 2 ≤ M ≤ COLUMNS_HEAD_NORM_ROWS: no norm pass, no normed rows), or, for a quantized out_proj of M ≤ ACTS_FOLD_ROWS
// rows, inside its activation-quantizing matmul (outProjHeadNormQuant); a quantized one of more
// rows reads the activations the norm pass quantized (normQuantFolds, outProjNormQuant).
import type { GdnDims } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import type { WebGpuKernels } from './backend.js';
import type { GpuWeight } from './weights.js';
import { floatLoadsFor, type FloatDType } from './wgsl/float-chunks.js';
import { matmulTile } from './wgsl/matmul.js';
import { floatMatmulGroupShader } from './wgsl/matmul-group.js';
import { floatColumnsShader } from './wgsl/matmul-columns.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { grid, headInvBytes, headTreeBytes } from './wgsl/common.js';
import { GATED_NORM_PERM } from './wgsl/gated-norm.js';
import { packParams } from './params.js';
import { headNormActsBytes, quantActsGroupDispatches } from './qmatmul-group.js';
import { ACTS_FOLD_ROWS, actsWorkgroupBytes } from './wgsl/qmatmul-acts.js';
import type { QuantType } from '../quant/formats.js';
import type { QuantActs } from './backend-types.js';

/** out[i·HV + j] = gatedRmsNorm(o, z)[i·HV + order[j]] per row of d = wv.length; `order`: the
 * HV heads' order as an i32 tensor of HV elements. out overlaps neither o nor z. */
export function gatedRmsNormPermuted(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, o: GpuTensor, z: GpuTensor, wv: GpuTensor, m: number,
  eps: number, order: GpuTensor, hv: number): void {
  if (m % hv !== 0) throw new RangeError(`gatedRmsNorm: ${m} rows are not whole tokens of ${hv} heads`);
  if (wv.offset !== 0) throw new RangeError('gatedRmsNorm weight must start its buffer');
  const n = m * wv.length;
  const overlaps = (a: GpuTensor): boolean => a.buffer === out.buffer && a.offset < out.offset + n && out.offset < a.offset + n;
  if (overlaps(o) || overlaps(z)) throw new RangeError('gatedRmsNorm: a permuted norm writes outside o and z');
  const params = packParams('gated_norm_perm', { d: wv.length, rows: m, hv, outOff: out.offset, xOff: o.offset, zOff: z.offset, orderOff: order.offset, eps });
  g.run(enc, 'gated_norm_perm', () => GATED_NORM_PERM, params, null, [out.buffer, o.buffer, z.buffer, wv.buffer, order.buffer], grid(m), 'gated_rms_norm');
}

/** The gated norm folded into out_proj's input (Kernels.gdnRecurrentGatedSeqs' project on the
 * column launch): the norm pass's rows are never stored. */
export interface HeadNormInput {
  readonly z: GpuTensor; // [M, HV·dv] the gate
  readonly norm: GpuTensor; // f32 [dv], starting its buffer
  readonly eps: number;
  readonly order: GpuTensor; // i32 [HV]: out_proj's head order (identity without one)
  readonly hv: number;
}

/** Workgroup bytes of the folded matmul's tile of `tm` rows: the float tile's partial sums
 * plus the head inverses' memory (wgsl/common.ts headInvDecls). */
function headNormTileBytes(tm: number, hv: number): number {
  return tm * 64 * 4 + headInvBytes(hv, tm);
}

/** Rows up to which the multi-column float out_proj (g.floatColumnsAt(M) > 1) takes the
 * head norm (verifies, up to 16 streams); above, the norm keeps its pass. Every workgroup of
 * the folded kernel forms its tile's inverses and loads z: at M rows that is N ÷ C × M rows
 * read twice more, against one dispatch saved. The batch model (qwen3.5-4b BF16, 8 columns,
 * chunked at 24 µs a dispatch; `scripts/gpu-batch-model.mjs` with those loads priced) puts
 * the fold ahead up to 16 streams (H200 14.31 → 15.47 × one), even at 24 (18.69 → 18.55)
 * and behind at 32 (22.18 → 21.78; its GPU µs 6,102 → 6,227). */
export const COLUMNS_HEAD_NORM_ROWS = 16;

/** Whether out_proj (w) over M rows of HV·dv takes the gated norm as its input on this
 * device: the column launch (its norm is a pass of its own), a float weight in one part, the
 * one-column kernel at this M or the multi-column one at M ≤ COLUMNS_HEAD_NORM_ROWS, dv ≡ 0
 * (mod 4) (a weight unit inside one head), and the tile within the workgroup memory and bindings. */
export function headNormFolds(g: WebGpuKernels, w: GpuWeight, m: number, dims: GdnDims): boolean {
  const { numValueHeads: hv, valueDim: dv } = dims;
  if (g.gdnLaunch !== 'columns' || isQuantType(w.dtype) || w.parts.length !== 1 || w.cols !== hv * dv || dv % 4 !== 0) return false;
  if (g.floatColumnsAt(m) > 1 && m > COLUMNS_HEAD_NORM_ROWS) return false;
  const lim = g.device.limits;
  return headNormTileBytes(headNormTile(g, m, hv), hv) <= lim.maxComputeWorkgroupStorageSize && lim.maxStorageBuffersPerShaderStage >= 6;
}

/** Whether a quantized out_proj (w) over M rows of HV·dv takes the gated norm as its input:
 * the column launch, the activation-quantizing matmuls on (foldQuantActs, M ≤ ACTS_FOLD_ROWS),
 * dv ≡ 0 (mod 4), and one column's workgroup within the device's memory and bindings (OUT, X,
 * W, z, the norm weight and the order per part: one part a dispatch keeps it at 6). */
export function quantHeadNormFolds(g: WebGpuKernels, w: GpuWeight, m: number, dims: GdnDims): boolean {
  const { numValueHeads: hv, valueDim: dv } = dims;
  if (g.gdnLaunch !== 'columns' || !isQuantType(w.dtype) || !g.foldQuantActs || m > ACTS_FOLD_ROWS || w.cols !== hv * dv || dv % 4 !== 0) return false;
  const lim = g.device.limits;
  return actsWorkgroupBytes(w.dtype as QuantType, 1) + headNormActsBytes(hv) <= lim.maxComputeWorkgroupStorageSize && lim.maxStorageBuffersPerShaderStage >= 6;
}

/** out += gatedNorm(o)·wᵀ over a quantized w, the normed rows formed and quantized in the
 * matmul (wgsl/qmatmul-acts-group.ts 'headnorm'): the bits of the column launch's norm pass
 * (with the head order) then matmulAdd's activation-quantizing matmul. o: [M, HV·dv]. */
export function outProjHeadNormQuant(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, o: GpuTensor, w: GpuWeight, m: number, gn: HeadNormInput): void {
  g.countWeightReads(w, 1);
  for (const d of quantActsGroupDispatches({ x: o, headNorm: { z: gn.z, norm: gn.norm, eps: gn.eps, order: gn.order, hv: gn.hv } }, m, w.cols, [{ out, w }], true,
    g.adapter.features.dot4I8, 1, g.actsColumns, g.device.limits.maxComputeWorkgroupStorageSize)) {
    g.run(enc, d.key, d.source, d.params, null, d.buffers, d.groups, d.label);
  }
}

/** Whether the column launch's norm pass writes a quantized out_proj's (w) quantized input
 * for these `rows` (the Σ t of the recurrent sequences; M = `m`): w not taking the norm itself
 * (quantHeadNormFolds false) and its input not quantized in its own matmul either (the
 * activation-quantizing matmuls off or M > ACTS_FOLD_ROWS: else quant_acts then the tiled
 * matmul), every row recurrent (the pass writes every block), a q8 block within one head
 * (dv ≡ 0 mod 32) and the pass's 7 bindings. */
export function normQuantFolds(g: WebGpuKernels, w: GpuWeight, m: number, rows: number, dims: GdnDims): boolean {
  const { numValueHeads: hv, valueDim: dv } = dims;
  if (g.gdnLaunch !== 'columns' || !isQuantType(w.dtype) || w.cols !== hv * dv || dv % 32 !== 0 || rows !== m) return false;
  if (g.foldQuantActs && m <= ACTS_FOLD_ROWS) return false;
  return g.device.limits.maxStorageBuffersPerShaderStage >= 7;
}

/** out += acts·wᵀ over the gated norm pass's quantized rows (normQuantFolds): matmulAdd's
 * tiled quantized matmuls at this M without its quant_acts. x: [M, w.rows]. */
export function outProjNormQuant(g: WebGpuKernels, enc: StepEncoder, x: GpuTensor, w: GpuWeight, m: number, acts: QuantActs): void {
  g.countWeightReads(w, Math.ceil(m / g.quantTile(m, w.dtype as QuantType).tm));
  g.quantMatmuls(enc, acts, m, w.cols, [{ out: x, w }], true);
}

/** The folded out_proj's tile: the one-column kernel's within the workgroup memory, capped by
 * the accumulators for C columns (floatColumnsTile, as floatSegments caps it). */
function headNormTile(g: WebGpuKernels, m: number, hv: number): number {
  const tm = matmulTile(m, 64 * 4 + hv * 4, headTreeBytes(hv), g.device.limits.maxComputeWorkgroupStorageSize);
  const columns = g.floatColumnsAt(m);
  return columns > 1 ? g.floatColumnsTile(tm, columns) : tm;
}

/** out += gatedNorm(o)·wᵀ, the normed rows formed in the matmul (wgsl/matmul-group.ts or, C
 * columns a workgroup at M ≥ 2, wgsl/matmul-columns.ts headNorm): the bits of the column
 * launch's norm pass (with the head order) then matmulAdd's float matmul at this M.
 * o: [M, HV·dv] un-normed; out: [M, w.rows]. */
export function outProjHeadNorm(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, o: GpuTensor, w: GpuWeight, m: number, gn: HeadNormInput): void {
  const k = w.cols;
  const dtype = w.dtype as FloatDType;
  const part = w.parts[0]!;
  if (gn.norm.offset !== 0) throw new RangeError('out_proj head norm: the norm weight must start its buffer');
  for (const [t, n, what] of [[o, m * k, 'o'], [gn.z, m * k, 'z'], [out, m * w.rows, 'out'], [gn.order, gn.hv, 'order']] as const) {
    if (t.length < n) throw new RangeError(`out_proj head norm: ${what} holds ${t.length} < ${n}`);
  }
  const sg = g.adapter.features.subgroups && g.subgroupSizeDivides64;
  const loads = floatLoadsFor(dtype, k, o.offset, gn.z.offset, out.buffer === o.buffer || out.buffer === gn.z.buffer);
  if (loads === 'element') throw new RangeError('out_proj head norm: K is not whole 4-element units');
  const tm = headNormTile(g, m, gn.hv);
  const tiles = Math.ceil(m / tm);
  const columns = g.floatColumnsAt(m);
  g.countWeightReads(w, tiles);
  const params = packParams('matmul_head_norm', { k, m, xOff: o.offset, segments: 1, seg0Start: 0, seg0Rows: part.rows, seg0OutOff: out.offset,
    seg0OutStride: w.rows, seg0Col0: part.row0, eps: gn.eps, gnZOff: gn.z.offset, gnOrderOff: gn.order.offset });
  const key = `matmul_group_${dtype}_1_tm${tm}${sg ? '_sg' : ''}_acc_headnorm${gn.hv}_${loads}${columns > 1 ? `_cols${columns}` : ''}`;
  const shader = (): string => columns > 1 ? floatColumnsShader(dtype, 1, sg, true, tm, loads === 'vec4', columns, false, null, null, gn.hv)
    : floatMatmulGroupShader(dtype, 1, sg, true, false, null, null, false, tm, loads, gn.hv);
  g.run(enc, key, shader, params, null,
    [o.buffer, out.buffer, part.buffer, gn.norm.buffer, gn.z.buffer, gn.order.buffer], grid(Math.ceil(part.rows / columns), tiles), `matmul_${dtype}`);
}

const identities = new Map<number, Int32Array>();

/** [0, 1, …, hv − 1] (a model without a head order), one array per hv. */
export function identityOrder(hv: number): Int32Array {
  let o = identities.get(hv);
  if (!o) identities.set(hv, (o = Int32Array.from({ length: hv }, (_, i) => i)));
  return o;
}
