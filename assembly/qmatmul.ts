// Integer matmul for GGML-quantized weights: out[m, n] = Σ_k x[m, k] · W[n, k], W row-major
// [N, K] in raw GGML blocks (qdecode.ts). Twin: src/kernels/ref/quant.ts, which defines the
// arithmetic; this file computes exactly the same bits:
//  - x is quantized per 32-element block to int16-held int8 (quantizeActs): d = amax/127,
//    q = nearest-even(x · (1/d)), s = Σ q;
//  - per output (m, n) and sub-block j the integer sum Σ q_w·q_x is EXACT (any order or
//    grouping gives the same value), then one f32 chain over j:
//      acc += (scale_j·d_j)·sumi  [+ (offset_j·d_j)·s_j]   (mul, then add; never fused)
//    computed 4 output columns per f32x4 (lanes = columns), so every lane is that chain.
// Q8_0 / Q4_K / Q6_K weights packed by the wasm backend take assembly/q8x4.ts / q4kx4.ts /
// q6kx4.ts instead (same arithmetic).
// Two ways to form the exact sums, chosen by M (results identical, so batch-invariant):
//  - M = 1 (decode): per column, i16x8 weights · i16x8 x with dot_i16x8_s (lanes = partial
//    sums over k), 4 columns reduced to one i32x4 by shuffles; 4 rows stream concurrently.
//  - M > 1 (prefill / verify / batches): tiles of 4 columns × K are decoded once into
//    per-thread scratch as k-pair-interleaved i16 ([pair][column][2]); then rows pass over
//    them 4 at a time: each tile load feeds 4 rows · 4 columns · 2 k of dot_i16x8_s
//    with a broadcast x pair, no horizontal sums.
import { qmatmulQ8x4, storeCols, storeRows4 } from './q8x4';
import { qmatmulQ8x4Quad, qmatmulQ8x4Wide } from './q8x4wide';
import { qmatmulQ8u4 } from './q8u4';
import { qmatmulQ4kx4 } from './q4kx4';
import { qmatmulQ4kx4Wide } from './q4kx4wide';
import { qmatmulQ6kx4 } from './q6kx4';
import { qmatmulQ6kx4Wide } from './q6kx4wide';
import { qmatmulQ32x4 } from './q32x4';
import { qmatmulQ5kx4 } from './q5kx4';
import { Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, blockAt, hasMin, intOffset, qRowBytes, scales4, sumsF32, wq, wq8u } from './qdecode';

/** Quantize rows [0, m) of x [M, K] (K a multiple of 32): the same quants as i16 (q16
 * [M, K]) and i8 (q8 [M, K]), block scales d [M, K/32] f32 and sums s [M, K/32] i32,
 * followed by the same sums as f32 (sumsF32: s needs 2·M·K/32 slots). */
export function quantizeActs(x: usize, m: i32, k: i32, q16: usize, q8: usize, d: usize, s: usize): void {
  const nb = (m * k) >> 5;
  const sf = sumsF32(s, m, k);
  for (let b = 0; b < nb; b++) {
    const xb = x + (<usize>b << 7);
    let amax = f32x4.splat(0);
    for (let i = 0; i < 8; i++) amax = f32x4.max(amax, f32x4.abs(v128.load(xb + (<usize>i << 4))));
    const mx = max(max(f32x4.extract_lane(amax, 0), f32x4.extract_lane(amax, 1)), max(f32x4.extract_lane(amax, 2), f32x4.extract_lane(amax, 3)));
    const db: f32 = mx / 127;
    const id = f32x4.splat(db != 0 ? <f32>1 / db : 0);
    let sum = i32x4.splat(0);
    const qb = q16 + (<usize>b << 6);
    let prev = i16x8.splat(0);
    for (let i = 0; i < 8; i += 2) {
      const a = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xb + (<usize>i << 4)), id)));
      const c = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xb + (<usize>(i + 1) << 4)), id)));
      sum = i32x4.add(sum, i32x4.add(a, c));
      const h = i16x8.narrow_i32x4_s(a, c);
      v128.store(qb + (<usize>i << 3), h);
      if (i & 2) v128.store(q8 + (<usize>b << 5) + (<usize>(i >> 2) << 4), i8x16.narrow_i16x8_s(prev, h));
      prev = h;
    }
    store<f32>(d + (<usize>b << 2), db);
    const sb = i32x4.extract_lane(sum, 0) + i32x4.extract_lane(sum, 1) + i32x4.extract_lane(sum, 2) + i32x4.extract_lane(sum, 3);
    store<i32>(s + (<usize>b << 2), sb);
    store<f32>(sf + (<usize>b << 2), <f32>sb);
  }
}

