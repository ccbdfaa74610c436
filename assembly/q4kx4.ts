// Q4_K repacked for the integer matmul ('q4kx4' layout, set by the wasm backend's
// packWeight): the same nibbles, scales and mins as the GGML Q4_K blocks, rearranged so that
// one 16-byte load feeds 4 output columns, with the 6-bit scales unpacked once at load.
//
// Layout: groups of 4 weight rows (= output columns; the last group zero-padded), group g
// at g·ns·608 bytes (ns = K/256 super-blocks); super-block b of a group at +b·608:
//   [0, 16)    f32 d of columns 0..3 (the f16 d of their Q4_K block, exactly)
//   [16, 32)   f32 −dmin of columns 0..3
//   [32, 64)   u8 six-bit scale sc of sub-block j (0..7), column c at 32 + 4j + c
//   [64, 96)   u8 six-bit min m of sub-block j, column c at 64 + 4j + c
//   [96, 608)  sub-block j at 96 + 64j: 4 vectors; byte 4c + i of vector v holds element
//              8v + i of column c in its low nibble and element 8v + 4 + i in its high one,
// so (vector & 15) is the quad tile [column][4 k] of elements 8v..8v+3 and (vector >> 4)
// that of 8v+4..8v+7. 608 bytes per 1024 weights: 4.75 bits/weight (GGML Q4_K: 4.5).
//
// Arithmetic: exactly the twin's (src/kernels/ref/quant.ts): scale_j = d·sc and
// offset_j = −dmin·m (exact in f32: 11-bit × 6-bit), an exact integer Σ u·x per sub-block,
// then per column one f32 chain  acc += (scale_j·d_j)·sumi;  acc += (offset_j·d_j)·s_j
// (mul, mul, add; unfused). Σ u·x: the relaxed build takes
// i16x8.relaxed_dot_i8x16_i7x16_s (u ∈ 0..15 the i7 operand, the int8 quants the other: one
// vpmaddubsw), sums it in i16 over the sub-block (exact, see dot16) and widens once (V8 11.3
// lowers i32x4.relaxed_dot_i8x16_i7x16_add_s to 5 instructions, rebuilding a constant);
// the plain build widens u to i16 and dots it with a broadcast i16 quad (two partial lanes
// per column, folded per sub-block). Same integers, so the same bits in both builds.
//
// Activations (see interleaveQ4kx4Acts): relaxed build: int8 rows (stride K), and for whole
// blocks of 4 rows quad q of row 4i+r at x4 + 4K·i + 16q + 4r; plain build: i16 rows (stride
// 2K), and quad q of row 4i+r at x4 + 8K·i + 32q + 8r.
import { f16At, k4, sumsF32 } from './qdecode';
import { groupSource, interleaveActs4, storeCols, storeRows4 } from './q8x4';

const SB: usize = 608; // bytes of one (group, super-block)
const QB: usize = 144; // bytes of one GGML Q4_K block
const XB: usize = ASC_FEATURE_RELAXED_SIMD ? 1 : 2; // bytes of one activation quant

/** Repack a GGML Q4_K weight [rows, k] at w in place (the buffer must hold
 * ⌈rows/4⌉·(k/256)·608 bytes). tmp: 4·(k/256)·144 bytes of scratch. Groups run last to
 * first: group g's destination (608 bytes per column-super-block group vs 4·144 = 576 of
 * source) starts at or after the end of group g−1's source; its own source is in tmp. */
export function repackQ4kx4(w: usize, rows: i32, k: i32, tmp: usize): void {
  const ns = k >> 8;
  const rb = <usize>ns * QB;
  for (let g = ((rows + 3) >> 2) - 1; g >= 0; g--) {
    groupSource(w, g, rows, rb, tmp);
    const dst = w + <usize>g * <usize>ns * SB;
    for (let b = 0; b < ns; b++) {
      for (let c = 0; c < 4; c++) packColumn(dst + <usize>b * SB, tmp + <usize>c * rb + <usize>b * QB, c);
    }
  }
}

