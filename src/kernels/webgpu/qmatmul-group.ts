// The dispatch of a quantized matmul group (wgsl/qmatmul-group.ts): its pipeline key, source,
// parameter block, bindings and grid, for WebGpuKernels.matmulGroup to run.
import type { QuantType } from '../quant/formats.js';
import type { QuantActs } from './backend-types.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { grid } from './wgsl/common.js';
import { packParams } from './params.js';
import { groupSegmentParams } from './wgsl/matmul-group.js';
import type { QuantLayout } from './wgsl/matmul.js';
import { quantMatmulGroupShader } from './wgsl/qmatmul-group.js';

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

/** The segments (all of `type`, every weight K columns) over the activations `acts` of m
 * rows in tiles of `tm`. */
export function quantGroupDispatch(acts: QuantActs, m: number, k: number, type: QuantType, segs: readonly QuantSegment[], accumulate: boolean,
  tm: number, dot4: boolean, layout: QuantLayout = 'lanes'): QuantGroupDispatch {
  const rowBytes = segs[0]!.w.rowBytes;
  for (const s of segs) {
    if (s.w.dtype !== type || s.w.cols !== k || s.w.rowBytes !== rowBytes) throw new RangeError(`quant matmul group: a ${s.w.dtype} weight of ${s.w.cols} columns among ${type} of ${k}`);
  }
  const n = segs.length;
  const segments = groupSegmentParams(segs.map((s) => ({ rows: s.part.rows, outOff: s.out.offset, outStride: s.w.rows, col0: s.part.row0 })));
  const cols = segs.reduce((a, s) => a + s.part.rows, 0);
  return {
    key: `qmatmul_group_${type}_${n}_tm${tm}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${layout === 'block' ? '_block' : ''}`,
    source: () => quantMatmulGroupShader(type, n, dot4, accumulate, tm, layout),
    params: packParams('qmatmul_group', { k, m, rowBytes, segments: n, ...segments }),
    buffers: [...segs.map((s) => s.out.buffer), acts.qx.buffer, acts.dx.buffer, acts.sx.buffer, ...segs.map((s) => s.part.buffer)],
    groups: grid(cols, Math.ceil(m / tm)),
  };
}