/** [Σa, Σb, Σc, Σd] (integer: exact in any order). */
// @ts-ignore: decorator
@inline function reduce4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(i32x4.shuffle(a, b, 0, 1, 4, 5), i32x4.shuffle(a, b, 2, 3, 6, 7));
  const cd = i32x4.add(i32x4.shuffle(c, d, 0, 1, 4, 5), i32x4.shuffle(c, d, 2, 3, 6, 7));
  return i32x4.add(i32x4.shuffle(ab, cd, 0, 2, 4, 6), i32x4.shuffle(ab, cd, 1, 3, 5, 7));
}

/** One step of the canonical f32 chain for 4 columns (see the header). */
// @ts-ignore: decorator
@inline function chain(T: i32, acc: v128, sumi: v128, sc: v128, off: v128, dx: f32, sx: i32): v128 {
  const dv = f32x4.splat(dx);
  acc = f32x4.add(acc, f32x4.mul(f32x4.mul(sc, dv), f32x4.convert_i32x4_s(sumi)));
  if (hasMin(T)) acc = f32x4.add(acc, f32x4.mul(f32x4.mul(off, dv), f32x4.splat(<f32>sx)));
  return acc;
}

/** Σ over one sub-block of the column row at rb · x (32 i16 quants at xq) as 4 partial
 * lanes (dot_i16x8_s: i8 weights widened to i16; measured faster on x86 than i8 extmul). */
// @ts-ignore: decorator
@inline function colPartial(T: i32, rb: usize, j: i32, xq: usize): v128 {
  const blk = blockAt(T, rb, j);
  let p = i32x4.dot_i16x8_s(wq(T, blk, j, 0), v128.load(xq));
  p = i32x4.add(p, i32x4.dot_i16x8_s(wq(T, blk, j, 1), v128.load(xq, 16)));
  p = i32x4.add(p, i32x4.dot_i16x8_s(wq(T, blk, j, 2), v128.load(xq, 32)));
  return i32x4.add(p, i32x4.dot_i16x8_s(wq(T, blk, j, 3), v128.load(xq, 48)));
}

/** f32x4 of a per-column sub-block value (scale, or offset when min) for the columns at
 * rows r0..r3. */
// @ts-ignore: decorator
@inline function colScales(T: i32, r0: usize, r1: usize, r2: usize, r3: usize, j: i32, min: bool): v128 {
  return scales4(T, blockAt(T, r0, j), blockAt(T, r1, j), blockAt(T, r2, j), blockAt(T, r3, j), j, min);
}

/** Decode row: out[ca], out[cb], out[cc], out[cd] for one activation row (xq: its i16
 * quants, d/s its block scales and sums). The four columns are a quarter of the thread's
 * range apart, so the weights stream as four long sequential runs (the prefetchers lose
 * track of four short adjacent rows: measured 2× slower out of cache). A column < 0 is
 * absent (computed on column ca, not stored). */