/** Column c's Q4_K block at src → its slots of the group's super-block at o. */
function packColumn(o: usize, src: usize, c: i32): void {
  const cc = <usize>c;
  store<f32>(o + (cc << 2), f16At(src));
  store<f32>(o + 16 + (cc << 2), -f16At(src + 2));
  for (let j = 0; j < 8; j++) {
    store<u8>(o + 32 + (<usize>j << 2) + cc, <u8>k4(src + 4, j, false));
    store<u8>(o + 64 + (<usize>j << 2) + cc, <u8>k4(src + 4, j, true));
    const qs = src + 16 + (<usize>(j >> 1) << 5); // GGML: sub-blocks 2i, 2i+1 share 32 bytes
    const sh = <u32>(j & 1) << 2;
    const vb = o + 96 + (<usize>j << 6) + (cc << 2);
    for (let v = 0; v < 4; v++) {
      for (let i = 0; i < 4; i++) {
        const lo = (<u32>load<u8>(qs + <usize>(8 * v + i)) >> sh) & 15;
        const hi = (<u32>load<u8>(qs + <usize>(8 * v + 4 + i)) >> sh) & 15;
        store<u8>(vb + (<usize>v << 4) + <usize>i, <u8>(lo | (hi << 4)));
      }
    }
  }
}

/** Interleave whole blocks of 4 rows of activations into x4 = q8 + M·K (the layouts above):
 * the int8 quants (relaxed build) or the i16 ones (plain build). */
export function interleaveQ4kx4Acts(q16: usize, q8: usize, m: i32, k: i32): void {
  const x4 = q8 + <usize>m * <usize>k;
  if (ASC_FEATURE_RELAXED_SIMD) {
    interleaveActs4(q8, m, k >> 1, x4); // 4-byte units of rows of K bytes
    return;
  }
  const rs = <usize>k << 1;
  for (let i = 0; i + 4 <= m; i += 4) {
    const r0 = q16 + <usize>i * rs;
    const o = x4 + <usize>i * rs;
    for (let p: usize = 0; p < rs; p += 16) { // 2 quads of the 4 rows
      const a = v128.load(r0 + p), b = v128.load(r0 + rs + p), c = v128.load(r0 + 2 * rs + p), e = v128.load(r0 + 3 * rs + p);
      const q = o + (p << 2);
      v128.store(q, i32x4.shuffle(a, b, 0, 1, 4, 5));
      v128.store(q, i32x4.shuffle(c, e, 0, 1, 4, 5), 16);
      v128.store(q, i32x4.shuffle(a, b, 2, 3, 6, 7), 32);
      v128.store(q, i32x4.shuffle(c, e, 2, 3, 6, 7), 48);
    }
  }
}

/** The low / high nibbles of 16 bytes (u8 0..15). */
// @ts-ignore: decorator
@inline function lo(w: v128): v128 {
  return v128.and(w, i8x16.splat(15));
}
// @ts-ignore: decorator
@inline function hi(w: v128): v128 {
  return i8x16.shr_u(w, 4);
}

/** acc + the i16 pair sums of u (u8 0..15) · x (a broadcast int8 quad) per column lane
 * pair (relaxed build: one vpmaddubsw). Summed over a sub-block's 8 quads a lane holds 16
 * products of ≤ 15·128: |Σ| ≤ 30720, exact in i16. */
// @ts-ignore: decorator
@inline function dot16(acc: v128, x: v128, u: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    if (DOT_I32) return i32x4.relaxed_dot_i8x16_i7x16_add_s(x, u, acc); // vnni build: i32 lanes
    return i16x8.add(acc, i16x8.relaxed_dot_i8x16_i7x16_s(x, u));
  }
  unreachable();
  return acc;
}

/** dot16's accumulator as i32 column sums: the vnni build's already are; the i16 pair sums
 * of the fma build are added pairwise. */
// @ts-ignore: decorator
@inline export function widen16(h: v128): v128 {
  return DOT_I32 ? h : i32x4.extadd_pairwise_i16x8_s(h);
}

/** acc + the i16 pair sums of u16 (4 k of 2 columns) · x (a broadcast i16 quad) (plain). */
// @ts-ignore: decorator
@inline function pdot(acc: v128, u16: v128, x: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(u16, x));
}

/** Plain build: a = [c0 p0, c0 p1, c1 p0, c1 p1], b = the same for c2, c3 → Σ per column. */
// @ts-ignore: decorator
@inline function fold(a: v128, b: v128): v128 {
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** Four u8 at the low bytes of v → f32x4 (exact). */
// @ts-ignore: decorator
@inline function bytes4(v: v128): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v)));
}

