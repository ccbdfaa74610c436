// Q8_0 in the 'q8u4' layout: the vnni build's Q8_0 matmul where V8 lowers the relaxed
// i8×i7 dot-add to AVX-VNNI `vpdpbusd` (unsigned × signed bytes, i32 sums, no saturation;
// module.ts dotAddIsVnni). The backend repacks Q8_0 into it only there (wasm backend
// `q8u4`); everywhere else Q8_0 runs q8x4.ts.
//
// Layout: q8x4.ts's (groups of 4 weight rows = output columns, group g at g·nb·144 bytes,
// sub-block j at +j·144, [0, 16) the f32 scales of columns 0..3), except the 8 quant
// vectors at [16, 144): vector v holds elements 4v..4v+3 of each column as a column quad
// [c0 e0..e3, c1 e0..e3, c2 e0..e3, c3 e0..e3], every byte w + 128 (w ^ 0x80: 0..255).
// So one dot-add of a weight vector (the unsigned operand) with a broadcast activation quad
// (the signed one, x ∈ −127..127) gives 4 column sums, and per column and 32-block
//   Σ w·x = Σ (w + 128)·x − 128·Σ x,
// Σ x being quantizeActs's integer block sum (its `s`): a per-row correction, nothing per
// column. Both sums are exact in i32 (|Σ (w+128)·x| ≤ 32·255·127), so sumi is q8x4.ts's
// exact integer and the f32 chain is its (acc += (scale_j·d_j)·sumi: mul, mul, add;
// unfused): the same bits as every other Q8_0 kernel, at any M.
//
// Activations: rows of int8 quants at q8 (stride K); for whole blocks of 4 rows also the
// rows interleaved by 4 (q4kx4.ts interleaveQ4kx4Acts, at q8 + M·K): quad q of row 4i+r at
// x4 + 4K·i + 16q + 4r.
//
// Single rows run four groups at once, a quarter of the column range apart; blocks of 4 rows
// run two, group t with group t + half of the range: one activation broadcast feeds them
// all, and the weights stream as four (two) long sequential runs; the groups left over run
// alone. Four streams against two: Q8_0 matmuls 30.5-31.6 -> 29.8-30.8 ms per decode step
// (Intel Xeon, Node 24).
import { repackQ8x4, storeCols, storeQuadRow, storeRows4, touchAhead, TOUCH_AHEAD } from './q8x4';

const SB: usize = 144; // bytes of one (group, sub-block)
/** Repack a GGML Q8_0 weight [rows, k] at w in place into q8u4 (q8x4's size; tmp as
 * repackQ8x4's): q8x4, then every quant vector from k pairs to column quads, + 128. */
export function repackQ8u4(w: usize, rows: i32, k: i32, tmp: usize): void {
  repackQ8x4(w, rows, k, tmp);
  const perm = i8x16(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15);
  const m80 = i8x16.splat(<i8>0x80);
  const blocks = <usize>((rows + 3) >> 2) * <usize>(k >> 5);
  for (let b: usize = 0; b < blocks; b++) {
    const p = w + b * SB + 16;
    for (let v: usize = 0; v < 128; v += 16) v128.store(p + v, v128.xor(i8x16.swizzle(v128.load(p + v), perm), m80));
  }
}

/** One chain step: acc + (sc · dx) · sumi for 4 columns (q8x4.ts's). */
// @ts-ignore: decorator
@inline function chain(acc: v128, sumi: v128, sc: v128, dx: f32): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(sc, f32x4.splat(dx)), f32x4.convert_i32x4_s(sumi)));
}

/** Σ (w + 128)·x of one weight vector (4 columns × 4 k) with a broadcast quad, into acc. */
// @ts-ignore: decorator
@inline function dotq(acc: v128, w: v128, xq: v128): v128 {
  return i32x4.relaxed_dot_i8x16_i7x16_add_s(xq, w, acc);
}

/** Row mi × the 16 columns of the groups at wg + i·gb (i = 0..3; columns c0 + i·cq): four
 * sequential weight streams per thread, each activation broadcast feeding 16 columns. */
