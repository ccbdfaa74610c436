// Shared SIMD helpers for the kernels. All pointers are byte addresses into the (shared,
// imported) linear memory; all element buffers are f32 unless stated otherwise.
// Invariant: every reduction has ONE fixed order that depends only on its length, never on
// how many rows/heads/tokens a call processes or which thread runs it (batch invariance).

/** Mask selecting the high 16 bits of each i32 lane (bf16 odd elements → f32 bits). */
// @ts-ignore: decorator
@inline export const HI16: u32 = 0xFFFF0000;

/** acc + a·b per lane: a fused multiply-add in the relaxed-SIMD build (kernels-fma.wasm),
 * multiply then add otherwise. Fixed per build, so every kernel using it is deterministic;
 * results differ between the builds only in rounding. */
// @ts-ignore: decorator
@inline export function mac(acc: v128, a: v128, b: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, acc);
  return f32x4.add(acc, f32x4.mul(a, b));
}

/** Scalar twin of one mac lane (bit-identical to it in either build). */
// @ts-ignore: decorator
@inline export function mac1(acc: f32, a: f32, b: f32): f32 {
  return f32x4.extract_lane(mac(f32x4.splat(acc), f32x4.splat(a), f32x4.splat(b)), 0);
}

/** Horizontal sum in the fixed order (l0 + l1) + (l2 + l3). */
// @ts-ignore: decorator
@inline export function hsum(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** bf16 bits at byte address p widened to f32. */
// @ts-ignore: decorator
@inline export function bf16At(p: usize): f32 {
  return reinterpret<f32>(<u32>load<u16>(p) << 16);
}

/** Element i of a weight vector that is bf16 (isBf16 != 0) or f32. */
// @ts-ignore: decorator
@inline export function wAt(w: usize, i: i32, isBf16: i32): f32 {
  return isBf16 ? bf16At(w + (<usize>i << 1)) : load<f32>(w + (<usize>i << 2));
}

// @ts-ignore: decorator
@inline export function f32At(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

// @ts-ignore: decorator
@inline export function f32Set(p: usize, i: i32, v: f32): void {
  store<f32>(p + (<usize>i << 2), v);
}

/** Σ a[i]·b[i], i < n: f32x4 lanes over 4-blocks in order, fixed horizontal sum, then the
 * scalar tail in order. */
export function dot(a: usize, b: usize, n: i32): f32 {
  let acc = f32x4.splat(0);
  const n4 = n & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    const o = <usize>i << 2;
    acc = f32x4.add(acc, f32x4.mul(v128.load(a + o), v128.load(b + o)));
  }
  let t: f32 = 0;
  for (; i < n; i++) t += f32At(a, i) * f32At(b, i);
  return hsum(acc) + t;
}

/** Σ a[i]², same fixed order as dot. */
export function sumSq(a: usize, n: i32): f32 {
  return dot(a, a, n);
}

/** dst[i] += s · src[i] (elementwise; exact per element whatever the vector split). */
export function axpy(dst: usize, s: f32, src: usize, n: i32): void {
  const sv = f32x4.splat(s);
  const n4 = n & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    const o = <usize>i << 2;
    v128.store(dst + o, f32x4.add(v128.load(dst + o), f32x4.mul(sv, v128.load(src + o))));
  }
  for (; i < n; i++) f32Set(dst, i, f32At(dst, i) + s * f32At(src, i));
}

/** dst[i] = s · src[i]. */
export function scaleTo(dst: usize, s: f32, src: usize, n: i32): void {
  const sv = f32x4.splat(s);
  const n4 = n & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    const o = <usize>i << 2;
    v128.store(dst + o, f32x4.mul(sv, v128.load(src + o)));
  }
  for (; i < n; i++) f32Set(dst, i, s * f32At(src, i));
}

/** dst[i] = 0 for i < n floats. */
export function zero(dst: usize, n: i32): void {
  memory.fill(dst, 0, <usize>n << 2);
}

// ---- exp, SiLU and sigmoid on f32x4 ------------------------------------------------
// exp: Cody–Waite range reduction x = n·ln2 + r (|r| ≤ ln2/2, ln2 split in two constants),
// a degree-5 polynomial for e^r (the classic single-precision coefficients, ~1 ulp), then
// ·2ⁿ through the exponent bits. Plain mul/add only (never mac), so the scalar versions,
// which run the same vector code on a splat, are bit-identical to every lane: an element's
// value never depends on whether it falls in a vector body or a tail.
const EXP_HI: f32 = 88.3762626647949; // above: +inf
const EXP_LO: f32 = -87.3365447505531; // below: 0

