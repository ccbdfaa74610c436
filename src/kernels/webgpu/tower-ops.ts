/// <reference types="@webgpu/types" />
// The vision tower's row-wise kernels on the GPU (Kernels.layerNorm, Kernels.biasAct):
// one dispatch each (wgsl/tower.ts).
import type { BiasAct } from '../types.js';
import { packParams } from './params.js';
import { grid } from './wgsl/common.js';
import { BIAS_ACT, LAYER_NORM } from './wgsl/tower.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';

/** The shader's act codes, by index. */
const ACTS: readonly BiasAct[] = ['none', 'geluTanh', 'geluErf'];

/** LayerNorm of m rows of d: x, out [m × d]; w, b [d]. */
export function layerNormOn(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, x: GpuTensor, w: GpuTensor, b: GpuTensor, m: number, d: number,
  eps: number): void {
  if (m <= 0) return;
  const params = packParams('layer_norm', { d, rows: m, outOff: out.offset, xOff: x.offset, wOff: w.offset, bOff: b.offset, eps });
  g.run(enc, 'layer_norm', () => LAYER_NORM, params, null, [out.buffer, x.buffer, w.buffer, b.buffer], grid(m), 'layer_norm');
}

/** out = act(x + bias) over m rows of d. */
export function biasActOn(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, x: GpuTensor, bias: GpuTensor, m: number, d: number, act: BiasAct): void {
  if (m <= 0) return;
  const params = packParams('bias_act', { m, d, act: ACTS.indexOf(act), outOff: out.offset, xOff: x.offset, biasOff: bias.offset });
  g.run(enc, 'bias_act', () => BIAS_ACT, params, null, [out.buffer, x.buffer, bias.buffer], grid(Math.ceil((m * d) / 64)), `bias_${act}`);
}