// @ts-ignore: decorator
@inline function groupRow1Quad(out: usize, q8: usize, d: usize, s: usize, wg: usize, gb: usize, n: i32, k: i32, mi: i32, c0: i32, cq: i32): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v++) {
      const xv = v128.load32_splat(x);
      a0 = dotq(a0, v128.load(wp, 16), xv);
      a1 = dotq(a1, v128.load(wp + gb, 16), xv);
      a2 = dotq(a2, v128.load(wp + 2 * gb, 16), xv);
      a3 = dotq(a3, v128.load(wp + 3 * gb, 16), xv);
      wp += 16;
      x += 4;
    }
    f0 = rowStep(f0, a0, sj, dj, v128.load(b));
    f1 = rowStep(f1, a1, sj, dj, v128.load(b + gb));
    f2 = rowStep(f2, a2, sj, dj, v128.load(b + 2 * gb));
    f3 = rowStep(f3, a3, sj, dj, v128.load(b + 3 * gb));
    b += SB;
    dj += 4;
    sj += 4;
  }
  storeQuadRow(out, n, mi, c0, cq, f0, f1, f2, f3);
}

/** acc + (sc · d_j) · (a − 128·Σx): one row's chain step for 4 columns, Σx and d_j of the
 * row's block j at sj / dj. */
// @ts-ignore: decorator
@inline function rowStep(acc: v128, a: v128, sj: usize, dj: usize, sc: v128): v128 {
  return chain(acc, i32x4.sub(a, i32x4.shl(v128.load32_splat(sj), 7)), sc, load<f32>(dj));
}

/** Row mi (int8 quants at q8, block sums at s) × the 4 columns of group wg. */
// @ts-ignore: decorator
@inline function groupRow1(out: usize, q8: usize, d: usize, s: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a = i32x4.splat(0), c = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v += 2) {
      a = dotq(a, v128.load(wp, 16), v128.load32_splat(x));
      c = dotq(c, v128.load(wp, 32), v128.load32_splat(x, 4));
      wp += 32;
      x += 8;
    }
    f = rowStep(f, i32x4.add(a, c), sj, dj, v128.load(b));
    b += SB;
    dj += 4;
    sj += 4;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 (interleaved quads at x4) × the 4 columns of group wg (a last unpaired or
 * partial group; pairs run groupRows4Pair). Per weight vector: one 16-byte load of the 4
 * rows' quads and 4 lane broadcasts (cheaper than 4 broadcast loads, measured). */
