// The 32-element block quantizers (Q8_0, Q4_0, Q5_0: one scale per block, no search) and
// the f16 conversions of the twin (src/kernels/quant/quantize-ggml.ts), bit for bit; used
// by quantize.ts. No fused multiply-add (both wasm builds give the same bytes).

// ---- f16 conversions (the twin's f32ToF16 / f16ToF32) ----

/** f32 → f16 bits, round to nearest even (overflow → ±inf, tiny → subnormal or 0). */
export function f32ToF16(v: f32): u32 {
  const x = reinterpret<u32>(v);
  const sign = (x >>> 16) & 0x8000;
  const exp = <i32>((x >>> 23) & 0xff);
  const mant = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = <u32>(14 - e);
    let h = m >>> shift;
    const rem = m & ((<u32>1 << shift) - 1);
    const half = <u32>1 << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return sign | h;
  }
  let h = (<u32>e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; // may carry into the exponent: still right
  return sign | h;
}

/** f16 bits → f32 (exact; inf and NaN kept). */
export function f16ToF32(h: u32): f32 {
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  let v: f32;
  if (exp == 0) v = <f32>mant * reinterpret<f32>(<u32>0x33800000); // 2⁻²⁴
  else if (exp == 0x1f) v = mant == 0 ? Infinity : NaN;
  else v = reinterpret<f32>(((exp + 112) << 23) | (mant << 13));
  return h & 0x8000 ? -v : v;
}

// ---- Q8_0, Q4_0, Q5_0: 32-element blocks, no search ----

/** round(v) half away from zero per lane (C roundf): trunc(|v|) + (frac ≥ 0.5), sign put
 * back; |v| − trunc(|v|) is exact, so no addition can round up a value just below .5.
 * ±inf (x · 1/d when d is so small that 1/d overflows) and NaN (x · 0 for x = ±inf or NaN)
 * become 0, as in the twin, where the byte store of ±Infinity or NaN wraps to 0 (and x86
 * C's int8 cast of INT_MIN gives 0). */
// @ts-ignore: decorator
@inline function roundAway(v: v128): v128 {
  const a = f32x4.abs(v);
  const t = f32x4.trunc(a);
  const up = v128.and(f32x4.ge(f32x4.sub(a, t), f32x4.splat(0.5)), f32x4.splat(1));
  const r = v128.or(f32x4.add(t, up), v128.and(v, i32x4.splat(0x80000000)));
  return v128.and(r, f32x4.lt(a, f32x4.splat(Infinity)));
}

/** The i32 of an f32 lane holding an integer of magnitude < 2²²: 1.5·2²³ + r is exact and
 * its low mantissa bits are r in two's complement (2 instructions; trunc_sat's NaN and
 * overflow fix-ups cost ~8 on x64). */
// @ts-ignore: decorator
@inline function smallIntToI32(r: v128): v128 {
  return i32x4.sub(f32x4.add(r, f32x4.splat(12582912)), i32x4.splat(0x4b400000));
}

/** Lane quant of Q8_0: roundf(x·id) as i32 (|x·id| ≤ 127·(1 + 2⁻²¹) whenever id is finite:
 * d = amax/127 and 1/d round at most three times, subnormal d keeping ≥ 22 bits). */
// @ts-ignore: decorator
@inline function q8Lane(x: v128, idv: v128): v128 {
  return smallIntToI32(roundAway(f32x4.mul(x, idv)));
}

/** Q8_0 from 32 f32 values at x. */
export function q8_0Block(x: usize, out: usize): void {
  q8_0Regs(
    v128.load(x), v128.load(x, 16), v128.load(x, 32), v128.load(x, 48),
    v128.load(x, 64), v128.load(x, 80), v128.load(x, 96), v128.load(x, 112), out,
  );
}

/** Q8_0 from 32 bf16 values at p, widened in registers (bf16 bits << 16 is the f32). */
export function q8_0BlockBf16(p: usize, out: usize): void {
  const a = v128.load(p);
  const b = v128.load(p, 16);
  const c = v128.load(p, 32);
  const e = v128.load(p, 48);
  q8_0Regs(
    i32x4.shl(i32x4.extend_low_i16x8_u(a), 16), i32x4.shl(i32x4.extend_high_i16x8_u(a), 16),
    i32x4.shl(i32x4.extend_low_i16x8_u(b), 16), i32x4.shl(i32x4.extend_high_i16x8_u(b), 16),
    i32x4.shl(i32x4.extend_low_i16x8_u(c), 16), i32x4.shl(i32x4.extend_high_i16x8_u(c), 16),
    i32x4.shl(i32x4.extend_low_i16x8_u(e), 16), i32x4.shl(i32x4.extend_high_i16x8_u(e), 16), out,
  );
}

/** 34 bytes: d f16 | qs i8[32]; d = amax/127, q = roundf(x·(1/d)), for the block's 32
 * elements held in eight vectors (all in registers: no scratch round trip, and the one
 * call, f32ToF16, comes last so nothing is spilled around it). */
