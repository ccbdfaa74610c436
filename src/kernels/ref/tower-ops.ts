// Reference twins of the vision tower's row-wise kernels (Kernels.layerNorm, Kernels.biasAct)
// and the GELU forms they use. f64 arithmetic, each output rounded to f32 once on store; the
// plain-TS tower (vision/ops.ts) computes with these same functions.
import type { BiasAct } from '../types.js';

/** LayerNorm over rows of width d: (x − μ)·(σ² + eps)^−½·w + b (biased σ²), μ and σ² summed
 * in index order in f64. x, out: [M, d] (may alias: a row is read before it is written). */
export function layerNorm(out: Float32Array, x: Float32Array, w: ArrayLike<number>, b: ArrayLike<number>, m: number, d: number,
  eps: number): void {
  for (let r = 0; r < m; r++) {
    const o = r * d;
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[o + i]!;
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (x[o + i]! - mean) ** 2;
    const inv = 1 / Math.sqrt(v / d + eps);
    for (let i = 0; i < d; i++) out[o + i] = (x[o + i]! - mean) * inv * w[i]! + b[i]!;
  }
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

const identity = (v: number): number => v;

/** The activation function of a BiasAct. */
export function activation(act: BiasAct): (v: number) => number {
  return act === 'geluTanh' ? geluTanh : act === 'geluErf' ? geluErf : identity;
}

/** out[r, c] = act(x[r, c] + bias[c]): the sum rounded to f32 (a bias add stored), the
 * activation in f64 rounded once. x, out: [M, d] (may alias). */
export function biasAct(out: Float32Array, x: Float32Array, bias: ArrayLike<number>, m: number, d: number, act: BiasAct): void {
  const f = activation(act);
  for (let r = 0; r < m; r++) {
    const o = r * d;
    for (let c = 0; c < d; c++) out[o + c] = f(Math.fround(x[o + c]! + bias[c]!));
  }
}
