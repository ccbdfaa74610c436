// Plain-TS f32 operations of the ref vision tower. Activations are stored as f32; every
// reduction (dot product, mean, variance) accumulates in f64 and rounds once on store.
import type { LayerNormWeights, Linear } from './weights.js';
import { layerNorm as refLayerNorm } from '../kernels/ref/tower-ops.js';

export { erf, geluErf, geluTanh } from '../kernels/ref/tower-ops.js';

/** out[m × outDim] = x[m × inDim] · Wᵀ + b. */
export function linear(x: Float32Array, m: number, l: Linear): Float32Array {
  const { w, b, outDim, inDim } = l;
  const out = new Float32Array(m * outDim);
  for (let r = 0; r < m; r++) {
    const xo = r * inDim;
    for (let o = 0; o < outDim; o++) {
      const wo = o * inDim;
      let s = 0;
      for (let i = 0; i < inDim; i++) s += x[xo + i]! * w[wo + i]!;
      out[r * outDim + o] = s + b[o]!;
    }
  }
  return out;
}

/** LayerNorm over rows of width dim: (x − mean) / sqrt(var + eps) · w + b (biased var);
 * the arithmetic of the kernels' ref twin (kernels/ref/tower-ops.ts). */
export function layerNorm(x: Float32Array, m: number, dim: number, n: LayerNormWeights, eps: number): Float32Array {
  const out = new Float32Array(m * dim);
  refLayerNorm(out, x, n.w, n.b, m, dim, eps);
  return out;
}

export function applyInPlace(x: Float32Array, f: (v: number) => number): Float32Array {
  for (let i = 0; i < x.length; i++) x[i] = f(x[i]!);
  return x;
}

/** x += y (elementwise). */
export function addInPlace(x: Float32Array, y: Float32Array): void {
  for (let i = 0; i < x.length; i++) x[i] = x[i]! + y[i]!;
}
