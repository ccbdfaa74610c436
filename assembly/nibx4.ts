// Shared pieces of the repacked 4/5-bit layouts grouped by 4 output columns (q32x4.ts:
// Q4_0 / Q4_1 / Q5_0 / Q5_1; q5kx4.ts: Q5_K). Their common unit is a 32-element sub-block of
// 4 columns:
//   4 nibble vectors (64 bytes): byte 4c + i of vector v holds element 8v + i of column c in
//     its low nibble and element 8v + 4 + i in its high one (the order of q4kx4.ts), so
//     (vector & 15) is the quad tile [column][4 k] of elements 8v..8v+3, (vector >> 4) that of
//     8v+4..8v+7;
//   5-bit formats: 16 more bytes of 5th bits: byte 4c + i, bit v = the 5th bit of element
//     8v + i, bit 4 + v = that of element 8v + 4 + i, so each quad's bits are one shift and
//     one mask away from the nibbles (`hiBitsLo` / `hiBitsHi`).
// Σ u·x (u the unsigned quants 0..31) per column is exact in every build: the relaxed
// builds take u as the i7 operand of the relaxed dot and the int8 activations as the other
// (rdot2: the vnni build's i32x4 dot-add is one vpdpbusd; the fma build sums two i16 dots,
// one vpmaddubsw each, and widens once); the plain one widens u to i16 and dots it with a
// broadcast i16 quad (two partial lanes per column, folded per sub-block). Same integers,
// so the same bits.
// Activations (the layouts of q4kx4.ts interleaveQ4kx4Acts): relaxed build: int8 rows
// (stride K), and for whole blocks of 4 rows quad q of row 4i+r at x4 + 4K·i + 16q + 4r;
// plain build: i16 rows (stride 2K), quad q of row 4i+r at x4 + 8K·i + 32q + 8r.

import { widen16 } from './q4kx4';

/** Bytes of one activation quant (int8 in the relaxed build, i16 in the plain one). */
export const XB: usize = ASC_FEATURE_RELAXED_SIMD ? 1 : 2;

// The shifts below are 16-bit (x86 has no 8-bit vector shift; V8 emulates i8x16 ones with
// extra masks): each byte's result is masked right after, and a 16-bit shift by s ≤ 4
// moves into bit 4 (or bits 0..3) of each byte only bits of that same byte.

// The byte masks 0x0f and 0x10 (16 bytes each), and f16x4At's two constants, as data
// loaded where used: V8 rebuilds a splat of a constant inside the loop each time it is used
// (movq imm64 + vmovq + vpunpcklqdq, two port-5 uops), up to 16 per sub-block here.
const NIB_MASKS = memory.data<u8>([
  15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
  16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16,
], 16);
const F16_K = memory.data<u32>([0x8fffe000, 0x77800000], 8); // sign + exponent + mantissa mask, 2^112

/** Unsigned quants of the low quad of nibble vector v (plus its 5th bits when `five`). */
// @ts-ignore: decorator
@inline export function quadLo(five: bool, w: v128, hb: v128, v: i32): v128 {
  const u = v128.and(w, v128.load(NIB_MASKS));
  return five ? v128.or(u, v128.and(i16x8.shl(hb, <u32>(4 - v)), v128.load(NIB_MASKS, 16))) : u;
}

/** Unsigned quants of the high quad of nibble vector v (plus its 5th bits when `five`). */
// @ts-ignore: decorator
@inline export function quadHi(five: bool, w: v128, hb: v128, v: i32): v128 {
  const u = v128.and(i16x8.shr_u(w, 4), v128.load(NIB_MASKS));
  return five ? v128.or(u, v128.and(i16x8.shr_u(hb, <u32>v), v128.load(NIB_MASKS, 16))) : u;
}

/** acc + Σ ul·xl + Σ uh·xh per column lane (relaxed builds; xl, xh broadcast int8 quads,
 * ul, uh their quad tiles of unsigned quants ≤ 31). The vnni build: two dot-adds (one
 * vpdpbusd each). The fma build: without AVX-VNNI V8 lowers each i32x4 dot-add to 5
 * instructions, rebuilding a constant of ones each time (vpcmpeqd, vpsrlw, vpmaddubsw,
 * vpmaddwd, vpaddd; read from Node 24's x64 code on an AMD EPYC, Zen 4), so here the two
 * i16 dots (one vpmaddubsw each; a lane ≤ 2·31·128, the sum ≤ 15872: exact) are added in
 * i16 and widened once (q4kx4.ts widen16: one vpmaddwd against a constant in memory). */
// @ts-ignore: decorator
@inline export function rdot2(acc: v128, xl: v128, ul: v128, xh: v128, uh: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    if (DOT_I32) return i32x4.relaxed_dot_i8x16_i7x16_add_s(xh, uh, i32x4.relaxed_dot_i8x16_i7x16_add_s(xl, ul, acc));
    const s = i16x8.add(i16x8.relaxed_dot_i8x16_i7x16_s(xl, ul), i16x8.relaxed_dot_i8x16_i7x16_s(xh, uh));
    return i32x4.add(acc, widen16(s));
  }
  unreachable();
  return acc;
}

