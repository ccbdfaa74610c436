// Q5_K repacked for the integer matmul ('q5kx4' layout, set by the wasm backend's
// packWeight): the same quants, scales and mins as the GGML Q5_K blocks, rearranged so that
// one 16-byte load feeds 4 output columns, with the 6-bit scales unpacked once at load (the
// q4kx4.ts layout plus 5th bits).
//
// Layout: groups of 4 weight rows (= output columns; the last group zero-padded), group g
// at g·ns·736 bytes (ns = K/256 super-blocks); super-block b of a group at +b·736:
//   [0, 16)    f32 d of columns 0..3 (the f16 d of their Q5_K block, exactly)
//   [16, 32)   f32 −dmin of columns 0..3
//   [32, 64)   u8 six-bit scale sc of sub-block j (0..7), column c at 32 + 4j + c
//   [64, 96)   u8 six-bit min m of sub-block j, column c at 64 + 4j + c
//   [96, 736)  sub-block j at 96 + 80j: 4 nibble vectors, then 16 bytes of 5th bits (nibx4.ts)
// 736 bytes per 1024 weights: 5.75 bits/weight (GGML Q5_K: 5.5).
//
// Arithmetic: exactly the twin's (src/kernels/ref/quant.ts): scale_j = d·sc and
// offset_j = −dmin·m (exact in f32: 11-bit × 6-bit), an exact integer Σ u·x per sub-block,
// then per column one f32 chain  acc += (scale_j·d_j)·sumi;  acc += (offset_j·d_j)·s_j
// (mul, mul, add; unfused).
import { f16At, k4, sumsF32 } from './qdecode';
import { step } from './q4kx4';
import { groupSource, storeCols, storeQuadRow, storeRows4 } from './q8x4';
import { XB, putQuant, quadHi, quadLo, rdot2, subDot1, subDot4, sum0, sum1, sum2, sum3 } from './nibx4';

const SB: usize = 736; // bytes of one (group, super-block)
const QB: usize = 176; // bytes of one GGML Q5_K block
const SUB: usize = 80; // bytes of one (group, sub-block) of quants

/** Repack a GGML Q5_K weight [rows, k] at w in place (the buffer must hold
 * ⌈rows/4⌉·(k/256)·736 bytes). tmp: 4·(k/256)·176 bytes of scratch. Groups run last to
 * first: group g's destination starts at or after the end of group g−1's source (736 vs
 * 4·176 = 704 bytes per super-block); its own source is in tmp. */
export function repackQ5kx4(w: usize, rows: i32, k: i32, tmp: usize): void {
  const ns = k >> 8;
  const rb = <usize>ns * QB;
  for (let g = ((rows + 3) >> 2) - 1; g >= 0; g--) {
    groupSource(w, g, rows, rb, tmp);
    const dst = w + <usize>g * <usize>ns * SB;
    memory.fill(dst, 0, <usize>ns * SB);
    for (let b = 0; b < ns; b++) {
      for (let c = 0; c < 4; c++) packColumn(dst + <usize>b * SB, tmp + <usize>c * rb + <usize>b * QB, c);
    }
  }
}

/** Column c's Q5_K block at src → its slots of the group's (zeroed) super-block at o. */
function packColumn(o: usize, src: usize, c: i32): void {
  const cc = <usize>c;
  store<f32>(o + (cc << 2), f16At(src));
  store<f32>(o + 16 + (cc << 2), -f16At(src + 2));
  for (let j = 0; j < 8; j++) {
    store<u8>(o + 32 + (<usize>j << 2) + cc, <u8>k4(src + 4, j, false));
    store<u8>(o + 64 + (<usize>j << 2) + cc, <u8>k4(src + 4, j, true));
    const qs = src + 48 + (<usize>(j >> 1) << 5); // GGML: sub-blocks 2i, 2i+1 share 32 bytes
    const sh = <u32>(j & 1) << 2;
    for (let e = 0; e < 32; e++) {
      const u = ((<u32>load<u8>(qs + <usize>e) >> sh) & 15) | (((<u32>load<u8>(src + 16 + <usize>e) >> <u32>j) & 1) << 4);
      putQuant(o + 96 + <usize>j * SUB, c, e, u, true);
    }
  }
}

