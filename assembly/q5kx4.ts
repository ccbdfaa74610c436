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
import { groupSource, storeCols, storeRows4 } from './q8x4';
import { XB, putQuant, subDot1, subDot4, sum0, sum1, sum2, sum3 } from './nibx4';

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
    const dd = v128.load(b), dm = v128.load(b, 16);
    let cp = b, wq = b + 96;
    for (let j = 0; j < 8; j++) {
      const sc = f32x4.mul(dd, bytes4(v128.load32_zero(cp, 32)));
      const mn = f32x4.mul(dm, bytes4(v128.load32_zero(cp, 64)));
      f = step(f, subDot1(true, wq, x), sc, mn, v128.load32_splat(dj), v128.load32_splat(sj));
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

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q5kx4 layout at
 * w; q16/q8/d/s: quantizeActs of x, and (M ≥ 4) interleaveQ4kx4Acts at q8 + M·K. */
export function qmatmulQ5kx4(out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const xr = ASC_FEATURE_RELAXED_SIMD ? q8 : q16;
  const x4 = q8 + <usize>m * <usize>k;
  const sf = sumsF32(s, m, k);
  const gb = <usize>(k >> 8) * SB;
  const rb = max(4, <i32>(<usize>262144 / (<usize>k * XB)) & ~3); // rows whose quants fit in L2
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let c = n0; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, d, sf, wg, n, k, mi, c, cnt);
      for (; mi < r1; mi++) groupRow1(out, xr, d, sf, wg, n, k, mi, c, cnt);
    }
  }
}