// @ts-ignore: decorator
@inline function row1cols4(T: i32, out: usize, xq: usize, d: usize, s: usize, w: usize, k: i32, ca: i32, cb: i32, cc: i32, cd: i32): void {
  const rb = qRowBytes(T, k);
  const r0 = w + <usize>ca * rb;
  const r1 = cb >= 0 ? w + <usize>cb * rb : r0;
  const r2 = cc >= 0 ? w + <usize>cc * rb : r0;
  const r3 = cd >= 0 ? w + <usize>cd * rb : r0;
  const nb = k >> 5;
  let acc = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    const xj = xq + (<usize>j << 6);
    const sumi = reduce4(colPartial(T, r0, j, xj), colPartial(T, r1, j, xj), colPartial(T, r2, j, xj), colPartial(T, r3, j, xj));
    const sc = colScales(T, r0, r1, r2, r3, j, false);
    const off = hasMin(T) ? colScales(T, r0, r1, r2, r3, j, true) : sc;
    acc = chain(T, acc, sumi, sc, off, load<f32>(d + (<usize>j << 2)), hasMin(T) ? load<i32>(s + (<usize>j << 2)) : 0);
  }
  store<f32>(out + (<usize>ca << 2), f32x4.extract_lane(acc, 0));
  if (cb >= 0) store<f32>(out + (<usize>cb << 2), f32x4.extract_lane(acc, 1));
  if (cc >= 0) store<f32>(out + (<usize>cc << 2), f32x4.extract_lane(acc, 2));
  if (cd >= 0) store<f32>(out + (<usize>cd << 2), f32x4.extract_lane(acc, 3));
}

/** Bytes of the tile of 4 columns × k: per sub-block 16 pair vectors + scale + offset. */
// @ts-ignore: decorator
@inline function tileBytes(k: i32): usize {
  return <usize>(k >> 5) * (16 * 16 + 32);
}

/** Decode columns c0..c0+3 (repeating the last valid one beyond cnt) into a tile. */
// @ts-ignore: decorator
@inline function buildTile(T: i32, tile: usize, w: usize, k: i32, c0: i32, cnt: i32): void {
  const rb = qRowBytes(T, k);
  const r0 = w + <usize>c0 * rb;
  const r1 = cnt > 1 ? r0 + rb : r0;
  const r2 = cnt > 2 ? r0 + 2 * rb : r1;
  const r3 = cnt > 3 ? r0 + 3 * rb : r2;
  const nb = k >> 5;
  for (let j = 0; j < nb; j++) {
    const t = tile + <usize>j * (16 * 16 + 32);
    const b0 = blockAt(T, r0, j), b1 = blockAt(T, r1, j), b2 = blockAt(T, r2, j), b3 = blockAt(T, r3, j);
    for (let v = 0; v < 4; v++) {
      // 4×4 transpose of i32 lanes (k-pairs): out vector p = pair 4v+p of columns 0..3
      const a = wq(T, b0, j, v), b = wq(T, b1, j, v), c = wq(T, b2, j, v), e = wq(T, b3, j, v);
      const t0 = i32x4.shuffle(a, b, 0, 4, 1, 5), t1 = i32x4.shuffle(a, b, 2, 6, 3, 7);
      const t2 = i32x4.shuffle(c, e, 0, 4, 1, 5), t3 = i32x4.shuffle(c, e, 2, 6, 3, 7);
      const tv = t + (<usize>v << 6);
      v128.store(tv, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
      v128.store(tv, i32x4.shuffle(t0, t2, 2, 3, 6, 7), 16);
      v128.store(tv, i32x4.shuffle(t1, t3, 0, 1, 4, 5), 32);
      v128.store(tv, i32x4.shuffle(t1, t3, 2, 3, 6, 7), 48);
    }
    v128.store(t + 256, colScales(T, r0, r1, r2, r3, j, false));
    if (hasMin(T)) v128.store(t + 272, colScales(T, r0, r1, r2, r3, j, true));
  }
}

/** Rows mi..mi+3 × the tile's 4 columns. */
// @ts-ignore: decorator
@inline function tileRows4(T: i32, out: usize, tile: usize, q16: usize, d: usize, s: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  const xs = <usize>k << 1;
  const x0 = q16 + <usize>mi * xs, x1 = x0 + xs, x2 = x1 + xs, x3 = x2 + xs;
  const bs0 = <usize>(mi * nb) << 2;
  const bs = <usize>nb << 2;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    const t = tile + <usize>j * (16 * 16 + 32);
    const xo = <usize>j << 6;
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    for (let p = 0; p < 16; p++) {
      const wv = v128.load(t + (<usize>p << 4));
      const po = xo + (<usize>p << 2);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.load32_splat(x0 + po), wv));
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(v128.load32_splat(x1 + po), wv));
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(v128.load32_splat(x2 + po), wv));
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(v128.load32_splat(x3 + po), wv));
    }
    const sc = v128.load(t + 256);
    const off = hasMin(T) ? v128.load(t + 272) : sc;
    const jb = bs0 + (<usize>j << 2);
    f0 = chain(T, f0, a0, sc, off, load<f32>(d + jb), hasMin(T) ? load<i32>(s + jb) : 0);
    f1 = chain(T, f1, a1, sc, off, load<f32>(d + jb + bs), hasMin(T) ? load<i32>(s + jb + bs) : 0);
    f2 = chain(T, f2, a2, sc, off, load<f32>(d + jb + 2 * bs), hasMin(T) ? load<i32>(s + jb + 2 * bs) : 0);
    f3 = chain(T, f3, a3, sc, off, load<f32>(d + jb + 3 * bs), hasMin(T) ? load<i32>(s + jb + 3 * bs) : 0);
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** Row mi × the tile's 4 columns. */
// @ts-ignore: decorator
@inline function tileRow1(T: i32, out: usize, tile: usize, q16: usize, d: usize, s: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  const x0 = q16 + <usize>mi * (<usize>k << 1);
  const bs0 = <usize>(mi * nb) << 2;
  let f0 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    const t = tile + <usize>j * (16 * 16 + 32);
    const xo = <usize>j << 6;
    let a0 = i32x4.splat(0);
    for (let p = 0; p < 16; p++) {
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.load32_splat(x0 + xo + (<usize>p << 2)), v128.load(t + (<usize>p << 4))));
    }
    const sc = v128.load(t + 256);
    const jb = bs0 + (<usize>j << 2);
    f0 = chain(T, f0, a0, sc, hasMin(T) ? v128.load(t + 272) : sc, load<f32>(d + jb), hasMin(T) ? load<i32>(s + jb) : 0);
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f0, cnt);
}

