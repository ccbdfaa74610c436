// Q8_0 in the q8x4 layout (q8x4.ts), "wide" kernels for single rows: four groups a quarter
// of the range apart per pass (quadRow1; the leftover groups and the leftover rows of
// M ≥ 4 two per pass, pairRow1), so each activation broadcast feeds 16 (8) columns instead
// of 4, each thread reads four long sequential weight streams, and V8's per-iteration loop
// cost (counter, stack check, pointer bumps) is shared.
// Read from V8's x64 code (node --print-wasm-code, see docs/ARCHITECTURE.md): q8x4.ts's
// single-row loop runs ~113 instructions per 144-byte sub-block of one group, this one ~93
// (28 SIMD + 9 scalar per 4 k-pairs of both groups, no spills). M ≥ 4 always takes
// q8x4.ts's entry point, whose blocks of 4 rows run 4 rows × 8 columns (pairRows4), so
// these kernels see single rows only.
// Same arithmetic as q8x4.ts, so the same bits: exact integer sums per (row, column,
// sub-block), then the unfused f32 chain acc += (scale_j · d_j) · sumi per column lane.
// Format id Q8X4W (qmatmul.ts); the backend picks it or q8x4.ts's kernels by a start-up
// calibration (kernels/wasm/calibrate.ts).
import { storeCols, storeQuadRow } from './q8x4';

const SB: usize = 144; // bytes of one (group, sub-block)

/** acc + the two k-pairs of one weight vector (wl / wh: its low / high half widened to
 * i16) times the broadcast activation pairs xl / xh. */
// @ts-ignore: decorator
@inline function pairs(acc: v128, wl: v128, wh: v128, xl: v128, xh: v128): v128 {
  return i32x4.add(acc, i32x4.add(i32x4.dot_i16x8_s(xl, wl), i32x4.dot_i16x8_s(xh, wh)));
}

/** One chain step: acc + (sc · dx) · sumi for 4 columns. */
// @ts-ignore: decorator
@inline function chain(acc: v128, sumi: v128, sc: v128, dx: v128): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(sc, dx), f32x4.convert_i32x4_s(sumi)));
}

/** Row mi (its i16 quants in q16 [M, K]) × the 8 columns of the groups at b0 (columns
 * c0..c0+3) and b1 (columns c1.., cnt1 of them valid). One weight vector of each group per loop
 * pass: V8 hoists every load of a fully unrolled sub-block ahead of its use and spills
 * (measured: 90 spill moves per sub-block), so the loop stays. */
// @ts-ignore: decorator
@inline function pairRow1(out: usize, q16: usize, d: usize, b0: usize, b1: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, cnt1: i32): void {
  const nb = k >> 5;
  let x = q16 + <usize>mi * (<usize>k << 1); // pair p of sub-block j at x + 64j + 4p
  let dj = d + <usize>(mi * nb) * 4;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0);
    let w0 = b0, w1 = b1;
    for (let v = 0; v < 8; v += 2) { // k-pairs 2v..2v+3 of both groups
      let xl = v128.load32_splat(x), xh = v128.load32_splat(x, 4);
      a0 = pairs(a0, v128.load8x8_s(w0, 16), v128.load8x8_s(w0, 24), xl, xh);
      a1 = pairs(a1, v128.load8x8_s(w1, 16), v128.load8x8_s(w1, 24), xl, xh);
      xl = v128.load32_splat(x, 8);
      xh = v128.load32_splat(x, 12);
      a0 = pairs(a0, v128.load8x8_s(w0, 32), v128.load8x8_s(w0, 40), xl, xh);
      a1 = pairs(a1, v128.load8x8_s(w1, 32), v128.load8x8_s(w1, 40), xl, xh);
      w0 += 32;
      w1 += 32;
      x += 16;
    }
    const dx = v128.load32_splat(dj);
    f0 = chain(f0, a0, v128.load(b0), dx);
    f1 = chain(f1, a1, v128.load(b1), dx);
    b0 += SB;
    b1 += SB;
    dj += 4;
  }
  const o = out + <usize>mi * (<usize>n << 2);
  v128.store(o + (<usize>c0 << 2), f0);
  storeCols(o + (<usize>c1 << 2), f1, cnt1);
}

