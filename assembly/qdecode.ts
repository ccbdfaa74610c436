// GGML block decoding for the integer matmul (twin: src/kernels/quant/dequant.ts
// decodeSubBlock). Every format is read as 32-element sub-blocks j of a row; a sub-block's
// weights are  w_k = scale · q_k + offset  with integer q_k, returned 8 at a time as i16x8
// (wq(…, v) = elements 8v..8v+7). `T` is a compile-time format id (the callers are
// specialised per format, so every switch below folds away).
// Layouts: see dequant.ts. Scales are f16; f16At converts finite values exactly.

export const Q8_0: i32 = 0;
export const Q4_0: i32 = 1;
export const Q4_1: i32 = 2;
export const Q5_0: i32 = 3;
export const Q5_1: i32 = 4;
export const Q4_K: i32 = 5;
export const Q5_K: i32 = 6;
export const Q6_K: i32 = 7;

/** Bytes of one block. */
// @ts-ignore: decorator
@inline export function blockBytes(T: i32): i32 {
  switch (T) {
    case Q8_0: return 34;
    case Q4_0: return 18;
    case Q4_1: return 20;
    case Q5_0: return 22;
    case Q5_1: return 24;
    case Q4_K: return 144;
    case Q5_K: return 176;
    default: return 210;
  }
}

/** 32-element sub-blocks per block (1, or 8 for the 256-element K-quants). */
// @ts-ignore: decorator
@inline export function subPerBlock(T: i32): i32 {
  return T >= Q4_K ? 8 : 1;
}

/** Whether the format has a per-sub-block offset (a min). */
// @ts-ignore: decorator
@inline export function hasMin(T: i32): bool {
  return T == Q4_1 || T == Q5_1 || T == Q4_K || T == Q5_K;
}

/** The f32 copy of quantizeActs's block sums s [M·K/32] i32: [M·K/32] f32 right after
 * them (exact: |s| ≤ 32·127). The K-quant kernels (q4kx4, q4kx4wide, q5kx4) broadcast
 * s_j from here: no scalar int → f32 conversion per row and sub-block. */
// @ts-ignore: decorator
@inline export function sumsF32(s: usize, m: i32, k: i32): usize {
  return s + (<usize>((m * k) >> 5) << 2);
}

/** Bytes of one row of k elements. */
// @ts-ignore: decorator
@inline export function qRowBytes(T: i32, k: i32): usize {
  return <usize>(k >> 5) / <usize>subPerBlock(T) * <usize>blockBytes(T);
}

/** f16 at p → f32 (exact for finite values, subnormals included: the f16 bits shifted into
 * an f32 then scaled by 2¹¹²). */
// @ts-ignore: decorator
@inline export function f16At(p: usize): f32 {
  const h = <u32>load<u16>(p);
  const v = reinterpret<f32>((h & 0x7fff) << 13) * reinterpret<f32>(<u32>0x77800000); // 2^112
  return h & 0x8000 ? -v : v;
}

/** Address of the block holding sub-block j of the row at rb. */
// @ts-ignore: decorator
@inline export function blockAt(T: i32, rb: usize, j: i32): usize {
  return rb + <usize>(j / subPerBlock(T)) * <usize>blockBytes(T);
}

/** Six-bit scale (min = false) or min of sub-block s (0..7) from the 12 bytes at p. */
// @ts-ignore: decorator
@inline export function k4(p: usize, s: i32, min: bool): u32 {
  const o: usize = min ? 4 : 0;
  if (s < 4) return <u32>load<u8>(p + <usize>s + o) & 63;
  const b = <u32>load<u8>(p + <usize>s + 4);
  const top = <u32>load<u8>(p + <usize>s - 4 + o) >> 6;
  return (min ? b >> 4 : b & 15) | (top << 4);
}

/** scale of sub-block j (blk: its block). */
// @ts-ignore: decorator
@inline export function subScale(T: i32, blk: usize, j: i32): f32 {
  if (T == Q6_K) return f16At(blk + 208);
  if (T == Q4_K || T == Q5_K) return f16At(blk) * <f32>k4(blk + 4, j & 7, false);
  return f16At(blk);
}

/** offset of sub-block j (formats with a min only). */
// @ts-ignore: decorator
@inline export function subOffset(T: i32, blk: usize, j: i32): f32 {
  if (T == Q4_K || T == Q5_K) return -(f16At(blk + 2) * <f32>k4(blk + 4, j & 7, true));
  return f16At(blk + 2); // q4_1, q5_1: m
}