// ---- relaxed-SIMD tiles (kernels-fma.wasm) for the 4/5-bit formats --------------------
// The weights' unsigned quants u (0..31) are the i7 operand of
// i32x4.relaxed_dot_i8x16_i7x16_add_s and the int8 activations the signed one: 16
// multiply-adds per instruction, exact (pair sums ≤ 2·127·31, no saturation), and
// Σ q·x = Σ u·x − intOffset·Σ x: the same integer as the i16 tiles, so the same bits.
// Tile per sub-block: 8 quad vectors [column][4 k] (128 bytes) + scale + offset.

/** Whether format T uses the relaxed-SIMD tiles in this build. */
// @ts-ignore: decorator
@inline function relaxedTiles(T: i32): bool {
  return ASC_FEATURE_RELAXED_SIMD && T != Q8_0 && T != Q6_K;
}

// @ts-ignore: decorator
@inline function tile8Bytes(k: i32): usize {
  return <usize>(k >> 5) * (128 + 32);
}

/** Decode columns (rows r0..r3 of W) into an i8 quad tile. */
// @ts-ignore: decorator
@inline function buildTile8(T: i32, tile: usize, w: usize, k: i32, c0: i32, cnt: i32): void {
  const rb = qRowBytes(T, k);
  const r0 = w + <usize>c0 * rb;
  const r1 = cnt > 1 ? r0 + rb : r0;
  const r2 = cnt > 2 ? r0 + 2 * rb : r1;
  const r3 = cnt > 3 ? r0 + 3 * rb : r2;
  const nb = k >> 5;
  for (let j = 0; j < nb; j++) {
    const t = tile + <usize>j * (128 + 32);
    const b0 = blockAt(T, r0, j), b1 = blockAt(T, r1, j), b2 = blockAt(T, r2, j), b3 = blockAt(T, r3, j);
    for (let h = 0; h < 2; h++) {
      const a = wq8u(T, b0, j, h), b = wq8u(T, b1, j, h), c = wq8u(T, b2, j, h), e = wq8u(T, b3, j, h);
      const t0 = i32x4.shuffle(a, b, 0, 4, 1, 5), t1 = i32x4.shuffle(a, b, 2, 6, 3, 7);
      const t2 = i32x4.shuffle(c, e, 0, 4, 1, 5), t3 = i32x4.shuffle(c, e, 2, 6, 3, 7);
      const tv = t + (<usize>h << 6);
      v128.store(tv, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
      v128.store(tv, i32x4.shuffle(t0, t2, 2, 3, 6, 7), 16);
      v128.store(tv, i32x4.shuffle(t1, t3, 0, 1, 4, 5), 32);
      v128.store(tv, i32x4.shuffle(t1, t3, 2, 3, 6, 7), 48);
    }
    v128.store(t + 128, scales4(T, b0, b1, b2, b3, j, false));
    if (hasMin(T)) v128.store(t + 144, scales4(T, b0, b1, b2, b3, j, true));
  }
}

/** Σ u·x over one sub-block for one row (x: its 32 i8 quants) against a quad tile. */
// @ts-ignore: decorator
@inline function quadDot(t: usize, x: usize): v128 {
  let a = i32x4.splat(0);
  if (ASC_FEATURE_RELAXED_SIMD) { // (compiled only into the relaxed build; never reached in the plain one)
    for (let q = 0; q < 8; q++) a = i32x4.relaxed_dot_i8x16_i7x16_add_s(v128.load32_splat(x + (<usize>q << 2)), v128.load(t + (<usize>q << 4)), a);
  } else unreachable();
  return a;
}

/** One row's chain step over sub-block tile t (x: the row's 32 i8 quants of it). */
// @ts-ignore: decorator
@inline function quadStep(T: i32, f: v128, t: usize, x: usize, sc: v128, mn: v128, dx: f32, sx: i32): v128 {
  let a = quadDot(t, x);
  if (intOffset(T) != 0) a = i32x4.sub(a, i32x4.splat(intOffset(T) * sx));
  return chain(T, f, a, sc, mn, dx, sx);
}

/** Rows mi..mi+r-1 (r = 1 or 4) × the quad tile's 4 columns. */
// @ts-ignore: decorator
@inline function tile8Rows(T: i32, r: i32, out: usize, tile: usize, q8: usize, d: usize, s: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  const xs = <usize>k;
  const x0 = q8 + <usize>mi * xs;
  const bs0 = <usize>(mi * nb) << 2;
  const bs = <usize>nb << 2;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    const t = tile + <usize>j * (128 + 32);
    const xo = x0 + (<usize>j << 5);
    const sc = v128.load(t + 128);
    const mn = hasMin(T) ? v128.load(t + 144) : sc;
    const jb = bs0 + (<usize>j << 2);
    f0 = quadStep(T, f0, t, xo, sc, mn, load<f32>(d + jb), load<i32>(s + jb));
    if (r > 1) {
      f1 = quadStep(T, f1, t, xo + xs, sc, mn, load<f32>(d + jb + bs), load<i32>(s + jb + bs));
      f2 = quadStep(T, f2, t, xo + 2 * xs, sc, mn, load<f32>(d + jb + 2 * bs), load<i32>(s + jb + 2 * bs));
      f3 = quadStep(T, f3, t, xo + 3 * xs, sc, mn, load<f32>(d + jb + 3 * bs), load<i32>(s + jb + 3 * bs));
    }
  }
  const os = <usize>n << 2;
  const o = out + <usize>mi * os + (<usize>c0 << 2);
  storeCols(o, f0, cnt);
  if (r > 1) {
    storeCols(o + os, f1, cnt);
    storeCols(o + 2 * os, f2, cnt);
    storeCols(o + 3 * os, f3, cnt);
  }
}