// @ts-ignore: decorator
@inline function groupRows4(out: usize, x4: usize, d: usize, s: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v++) {
      const w = v128.load(wp, 16);
      const xq = v128.load(x);
      a0 = dotq(a0, w, i32x4.shuffle(xq, xq, 0, 0, 0, 0));
      a1 = dotq(a1, w, i32x4.shuffle(xq, xq, 1, 1, 1, 1));
      a2 = dotq(a2, w, i32x4.shuffle(xq, xq, 2, 2, 2, 2));
      a3 = dotq(a3, w, i32x4.shuffle(xq, xq, 3, 3, 3, 3));
      wp += 16;
      x += 16;
    }
    const sc = v128.load(b);
    f0 = rowStep(f0, a0, sj, dj, sc);
    f1 = rowStep(f1, a1, sj + ds, dj + ds, sc);
    f2 = rowStep(f2, a2, sj + 2 * ds, dj + 2 * ds, sc);
    f3 = rowStep(f3, a3, sj + 3 * ds, dj + 3 * ds, sc);
    b += SB;
    dj += 4;
    sj += 4;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** Rows mi..mi+3 × the columns c0..c0+3 of group wg and c1..c1+3 of the group at wg + gb:
 * each lane broadcast of the activations feeds both groups (4 + 4 dot-add chains per
 * vector; 1.1–1.2× the single group's speed, measured). */
// @ts-ignore: decorator
@inline function groupRows4Pair(out: usize, x4: usize, d: usize, s: usize, wg: usize, gb: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, lim: usize): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  let g0 = f32x4.splat(0), g1 = f32x4.splat(0), g2 = f32x4.splat(0), g3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let e0 = i32x4.splat(0), e1 = i32x4.splat(0), e2 = i32x4.splat(0), e3 = i32x4.splat(0);
    let wp = b;
    touchAhead(min(b + TOUCH_AHEAD, lim));
    touchAhead(min(b + gb + TOUCH_AHEAD, lim));
    for (let v = 0; v < 8; v++) {
      const w = v128.load(wp, 16);
      const u = v128.load(wp + gb, 16);
      const xq = v128.load(x);
      const x0 = i32x4.shuffle(xq, xq, 0, 0, 0, 0);
      a0 = dotq(a0, w, x0);
      e0 = dotq(e0, u, x0);
      const x1 = i32x4.shuffle(xq, xq, 1, 1, 1, 1);
      a1 = dotq(a1, w, x1);
      e1 = dotq(e1, u, x1);
      const x2 = i32x4.shuffle(xq, xq, 2, 2, 2, 2);
      a2 = dotq(a2, w, x2);
      e2 = dotq(e2, u, x2);
      const x3 = i32x4.shuffle(xq, xq, 3, 3, 3, 3);
      a3 = dotq(a3, w, x3);
      e3 = dotq(e3, u, x3);
      wp += 16;
      x += 16;
    }
    const sc = v128.load(b), sd = v128.load(b + gb);
    f0 = rowStep(f0, a0, sj, dj, sc);
    f1 = rowStep(f1, a1, sj + ds, dj + ds, sc);
    f2 = rowStep(f2, a2, sj + 2 * ds, dj + 2 * ds, sc);
    f3 = rowStep(f3, a3, sj + 3 * ds, dj + 3 * ds, sc);
    g0 = rowStep(g0, e0, sj, dj, sd);
    g1 = rowStep(g1, e1, sj + ds, dj + ds, sd);
    g2 = rowStep(g2, e2, sj + 2 * ds, dj + 2 * ds, sd);
    g3 = rowStep(g3, e3, sj + 3 * ds, dj + 3 * ds, sd);
    b += SB;
    dj += 4;
    sj += 4;
  }
  storeRows4(out, n, mi, c0, 4, f0, f1, f2, f3);
  storeRows4(out, n, mi, c1, 4, g0, g1, g2, g3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q8u4 layout at
 * w; q8/d/s: quantizeActs of x (int8 quants, block scales, integer block sums), and for
 * M ≥ 4 interleaveQ4kx4Acts at q8 + M·K. vnni build on a `vpdpbusd` runtime only. */
export function qmatmulQ8u4(out: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const x4 = q8 + <usize>m * <usize>k;
  const gb = <usize>(k >> 5) * SB;
  const rb = max(4, <i32>(<usize>262144 / <usize>k) & ~3); // rows whose quants fit in ~256 KiB
  // blocks of 4 rows pair group t with group t + half of the range's whole groups: two long
  // sequential weight streams (pairing adjacent groups restarts both every 2·gb bytes and
  // ran 2× slower out of cache, as q8x4wide.ts found)
  const half = ((n1 - n0) >> 2) >> 1;
  const off = <usize>half * gb;
  const c1 = n0 + 8 * half; // first column after the pairs
  const lim = w + <usize>((n1 + 3) >> 2) * gb - SB; // touchAhead stays in the range's weights
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    let c = n0;
    if (r1 - r0 < 4) { // single rows (decode; M = 2, 3): four streams per thread
      const q = ((n1 - n0) >> 2) >> 2;
      for (; c < n0 + 4 * q; c += 4) {
        const wg = w + <usize>(c >> 2) * gb;
        for (let mi = r0; mi < r1; mi++) groupRow1Quad(out, q8, d, s, wg, <usize>q * gb, n, k, mi, c, 4 * q);
      }
      c = n0 + 16 * q;
    } else {
      for (; c < n0 + 4 * half; c += 4) {
        const wg = w + <usize>(c >> 2) * gb;
        let mi = r0;
        for (; mi + 4 <= r1; mi += 4) groupRows4Pair(out, x4, d, s, wg, off, n, k, mi, c, c + 4 * half, lim);
        for (; mi < r1; mi++) {
          groupRow1(out, q8, d, s, wg, n, k, mi, c, 4);
          groupRow1(out, q8, d, s, wg + off, n, k, mi, c + 4 * half, 4);
        }
      }
      c = c1;
    }
    for (; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, d, s, wg, n, k, mi, c, cnt);
      for (; mi < r1; mi++) groupRow1(out, q8, d, s, wg, n, k, mi, c, cnt);
    }
  }
}