// @ts-ignore: decorator
@inline function q8_0Regs(x0: v128, x1: v128, x2: v128, x3: v128, x4: v128, x5: v128, x6: v128, x7: v128, out: usize): void {
  // amax from the largest |x| bit pattern: for non-NaN f32 the unsigned order of |x|'s
  // bits is the order of |x|, and every NaN's |bits| exceed +inf's. The scalar f32.max
  // turns a NaN into the very NaN the twin's amax is (so d's f16 keeps its sign); any
  // other value max(0, amax) leaves as it is.
  const abs = i32x4.splat(0x7fffffff);
  let m = i32x4.max_u(v128.and(x0, abs), v128.and(x1, abs));
  m = i32x4.max_u(m, i32x4.max_u(v128.and(x2, abs), v128.and(x3, abs)));
  m = i32x4.max_u(m, i32x4.max_u(v128.and(x4, abs), v128.and(x5, abs)));
  m = i32x4.max_u(m, i32x4.max_u(v128.and(x6, abs), v128.and(x7, abs)));
  m = i32x4.max_u(m, i8x16.shuffle(m, m, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  m = i32x4.max_u(m, i8x16.shuffle(m, m, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  const amax = max<f32>(0, reinterpret<f32>(i32x4.extract_lane(m, 0)));
  const d: f32 = amax / 127;
  const idv = f32x4.splat(d != 0 && d == d ? <f32>1 / d : 0); // the twin's `d ? 1/d : 0`
  const n0 = i16x8.narrow_i32x4_s(q8Lane(x0, idv), q8Lane(x1, idv));
  const n1 = i16x8.narrow_i32x4_s(q8Lane(x2, idv), q8Lane(x3, idv));
  v128.store(out + 2, i8x16.narrow_i16x8_s(n0, n1));
  const n2 = i16x8.narrow_i32x4_s(q8Lane(x4, idv), q8Lane(x5, idv));
  const n3 = i16x8.narrow_i32x4_s(q8Lane(x6, idv), q8Lane(x7, idv));
  v128.store(out + 18, i8x16.narrow_i16x8_s(n2, n3));
  store<u16>(out, <u16>f32ToF16(d));
}

/** The signed value of largest magnitude among the 32 at x (the first one on ties). */
function signedMax(x: usize): f32 {
  let amax: f32 = 0;
  let m: f32 = 0;
  for (let j = 0; j < 32; j++) {
    const v = load<f32>(x + (<usize>j << 2));
    if (amax < abs(v)) { amax = abs(v); m = v; }
  }
  return m;
}

/** min(cap, trunc(x·id + bias)) per lane; −inf (1/d overflowed) gives 0, as the twin's
 * byte store of −Infinity does (+inf gives cap in both). */
// @ts-ignore: decorator
@inline function truncQuant(x: v128, idv: v128, bv: v128, capv: v128): v128 {
  const v = f32x4.add(f32x4.mul(x, idv), bv);
  return i32x4.min_s(capv, i32x4.trunc_sat_f32x4_s(v128.and(v, f32x4.ne(v, f32x4.splat(-Infinity)))));
}

/** 32 quants min(cap, trunc(x·id + bias)) as bytes at q (q[j] for element j). */
function truncQuants(x: usize, id: f32, bias: f32, cap: i32, q: usize): void {
  const idv = f32x4.splat(id);
  const bv = f32x4.splat(bias);
  const capv = i32x4.splat(cap);
  for (let i = 0; i < 32; i += 16) {
    const p = x + (<usize>i << 2);
    const q0 = truncQuant(v128.load(p), idv, bv, capv);
    const q1 = truncQuant(v128.load(p, 16), idv, bv, capv);
    const q2 = truncQuant(v128.load(p, 32), idv, bv, capv);
    const q3 = truncQuant(v128.load(p, 48), idv, bv, capv);
    v128.store(q + <usize>i, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
  }
}

/** Q4_0 / Q5_0's scale and quants: d = max/div (max: the signed value of largest
 * magnitude) stored as f16 at out, q[j] = min(cap, trunc(x_j·(1/d) + bias)). */
// @ts-ignore: decorator
@inline function signedScaleQuants(x: usize, out: usize, q: usize, div: f32, bias: f32, cap: i32): void {
  const d: f32 = signedMax(x) / div;
  const id: f32 = d != 0 && d == d ? <f32>1 / d : 0;
  store<u16>(out, <u16>f32ToF16(d));
  truncQuants(x, id, bias, cap, q);
}

/** 18 bytes: d f16 | qs[16] (element j low nibble, j + 16 high); d = max/−8. q: 32 bytes
 * of scratch for the quants. */
export function q4_0Block(x: usize, out: usize, q: usize): void {
  signedScaleQuants(x, out, q, -8, 8.5, 15);
  const lo = v128.load(q);
  const hi = v128.load(q, 16);
  v128.store(out + 2, v128.or(lo, i8x16.shl(hi, 4)));
}

/** 22 bytes: d f16 | qh u32 (fifth bits) | qs[16]; d = max/−16. q: 32 bytes of scratch. */
export function q5_0Block(x: usize, out: usize, q: usize): void {
  signedScaleQuants(x, out, q, -16, 16.5, 31);
  const lo = v128.load(q);
  const hi = v128.load(q, 16);
  const nib = i8x16.splat(0x0f);
  v128.store(out + 6, v128.or(v128.and(lo, nib), i8x16.shl(v128.and(hi, nib), 4)));
  // bit 4 of each quant moved to bit 7: bitmask collects them in element order
  const qh = i8x16.bitmask(i8x16.shl(lo, 3)) | (i8x16.bitmask(i8x16.shl(hi, 3)) << 16);
  store<u32>(out + 2, qh);
}
