/// <reference types="@webgpu/types" />
// Kernels.mtpInputs on the GPU: one dispatch (wgsl/mtp-inputs.ts) in place of the plain form's
// hidden-row copy, embed, two rms_norms and two copies into cat. It serves a table in one part
// (an embedding past the binding limit takes the plain form: split embed's gather) whose
// hidden rows all come from one tensor (besides the host-written first rows) that is not cat.
import { isQuantType, type QuantType } from '../quant/formats.js';
import { mtpInputRows, type MtpInputs } from '../mtp-inputs.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { mtpInputsShader } from './wgsl/mtp-inputs.js';

/** Storage buffers the shader binds (OUT, IDS, W, WE, WH, HID, FIRST, SRC). */
export const MTP_INPUTS_BINDINGS = 8;

/** What the dispatch needs besides the operands: the table and norm weights on the GPU, and
 * the step's upload arena (host data bound where it lands). */
export interface MtpInputsOn {
  readonly table: GpuWeight;
  readonly normEmbedding: GpuTensor; // f32 [H], its own buffer (uploadVector)
  readonly normHidden: GpuTensor;
  readonly put: (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;
}

/** Whether one dispatch serves `a` (else the caller runs mtp-inputs-by-calls.ts). */
export function mtpInputsFits(g: WebGpuKernels, a: MtpInputs<GpuTensor, GpuTensor>, table: GpuWeight): boolean {
  const src = a.runs[0]?.src.buffer;
  return table.parts.length === 1 && src !== undefined && a.runs.every((r) => r.src.buffer === src) && src !== a.cat.buffer
    && !('device' in a.ids && (a.ids.device.buffer === a.cat.buffer || a.ids.device.buffer === src)) && mtpInputRows(a.runs) > 0
    && g.adapter.limits.maxStorageBuffersPerShaderStage >= MTP_INPUTS_BINDINGS;
}

/** The SRC table ([M]: each row's hidden as an element offset in HID, or −1 − its offset in
 * the first rows' upload) and the first rows stacked ([F, H], F ≥ 0). */
function hiddenSources(a: MtpInputs<GpuTensor, GpuTensor>, h: number): { src: Int32Array; firsts: Float32Array } {
  const m = mtpInputRows(a.runs);
  const src = new Int32Array(m);
  const firsts = new Float32Array(h * a.runs.filter((r) => r.first).length);
  let row = 0;
  let f = 0;
  for (const r of a.runs) {
    if (!(Number.isInteger(r.row) && r.row >= 0 && Number.isInteger(r.n) && r.n >= 0 && (r.row + r.n) * h <= r.src.length)) {
      throw new RangeError(`mtpInputs: hidden rows [${r.row}, ${r.row + r.n}) past a tensor of ${r.src.length / h} rows`);
    }
    if (r.first) {
      if (r.first.length !== h) throw new RangeError(`mtpInputs: a first row of ${r.first.length} elements, need ${h}`);
      firsts.set(r.first, f * h);
      src[row++] = -1 - f++ * h; // made absolute once the upload's offset is known
    }
    for (let j = 0; j < r.n; j++) src[row++] = r.src.offset + (r.row + j) * h;
  }
  return { src, firsts };
}

/** cat = the op's rows, one dispatch (mtpInputsFits(g, a, on.table) must hold). */
export function mtpInputsDispatch(g: WebGpuKernels, enc: StepEncoder, a: MtpInputs<GpuTensor, GpuTensor>, on: MtpInputsOn): void {
  const { table } = on;
  const h = table.cols;
  const m = mtpInputRows(a.runs);
  if (a.cat.length < m * 2 * h) throw new RangeError(`mtpInputs cat: tensor of ${a.cat.length} elements, need ${m * 2 * h}`);
  if (on.normEmbedding.offset !== 0 || on.normHidden.offset !== 0) throw new RangeError('mtpInputs: norm weights must start their buffers (uploadVector)');
  const { src, firsts } = hiddenSources(a, h);
  const first = firsts.length > 0 ? on.put(firsts, 'f32') : null;
  if (first) for (let i = 0; i < m; i++) if (src[i]! < 0) src[i] = -1 - (first.offset + (-1 - src[i]!));
  let ids: GpuTensor;
  let idsOff: number;
  let table32: GpuTensor;
  if ('device' in a.ids) {
    if (a.ids.device.length < a.ids.offset + m) throw new RangeError(`mtpInputs: ${a.ids.device.length - a.ids.offset} device ids, need ${m}`);
    table32 = on.put(src, 'i32');
    ids = a.ids.device;
    idsOff = ids.offset + a.ids.offset;
  } else {
    const host = a.ids.host;
    if (host.length !== m) throw new RangeError(`mtpInputs: ${host.length} ids for ${m} rows`);
    for (let i = 0; i < m; i++) {
      if (!(host[i]! >= 0 && host[i]! < table.rows)) throw new RangeError(`mtpInputs: token id ${host[i]} out of range [0, ${table.rows})`);
    }
    const both = new Int32Array(2 * m);
    both.set(src);
    for (let i = 0; i < m; i++) both[m + i] = host[i]!;
    table32 = on.put(both, 'i32');
    ids = table32;
    idsOff = table32.offset + m;
  }
  const common = { rows: m, d: h, outOff: a.cat.offset, idsOff, srcOff: table32.offset, zeroCentered: a.zeroCentered ? 1 : 0, eps: a.eps };
  const params = isQuantType(table.dtype) ? packParams('mtp_inputs_quant', { ...common, rowBytes: table.rowBytes }) : packParams('mtp_inputs_float', common);
  const buffers = [a.cat.buffer, ids.buffer, table.parts[0]!.buffer, on.normEmbedding.buffer, on.normHidden.buffer, a.runs[0]!.src.buffer,
    first?.buffer ?? g.dummyBuffer, table32.buffer];
  g.run(enc, `mtp_inputs_${table.dtype}`, () => mtpInputsShader(table.dtype as 'f32' | 'bf16' | 'f16' | QuantType), params, null, buffers, grid(2 * m), 'mtp_inputs');
}
