// The dispatch of a quantized matmul group (wgsl/qmatmul-group.ts): its pipeline key, source,
// parameter block, bindings and grid, for WebGpuKernels.matmulGroup to run; and the
// activation-quantizing group of M ≤ ACTS_FOLD_ROWS rows (wgsl/qmatmul-acts-group.ts), with
// the GDN causal conv folded into its stores where convFoldPlan allows.
import type { QuantType } from '../quant/formats.js';
import type { GpuConvFold, QuantActs } from './backend-types.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { grid, headInvBytes } from './wgsl/common.js';
import { packParams } from './params.js';
import { groupSegmentParams } from './wgsl/matmul-group.js';
import type { QuantLayout } from './wgsl/matmul.js';
import { quantMatmulGroupShader } from './wgsl/qmatmul-group.js';
import { quantColumnsShader } from './wgsl/qmatmul-columns.js';
import { ACTS_FOLD_ROWS, ACTS_TILE, actsColumnsWithin, quantMatmulActsShader } from './wgsl/qmatmul-acts.js';
import { quantMatmulActsGroupShader, type ActsInput } from './wgsl/qmatmul-acts-group.js';
import { convFoldKey, type ConvFoldShape } from './wgsl/conv-fold.js';

/** One weight part of a group and the output its rows go to. */
export interface QuantSegment {
  readonly out: GpuTensor;
  readonly w: GpuWeight;
  readonly part: GpuWeight['parts'][number];
}

export interface QuantGroupDispatch {
  readonly key: string;
  readonly source: () => string;
  readonly params: readonly number[];
  readonly buffers: readonly GPUBuffer[];
  readonly groups: readonly [number, number, number];
}

/** The segments' common row bytes; every weight must be of `type` with K columns. */
function checkSegments(k: number, type: QuantType, segs: readonly QuantSegment[]): number {
  const rowBytes = segs[0]!.w.rowBytes;
  for (const s of segs) {
    if (s.w.dtype !== type || s.w.cols !== k || s.w.rowBytes !== rowBytes) throw new RangeError(`quant matmul group: a ${s.w.dtype} weight of ${s.w.cols} columns among ${type} of ${k}`);
  }
  return rowBytes;
}

/** The segments (all of `type`, every weight K columns) over the activations `acts` of m
 * rows in tiles of `tm`; `columns` > 1: that many output columns a workgroup
 * (wgsl/qmatmul-columns.ts, `tm` from quantColumnsTile; `layout` unused). */
export function quantGroupDispatch(acts: QuantActs, m: number, k: number, type: QuantType, segs: readonly QuantSegment[], accumulate: boolean,
  tm: number, dot4: boolean, layout: QuantLayout = 'lanes', columns = 1): QuantGroupDispatch {
  const rowBytes = checkSegments(k, type, segs);
  const n = segs.length;
  const segments = groupSegmentParams(segs.map((s) => ({ rows: s.part.rows, outOff: s.out.offset, outStride: s.w.rows, col0: s.part.row0 })), columns);
  const cols = segs.reduce((a, s) => a + Math.ceil(s.part.rows / columns), 0);
  const variant = columns > 1 ? `_cols${columns}` : layout === 'block' ? '_block' : '';
  return {
    key: `qmatmul_group_${type}_${n}_tm${tm}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${variant}`,
    source: () => (columns > 1 ? quantColumnsShader(type, n, dot4, accumulate, tm, columns) : quantMatmulGroupShader(type, n, dot4, accumulate, tm, layout)),
    params: packParams('qmatmul_group', { k, m, rowBytes, segments: n, ...segments }),
    buffers: [...segs.map((s) => s.out.buffer), acts.qx.buffer, acts.dx.buffer, acts.sx.buffer, ...segs.map((s) => s.part.buffer)],
    groups: grid(cols, Math.ceil(m / tm)),
  };
}

/** The GDN causal conv folded into an activation-quantizing group (conv-launch.ts
 * convFoldPlan): the fold, the segments a dispatch holding conv segments may bind
 * (WebGpuKernels.convFoldSegments) and a buffer for an absent scratch binding. */
export interface ActsConvFold {
  readonly fold: GpuConvFold;
  readonly segments: number;
  readonly dummy: GPUBuffer;
}

/** The input of an activation-quantizing group: x [M, K], and its norm or its gate, or the
 * GDN gated norm of x per head (x: o [M, HV·dv], z the gate, norm f32 [dv] starting its buffer,
 * order i32 [HV]: out_proj's head order). */
export interface ActsGroupInput {
  readonly x: GpuTensor;
  readonly norm?: { readonly wv: GpuTensor; readonly eps: number; readonly zeroCentered: boolean };
  readonly gate?: { readonly b: GpuTensor; readonly act: 'silu' | 'sigmoid' };
  readonly headNorm?: { readonly z: GpuTensor; readonly norm: GpuTensor; readonly eps: number; readonly order: GpuTensor; readonly hv: number };
}