/** One sub-block's chain steps for 4 columns: acc + (sc·dx)·sumi, then + (mn·dx)·sx.
 * dx / sx: splats of the row's block scale and f32 block sum, broadcast from memory
 * (load-port work; a scalar int→f32 conversion and register broadcast per row and
 * sub-block cost ~5% at M = 8 on the Intel Xeon). */
// @ts-ignore: decorator
@inline export function step(acc: v128, sumi: v128, sc: v128, mn: v128, dx: v128, sx: v128): v128 {
  const f = f32x4.add(acc, f32x4.mul(f32x4.mul(sc, dx), f32x4.convert_i32x4_s(sumi)));
  return f32x4.add(f, f32x4.mul(f32x4.mul(mn, dx), sx));
}

// The loops below advance pointers and use constant load offsets (wasm offset immediates):
// an i32 address sum cannot fold into an x64 addressing mode, an immediate can.

/** Σ u·x over one sub-block for one row: wq its 4 weight vectors, x the row's 32 quants. */
// @ts-ignore: decorator
@inline function dotRow1(wq: usize, x: usize, m15: v128): v128 {
  const w0 = v128.load(wq), w1 = v128.load(wq, 16), w2 = v128.load(wq, 32), w3 = v128.load(wq, 48);
  if (ASC_FEATURE_RELAXED_SIMD) { // i16 pair sums over the sub-block (see dot16), then i32
    const xa = v128.load(x), xb = v128.load(x, 16); // quads 0..3, 4..7
    // two accumulators (the vnni build's dot-adds are latency chains); i16 sums stay exact
    let h = dot16(i16x8.splat(0), i32x4.shuffle(xa, xa, 0, 0, 0, 0), v128.and(w0, m15));
    let g = dot16(i16x8.splat(0), i32x4.shuffle(xa, xa, 1, 1, 1, 1), v128.and(i16x8.shr_u(w0, 4), m15));
    h = dot16(h, i32x4.shuffle(xa, xa, 2, 2, 2, 2), v128.and(w1, m15));
    g = dot16(g, i32x4.shuffle(xa, xa, 3, 3, 3, 3), v128.and(i16x8.shr_u(w1, 4), m15));
    h = dot16(h, i32x4.shuffle(xb, xb, 0, 0, 0, 0), v128.and(w2, m15));
    g = dot16(g, i32x4.shuffle(xb, xb, 1, 1, 1, 1), v128.and(i16x8.shr_u(w2, 4), m15));
    h = dot16(h, i32x4.shuffle(xb, xb, 2, 2, 2, 2), v128.and(w3, m15));
    g = dot16(g, i32x4.shuffle(xb, xb, 3, 3, 3, 3), v128.and(i16x8.shr_u(w3, 4), m15));
    return widen16(DOT_I32 ? i32x4.add(h, g) : i16x8.add(h, g));
  }
  let a = i32x4.splat(0), b = i32x4.splat(0);
  let u = lo(w0), y = v128.load64_splat(x);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = hi(w0); y = v128.load64_splat(x, 8);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = lo(w1); y = v128.load64_splat(x, 16);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = hi(w1); y = v128.load64_splat(x, 24);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = lo(w2); y = v128.load64_splat(x, 32);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = hi(w2); y = v128.load64_splat(x, 40);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = lo(w3); y = v128.load64_splat(x, 48);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  u = hi(w3); y = v128.load64_splat(x, 56);
  a = pdot(a, i16x8.extend_low_i8x16_u(u), y); b = pdot(b, i16x8.extend_high_i8x16_u(u), y);
  return fold(a, b);
}