/** Four u8 at the low bytes of v → f32x4 (exact). */
// @ts-ignore: decorator
@inline function bytes4(v: v128): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v)));
}


/** Row mi (its quants at xr: int8 or i16 rows) × the 4 columns of group wg. */
// @ts-ignore: decorator
@inline function groupRow1(out: usize, xr: usize, d: usize, sf: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = xr + <usize>mi * <usize>k * XB;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = sf + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let cp = b, wq = b + 96;
    for (let j = 0; j < 8; j++) {
      f = chain5(f, subDot1(true, wq, x), b, cp, v128.load32_splat(dj), v128.load32_splat(sj));
      wq += SUB;
      x += 32 * XB;
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 × the 4 columns of group wg; x4 the interleaved quants (nibx4.ts). */
// @ts-ignore: decorator
@inline function groupRows4(out: usize, x4: usize, d: usize, sf: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
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
      subDot4(true, wq, x);
      const sc = f32x4.mul(dd, bytes4(v128.load32_zero(cp, 32)));
      const mn = f32x4.mul(dm, bytes4(v128.load32_zero(cp, 64)));
      f0 = step(f0, sum0, sc, mn, v128.load32_splat(dj), v128.load32_splat(sj));
      f1 = step(f1, sum1, sc, mn, v128.load32_splat(dj + ds), v128.load32_splat(sj + ds));
      f2 = step(f2, sum2, sc, mn, v128.load32_splat(dj + 2 * ds), v128.load32_splat(sj + 2 * ds));
      f3 = step(f3, sum3, sc, mn, v128.load32_splat(dj + 3 * ds), v128.load32_splat(sj + 3 * ds));
      wq += SUB;
      x += 128 * XB;
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** acc + Σ u·x over nibble vector v (w, 5th bits hb) of one group for the row's broadcast
 * int8 quads xl (elements 8v..8v+3) and xh (8v+4..8v+7); relaxed builds. */
// @ts-ignore: decorator
@inline function vec5(acc: v128, w: v128, hb: v128, v: i32, xl: v128, xh: v128): v128 {
  return rdot2(acc, xl, quadLo(true, w, hb, v), xh, quadHi(true, w, hb, v));
}

/** One group's chain step for sub-block j: sb the group's super-block, cp = sb + 4j (its
 * scale and min bytes at cp + 32 and cp + 64). */
// @ts-ignore: decorator
@inline function chain5(acc: v128, sumi: v128, sb: usize, cp: usize, dx: v128, sx: v128): v128 {
  const sc = f32x4.mul(v128.load(sb), bytes4(v128.load32_zero(cp, 32)));
  const mn = f32x4.mul(v128.load(sb, 16), bytes4(v128.load32_zero(cp, 64)));
  return step(acc, sumi, sc, mn, dx, sx);
}

/** Single row (M = 1, relaxed builds) × the 16 columns of the groups at g0 + i·off (i =
 * 0..3; columns c0 + i·cq): four sequential weight streams per thread, each activation
 * broadcast feeding 16 columns, four independent dot-add chains (as q4kx4wide.ts does for
 * Q4_K). Per column the integers and the f32 chain are groupRow1's. */
// @ts-ignore: decorator
@inline function quadRow1(out: usize, q8: usize, d: usize, sf: usize, g0: usize, off: usize, n: i32, k: i32, c0: i32, cq: i32): void {
  let x = q8; // the row's 32 quants of sub-block j at x + 32j
  let dj = d;
  let sj = sf;
  let b = g0;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let wq = b + 96, cp = b;
    for (let j = 0; j < 8; j++) {
      const e0 = wq, e1 = wq + off, e2 = wq + 2 * off, e3 = wq + 3 * off;
      const b0 = v128.load(e0, 64), b1 = v128.load(e1, 64), b2 = v128.load(e2, 64), b3 = v128.load(e3, 64);
      let h0 = i32x4.splat(0), h1 = i32x4.splat(0), h2 = i32x4.splat(0), h3 = i32x4.splat(0);
      let xl = v128.load32_splat(x), xh = v128.load32_splat(x, 4);
      h0 = vec5(h0, v128.load(e0), b0, 0, xl, xh); h1 = vec5(h1, v128.load(e1), b1, 0, xl, xh);
      h2 = vec5(h2, v128.load(e2), b2, 0, xl, xh); h3 = vec5(h3, v128.load(e3), b3, 0, xl, xh);
      xl = v128.load32_splat(x, 8); xh = v128.load32_splat(x, 12);
      h0 = vec5(h0, v128.load(e0, 16), b0, 1, xl, xh); h1 = vec5(h1, v128.load(e1, 16), b1, 1, xl, xh);
      h2 = vec5(h2, v128.load(e2, 16), b2, 1, xl, xh); h3 = vec5(h3, v128.load(e3, 16), b3, 1, xl, xh);
      xl = v128.load32_splat(x, 16); xh = v128.load32_splat(x, 20);
      h0 = vec5(h0, v128.load(e0, 32), b0, 2, xl, xh); h1 = vec5(h1, v128.load(e1, 32), b1, 2, xl, xh);
      h2 = vec5(h2, v128.load(e2, 32), b2, 2, xl, xh); h3 = vec5(h3, v128.load(e3, 32), b3, 2, xl, xh);
      xl = v128.load32_splat(x, 24); xh = v128.load32_splat(x, 28);
      h0 = vec5(h0, v128.load(e0, 48), b0, 3, xl, xh); h1 = vec5(h1, v128.load(e1, 48), b1, 3, xl, xh);
      h2 = vec5(h2, v128.load(e2, 48), b2, 3, xl, xh); h3 = vec5(h3, v128.load(e3, 48), b3, 3, xl, xh);
      const dx = v128.load32_splat(dj), sx = v128.load32_splat(sj);
      f0 = chain5(f0, h0, b, cp, dx, sx);
      f1 = chain5(f1, h1, b + off, cp + off, dx, sx);
      f2 = chain5(f2, h2, b + 2 * off, cp + 2 * off, dx, sx);
      f3 = chain5(f3, h3, b + 3 * off, cp + 3 * off, dx, sx);
      wq += SUB;
      x += 32;
      cp += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeQuadRow(out, n, 0, c0, cq, f0, f1, f2, f3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q5kx4 layout at
 * w; q16/q8/d/s: quantizeActs of x, and (M ≥ 4) interleaveQ4kx4Acts at q8 + M·K. With
 * `quad` (the 'wide' family), a single row (relaxed builds) runs quadRow1 over the whole
 * groups in fours, a quarter of them apart; the rest, and every other case, the per-group
 * loops (the 'narrow' family: one weight stream per thread). Both give the same bits.
 * Intel Xeon, 2 threads, 248320×1024 streamed from memory: 22.2 → 28.6–29.2 GMAC/s (in L3
 * about even); Q5_K_M decode (qwen3.5-0.8b shape) 25.7–26.7 → 29.8–29.9 tok/s. */
export function qmatmulQ5kx4(out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, quad: bool): void {
  const xr = ASC_FEATURE_RELAXED_SIMD ? q8 : q16;
  const x4 = q8 + <usize>m * <usize>k;
  const sf = sumsF32(s, m, k);
  const gb = <usize>(k >> 8) * SB;
  const rb = max(4, <i32>(<usize>262144 / (<usize>k * XB)) & ~3); // rows whose quants fit in L2
  let cw = n0; // columns [n0, cw) done by quadRow1
  if (ASC_FEATURE_RELAXED_SIMD && quad && m == 1) {
    const q = ((n1 - n0) >> 2) >> 2; // whole groups in fours
    for (let t = 0; t < q; t++) quadRow1(out, q8, d, sf, w + <usize>((n0 >> 2) + t) * gb, <usize>q * gb, n, k, n0 + 4 * t, 4 * q);
    cw = n0 + 16 * q;
  }
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let c = cw; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, d, sf, wg, n, k, mi, c, cnt);
      for (; mi < r1; mi++) groupRow1(out, xr, d, sf, wg, n, k, mi, c, cnt);
    }
  }
}
