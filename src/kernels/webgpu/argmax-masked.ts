/// <reference types="@webgpu/types" />
// Kernels.argmaxRowsMasked on the GPU: the rows' masks packed [m, words] (a null mask: every
// bit set; words past a mask's end: clear, as the host reads them), uploaded with the step,
// and one dispatch of wgsl/argmax-masked.ts; Kernels.gatherPicked, one dispatch too.
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import { type GpuTensor, view } from './tensor.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { ARGMAX_MASKED, GATHER_PICKED } from './wgsl/argmax-masked.js';

/** The masks of m rows of n ids as one [m, ceil(n / 32)] word array. */
export function packMasks(masks: readonly (Uint32Array | null)[], n: number): Uint32Array {
  const words = Math.ceil(n / 32);
  const out = new Uint32Array(masks.length * words);
  masks.forEach((mask, r) => {
    if (mask) out.set(mask.length > words ? mask.subarray(0, words) : mask, r * words);
    else out.fill(0xffffffff, r * words, (r + 1) * words);
  });
  return out;
}

/** Kernels.argmaxRowsMasked: out[outOffset + i] = the masked argmax of row i of x. */
export function argmaxRowsMaskedOn(g: WebGpuKernels, enc: StepEncoder, a: { out: GpuTensor; outOffset: number; x: GpuTensor; m: number; n: number; stride: number },
  masks: readonly (Uint32Array | null)[], upload: (words: Uint32Array) => GpuTensor): void {
  const { out, outOffset, x, m, n, stride } = a;
  if (m <= 0) return;
  if (masks.length !== m) throw new RangeError(`argmaxRowsMasked: ${masks.length} masks for ${m} rows`);
  if (outOffset + m > out.length || (m - 1) * stride + n > x.length) throw new RangeError(`argmaxRowsMasked: ${m} rows past the tensors`);
  argmaxMaskedDispatch(g, enc, view(out, outOffset, m), x, m, n, stride, upload, masks);
}

/** out[i] = the masked argmax of row i of x (x[i·stride .. i·stride + n)). */
export function argmaxMaskedDispatch(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, x: GpuTensor, m: number, n: number, stride: number,
  upload: (words: Uint32Array) => GpuTensor, masks: readonly (Uint32Array | null)[]): void {
  const words = Math.ceil(n / 32);
  const packed = upload(packMasks(masks, n));
  const params = packParams('argmax_masked', { m, n, stride, xOff: x.offset, outOff: out.offset, maskOff: packed.offset, words, negInf: -Infinity });
  g.run(enc, 'argmax_masked', () => ARGMAX_MASKED, params, null,
    [out.buffer, x.buffer, packed.buffer], grid(m), 'argmax');
}

/** Kernels.gatherPicked: out[outOffset + i] = x[i·stride + ids[i]], the ids read on the device:
 * one dispatch of GATHER_PICKED for all m rows. An id outside its row writes nothing (the ids
 * come from argmaxRows* over n ≤ stride). */
export function gatherPickedOn(g: WebGpuKernels, enc: StepEncoder, a: { out: GpuTensor; outOffset: number; x: GpuTensor; ids: GpuTensor; m: number; stride: number }): void {
  const { out, outOffset, x, ids, m, stride } = a;
  if (outOffset + m > out.length || m > ids.length || (m > 0 && m * stride > x.length)) throw new RangeError(`gatherPicked: ${m} rows past the tensors`);
  if (m <= 0) return;
  const params = packParams('gather_picked', { m, stride, xOff: x.offset, idsOff: ids.offset, outOff: out.offset + outOffset });
  g.run(enc, 'gather_picked', () => GATHER_PICKED, params, null, [out.buffer, x.buffer, ids.buffer], grid(Math.ceil(m / 64)), 'gather_picked');
}