/** Row mi (its quants at xr: int8 or i16 rows, see above) × the 4 columns of group wg. */
// @ts-ignore: decorator
@inline function groupRow1(out: usize, xr: usize, d: usize, sf: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, m15: v128): void {
  const nb = k >> 5;
  let x = xr + <usize>mi * <usize>k * XB;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = sf + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b), dm = v128.load(b, 16);
    let cp = b, wq = b + 96;
    for (let j = 0; j < 8; j++) {
      const sumi = dotRow1(wq, x, m15);
      const sc = f32x4.mul(dd, bytes4(v128.load32_zero(cp, 32)));
      const mn = f32x4.mul(dm, bytes4(v128.load32_zero(cp, 64)));
      f = step(f, sumi, sc, mn, v128.load32_splat(dj), v128.load32_splat(sj));
      wq += 64;
      x += 32 * XB;
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 × the 4 columns of group wg; x4 the interleaved quants (see above). */
// @ts-ignore: decorator
@inline function groupRows4(out: usize, x4: usize, d: usize, sf: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, m15: v128): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k * XB;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = sf + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b), dm = v128.load(b, 16);
    let cp = b, wq = b + 96;
    for (let j = 0; j < 8; j++) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
      let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
      for (let v = 0; v < 4; v++) { // one weight vector (2 quads of 4 columns) × 4 rows per pass
        const w = v128.load(wq);
        const l = v128.and(w, m15), h = v128.and(i16x8.shr_u(w, 4), m15);
        if (ASC_FEATURE_RELAXED_SIMD) { // quad 2v of row r at x + 4r, quad 2v+1 at x + 16 + 4r
          const xl = v128.load(x), xh = v128.load(x, 16); // i16 pair sums (see dot16)
          if (DOT_I32) { // low and high nibbles in separate accumulators: 8 dot-add chains
            a0 = dot16(a0, i32x4.shuffle(xl, xl, 0, 0, 0, 0), l); b0 = dot16(b0, i32x4.shuffle(xh, xh, 0, 0, 0, 0), h);
            a1 = dot16(a1, i32x4.shuffle(xl, xl, 1, 1, 1, 1), l); b1 = dot16(b1, i32x4.shuffle(xh, xh, 1, 1, 1, 1), h);
            a2 = dot16(a2, i32x4.shuffle(xl, xl, 2, 2, 2, 2), l); b2 = dot16(b2, i32x4.shuffle(xh, xh, 2, 2, 2, 2), h);
            a3 = dot16(a3, i32x4.shuffle(xl, xl, 3, 3, 3, 3), l); b3 = dot16(b3, i32x4.shuffle(xh, xh, 3, 3, 3, 3), h);
          } else {
            a0 = dot16(dot16(a0, i32x4.shuffle(xl, xl, 0, 0, 0, 0), l), i32x4.shuffle(xh, xh, 0, 0, 0, 0), h);
            a1 = dot16(dot16(a1, i32x4.shuffle(xl, xl, 1, 1, 1, 1), l), i32x4.shuffle(xh, xh, 1, 1, 1, 1), h);
            a2 = dot16(dot16(a2, i32x4.shuffle(xl, xl, 2, 2, 2, 2), l), i32x4.shuffle(xh, xh, 2, 2, 2, 2), h);
            a3 = dot16(dot16(a3, i32x4.shuffle(xl, xl, 3, 3, 3, 3), l), i32x4.shuffle(xh, xh, 3, 3, 3, 3), h);
          }
        } else { // quad 2v of row r at x + 8r, quad 2v+1 at x + 32 + 8r
          const ll = i16x8.extend_low_i8x16_u(l), lh = i16x8.extend_high_i8x16_u(l);
          const hl = i16x8.extend_low_i8x16_u(h), hh = i16x8.extend_high_i8x16_u(h);
          let y = v128.load64_splat(x), z = v128.load64_splat(x, 32);
          a0 = pdot(pdot(a0, ll, y), hl, z); b0 = pdot(pdot(b0, lh, y), hh, z);
          y = v128.load64_splat(x, 8); z = v128.load64_splat(x, 40);
          a1 = pdot(pdot(a1, ll, y), hl, z); b1 = pdot(pdot(b1, lh, y), hh, z);
          y = v128.load64_splat(x, 16); z = v128.load64_splat(x, 48);
          a2 = pdot(pdot(a2, ll, y), hl, z); b2 = pdot(pdot(b2, lh, y), hh, z);
          y = v128.load64_splat(x, 24); z = v128.load64_splat(x, 56);
          a3 = pdot(pdot(a3, ll, y), hl, z); b3 = pdot(pdot(b3, lh, y), hh, z);
        }
        wq += 16;
        x += 32 * XB;
      }
      if (ASC_FEATURE_RELAXED_SIMD && DOT_I32) {
        a0 = i32x4.add(a0, b0); a1 = i32x4.add(a1, b1); a2 = i32x4.add(a2, b2); a3 = i32x4.add(a3, b3);
      } else if (ASC_FEATURE_RELAXED_SIMD) {
        a0 = i32x4.extadd_pairwise_i16x8_s(a0); a1 = i32x4.extadd_pairwise_i16x8_s(a1);
        a2 = i32x4.extadd_pairwise_i16x8_s(a2); a3 = i32x4.extadd_pairwise_i16x8_s(a3);
      } else {
        a0 = fold(a0, b0); a1 = fold(a1, b1); a2 = fold(a2, b2); a3 = fold(a3, b3);
      }
      const sc = f32x4.mul(dd, bytes4(v128.load32_zero(cp, 32)));
      const mn = f32x4.mul(dm, bytes4(v128.load32_zero(cp, 64)));
      f0 = step(f0, a0, sc, mn, v128.load32_splat(dj), v128.load32_splat(sj));
      f1 = step(f1, a1, sc, mn, v128.load32_splat(dj + ds), v128.load32_splat(sj + ds));
      f2 = step(f2, a2, sc, mn, v128.load32_splat(dj + 2 * ds), v128.load32_splat(sj + 2 * ds));
      f3 = step(f3, a3, sc, mn, v128.load32_splat(dj + 3 * ds), v128.load32_splat(sj + 3 * ds));
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** Relaxed builds: rows mi..mi+3 × the columns c0..c0+3 of group wg and c1..c1+3 of the
 * group at wg + gb. Each lane broadcast of the activations feeds both groups; a row's low-
 * and high-nibble dot-adds share one accumulator per group (vnni: i32 lanes, the same exact
 * integer as groupRows4's two, 8 dot-add chains either way; fma: i16 pair sums, 16 products
 * of ≤ 15·128 per lane over the sub-block as in dot16, widened once). The broadcasts are
 * load32_splat (a load-port uop each) rather than lane shuffles of one load: 8% less time
 * at M = 8 on the Intel Xeon (Node 24), where the shuffles shared ports with the dot-adds;
 * q8u4.ts's shuffles measured the other way. The fma build (Node 20, no VNNI lowering),
 * one thread, L3-resident 3584×1024: 32–33 → 37–40 GMAC/s at M = 4 and 8 against groupRows4. */