/** Row mi × the 16 columns of the four whole groups at b + i·gb (i = 0..3; columns
 * c0 + i·cq): four sequential weight streams per thread, each activation broadcast feeding
 * 16 columns. Out of cache a thread's stream rate bounds a single row, not its arithmetic
 * (q4kx4wide.ts); one weight vector of each group per pass keeps the 4 integer and 4 f32
 * accumulators, 2 broadcasts and the loads in V8's 16 xmm registers. */
// @ts-ignore: decorator
@inline function quadRow1(out: usize, q16: usize, d: usize, b: usize, gb: usize, n: i32, k: i32, mi: i32, c0: i32, cq: i32): void {
  const nb = k >> 5;
  let x = q16 + <usize>mi * (<usize>k << 1); // pair p of sub-block j at x + 64j + 4p
  let dj = d + <usize>(mi * nb) * 4;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v++) { // k-pairs 2v, 2v + 1 of the four groups
      const xl = v128.load32_splat(x), xh = v128.load32_splat(x, 4);
      a0 = pairs(a0, v128.load8x8_s(wp, 16), v128.load8x8_s(wp, 24), xl, xh);
      a1 = pairs(a1, v128.load8x8_s(wp + gb, 16), v128.load8x8_s(wp + gb, 24), xl, xh);
      a2 = pairs(a2, v128.load8x8_s(wp + 2 * gb, 16), v128.load8x8_s(wp + 2 * gb, 24), xl, xh);
      a3 = pairs(a3, v128.load8x8_s(wp + 3 * gb, 16), v128.load8x8_s(wp + 3 * gb, 24), xl, xh);
      wp += 16;
      x += 8;
    }
    const dx = v128.load32_splat(dj);
    f0 = chain(f0, a0, v128.load(b), dx);
    f1 = chain(f1, a1, v128.load(b + gb), dx);
    f2 = chain(f2, a2, v128.load(b + 2 * gb), dx);
    f3 = chain(f3, a3, v128.load(b + 3 * gb), dx);
    b += SB;
    dj += 4;
  }
  storeQuadRow(out, n, mi, c0, cq, f0, f1, f2, f3);
}

/** Single rows (M < 4) over the first 4·quarter whole groups from column n0: group t runs
 * with groups t + quarter, t + 2·quarter and t + 3·quarter (four long sequential streams).
 * Arguments otherwise as qmatmulQ8x4Wide. */
export function qmatmulQ8x4Quad(out: usize, q16: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, quarter: i32): void {
  const gb = <usize>(k >> 5) * SB;
  const g0 = n0 >> 2;
  for (let t = 0; t < quarter; t++) {
    const b = w + <usize>(g0 + t) * gb;
    for (let mi = 0; mi < m; mi++) quadRow1(out, q16, d, b, <usize>quarter * gb, n, k, mi, n0 + 4 * t, 4 * quarter);
  }
}

/** Every row alone (pairRow1; quantFormatId sends M ≥ 4 to q8x4.ts's entry point, whose
 * blocks of 4 rows are faster) over groups [0, 2·half) of the columns
 * from n0 (n0 a multiple of 4, the last group possibly partial: columns < n1) of
 * out [M, N] = x · Wᵀ, W in the q8x4 layout at w: group t is paired with group t + half, so
 * the weights stream as two long sequential runs (pairing adjacent groups restarts both
 * streams every 9 KB: measured 1.9× slower out of cache). Arguments otherwise as q8x4.ts's
 * qmatmulQ8x4. */
export function qmatmulQ8x4Wide(out: usize, q16: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, half: i32): void {
  const gb = <usize>(k >> 5) * SB;
  const g0 = n0 >> 2;
  for (let t = 0; t < half; t++) {
    const ca = n0 + 4 * t, cb = ca + 4 * half;
    const ba = w + <usize>(g0 + t) * gb, bb = ba + <usize>half * gb;
    const cnt1 = min(4, n1 - cb);
    for (let mi = 0; mi < m; mi++) pairRow1(out, q16, d, ba, bb, n, k, mi, ca, cb, cnt1);
  }
}
