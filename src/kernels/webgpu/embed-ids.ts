/// <reference types="@webgpu/types" />
// Kernels.embedIds on the GPU: embedding rows gathered by token ids that are already in a
// device int32 tensor (MTP drafts chained on the device: a draft's argmax feeds the next
// draft's embedding without a read-back). A one-part table takes the embed shader of
// host ids (the ids' offset is a parameter); a table split in row parts runs one dispatch
// per part over all ids, each writing only the rows of ids it holds (the part form of dense.ts's embed shaders).
import { isQuantType, type QuantType } from '../quant/formats.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { embedFloatShader, embedQuantShader } from './wgsl/dense.js';

/** out[i, :] = table row ids[i] for i < t (ids: an i32 view of t ids, each in [0, table.rows)). */
export function embedDeviceIds(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, table: GpuWeight, ids: GpuTensor, t: number): void {
  if (ids.length < t) throw new RangeError(`embedIds: ${ids.length} ids, need ${t}`);
  if (out.length < t * table.cols) throw new RangeError(`embedIds out: tensor of ${out.length} elements, need ${t * table.cols}`);
  if (table.parts.length === 1) {
    g.embed(enc, out, table, ids, t);
    return;
  }
  const d = table.cols;
  const quant = isQuantType(table.dtype);
  const dtype = table.dtype;
  for (const part of table.parts) {
    const common = { t, d, outOff: out.offset, idsOff: ids.offset, row0: part.row0, rows: part.rows };
    const buffers = [out.buffer, ids.buffer, part.buffer];
    if (quant) {
      const params = packParams('embed_part_quant', { ...common, rowBytes: table.rowBytes });
      g.run(enc, `embed_part_${dtype}`, () => embedQuantShader(dtype as QuantType, true), params, null, buffers, grid(Math.ceil((t * d) / 32 / 64)), 'embed');
    } else {
      const params = packParams('embed_part_float', common);
      g.run(enc, `embed_part_${dtype}`, () => embedFloatShader(dtype as 'f32' | 'bf16' | 'f16', true), params, null, buffers, grid(Math.ceil((t * d) / 64)), 'embed');
    }
  }
}