/** The 5th bits of 8 elements as i16x8 of 0 / 16: bit (lane) of byte `bits`. */
// @ts-ignore: decorator
@inline function highBits8(bits: u32): v128 {
  const m = v128.and(i16x8.splat(<i16>bits), i16x8(1, 2, 4, 8, 16, 32, 64, 128));
  return v128.and(i16x8.ne(m, i16x8.splat(0)), i16x8.splat(16));
}

/** Nibbles of 16 bytes at p: low (hi = false) or high. */
// @ts-ignore: decorator
@inline function nibbles(p: usize, hi: bool): v128 {
  const raw = v128.load(p);
  return hi ? i8x16.shr_u(raw, 4) : v128.and(raw, i8x16.splat(15));
}

/** Unsigned bytes → i16x8: the low (half 0) or high 8 lanes. */
// @ts-ignore: decorator
@inline function widenU(b: v128, half: i32): v128 {
  return half ? i16x8.extend_high_i8x16_u(b) : i16x8.extend_low_i8x16_u(b);
}

/** q_k of elements 8v..8v+7 of sub-block j (blk: its block) as i16x8. */
// @ts-ignore: decorator
@inline export function wq(T: i32, blk: usize, j: i32, v: i32): v128 {
  if (T == Q8_0) {
    const raw = v128.load(blk + 2 + <usize>((v >> 1) << 4));
    return v & 1 ? i16x8.extend_high_i8x16_s(raw) : i16x8.extend_low_i8x16_s(raw);
  }
  if (T <= Q5_1) { // 32-element blocks of nibbles: elements 0..15 low, 16..31 high
    const qs: usize = T == Q4_0 ? 2 : T == Q4_1 ? 4 : T == Q5_0 ? 6 : 8;
    let q = widenU(nibbles(blk + qs, v >= 2), v & 1);
    if (T == Q5_0 || T == Q5_1) {
      const qh = load<u32>(blk + (T == Q5_0 ? 2 : 4));
      q = v128.or(q, highBits8((qh >> (<u32>v << 3)) & 0xff));
    }
    if (T == Q4_0) q = i16x8.sub(q, i16x8.splat(8));
    if (T == Q5_0) q = i16x8.sub(q, i16x8.splat(16));
    return q;
  }
  const s = j & 7;
  const half: usize = <usize>((v >> 1) << 4); // bytes 0..15 or 16..31 of a 32-byte run
  if (T == Q4_K || T == Q5_K) {
    const qs = blk + (T == Q4_K ? 16 : 48) + <usize>((s >> 1) << 5) + half;
    let b = nibbles(qs, (s & 1) != 0);
    if (T == Q5_K) {
      const hb = v128.and(i8x16.shr_u(v128.load(blk + 16 + half), <u32>s), i8x16.splat(1));
      b = v128.or(b, i8x16.shl(hb, 4));
    }
    return widenU(b, v & 1);
  }
  // Q6_K: sub-block s = half h (s >> 2) run r (s & 3)
  const h: usize = <usize>(s >> 2);
  const r = s & 3;
  const lo = nibbles(blk + h * 64 + <usize>((r & 1) << 5) + half, r >= 2);
  const hi = v128.and(i8x16.shr_u(v128.load(blk + 128 + h * 32 + half), <u32>(r << 1)), i8x16.splat(3));
  const q = i16x8.sub(widenU(v128.or(lo, i8x16.shl(hi, 4)), v & 1), i16x8.splat(32));
  const sc = <i16>load<i8>(blk + 192 + <usize>(s << 1) + <usize>(v >> 1));
  return i16x8.mul(q, i16x8.splat(sc));
}

