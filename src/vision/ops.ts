// Plain-TS f32 operations of the ref vision tower. Activations are stored as f32; every
// reduction (dot product, mean, variance) accumulates in f64 and rounds once on store.
import type { LayerNormWeights, Linear } from './weights.js';

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

/** LayerNorm over rows of width dim: (x − mean) / sqrt(var + eps) · w + b (biased var). */
export function layerNorm(x: Float32Array, m: number, dim: number, n: LayerNormWeights, eps: number): Float32Array {
  const out = new Float32Array(m * dim);
  for (let r = 0; r < m; r++) {
    const o = r * dim;
    let mean = 0;
    for (let i = 0; i < dim; i++) mean += x[o + i]!;
    mean /= dim;
    let v = 0;
    for (let i = 0; i < dim; i++) v += (x[o + i]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / dim + eps);
    for (let i = 0; i < dim; i++) out[o + i] = (x[o + i]! - mean) * inv * n.w[i]! + n.b[i]!;
  }
  return out;
}

const TWO_OVER_SQRT_PI = 2 / Math.sqrt(Math.PI);

/** erf(x) to ~1e-15 relative: erf(x) = 2/√π · e^(−x²) · Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1)),
 * a series of positive terms (no cancellation); |x| ≥ 6 returns ±1 (1 − erf(6) < 3e-17). */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax >= 6) return Math.sign(x);
  if (ax === 0) return x;
  const x2 = ax * ax;
  let term = ax;
  let sum = ax;
  for (let n = 0; n < 200; n++) {
    term *= (2 * x2) / (2 * n + 3);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return Math.sign(x) * TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
}

/** GELU, exact form: x · Φ(x) = x/2 · (1 + erf(x/√2)) (torch nn.GELU()). */
export function geluErf(x: number): number {
  return 0.5 * x * (1 + erf(x / Math.SQRT2));
}

const GELU_TANH_C = Math.sqrt(2 / Math.PI);

/** GELU, tanh approximation (gelu_pytorch_tanh): x/2 · (1 + tanh(√(2/π)(x + 0.044715x³))). */
export function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(GELU_TANH_C * (x + 0.044715 * x * x * x)));
}

export function applyInPlace(x: Float32Array, f: (v: number) => number): Float32Array {
  for (let i = 0; i < x.length; i++) x[i] = f(x[i]!);
  return x;
}

/** x += y (elementwise). */
export function addInPlace(x: Float32Array, y: Float32Array): void {
  for (let i = 0; i < x.length; i++) x[i] = x[i]! + y[i]!;
}
