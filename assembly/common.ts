// Shared SIMD helpers for the kernels. All pointers are byte addresses into the (shared,
// imported) linear memory; all element buffers are f32 unless stated otherwise.
// Invariant: every reduction has ONE fixed order that depends only on its length, never on
// how many rows/heads/tokens a call processes or which thread runs it (batch invariance).

/** Mask selecting the high 16 bits of each i32 lane (bf16 odd elements → f32 bits). */
// @ts-ignore: decorator
@inline export const HI16: u32 = 0xFFFF0000;

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

/** f32 SiLU and sigmoid (Mathf.exp: correctly rounded-ish single precision). */
// @ts-ignore: decorator
@inline export function siluf(x: f32): f32 {
  return x / (<f32>1 + Mathf.exp(-x));
}

// @ts-ignore: decorator
@inline export function sigmoidf(x: f32): f32 {
  return <f32>1 / (<f32>1 + Mathf.exp(-x));
}