/** Plain build: acc pair sums += u (c0, c1 of a quad, widened) · x (a broadcast i16 quad). */
// @ts-ignore: decorator
@inline export function pdot(acc: v128, u16: v128, x: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(u16, x));
}

/** Plain build: a = [c0 p0, c0 p1, c1 p0, c1 p1], b = the same for c2, c3 → Σ per column. */
// @ts-ignore: decorator
@inline export function fold(a: v128, b: v128): v128 {
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** Σ u·x over one sub-block of 4 columns for one row: wq its 4 nibble vectors (5th bits at
 * wq + 64 when `five`), x the row's 32 quants (int8 or i16 by build). */
// @ts-ignore: decorator
@inline export function subDot1(five: bool, wq: usize, x: usize): v128 {
  const hb = five ? v128.load(wq, 64) : i32x4.splat(0);
  if (ASC_FEATURE_RELAXED_SIMD) { // vectors 0..3 written out, so every shift is a constant
    // two dot-add chains (vectors 0, 2 and 1, 3), added at the end: the vnni build's
    // vpdpbusd has a 5-cycle latency, and one chain of 8 bounded a single row at ~40 cycles
    // per sub-block (exact i32 sums, so the same integers)
    let a = vec1Relaxed(five, i32x4.splat(0), v128.load(wq), hb, 0, x);
    let b = vec1Relaxed(five, i32x4.splat(0), v128.load(wq, 16), hb, 1, x + 8);
    a = vec1Relaxed(five, a, v128.load(wq, 32), hb, 2, x + 16);
    b = vec1Relaxed(five, b, v128.load(wq, 48), hb, 3, x + 24);
    return i32x4.add(a, b);
  }
  let w = v128.load(wq);
  let l = quadLo(five, w, hb, 0), h = quadHi(five, w, hb, 0);
  let a = vec1Plain(i32x4.splat(0), l, h, x, false), b = vec1Plain(i32x4.splat(0), l, h, x, true);
  w = v128.load(wq, 16);
  l = quadLo(five, w, hb, 1); h = quadHi(five, w, hb, 1);
  a = vec1Plain(a, l, h, x + 16, false); b = vec1Plain(b, l, h, x + 16, true);
  w = v128.load(wq, 32);
  l = quadLo(five, w, hb, 2); h = quadHi(five, w, hb, 2);
  a = vec1Plain(a, l, h, x + 32, false); b = vec1Plain(b, l, h, x + 32, true);
  w = v128.load(wq, 48);
  l = quadLo(five, w, hb, 3); h = quadHi(five, w, hb, 3);
  a = vec1Plain(a, l, h, x + 48, false); b = vec1Plain(b, l, h, x + 48, true);
  return fold(a, b);
}

/** Relaxed build: acc + Σ u·x over nibble vector v (w) for one row (x: its 8 int8 quants). */
// @ts-ignore: decorator
@inline function vec1Relaxed(five: bool, acc: v128, w: v128, hb: v128, v: i32, x: usize): v128 {
  return rdot2(acc, v128.load32_splat(x), quadLo(five, w, hb, v), v128.load32_splat(x, 4), quadHi(five, w, hb, v));
}

/** Plain build: acc + the pair sums of columns 0, 1 (`high` false) or 2, 3 of the quads
 * l, h of one nibble vector for one row (x: its 8 i16 quants). */
// @ts-ignore: decorator
@inline function vec1Plain(acc: v128, l: v128, h: v128, x: usize, high: bool): v128 {
  const lw = high ? i16x8.extend_high_i8x16_u(l) : i16x8.extend_low_i8x16_u(l);
  const hw = high ? i16x8.extend_high_i8x16_u(h) : i16x8.extend_low_i8x16_u(h);
  return pdot(pdot(acc, lw, v128.load64_splat(x)), hw, v128.load64_splat(x, 8));
}

/** The four rows' sums of the last subDot4 (module globals: every thread has its own
 * instance, so they are per thread; the caller reads them right after the call). */
export let sum0: v128 = i32x4.splat(0);
export let sum1: v128 = i32x4.splat(0);
export let sum2: v128 = i32x4.splat(0);
export let sum3: v128 = i32x4.splat(0);

/** Σ u·x over one sub-block of 4 columns for rows 4i..4i+3 at once (x: the interleaved
 * quants of the sub-block, see above) → sum0..sum3. */
// @ts-ignore: decorator
@inline export function subDot4(five: bool, wq: usize, x: usize): void {
  const hb = five ? v128.load(wq, 64) : i32x4.splat(0);
  let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
  if (ASC_FEATURE_RELAXED_SIMD) { // vectors 0..3 written out, so every shift is a constant
    let w = v128.load(wq), l = quadLo(five, w, hb, 0), h = quadHi(five, w, hb, 0);
    a0 = quads(a0, x, l, h); a1 = quads(a1, x + 4, l, h); a2 = quads(a2, x + 8, l, h); a3 = quads(a3, x + 12, l, h);
    w = v128.load(wq, 16); l = quadLo(five, w, hb, 1); h = quadHi(five, w, hb, 1);
    a0 = quads(a0, x + 32, l, h); a1 = quads(a1, x + 36, l, h); a2 = quads(a2, x + 40, l, h); a3 = quads(a3, x + 44, l, h);
    w = v128.load(wq, 32); l = quadLo(five, w, hb, 2); h = quadHi(five, w, hb, 2);
    a0 = quads(a0, x + 64, l, h); a1 = quads(a1, x + 68, l, h); a2 = quads(a2, x + 72, l, h); a3 = quads(a3, x + 76, l, h);
    w = v128.load(wq, 48); l = quadLo(five, w, hb, 3); h = quadHi(five, w, hb, 3);
    a0 = quads(a0, x + 96, l, h); a1 = quads(a1, x + 100, l, h); a2 = quads(a2, x + 104, l, h); a3 = quads(a3, x + 108, l, h);
    sum0 = a0; sum1 = a1; sum2 = a2; sum3 = a3;
    return;
  }
  let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
  for (let v = 0; v < 4; v++) { // one nibble vector (2 quads of 4 columns) × 4 rows per pass
    const w = v128.load(wq + (<usize>v << 4));
    const l = quadLo(five, w, hb, v), h = quadHi(five, w, hb, v);
    const xp = x + (<usize>v << 6); // quad 2v of row r at xp + 8r, quad 2v+1 at xp + 32 + 8r
    const ll = i16x8.extend_low_i8x16_u(l), lh = i16x8.extend_high_i8x16_u(l);
    const hl = i16x8.extend_low_i8x16_u(h), hh = i16x8.extend_high_i8x16_u(h);
    let y = v128.load64_splat(xp), z = v128.load64_splat(xp, 32);
    a0 = pdot(pdot(a0, ll, y), hl, z); b0 = pdot(pdot(b0, lh, y), hh, z);
    y = v128.load64_splat(xp, 8); z = v128.load64_splat(xp, 40);
    a1 = pdot(pdot(a1, ll, y), hl, z); b1 = pdot(pdot(b1, lh, y), hh, z);
    y = v128.load64_splat(xp, 16); z = v128.load64_splat(xp, 48);
    a2 = pdot(pdot(a2, ll, y), hl, z); b2 = pdot(pdot(b2, lh, y), hh, z);
    y = v128.load64_splat(xp, 24); z = v128.load64_splat(xp, 56);
    a3 = pdot(pdot(a3, ll, y), hl, z); b3 = pdot(pdot(b3, lh, y), hh, z);
  }
  sum0 = fold(a0, b0); sum1 = fold(a1, b1); sum2 = fold(a2, b2); sum3 = fold(a3, b3);
}

/** Relaxed build: acc + Σ u·x of one row over a nibble vector's quads l, h (quad 2v at x,
 * quad 2v+1 at x + 16: the interleaved layout). */
// @ts-ignore: decorator
@inline function quads(acc: v128, x: usize, l: v128, h: v128): v128 {
  return rdot2(acc, v128.load32_splat(x), l, v128.load32_splat(x, 16), h);
}

/** Four f16 at p (u16 each, consecutive) → f32x4, exactly as qdecode.ts f16At (finite). */
// @ts-ignore: decorator
@inline export function f16x4At(p: usize): v128 {
  const h = i32x4.shl(i32x4.extend_low_i16x8_u(v128.load64_zero(p)), 16);
  const bits = v128.and(i32x4.shr_s(h, 3), v128.load32_splat(F16_K));
  return f32x4.mul(bits, v128.load32_splat(F16_K, 4)); // × 2^112
}

/** Pack nibble pair / 5th bits of element e (0..31) of column c into a sub-block's 4×4
 * layout at o (nibble vectors at o, 5th bits at o + 64): q is the unsigned quant. The byte
 * must start zeroed (the repack clears each sub-block first). */
// @ts-ignore: decorator
@inline export function putQuant(o: usize, c: i32, e: i32, q: u32, five: bool): void {
  const v = e >> 3;
  const hiHalf = (e & 4) != 0;
  const byte = o + <usize>((v << 4) + (c << 2) + (e & 3));
  store<u8>(byte, load<u8>(byte) | <u8>((q & 15) << (hiHalf ? 4 : 0)));
  if (five && (q & 16) != 0) {
    const hb = o + 64 + <usize>((c << 2) + (e & 3));
    store<u8>(hb, load<u8>(hb) | <u8>(<u32>1 << <u32>(hiHalf ? 4 + v : v)));
  }
}