/** The M > 1 path on quad tiles (relaxed build, 4/5-bit formats). */
// @ts-ignore: decorator
@inline function qmmRelaxed(T: i32, out: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  const tb = tile8Bytes(k);
  let tiles = <i32>(<usize>98304 / tb);
  if (tiles < 1) tiles = 1;
  for (let c = n0; c < n1; c += 4 * tiles) {
    const nt = min(tiles, (n1 - c + 3) >> 2);
    for (let t = 0; t < nt; t++) buildTile8(T, tmp + <usize>t * tb, w, k, c + 4 * t, min(4, n1 - c - 4 * t));
    let mi = 0;
    for (; mi + 4 <= m; mi += 4) {
      for (let t = 0; t < nt; t++) tile8Rows(T, 4, out, tmp + <usize>t * tb, q8, d, s, n, k, mi, c + 4 * t, min(4, n1 - c - 4 * t));
    }
    for (; mi < m; mi++) {
      for (let t = 0; t < nt; t++) tile8Rows(T, 1, out, tmp + <usize>t * tb, q8, d, s, n, k, mi, c + 4 * t, min(4, n1 - c - 4 * t));
    }
  }
}

/** Columns [n0, n1) (n0 a multiple of 4) of the matmul, for format T. tmp: per-thread
 * scratch of qmatmulTmpBytes(k) bytes. */