/** Workgroup bytes a head-norm input adds (its inverses and side-by-side trees). */
export function headNormActsBytes(hv: number): number {
  return headInvBytes(hv, ACTS_TILE);
}

/** The activation-quantizing kernels' key field after the type: `_c<C>` (C output columns a
 * workgroup, C > 1), `v` with vec4 input loads. */
function actsVariant(cols: number, vec: boolean): string {
  if (!Number.isInteger(cols) || cols < 1) throw new RangeError(`quant acts: ${cols} columns`);
  return `${cols > 1 ? `_c${cols}` : ''}${vec ? `${cols > 1 ? '' : '_'}v` : ''}`;
}

/** vec4 input loads: the input (and gate) at offsets ≡ 0 mod 4, no output in their buffers
 * (K ≡ 0 mod 32 keeps every lane's 4 elements in one vec4). */
function actsVec4(x: GpuTensor, gate: GpuTensor | undefined, outs: readonly GpuTensor[]): boolean {
  return x.offset % 4 === 0 && (gate === undefined || gate.offset % 4 === 0) && !outs.some((o) => o.buffer === x.buffer || o.buffer === gate?.buffer);
}

/** One unnormed weight part over m ≤ ACTS_FOLD_ROWS rows (tiles of ACTS_TILE) of x (or x ⊙ act(gate)) quantizing its
 * own input (wgsl/qmatmul-acts.ts), up to `maxCols` output columns a workgroup (as many as fit
 * `limitBytes` of workgroup memory). */
export function quantActsDispatch(x: GpuTensor, gate: { readonly b: GpuTensor; readonly act: 'silu' | 'sigmoid' } | undefined, out: GpuTensor, w: GpuWeight,
  m: number, k: number, accumulate: boolean, dot4: boolean, maxCols = 1, limitBytes = Infinity): QuantGroupDispatch {
  if (m > ACTS_FOLD_ROWS) throw new RangeError(`quant acts: ${m} rows > ${ACTS_FOLD_ROWS}`);
  const type = w.dtype as QuantType;
  const cols = actsColumnsWithin(type, maxCols, limitBytes);
  const part = w.parts[0]!;
  const vec = actsVec4(x, gate?.b, [out]);
  return {
    key: `qmatmul_acts_${type}${actsVariant(cols, vec)}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${gate ? `_${gate.act}` : ''}`,
    source: () => quantMatmulActsShader(type, dot4, accumulate, gate?.act ?? null, cols, vec),
    params: packParams('qmatmul_acts', { rows: part.rows, k, m, outOff: out.offset, outStride: w.rows, col0: part.row0, rowBytes: w.rowBytes,
      xOff: x.offset, gateOff: gate?.b.offset ?? 0 }),
    buffers: [out.buffer, x.buffer, part.buffer, ...(gate ? [gate.b.buffer] : [])],
    groups: grid(Math.ceil(part.rows / cols), Math.ceil(m / ACTS_TILE)),
  };
}

/** The segments (all of `type`, every weight K columns) over m ≤ ACTS_FOLD_ROWS rows of the input (tiles of ACTS_TILE),
 * each workgroup quantizing (and norming) its rows itself for up to `maxCols` output columns
 * of one segment, as many as fit `limitBytes` (wgsl/qmatmul-acts-group.ts). */
