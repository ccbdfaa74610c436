// A normed quantized matmul group's inputs and its one matmulGroup call, shared by the
// quantized-group suites (webgpu-quant-group, webgpu-qmatmul-norm-fold).
import type { Kernels, WeightDType } from '../src/kernels/types.js';
import type { GpuGroupNorm, WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { randomWeight, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { run } from './webgpu-helpers.js';

export interface QuantCase { readonly ws: GpuWeight[]; readonly x: Float32Array; readonly nw: GpuTensor; readonly zeroCentered: boolean; readonly k: number }

const ROWS = [37, 64, 5, 19];
const fill = (n: number, f: () => number): Float32Array => Float32Array.from({ length: n }, f);

/** Weights of `dtypes` (rows 37, 64, 5, 19 in turn) over K = k, m input rows and a bf16 norm
 * weight, all drawn from rng(seed). */
export function makeQuantCase(g: WebGpuKernels, ref: Pick<Kernels, 'allocWeight'>, k: number, dtypes: readonly WeightDType[], m: number, seed: number,
  zeroCentered: boolean): QuantCase {
  const r = rng(seed);
  const ws = dtypes.map((d, i) => g.uploadWeight(randomAnyWeight(ref, d, ROWS[i % 4]!, k, r)));
  const x = fill(m * k, () => 3 * (2 * r() - 1));
  const nw = g.uploadVector(randomWeight(ref, 'bf16', 1, k, () => 0.5 * (2 * r() - 1)));
  return { ws, x, nw, zeroCentered, k };
}

/** The group in one matmulGroup call with its norm (as g's settings route it): each output,
 * then the normed rows' tensor (NaN-filled before), and the dispatches it took. */
export async function normedGroupOnce(g: WebGpuKernels, c: QuantCase, m: number): Promise<{ outs: Float32Array[]; dispatches: number }> {
  const outs = c.ws.map((w) => g.alloc.upload(fill(m * w.rows, () => NaN)));
  const norm: GpuGroupNorm = { wv: c.nw, eps: 1e-6, zeroCentered: c.zeroCentered, out: g.alloc.upload(fill(m * c.k, () => NaN)) };
  const x = g.alloc.upload(c.x);
  let dispatches = 0;
  const got = await run(g, (e) => {
    const d0 = e.dispatchCount;
    g.matmulGroup(e, x, m, c.ws.map((w, j) => ({ out: outs[j]!, w })), false, norm);
    dispatches = e.dispatchCount - d0;
  }, ...outs, norm.out);
  return { outs: got, dispatches };
}

/** The same in separate calls, as g's settings route them: rmsNorm, then one matmul per
 * weight over the normed rows. Each output, then the normed rows. */
export async function normThenEachMatmul(g: WebGpuKernels, c: QuantCase, m: number): Promise<Float32Array[]> {
  const outs = c.ws.map((w) => g.alloc.upload(fill(m * w.rows, () => NaN)));
  const normed = g.alloc.upload(fill(m * c.k, () => NaN));
  const x = g.alloc.upload(c.x);
  return run(g, (e) => {
    g.rmsNorm(e, normed, x, c.nw, m, 1e-6, c.zeroCentered);
    c.ws.forEach((w, j) => g.matmul(e, outs[j]!, normed, w, m));
  }, ...outs, normed);
}
