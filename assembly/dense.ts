// Row-wise and elementwise kernels (rows / element ranges: the pool splits prefill-sized calls).
// Every row is computed independently with a fixed order (batch invariance).
import { sumSq, wAt, f32At, f32Set, siluf, sigmoidf, silu4, sigmoid4 } from './common';

/** RMSNorm of rows [r0, r1): out = x·rsqrt(mean(x²)+eps)·(1+w) (zeroCentered) or ·w.
 * x, out: [M, d] (may alias); w: [d] bf16 or f32. Σx² in the fixed `dot` order; the
 * scale 1/√(ss/d + eps) is computed in f64 and rounded once. */
export function rmsNorm(out: usize, x: usize, w: usize, wBf16: i32, r0: i32, r1: i32, d: i32, eps: f64,
  zeroCentered: i32): void {
  for (let r = r0; r < r1; r++) {
    const xr = x + ((<usize>r * <usize>d) << 2);
    const or = out + ((<usize>r * <usize>d) << 2);
    const inv = <f32>(1.0 / Math.sqrt(<f64>sumSq(xr, d) / <f64>d + eps));
    // 4 lanes at a time, each (x·inv)·s as the scalar tail computes it
    const d4 = d & ~3;
    const iv = f32x4.splat(inv);
    if (zeroCentered) {
      const one = f32x4.splat(1);
      for (let p = 0; p < d4; p += 4) {
        const q = <usize>p << 2;
        v128.store(or + q, f32x4.mul(f32x4.mul(v128.load(xr + q), iv), f32x4.add(one, wVec(w, p, wBf16))));
      }
    } else {
      for (let p = 0; p < d4; p += 4) {
        const q = <usize>p << 2;
        v128.store(or + q, f32x4.mul(f32x4.mul(v128.load(xr + q), iv), wVec(w, p, wBf16)));
      }
    }
    for (let p = d4; p < d; p++) {
      const wv = wAt(w, p, wBf16);
      const s: f32 = zeroCentered ? <f32>1 + wv : wv;
      f32Set(or, p, f32At(xr, p) * inv * s);
    }
  }
}

/** Elements p..p+3 of a weight vector (bf16 widened, or f32). */
// @ts-ignore: decorator
@inline function wVec(w: usize, p: i32, wBf16: i32): v128 {
  if (wBf16) return i32x4.shl(v128.load16x4_u(w + (<usize>p << 1)), 16);
  return v128.load(w + (<usize>p << 2));
}

/** Gated RMSNorm of rows [r0, r1) of out: out = o·rsqrt(mean(o²)+eps)·w·silu(z).
 * o, z, out: [M, d] (out may alias o without `order`); w: [d] (plain w). order: 0, or i32
 * [hv] — out row r then reads row r − r mod hv + order[r mod hv] of o and z (a head
 * permutation of tokens of hv rows; out overlaps neither). */
export function gatedRmsNorm(out: usize, o: usize, z: usize, w: usize, wBf16: i32, r0: i32, r1: i32, d: i32,
  eps: f64, order: usize, hv: i32): void {
  for (let r = r0; r < r1; r++) {
    const src = order ? r - r % hv + load<i32>(order + (<usize>(r % hv) << 2)) : r;
    const base = (<usize>src * <usize>d) << 2;
    const ob = out + ((<usize>r * <usize>d) << 2);
    const inv = <f32>(1.0 / Math.sqrt(<f64>sumSq(o + base, d) / <f64>d + eps));
    // silu(z) vectorised (bit-identical to the scalar twin), then the products in order
    const d4 = d & ~3;
    for (let p = 0; p < d4; p += 4) {
      const zo = z + base + (<usize>p << 2);
      v128.store(ob + (<usize>p << 2), f32x4.mul(
        f32x4.mul(f32x4.mul(v128.load(o + base + (<usize>p << 2)), f32x4.splat(inv)), wVec(w, p, wBf16)), silu4(v128.load(zo))));
    }
    for (let p = d4; p < d; p++) {
      f32Set(ob, p, f32At(o + base, p) * inv * wAt(w, p, wBf16) * siluf(f32At(z + base, p)));
    }
  }
}

/** Partial NeoX RoPE in place. x: [T, heads, headDim] with token stride `stride` floats;
 * positions: i32 [T]; invFreq: f64 [half] (the first 2·half dims rotate as pairs
 * (f, f + half) by pos·invFreq[f]); cos and sin multiplied by `scale`. Angles, cos, sin and
 * the rotation in f64, rounded once on store. */
export function rope(x: usize, positions: usize, t: i32, heads: i32, headDim: i32, invFreq: usize, half: i32,
  scale: f64, stride: i32): void {
  for (let i = 0; i < t; i++) {
    const pos = <f64>load<i32>(positions + (<usize>i << 2));
    for (let f = 0; f < half; f++) {
      const angle = pos * load<f64>(invFreq + (<usize>f << 3));
      const c = Math.cos(angle) * scale;
      const s = Math.sin(angle) * scale;
      for (let h = 0; h < heads; h++) {
        const b = x + ((<usize>i * <usize>stride + <usize>h * <usize>headDim) << 2);
        const x1 = <f64>f32At(b, f);
        const x2 = <f64>f32At(b, f + half);
        f32Set(b, f, <f32>(x1 * c - x2 * s));
        f32Set(b, f + half, <f32>(x2 * c + x1 * s));
      }
    }
  }
}