export function quantActsGroupDispatch(input: ActsGroupInput, m: number, k: number, type: QuantType, segs: readonly QuantSegment[], accumulate: boolean,
  dot4: boolean, maxCols = 1, limitBytes = Infinity, conv?: ActsConvFold): QuantGroupDispatch {
  const hn = input.headNorm;
  // the conv fold where a segment writes the conv's input (bit s: segment s stores through it)
  const mask = conv ? segs.reduce((a, s, i) => (s.out === conv.fold.x ? a | (1 << i) : a), 0) : 0;
  const fold = conv && mask !== 0 ? conv.fold : null;
  const shape: ConvFoldShape | null = fold ? { taps: fold.taps, mask, steps: fold.steps === true } : null;
  // rows a workgroup: ACTS_TILE, or the steps fold's one tile of every row
  const tm = fold?.steps ? fold.tile ?? ACTS_TILE : ACTS_TILE;
  const cols = actsColumnsWithin(type, maxCols, limitBytes - (hn ? headNormActsBytes(hn.hv) : 0), tm);
  if (m > ACTS_FOLD_ROWS) throw new RangeError(`quant acts group: ${m} rows > ${ACTS_FOLD_ROWS}`);
  if ([input.norm, input.gate, hn].filter(Boolean).length > 1) throw new Error('quant acts group: more than one of a norm, a gate and a head norm');
  if (hn && (k % hn.hv !== 0 || (k / hn.hv) % 4 !== 0 || hn.norm.offset !== 0 || hn.norm.length !== k / hn.hv)) {
    throw new RangeError(`quant acts group: a head norm of ${hn.hv} heads and ${hn.norm.length} weights over ${k} columns`);
  }
  const rowBytes = checkSegments(k, type, segs);
  const n = segs.length;
  const kind: ActsInput = input.norm ? 'norm' : input.gate ? input.gate.act : hn ? 'headnorm' : 'plain';
  const gateIn = input.gate?.b ?? hn?.z;
  const vec = actsVec4(input.x, gateIn, segs.map((s) => s.out));
  const segments = groupSegmentParams(segs.map((s) => ({ rows: s.part.rows, outOff: s.out.offset, outStride: s.w.rows, col0: s.part.row0 })), cols);
  const rows = segs.reduce((a, s) => a + s.part.rows, 0);
  const workgroups = segs.reduce((a, s) => a + Math.ceil(s.part.rows / cols), 0);
  const extra = input.norm ? [input.norm.wv.buffer] : input.gate ? [input.gate.b.buffer] : hn ? [hn.z.buffer, hn.norm.buffer, hn.order.buffer] : [];
  if (fold && (accumulate || input.gate || hn)) throw new Error('quant acts group: the conv fold is for a plain or normed input, not accumulating');
  const head = { rows, k, m, rowBytes, segments: n, ...segments, xOff: input.x.offset, eps: input.norm?.eps ?? hn?.eps ?? 0, zeroCentered: input.norm?.zeroCentered ? 1 : 0 };
  const convBuffers = fold ? [fold.wc.buffer, fold.window, fold.table.buffer, fold.out.buffer, ...(fold.steps ? [fold.scratch ?? conv!.dummy] : [])] : [];
  return {
    key: `qmatmul_acts_${type}${actsVariant(cols, vec)}_g${n}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${convFoldKey(shape)}${tm === ACTS_TILE ? '' : `_t${tm}`}${kind === 'plain' ? '' : `_${kind}`}${hn ? hn.hv : ''}`,
    source: () => quantMatmulActsGroupShader(type, n, dot4, accumulate, kind, cols, vec, hn?.hv ?? 0, shape, tm),
    params: fold ? packParams('qmatmul_acts_group_conv', { ...head, convOutOff: fold.out.offset, convTable: fold.table.offset })
      : packParams('qmatmul_acts_group', { ...head, gateOff: gateIn?.offset ?? 0, orderOff: hn?.order.offset ?? 0 }),
    buffers: [...segs.map((s) => s.out.buffer), input.x.buffer, ...segs.map((s) => s.part.buffer), ...extra, ...convBuffers],
    groups: grid(workgroups, Math.ceil(m / tm)),
  };
}

/** The dispatches of a group's quantized weights over m ≤ ACTS_FOLD_ROWS rows that quantize (and
 * norm) their own input: per quant type, its weights' parts as segments, up to `maxSegments`
 * a dispatch. The norm weight must start its buffer and span K (as norm_quant_acts reads it). */
export function quantActsGroupDispatches(input: ActsGroupInput, m: number, k: number, group: readonly { out: GpuTensor; w: GpuWeight }[], accumulate: boolean,
  dot4: boolean, maxSegments: number, cols = 1, limitBytes = Infinity, conv?: ActsConvFold): (QuantGroupDispatch & { readonly label: string })[] {
  if (input.norm && (input.norm.wv.offset !== 0 || input.norm.wv.length !== k)) {
    throw new RangeError(`matmulGroup: a norm weight of ${input.norm.wv.length} at ${input.norm.wv.offset} for an input of ${k} columns`);
  }
  if (input.x.length < m * k || (input.gate && input.gate.b.length < m * k) || (input.headNorm && input.headNorm.z.length < m * k)) {
    throw new RangeError(`quant acts group: an input shorter than ${m} × ${k}`);
  }
  if (input.headNorm && input.headNorm.order.length < input.headNorm.hv) throw new RangeError(`quant acts group: a head order of ${input.headNorm.order.length} < ${input.headNorm.hv} heads`);
  const out: (QuantGroupDispatch & { readonly label: string })[] = [];
  for (const type of new Set(group.map((g) => g.w.dtype as QuantType))) {
    const segs = group.filter((g) => g.w.dtype === type).flatMap(({ out: o, w }) => w.parts.map((part) => ({ out: o, w, part })));
    // a type holding the conv's segments binds the fold's buffers too: fewer segments a dispatch
    const per = conv && segs.some((s) => s.out === conv.fold.x) ? conv.segments : maxSegments;
    if (per < 1) throw new RangeError('quant acts group: no segment fits beside the conv fold\'s bindings');
    for (let i = 0; i < segs.length; i += per) {
      out.push({ ...quantActsGroupDispatch(input, m, k, type, segs.slice(i, i + per), accumulate, dot4, cols, limitBytes, conv), label: `matmul_${type}` });
    }
  }
  return out;
}
