// The dispatch of a quantized matmul group (wgsl/qmatmul-group.ts): its pipeline key, source,
// parameter block, bindings and grid, for WebGpuKernels.matmulGroup to run; and the
// activation-quantizing group of M ≤ ACTS_TILE rows (wgsl/qmatmul-acts-group.ts).
import type { QuantType } from '../quant/formats.js';
import type { QuantActs } from './backend-types.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { grid } from './wgsl/common.js';
import { packParams } from './params.js';
import { groupSegmentParams } from './wgsl/matmul-group.js';
import type { QuantLayout } from './wgsl/matmul.js';
import { quantMatmulGroupShader } from './wgsl/qmatmul-group.js';
import { quantColumnsShader } from './wgsl/qmatmul-columns.js';
import { ACTS_TILE } from './wgsl/qmatmul-acts.js';
import { quantMatmulActsGroupShader, type ActsInput } from './wgsl/qmatmul-acts-group.js';

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

/** The input of an activation-quantizing group: x [M, K], and its norm or its gate. */
export interface ActsGroupInput {
  readonly x: GpuTensor;
  readonly norm?: { readonly wv: GpuTensor; readonly eps: number; readonly zeroCentered: boolean };
  readonly gate?: { readonly b: GpuTensor; readonly act: 'silu' | 'sigmoid' };
}

/** The segments (all of `type`, every weight K columns) over m ≤ ACTS_TILE rows of the input,
 * each workgroup quantizing (and norming) its rows itself (wgsl/qmatmul-acts-group.ts). */
export function quantActsGroupDispatch(input: ActsGroupInput, m: number, k: number, type: QuantType, segs: readonly QuantSegment[], accumulate: boolean,
  dot4: boolean): QuantGroupDispatch {
  if (m > ACTS_TILE) throw new RangeError(`quant acts group: ${m} rows > ${ACTS_TILE}`);
  if (input.norm && input.gate) throw new Error('quant acts group: a norm and a gate together');
  const rowBytes = checkSegments(k, type, segs);
  const n = segs.length;
  const kind: ActsInput = input.norm ? 'norm' : input.gate ? input.gate.act : 'plain';
  const segments = groupSegmentParams(segs.map((s) => ({ rows: s.part.rows, outOff: s.out.offset, outStride: s.w.rows, col0: s.part.row0 })));
  const cols = segs.reduce((a, s) => a + s.part.rows, 0);
  const extra = input.norm ? [input.norm.wv.buffer] : input.gate ? [input.gate.b.buffer] : [];
  return {
    key: `qmatmul_acts_${type}_g${n}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${kind === 'plain' ? '' : `_${kind}`}`,
    source: () => quantMatmulActsGroupShader(type, n, dot4, accumulate, kind),
    params: packParams('qmatmul_acts_group', { rows: cols, k, m, rowBytes, segments: n, ...segments, xOff: input.x.offset, gateOff: input.gate?.b.offset ?? 0,
      eps: input.norm?.eps ?? 0, zeroCentered: input.norm?.zeroCentered ? 1 : 0 }),
    buffers: [...segs.map((s) => s.out.buffer), input.x.buffer, ...segs.map((s) => s.part.buffer), ...extra],
    groups: grid(cols, Math.ceil(m / ACTS_TILE)),
  };
}

/** The dispatches of a group's quantized weights over m ≤ ACTS_TILE rows that quantize (and
 * norm) their own input: per quant type, its weights' parts as segments, up to `maxSegments`
 * a dispatch. The norm weight must start its buffer and span K (as norm_quant_acts reads it). */
export function quantActsGroupDispatches(input: ActsGroupInput, m: number, k: number, group: readonly { out: GpuTensor; w: GpuWeight }[], accumulate: boolean,
  dot4: boolean, maxSegments: number): (QuantGroupDispatch & { readonly label: string })[] {
  if (input.norm && (input.norm.wv.offset !== 0 || input.norm.wv.length !== k)) {
    throw new RangeError(`matmulGroup: a norm weight of ${input.norm.wv.length} at ${input.norm.wv.offset} for an input of ${k} columns`);
  }
  if (input.x.length < m * k || (input.gate && input.gate.b.length < m * k)) throw new RangeError(`quant acts group: an input shorter than ${m} × ${k}`);
  const out: (QuantGroupDispatch & { readonly label: string })[] = [];
  for (const type of new Set(group.map((g) => g.w.dtype as QuantType))) {
    const segs = group.filter((g) => g.w.dtype === type).flatMap(({ out: o, w }) => w.parts.map((part) => ({ out: o, w, part })));
    for (let i = 0; i < segs.length; i += maxSegments) {
      out.push({ ...quantActsGroupDispatch(input, m, k, type, segs.slice(i, i + maxSegments), accumulate, dot4), label: `matmul_${type}` });
    }
  }
  return out;
}