/** The 5th bits of 16 elements as i8x16 of 0 / 16: bit (lane) of the 16-bit `bits`. */
// @ts-ignore: decorator
@inline function highBits16(bits: u32): v128 {
  const v = i16x8.splat(<i16>bits);
  const b = i8x16.shuffle(v, v, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const m = v128.and(b, i8x16(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128));
  return v128.and(i8x16.ne(m, i8x16.splat(0)), i8x16.splat(16));
}

/** Integer offset of the nibble formats' unsigned quants: q_k = u_k − intOffset (u from
 * wq8u). */
// @ts-ignore: decorator
@inline export function intOffset(T: i32): i32 {
  return T == Q4_0 ? 8 : T == Q5_0 ? 16 : 0;
}

/** Unsigned quants u_k (0..31) of elements 16h..16h+15 of sub-block j as u8x16, for the
 * 4/5-bit formats (q_k = u_k − intOffset(T)). */
// @ts-ignore: decorator
@inline export function wq8u(T: i32, blk: usize, j: i32, h: i32): v128 {
  if (T == Q4_0) return i8x16.add(wq8(T, blk, j, h), i8x16.splat(8));
  if (T == Q5_0) return i8x16.add(wq8(T, blk, j, h), i8x16.splat(16));
  return wq8(T, blk, j, h);
}

/** q_k of elements 16h..16h+15 of sub-block j as i8x16 (Q6_K: q − 32, its int8 group
 * scale not applied: see q6GroupScale). */
// @ts-ignore: decorator
@inline export function wq8(T: i32, blk: usize, j: i32, h: i32): v128 {
  const o: usize = <usize>(h << 4);
  if (T == Q8_0) return v128.load(blk + 2 + o);
  if (T <= Q5_1) {
    const qs: usize = T == Q4_0 ? 2 : T == Q4_1 ? 4 : T == Q5_0 ? 6 : 8;
    let q = nibbles(blk + qs, h != 0);
    if (T == Q5_0 || T == Q5_1) q = v128.or(q, highBits16((load<u32>(blk + (T == Q5_0 ? 2 : 4)) >> (<u32>h << 4)) & 0xffff));
    if (T == Q4_0) q = i8x16.sub(q, i8x16.splat(8));
    if (T == Q5_0) q = i8x16.sub(q, i8x16.splat(16));
    return q;
  }
  const s = j & 7;
  if (T == Q4_K || T == Q5_K) {
    let b = nibbles(blk + (T == Q4_K ? 16 : 48) + <usize>((s >> 1) << 5) + o, (s & 1) != 0);
    if (T == Q5_K) b = v128.or(b, i8x16.shl(v128.and(i8x16.shr_u(v128.load(blk + 16 + o), <u32>s), i8x16.splat(1)), 4));
    return b;
  }
  const hh: usize = <usize>(s >> 2);
  const r = s & 3;
  const lo = nibbles(blk + hh * 64 + <usize>((r & 1) << 5) + o, r >= 2);
  const hi = v128.and(i8x16.shr_u(v128.load(blk + 128 + hh * 32 + o), <u32>(r << 1)), i8x16.splat(3));
  return i8x16.sub(v128.or(lo, i8x16.shl(hi, 4)), i8x16.splat(32));
}

/** Q6_K: the int8 scale of the 16-element group h of sub-block j. */
// @ts-ignore: decorator
@inline export function q6GroupScale(blk: usize, j: i32, h: i32): i32 {
  return <i32>load<i8>(blk + 192 + <usize>((j & 7) << 1) + <usize>h);
}

/** f16 bits in the low halves of i32 lanes → f32x4 (exact for finite values, as f16At). */
// @ts-ignore: decorator
@inline function f16x4(h: v128): v128 {
  const mag = f32x4.mul(i32x4.shl(v128.and(h, i32x4.splat(0x7fff)), 13), f32x4.splat(reinterpret<f32>(<u32>0x77800000)));
  return v128.or(mag, i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16));
}

/** u16 at b0+o … b3+o in i32 lanes. */
// @ts-ignore: decorator
@inline function u16x4(b0: usize, b1: usize, b2: usize, b3: usize, o: usize): v128 {
  let v = i32x4.splat(<i32>load<u16>(b0 + o));
  v = i32x4.replace_lane(v, 1, <i32>load<u16>(b1 + o));
  v = i32x4.replace_lane(v, 2, <i32>load<u16>(b2 + o));
  return i32x4.replace_lane(v, 3, <i32>load<u16>(b3 + o));
}

/** Sub-block j's scale (min = false) or offset of four columns (blocks b0..b3) as f32x4:
 * the same f32 values as subScale / subOffset. */
// @ts-ignore: decorator
@inline export function scales4(T: i32, b0: usize, b1: usize, b2: usize, b3: usize, j: i32, min: bool): v128 {
  if (T == Q6_K) return f16x4(u16x4(b0, b1, b2, b3, 208));
  if (T == Q4_K || T == Q5_K) {
    const d = f16x4(u16x4(b0, b1, b2, b3, min ? 2 : 0));
    const s = j & 7;
    let c = i32x4.splat(<i32>k4(b0 + 4, s, min));
    c = i32x4.replace_lane(c, 1, <i32>k4(b1 + 4, s, min));
    c = i32x4.replace_lane(c, 2, <i32>k4(b2 + 4, s, min));
    c = i32x4.replace_lane(c, 3, <i32>k4(b3 + 4, s, min));
    const v = f32x4.mul(d, f32x4.convert_i32x4_s(c));
    return min ? f32x4.neg(v) : v;
  }
  return f16x4(u16x4(b0, b1, b2, b3, min ? 2 : 0));
}
