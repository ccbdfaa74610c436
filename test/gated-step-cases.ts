// Shared by the gated-norm fold suites (webgpu-gated-norm-fold, webgpu-wide-fold): one Gated
// DeltaNet recurrent step then out_proj on the webgpu kernels, either as the norm pass
// followed by matmulAdd or with out_proj given to gdnRecurrentGatedSeqs (the folds), and the
// head order a checkpoint may store out_proj's columns in.
import type { GdnDims, Weight } from '../src/kernels/types.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { rng } from './numeric.js';

/** A seeded random permutation of [0, hv): out_proj's stored head order. */
export function headOrderOf(hv: number, seed: number): Int32Array {
  const r = rng(seed);
  const o = Int32Array.from({ length: hv }, (_, i) => i);
  for (let i = hv - 1; i > 0; i--) { const j = Math.floor(r() * (i + 1)); [o[i], o[j]] = [o[j]!, o[i]!]; }
  return o;
}

/** The step's tensors: x [M, H] (out_proj adds into it), out / normed [M, HV·dv] (normed is
 * the permuted rows' tensor when `order` is set, else out), qkv, a, b, z, the states and
 * the weights. */
export interface GatedStepInputs {
  readonly x: GpuTensor; readonly out: GpuTensor; readonly normed: GpuTensor; readonly order: Int32Array | null;
  readonly qkv: GpuTensor; readonly a: GpuTensor; readonly b: GpuTensor; readonly z: GpuTensor; readonly states: GpuTensor;
  readonly aLog: Weight; readonly dtBias: Weight; readonly norm: Weight; readonly w: Weight;
  readonly m: number; readonly h: number;
}

/** Run the step as `form` ('project': out_proj folded into gdnRecurrentGatedSeqs; else the
 * norm pass then matmulAdd) after the pending work is flushed (`flush`); its dispatches, then
 * x and the states read back. */
export async function runGatedStep(k: WebGpuBoundaryKernels, s: GatedStepInputs, dims: GdnDims,
  seqs: readonly { row: number; t: number; state: GpuTensor }[], form: 'project' | 'pass',
  flush: () => Promise<unknown>, read: (t: GpuTensor) => Promise<Float32Array>): Promise<{ dispatches: number; x: Float32Array; states: Float32Array }> {
  const { m, h, hv } = { m: s.m, h: s.h, hv: dims.numValueHeads };
  await flush();
  const d0 = k.recordedDispatches;
  const gating = { a: s.a, b: s.b, aLog: s.aLog, dtBias: s.dtBias, g: k.alloc(m * hv), beta: k.alloc(m * hv), z: s.z, norm: s.norm, eps: 1e-6,
    ...(s.order ? { perm: { order: s.order, out: s.normed } } : {}) };
  if (form === 'project') k.gdnRecurrentGatedSeqs(s.out, s.qkv, { ...gating, project: { x: s.x, w: s.w, m, tmp: k.alloc(m * h) } }, dims, seqs);
  else {
    k.gdnRecurrentGatedSeqs(s.out, s.qkv, gating, dims, seqs);
    k.matmulAdd(s.x, s.normed, s.w, m, k.alloc(m * h));
  }
  const dispatches = k.recordedDispatches - d0;
  return { dispatches, x: await read(s.x), states: await read(s.states) };
}