/** out[i] = a[i]·act(b[i]), act = SiLU or sigmoid (a constant per call site, folded). */
// @ts-ignore: decorator
@inline function mulAct(out: usize, a: usize, b: usize, lo: i32, hi: i32, silu: bool): void {
  let i = lo;
  for (; i + 4 <= hi; i += 4) {
    const o = <usize>i << 2;
    const x = v128.load(b + o);
    v128.store(out + o, f32x4.mul(v128.load(a + o), silu ? silu4(x) : sigmoid4(x)));
  }
  for (; i < hi; i++) {
    const x = f32At(b, i);
    f32Set(out, i, f32At(a, i) * (silu ? siluf(x) : sigmoidf(x)));
  }
}

/** out[i] = a[i]·silu(b[i]) for i in [lo, hi) (per element: any split gives the same bits). */
export function mulSilu(out: usize, a: usize, b: usize, lo: i32, hi: i32): void {
  mulAct(out, a, b, lo, hi, true);
}

/** out[i] = a[i]·sigmoid(b[i]) for i in [lo, hi). */
export function mulSigmoid(out: usize, a: usize, b: usize, lo: i32, hi: i32): void {
  mulAct(out, a, b, lo, hi, false);
}

/** out[i] = a[i] + b[i] (SIMD; exact per element). */
export function add(out: usize, a: usize, b: usize, n: i32): void {
  const n4 = n & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    const o = <usize>i << 2;
    v128.store(out + o, f32x4.add(v128.load(a + o), v128.load(b + o)));
  }
  for (; i < n; i++) f32Set(out, i, f32At(a, i) + f32At(b, i));
}

// @ts-ignore: decorator
@inline function softplus(x: f64): f64 {
  return x > 20 ? x : Math.log1p(Math.exp(x));
}

/** g = −exp(A_log)·softplus(a + dt_bias), beta = sigmoid(b); a, b, g, beta: [T, HV].
 * f64 math (as the reference), rounded once. */
export function gdnGates(g: usize, beta: usize, a: usize, b: usize, aLog: usize, aLogBf16: i32, dtBias: usize,
  dtBf16: i32, t: i32, hv: i32): void {
  for (let i = 0; i < t; i++) {
    for (let h = 0; h < hv; h++) {
      const o = i * hv + h;
      const al = <f64>wAt(aLog, h, aLogBf16);
      const db = <f64>wAt(dtBias, h, dtBf16);
      f32Set(g, o, <f32>(-Math.exp(al) * softplus(<f64>f32At(a, o) + db)));
      f32Set(beta, o, <f32>(1.0 / (1.0 + Math.exp(-<f64>f32At(b, o)))));
    }
  }
}

/** MoE router, per row: softmax over E logits (f64), top-k (ties → lower id), optional
 * renormalisation. logits: [M, E] f32; ids: i32 [M, topK]; weights: f32 [M, topK].
 * tmp: f64 [E] + u8 [E] scratch. */
export function moeRoute(ids: usize, weights: usize, logits: usize, m: i32, e: i32, topK: i32, renorm: i32,
  tmp: usize): void {
  const probs = tmp;
  const taken = tmp + (<usize>e << 3);
  for (let i = 0; i < m; i++) {
    const lr = logits + ((<usize>i * <usize>e) << 2);
    let mx = -Infinity;
    for (let x = 0; x < e; x++) mx = Math.max(mx, <f64>f32At(lr, x));
    let sum = 0.0;
    for (let x = 0; x < e; x++) {
      const p = Math.exp(<f64>f32At(lr, x) - mx);
      store<f64>(probs + (<usize>x << 3), p);
      sum += p;
    }
    memory.fill(taken, 0, <usize>e);
    let picked = 0.0;
    const io = ids + ((<usize>i * <usize>topK) << 2);
    const wo = weights + ((<usize>i * <usize>topK) << 2);
    const wsel = probs; // reuse: the selected probabilities are re-read below
    for (let s = 0; s < topK; s++) {
      let best = -1;
      let bp = 0.0;
      for (let x = 0; x < e; x++) {
        if (load<u8>(taken + x)) continue;
        const p = load<f64>(wsel + (<usize>x << 3));
        if (best < 0 || p > bp) {
          best = x;
          bp = p;
        }
      }
      store<u8>(taken + best, 1);
      store<i32>(io + (<usize>s << 2), best);
      f32Set(wo, s, <f32>(bp / sum));
      picked += bp / sum;
    }
    if (renorm) for (let s = 0; s < topK; s++) f32Set(wo, s, <f32>(<f64>f32At(wo, s) / picked));
  }
}

/** out[i] = lowest j with x[i·stride + j] = max of the row (NaN ignored; all-NaN → 0).
 * Two SIMD passes: the maximum (pmax keeps the accumulator when a lane is NaN), then the
 * first position equal to it. */
export function argmax(out: usize, x: usize, m: i32, n: i32, stride: i32): void {
  const n4 = n & ~3;
  for (let i = 0; i < m; i++) {
    const row = x + ((<usize>i * <usize>stride) << 2);
    let acc = f32x4.splat(-Infinity);
    for (let j = 0; j < n4; j += 4) acc = f32x4.pmax(acc, v128.load(row + (<usize>j << 2)));
    let mx = max(max(f32x4.extract_lane(acc, 0), f32x4.extract_lane(acc, 1)),
      max(f32x4.extract_lane(acc, 2), f32x4.extract_lane(acc, 3)));
    for (let j = n4; j < n; j++) {
      const v = f32At(row, j);
      if (v > mx) mx = v;
    }
    let best = 0;
    const mv = f32x4.splat(mx);
    let j = 0;
    for (; j < n4; j += 4) {
      const mask = i32x4.bitmask(f32x4.eq(v128.load(row + (<usize>j << 2)), mv));
      if (mask) {
        best = j + ctz(mask);
        break;
      }
    }
    if (j >= n4) {
      for (j = n4; j < n; j++) {
        if (f32At(row, j) == mx) {
          best = j;
          break;
        }
      }
    }
    store<i32>(out + (<usize>i << 2), best);
  }
}
