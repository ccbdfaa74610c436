// The vision tower's row-wise kernels: LayerNorm with weight and bias, and a linear layer's
// bias add with the activation after it (none, GELU tanh form, exact GELU). Rows [r0, r1):
// the pool splits prefill-sized calls by rows; every element has one fixed computation
// (split- and batch-invariant).
import { f32At, f32Set, expf4, sigmoid4 } from './common';

/** LayerNorm of rows [r0, r1): out = (x − μ)·(σ² + eps)^−½·w + b, μ and the biased σ² in
 * f64 (two passes in index order), each output in f64 rounded once — the arithmetic of the
 * ref twin (src/kernels/ref/tower-ops.ts), so the bits are equal. x, out: [M, d] (may
 * alias); w, b: f32 [d]. */
export function layerNorm(out: usize, x: usize, w: usize, b: usize, r0: i32, r1: i32, d: i32, eps: f64): void {
  for (let r = r0; r < r1; r++) {
    const xr = x + ((<usize>r * <usize>d) << 2);
    const or = out + ((<usize>r * <usize>d) << 2);
    let s: f64 = 0;
    for (let p = 0; p < d; p++) s += <f64>f32At(xr, p);
    const mean = s / <f64>d;
    let v: f64 = 0;
    for (let p = 0; p < d; p++) {
      const e = <f64>f32At(xr, p) - mean;
      v += e * e;
    }
    const inv = 1.0 / Math.sqrt(v / <f64>d + eps);
    for (let p = 0; p < d; p++) {
      f32Set(or, p, <f32>((<f64>f32At(xr, p) - mean) * inv * <f64>f32At(w, p) + <f64>f32At(b, p)));
    }
  }
}

/** GELU, tanh form, per lane: x/2·(1 + tanh(u)) = x·σ(2u), u = √(2/π)(x + 0.044715x³). */
// @ts-ignore: decorator
@inline function geluTanh4(x: v128): v128 {
  const inner = f32x4.add(x, f32x4.mul(f32x4.splat(0.044715), f32x4.mul(f32x4.mul(x, x), x)));
  return f32x4.mul(x, sigmoid4(f32x4.mul(f32x4.splat(1.5957691216057308), inner)));
}

/** GELU, exact form, per lane: x/2·(1 + erf(z)), z = x/√2, with 1 + erf(z) = erfc(−z) taken
 * as erfc(|z|) (z < 0) or 2 − erfc(|z|): no cancellation in the negative tail. erfc(a) =
 * t·e^(−a² + P(t)), t = 1/(1 + a/2), P the degree-9 Chebyshev fit of Numerical Recipes'
 * erfcc (fractional error < 1.2e-7 for every a ≥ 0). */
// @ts-ignore: decorator
@inline function geluErf4(x: v128): v128 {
  const z = f32x4.mul(x, f32x4.splat(0.7071067811865476));
  const a = f32x4.abs(z);
  const one = f32x4.splat(1);
  const t = f32x4.div(one, f32x4.add(one, f32x4.mul(f32x4.splat(0.5), a)));
  let p = f32x4.splat(0.17087277);
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(-0.82215223));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(1.48851587));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(-1.13520398));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(0.27886807));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(-0.18628806));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(0.09678418));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(0.37409196));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(1.00002368));
  p = f32x4.add(f32x4.mul(p, t), f32x4.splat(-1.26551223));
  const erfc = f32x4.mul(t, expf4(f32x4.sub(p, f32x4.mul(a, a))));
  const onePlusErf = v128.bitselect(f32x4.sub(f32x4.splat(2), erfc), erfc, f32x4.ge(z, f32x4.splat(0)));
  return f32x4.mul(f32x4.mul(f32x4.splat(0.5), x), onePlusErf);
}

// @ts-ignore: decorator
@inline function act4(v: v128, act: i32): v128 {
  if (act == 1) return geluTanh4(v);
  if (act == 2) return geluErf4(v);
  return v;
}

/** out[r, c] = act(x[r, c] + bias[c]) for rows [r0, r1), act 0 none, 1 GELU tanh form,
 * 2 exact GELU (the sum rounded to f32, then the activation in f32x4; a tail element runs
 * the same vector code on a splat, so its bits do not depend on its place). x, out: [M, d]
 * (may alias); bias: f32 [d]. */
export function biasAct(out: usize, x: usize, bias: usize, r0: i32, r1: i32, d: i32, act: i32): void {
  const d4 = d & ~3;
  for (let r = r0; r < r1; r++) {
    const xr = x + ((<usize>r * <usize>d) << 2);
    const or = out + ((<usize>r * <usize>d) << 2);
    for (let p = 0; p < d4; p += 4) {
      const q = <usize>p << 2;
      v128.store(or + q, act4(f32x4.add(v128.load(xr + q), v128.load(bias + q)), act));
    }
    for (let p = d4; p < d; p++) {
      f32Set(or, p, f32x4.extract_lane(act4(f32x4.splat(f32At(xr, p) + f32At(bias, p)), act), 0));
    }
  }
}