// @ts-ignore: decorator
@inline function qmm(T: i32, out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  if (m == 1) {
    const q = (n1 - n0 + 3) >> 2; // columns n0 + t + i·q, i = 0..3
    for (let t = 0; t < q; t++) {
      const c = n0 + t;
      row1cols4(T, out, q16, d, s, w, k, c, c + q < n1 ? c + q : -1, c + 2 * q < n1 ? c + 2 * q : -1, c + 3 * q < n1 ? c + 3 * q : -1);
    }
    return;
  }
  if (relaxedTiles(T)) {
    qmmRelaxed(T, out, q8, d, s, w, m, n, k, n0, n1, tmp);
    return;
  }
  // Tiles of TILES×4 columns stay in L2 while every row block passes over them.
  const tb = tileBytes(k);
  const tiles = qTiles(k);
  for (let c = n0; c < n1; c += 4 * tiles) {
    const nt = min(tiles, (n1 - c + 3) >> 2);
    for (let t = 0; t < nt; t++) buildTile(T, tmp + <usize>t * tb, w, k, c + 4 * t, min(4, n1 - c - 4 * t));
    let mi = 0;
    for (; mi + 4 <= m; mi += 4) {
      for (let t = 0; t < nt; t++) tileRows4(T, out, tmp + <usize>t * tb, q16, d, s, n, k, mi, c + 4 * t, min(4, n1 - c - 4 * t));
    }
    for (; mi < m; mi++) {
      for (let t = 0; t < nt; t++) tileRow1(T, out, tmp + <usize>t * tb, q16, d, s, n, k, mi, c + 4 * t, min(4, n1 - c - 4 * t));
    }
  }
}

/** Tiles per pass (~96 KiB of decoded weights). */
// @ts-ignore: decorator
@inline function qTiles(k: i32): i32 {
  const t = <i32>(<usize>98304 / tileBytes(k));
  return t < 1 ? 1 : t;
}

/** Per-thread scratch bytes the matmul of inner size k needs (either tile kind). */
export function qmatmulTmpBytes(k: i32): i32 {
  return max(98304, <i32>tileBytes(k));
}

/** Format ids of Q8_0 / Q4_K / Q6_K in the repacked q8x4 / q4kx4 / q6kx4 layouts
 * (assembly/q8x4.ts, q4kx4.ts, q6kx4.ts). */
const Q8X4: i32 = 8;
const Q4KX4: i32 = 9;
const Q6KX4: i32 = 10;
/** Format ids of the repacked Q4_0 / Q4_1 / Q5_0 / Q5_1 (q32x4.ts) and Q5_K (q5kx4.ts)
 * layouts: the GGML id + 10. */
const REPACKED: i32 = 10;
/** Q8_0 in the q8x4 layout through q8x4wide.ts's kernels (8 columns per pass); clear of the
 * repacked ids (REPACKED + 1..7). */