// @ts-ignore: decorator
@inline function groupRows4Pair(out: usize, x4: usize, d: usize, sf: usize, wg: usize, gb: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, m15: v128): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = sf + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  let g0 = f32x4.splat(0), g1 = f32x4.splat(0), g2 = f32x4.splat(0), g3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let cp = b, wq = b + 96;
    for (let j = 0; j < 8; j++) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
      let e0 = i32x4.splat(0), e1 = i32x4.splat(0), e2 = i32x4.splat(0), e3 = i32x4.splat(0);
      // low nibbles (quads 2v), then high ones (quads 2v + 1), in separate loops: one loop
      // holding both spilled 5 of the 8 accumulators (V8 11.3 and 13.6 interleave them)
      let wv = wq, xv = x;
      for (let v = 0; v < 4; v++) { // broadcast loads: load-port work, no lane shuffles
        const u = v128.and(v128.load(wv), m15), u2 = v128.and(v128.load(wv + gb), m15);
        let t = v128.load32_splat(xv);
        a0 = dot16(a0, t, u); e0 = dot16(e0, t, u2);
        t = v128.load32_splat(xv, 4);
        a1 = dot16(a1, t, u); e1 = dot16(e1, t, u2);
        t = v128.load32_splat(xv, 8);
        a2 = dot16(a2, t, u); e2 = dot16(e2, t, u2);
        t = v128.load32_splat(xv, 12);
        a3 = dot16(a3, t, u); e3 = dot16(e3, t, u2);
        wv += 16;
        xv += 32;
      }
      wv = wq;
      xv = x + 16;
      for (let v = 0; v < 4; v++) {
        const u = v128.and(i16x8.shr_u(v128.load(wv), 4), m15), u2 = v128.and(i16x8.shr_u(v128.load(wv + gb), 4), m15);
        let t = v128.load32_splat(xv);
        a0 = dot16(a0, t, u); e0 = dot16(e0, t, u2);
        t = v128.load32_splat(xv, 4);
        a1 = dot16(a1, t, u); e1 = dot16(e1, t, u2);
        t = v128.load32_splat(xv, 8);
        a2 = dot16(a2, t, u); e2 = dot16(e2, t, u2);
        t = v128.load32_splat(xv, 12);
        a3 = dot16(a3, t, u); e3 = dot16(e3, t, u2);
        wv += 16;
        xv += 32;
      }
      wq += 64;
      x += 128;
      const sc = f32x4.mul(v128.load(b), bytes4(v128.load32_zero(cp, 32)));
      const mn = f32x4.mul(v128.load(b, 16), bytes4(v128.load32_zero(cp, 64)));
      const sc2 = f32x4.mul(v128.load(b + gb), bytes4(v128.load32_zero(cp + gb, 32)));
      const mn2 = f32x4.mul(v128.load(b + gb, 16), bytes4(v128.load32_zero(cp + gb, 64)));
      let dx = v128.load32_splat(dj), sx = v128.load32_splat(sj);
      f0 = step(f0, widen16(a0), sc, mn, dx, sx); g0 = step(g0, widen16(e0), sc2, mn2, dx, sx);
      dx = v128.load32_splat(dj + ds); sx = v128.load32_splat(sj + ds);
      f1 = step(f1, widen16(a1), sc, mn, dx, sx); g1 = step(g1, widen16(e1), sc2, mn2, dx, sx);
      dx = v128.load32_splat(dj + 2 * ds); sx = v128.load32_splat(sj + 2 * ds);
      f2 = step(f2, widen16(a2), sc, mn, dx, sx); g2 = step(g2, widen16(e2), sc2, mn2, dx, sx);
      dx = v128.load32_splat(dj + 3 * ds); sx = v128.load32_splat(sj + 3 * ds);
      f3 = step(f3, widen16(a3), sc, mn, dx, sx); g3 = step(g3, widen16(e3), sc2, mn2, dx, sx);
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, 4, f0, f1, f2, f3);
  storeRows4(out, n, mi, c1, 4, g0, g1, g2, g3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q4kx4 layout at
 * w; q16/q8/d/s: quantizeActs of x, and (M ≥ 4) interleaveQ4kx4Acts at q8 + M·K. Rows whose
 * quants fit in ~256 KiB (L2) pass over all of the thread's groups together. */
export function qmatmulQ4kx4(out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const xr = ASC_FEATURE_RELAXED_SIMD ? q8 : q16;
  const x4 = q8 + <usize>m * <usize>k;
  const sf = sumsF32(s, m, k);
  const gb = <usize>(k >> 8) * SB;
  const rb = max(4, <i32>(<usize>262144 / (<usize>k * XB)) & ~3);
  // a mask built from a run-time value: V8 would rematerialise a constant inside the loops
  const m15 = i8x16.splat(<i8>((k >> 31) + 15)); // k ≥ 0
  // relaxed builds, blocks of 4 rows: group t with group t + half of the range's whole
  // groups (two long sequential weight streams, as q8u4.ts)
  const half = ASC_FEATURE_RELAXED_SIMD && m >= 4 ? ((n1 - n0) >> 2) >> 1 : 0;
  const off = <usize>half * gb;
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    let c = n0;
    if (half > 0 && r1 - r0 >= 4) {
      for (; c < n0 + 4 * half; c += 4) {
        const wg = w + <usize>(c >> 2) * gb;
        let mi = r0;
        for (; mi + 4 <= r1; mi += 4) groupRows4Pair(out, x4, d, sf, wg, off, n, k, mi, c, c + 4 * half, m15);
        for (; mi < r1; mi++) {
          groupRow1(out, xr, d, sf, wg, n, k, mi, c, 4, m15);
          groupRow1(out, xr, d, sf, wg + off, n, k, mi, c + 4 * half, 4, m15);
        }
      }
      c = n0 + 8 * half;
    }
    for (; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, d, sf, wg, n, k, mi, c, cnt, m15);
      for (; mi < r1; mi++) groupRow1(out, xr, d, sf, wg, n, k, mi, c, cnt, m15);
    }
  }
}