// The constants as data, each lane broadcast from memory (one load-port uop). A splat of a
// constant in the source is rebuilt by V8 (11.3 to 13.6) inside the loop every time it is
// used: movq r, imm64; vmovq; vpunpcklqdq, two of them port-5 uops. expf4 has 19, and
// those ~40 port-5 uops bounded mulSilu at ~40 cycles per vector (Intel Xeon). The values
// are the same f32 constants, so the bits are the same.
const EXP_K = memory.data<f32>([
  EXP_HI, EXP_LO, 1.44269504088896341, 0.5, // 0..3: bounds, log2(e), ½
  0.693359375, -2.12194440e-4, // 4, 5: ln 2 in two parts
  1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, // 6..11: p
  1, 12582912, Infinity, 0, // 12..15: 1, 1.5·2²³, +inf, 0
], 16);
const EXP_BIAS = memory.data<i32>([0x4b400000 - 127], 16);

/** Lane-broadcast constant i of EXP_K (see there). */
// @ts-ignore: decorator
@inline function kx(i: i32): v128 {
  return v128.load32_splat(EXP_K + (<usize>i << 2));
}

/** e^x per lane. */
// @ts-ignore: decorator
@inline export function expf4(x: v128): v128 {
  const big = f32x4.gt(x, kx(0));
  const tiny = f32x4.lt(x, kx(1));
  // pmax/pmin with x first: NaN stays NaN as with f32x4.max/min, and the bounds are not
  // zeros, so every other lane is the same; one maxps + one minps on x64 instead of ~16
  const xc = f32x4.pmin(f32x4.pmax(x, kx(1)), kx(0));
  const n = f32x4.floor(f32x4.add(f32x4.mul(xc, kx(2)), kx(3)));
  let r = f32x4.sub(xc, f32x4.mul(n, kx(4)));
  r = f32x4.sub(r, f32x4.mul(n, kx(5)));
  let p = kx(6);
  p = f32x4.add(f32x4.mul(p, r), kx(7));
  p = f32x4.add(f32x4.mul(p, r), kx(8));
  p = f32x4.add(f32x4.mul(p, r), kx(9));
  p = f32x4.add(f32x4.mul(p, r), kx(10));
  p = f32x4.add(f32x4.mul(p, r), kx(11));
  const y = f32x4.add(f32x4.add(f32x4.mul(p, f32x4.mul(r, r)), r), kx(12));
  // n is an integer in [−126, 128] (NaN only when x is, and then e is NaN whatever scale
  // is): 1.5·2²³ + n holds n + 0x400000 in its mantissa bits, so 2ⁿ's exponent field is
  // those bits − (0x4b400000 − 127), without trunc_sat's ~8-instruction x64 fix-ups
  const nBits = f32x4.add(n, kx(13));
  const scale = i32x4.shl(i32x4.sub(nBits, v128.load32_splat(EXP_BIAS)), 23);
  const e = f32x4.mul(y, scale);
  return v128.bitselect(kx(15), v128.bitselect(kx(14), e, big), tiny);
}

/** 1 + e^−x per lane (the shared denominator of SiLU and sigmoid). */
// @ts-ignore: decorator
@inline function onePlusExpNeg(x: v128): v128 {
  return f32x4.add(kx(12), expf4(f32x4.neg(x)));
}

/** x·sigmoid(x) = x / (1 + e^−x) per lane. */
// @ts-ignore: decorator
@inline export function silu4(x: v128): v128 {
  return f32x4.div(x, onePlusExpNeg(x));
}

/** 1 / (1 + e^−x) per lane. */
// @ts-ignore: decorator
@inline export function sigmoid4(x: v128): v128 {
  return f32x4.div(kx(12), onePlusExpNeg(x));
}

/** Scalar twins (bit-identical to a lane of the vector versions). */
export function expf1(x: f32): f32 {
  return f32x4.extract_lane(expf4(f32x4.splat(x)), 0);
}
export function siluf(x: f32): f32 {
  return f32x4.extract_lane(silu4(f32x4.splat(x)), 0);
}
export function sigmoidf(x: f32): f32 {
  return f32x4.extract_lane(sigmoid4(f32x4.splat(x)), 0);
}