const Q8X4W: i32 = 20;
/** Q8_0 in the q8u4 layout (q8u4.ts: vnni build, where the dot-add is AVX-VNNI). */
const Q8U4: i32 = 24;
/** Q4_K in the q4kx4 layout through q4kx4wide.ts's single-row kernel (8 columns per pass). */
const Q4KX4W: i32 = 21;
/** Q6_K in the q6kx4 layout through q6kx4wide.ts's single-row kernel (8 columns per pass). */
const Q6KX4W: i32 = 22;
/** Q5_K in the q5kx4 layout with single rows in four weight streams (q5kx4.ts quadRow1). */
const Q5KX4W: i32 = 23;

/** q8x4wide.ts over the first 2·⌊G/2⌋ of the G groups of [n0, n1) (group t with group
 * t + ⌊G/2⌋), q8x4.ts over a last unpaired group. Single rows (M < 4) first run four
 * streams over the first 4·⌊W/4⌋ whole groups (W = ⌊(n1 − n0)/4⌋), the rest as above. */
function qmatmulQ8x4Pairs(out: usize, q16: usize, x4: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  if (m < 4) {
    const quarter = ((n1 - n0) >> 2) >> 2;
    if (quarter > 0) qmatmulQ8x4Quad(out, q16, d, w, m, n, k, n0, quarter);
    n0 += 16 * quarter;
    if (n0 >= n1) return;
  }
  const groups = (n1 - n0 + 3) >> 2;
  const half = groups >> 1;
  if (half > 0) qmatmulQ8x4Wide(out, q16, d, w, m, n, k, n0, n1, half);
  if (groups & 1) qmatmulQ8x4(out, q16, x4, d, w, m, n, k, n0 + 8 * half, n1);
}

/** out [M, N] = x · Wᵀ for columns [n0, n1), W in format `type` (qdecode.ts ids, Q8X4, Q8X4W, Q4KX4, Q4KX4W, Q6KX4, Q6KX4W, the repacked REPACKED + id, or Q5KX4W);
 * q16/q8/d/s from quantizeActs. */
export function qmatmul(type: i32, out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  switch (type) {
    case Q8_0: qmm(Q8_0, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q4_0: qmm(Q4_0, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q4_1: qmm(Q4_1, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q5_0: qmm(Q5_0, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q5_1: qmm(Q5_1, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q4_K: qmm(Q4_K, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q5_K: qmm(Q5_K, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q6_K: qmm(Q6_K, out, q16, q8, d, s, w, m, n, k, n0, n1, tmp); break;
    case Q8X4: qmatmulQ8x4(out, q16, q8, d, w, m, n, k, n0, n1); break; // q8: interleaved acts
    case Q4KX4: qmatmulQ4kx4(out, q16, q8, d, s, w, m, n, k, n0, n1); break;
    case Q8U4: if (DOT_I32) qmatmulQ8u4(out, q8, d, s, w, m, n, k, n0, n1); else unreachable(); break; // q8: + quads (M ≥ 4)
    case Q8X4W: qmatmulQ8x4Pairs(out, q16, q8, d, w, m, n, k, n0, n1); break;
    case Q4KX4W: qmatmulQ4kx4Wide(out, q16, q8, d, s, w, m, n, k, n0, n1); break;
    case Q6KX4: qmatmulQ6kx4(out, q16, q8, d, w, m, n, k, n0, n1); break; // q8: + acts, sums
    case Q6KX4W: qmatmulQ6kx4Wide(out, q16, q8, d, w, m, n, k, n0, n1); break;
    case REPACKED + Q4_0: case REPACKED + Q4_1: case REPACKED + Q5_0: case REPACKED + Q5_1:
      qmatmulQ32x4(type - REPACKED, out, q16, q8, d, s, w, m, n, k, n0, n1); break; // q8: + interleaved acts
    case REPACKED + Q5_K: qmatmulQ5kx4(out, q16, q8, d, s, w, m, n, k, n0, n1, false); break;
    case Q5KX4W: qmatmulQ5kx4(out, q16, q8, d, s, w, m, n, k, n0, n1, true); break;
    default: unreachable();
  }
}
