// Q8_0 repacked for the integer matmul ('q8x4' layout, set by the wasm backend's
// packWeight): the same quants and scales as the GGML Q8_0 blocks, rearranged so that one
// 16-byte load feeds 4 output columns with no horizontal sums and no f16 decoding.
//
// Layout: groups of 4 weight rows (= output columns; the last group zero-padded), group g
// at g·nb·144 bytes (nb = K/32); sub-block j of a group at +j·144:
//   [0, 16)    f32 scale of columns 0..3 (the f16 d of their Q8_0 block, exactly)
//   [16, 144)  8 vectors; vector v holds elements 4v..4v+3 of the 4 columns as
//              [c0 e0, c0 e1, c1 e0, c1 e1, c2 e0, c2 e1, c3 e0, c3 e1,  (pair 2v)
//               c0 e2, c0 e3, c1 e2, c1 e3, c2 e2, c2 e3, c3 e2, c3 e3]  (pair 2v+1)
// so i16x8.extend_low/high give the i16 weights of k-pair 2v / 2v+1 for 4 columns, and
// dot_i16x8_s with a broadcast activation pair sums one pair per column lane.
//
// Arithmetic: exactly the twin's (src/kernels/ref/quant.ts): exact integer sub-block sums,
// then per column one f32 chain  acc += (scale_j · d_j) · sumi  (mul, mul, add; unfused).
import { f16At } from './qdecode';

const SB: usize = 144; // bytes of one (group, sub-block)
const QB: usize = 34; // bytes of one GGML Q8_0 block

// Blocks of 4 rows (here, q8x4wide.ts and q8u4.ts) load each of the SB bytes TOUCH_AHEAD
// bytes ahead of use (touchAhead).
export const TOUCH_AHEAD: usize = 2048;

/** Load a byte of each 48 of the SB bytes at p, results unused: the cache misses (and the
 * page walks) of weights the 4-row blocks reach ~110 ns later start now. Their compute per
 * byte is 4× a single row's, so without this the misses start only as the arithmetic
 * reaches them and memory time adds to compute time. On an Intel Xeon (AVX-512, 2 vCPUs),
 * a 4-token verify step of the qwen3.5-0.8b Q8_0 file: q8u4 (vnni build) 73 → 57 ms;
 * this layout (fma build, Node 20) 180 → 82 ms. A wasm load can trap, so V8 keeps it
 * though its value is dropped; callers clamp p to their weights (lim). */
// @ts-ignore: decorator
@inline export function touchAhead(p: usize): void {
  load<u8>(p);
  load<u8>(p, 48);
  load<u8>(p, 96);
}

/** Copy the GGML rows 4g..4g+3 (rb bytes each) of the weight at w to tmp, zero rows past
 * `rows` (the last group's padding): the source of one group of an in-place repack that
 * runs last group first (a group's destination may overlap its own source). */
// @ts-ignore: decorator
@inline export function groupSource(w: usize, g: i32, rows: i32, rb: usize, tmp: usize): void {
  const cnt = min(4, rows - 4 * g);
  memory.copy(tmp, w + <usize>g * 4 * rb, <usize>cnt * rb);
  if (cnt < 4) memory.fill(tmp + <usize>cnt * rb, 0, <usize>(4 - cnt) * rb);
}

/** Repack a GGML Q8_0 weight [rows, k] at w in place (the buffer must hold
 * ⌈rows/4⌉·(k/32)·144 bytes). tmp: 4·(k/32)·34 bytes of scratch. Groups run last to first:
 * group g's destination starts at or after the end of group g−1's source. */
export function repackQ8x4(w: usize, rows: i32, k: i32, tmp: usize): void {
  const nb = k >> 5;
  const rb = <usize>nb * QB;
  for (let g = ((rows + 3) >> 2) - 1; g >= 0; g--) {
    groupSource(w, g, rows, rb, tmp);
    const dst = w + <usize>g * <usize>nb * SB;
    for (let j = 0; j < nb; j++) {
      const o = dst + <usize>j * SB;
      for (let c = 0; c < 4; c++) {
        const src = tmp + <usize>c * rb + <usize>j * QB;
        store<f32>(o + (<usize>c << 2), f16At(src));
        for (let p = 0; p < 16; p++) { // element pair p (2p, 2p+1) moves as one u16
          const at = 16 + ((p >> 1) << 4) + ((p & 1) << 3) + (c << 1);
          store<u16>(o + <usize>at, load<u16>(src + 2 + (<usize>p << 1)));
        }
      }
    }
  }
}

/** acc + Σ over the two k-pairs of one weight vector (see the layout): wl / wh its low /
 * high half as i16 (v128.load8x8_s: one sign-extending load each), xl / xh the broadcast
 * activation pairs. */
// @ts-ignore: decorator
@inline function pairs(acc: v128, wl: v128, wh: v128, xl: v128, xh: v128): v128 {
  return i32x4.add(acc, i32x4.add(i32x4.dot_i16x8_s(xl, wl), i32x4.dot_i16x8_s(xh, wh)));
}

/** Store row mi's results of four whole groups of 4 columns, cq columns apart (the
 * single-row kernels' four streams): f0 at columns c0.., f1 at c0 + cq.., f2, f3. */
// @ts-ignore: decorator
@inline export function storeQuadRow(out: usize, n: i32, mi: i32, c0: i32, cq: i32, f0: v128, f1: v128, f2: v128, f3: v128): void {
  const o = out + <usize>mi * (<usize>n << 2);
  v128.store(o + (<usize>c0 << 2), f0);
  v128.store(o + (<usize>(c0 + cq) << 2), f1);
  v128.store(o + (<usize>(c0 + 2 * cq) << 2), f2);
  v128.store(o + (<usize>(c0 + 3 * cq) << 2), f3);
}

/** Store lanes [0, cnt) of v at p (f32). */
// @ts-ignore: decorator
@inline export function storeCols(p: usize, v: v128, cnt: i32): void {
  if (cnt >= 4) {
    v128.store(p, v);
    return;
  }
  store<f32>(p, f32x4.extract_lane(v, 0));
  if (cnt > 1) store<f32>(p, f32x4.extract_lane(v, 1), 4);
  if (cnt > 2) store<f32>(p, f32x4.extract_lane(v, 2), 8);
}

/** Store 4 output rows mi..mi+3 (lanes [0, cnt) each) of columns c0.. of out [M, N]. */
// @ts-ignore: decorator
@inline export function storeRows4(out: usize, n: i32, mi: i32, c0: i32, cnt: i32, f0: v128, f1: v128, f2: v128, f3: v128): void {
  const os = <usize>n << 2;
  const o = out + <usize>mi * os + (<usize>c0 << 2);
  storeCols(o, f0, cnt);
  storeCols(o + os, f1, cnt);
  storeCols(o + 2 * os, f2, cnt);
  storeCols(o + 3 * os, f3, cnt);
}

/** One chain step: acc + (sc · dx) · sumi for 4 columns. */
// @ts-ignore: decorator
@inline function chain(acc: v128, sumi: v128, sc: v128, dx: f32): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(sc, f32x4.splat(dx)), f32x4.convert_i32x4_s(sumi)));
}

// The loops below advance pointers and use constant load offsets (wasm offset immediates):
// an i32 address sum cannot fold into an x64 addressing mode, an immediate can.

/** Row mi (its i16 quants in q16 [M, K]) × the 4 columns of group wg. */
// @ts-ignore: decorator
@inline function groupRow1(out: usize, q16: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = q16 + <usize>mi * (<usize>k << 1); // pair p of sub-block j at x + 64j + 4p
  let dj = d + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a = i32x4.splat(0), c = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v += 2) { // two weight vectors (4 pairs) per pass
      a = pairs(a, v128.load8x8_s(wp, 16), v128.load8x8_s(wp, 24), v128.load32_splat(x), v128.load32_splat(x, 4));
      c = pairs(c, v128.load8x8_s(wp, 32), v128.load8x8_s(wp, 40), v128.load32_splat(x, 8), v128.load32_splat(x, 12));
      wp += 32;
      x += 16;
    }
    f = chain(f, i32x4.add(a, c), v128.load(b), load<f32>(dj));
    b += SB;
    dj += 4;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 × the 4 columns of group wg; x4: the quants of rows 4⌊·/4⌋.. interleaved
 * by interleaveActs4 (pair p of row r of the block at 16p + 4r). lim: the last sub-block of
 * the weights the caller reads (touchAhead stays at or below it). */
// @ts-ignore: decorator
@inline function groupRows4(out: usize, x4: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lim: usize): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * (<usize>k << 1);
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let wp = b;
    touchAhead(min(b + TOUCH_AHEAD, lim));
    for (let v = 0; v < 8; v++) { // one weight vector (2 pairs) × 4 rows per pass
      const wl = v128.load8x8_s(wp, 16), wh = v128.load8x8_s(wp, 24);
      a0 = pairs(a0, wl, wh, v128.load32_splat(x), v128.load32_splat(x, 16));
      a1 = pairs(a1, wl, wh, v128.load32_splat(x, 4), v128.load32_splat(x, 20));
      a2 = pairs(a2, wl, wh, v128.load32_splat(x, 8), v128.load32_splat(x, 24));
      a3 = pairs(a3, wl, wh, v128.load32_splat(x, 12), v128.load32_splat(x, 28));
      wp += 16;
      x += 32;
    }
    const sc = v128.load(b);
    f0 = chain(f0, a0, sc, load<f32>(dj));
    f1 = chain(f1, a1, sc, load<f32>(dj + ds));
    f2 = chain(f2, a2, sc, load<f32>(dj + 2 * ds));
    f3 = chain(f3, a3, sc, load<f32>(dj + 3 * ds));
    b += SB;
    dj += 4;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** Rows mi..mi+3 × the 8 columns of the groups at b0 (columns c0..c0+3) and b1 (columns
 * c1.., cnt1 of them valid): groupRows4 on both groups at once, so each activation broadcast
 * feeds 8 columns (44 vector ops per 128 multiply-adds where two groupRows4 take 52; V8's
 * code keeps all but one accumulator in registers). Same sums and chains as groupRows4. */
// @ts-ignore: decorator
@inline function pairRows4(out: usize, x4: usize, d: usize, b0: usize, b1: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, cnt1: i32, lim: usize): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * (<usize>k << 1);
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  let g0 = f32x4.splat(0), g1 = f32x4.splat(0), g2 = f32x4.splat(0), g3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let e0 = i32x4.splat(0), e1 = i32x4.splat(0), e2 = i32x4.splat(0), e3 = i32x4.splat(0);
    let w0 = b0, w1 = b1;
    touchAhead(min(b0 + TOUCH_AHEAD, lim));
    touchAhead(min(b1 + TOUCH_AHEAD, lim));
    for (let v = 0; v < 8; v++) { // one weight vector (2 pairs) of each group × 4 rows per pass
      const wl = v128.load8x8_s(w0, 16), wh = v128.load8x8_s(w0, 24);
      const ul = v128.load8x8_s(w1, 16), uh = v128.load8x8_s(w1, 24);
      let xl = v128.load32_splat(x), xh = v128.load32_splat(x, 16);
      a0 = pairs(a0, wl, wh, xl, xh);
      e0 = pairs(e0, ul, uh, xl, xh);
      xl = v128.load32_splat(x, 4);
      xh = v128.load32_splat(x, 20);
      a1 = pairs(a1, wl, wh, xl, xh);
      e1 = pairs(e1, ul, uh, xl, xh);
      xl = v128.load32_splat(x, 8);
      xh = v128.load32_splat(x, 24);
      a2 = pairs(a2, wl, wh, xl, xh);
      e2 = pairs(e2, ul, uh, xl, xh);
      xl = v128.load32_splat(x, 12);
      xh = v128.load32_splat(x, 28);
      a3 = pairs(a3, wl, wh, xl, xh);
      e3 = pairs(e3, ul, uh, xl, xh);
      w0 += 16;
      w1 += 16;
      x += 32;
    }
    const s0 = v128.load(b0), s1 = v128.load(b1);
    let dx = load<f32>(dj);
    f0 = chain(f0, a0, s0, dx);
    g0 = chain(g0, e0, s1, dx);
    dx = load<f32>(dj + ds);
    f1 = chain(f1, a1, s0, dx);
    g1 = chain(g1, e1, s1, dx);
    dx = load<f32>(dj + 2 * ds);
    f2 = chain(f2, a2, s0, dx);
    g2 = chain(g2, e2, s1, dx);
    dx = load<f32>(dj + 3 * ds);
    f3 = chain(f3, a3, s0, dx);
    g3 = chain(g3, e3, s1, dx);
    b0 += SB;
    b1 += SB;
    dj += 4;
  }
  storeRows4(out, n, mi, c0, 4, f0, f1, f2, f3);
  storeRows4(out, n, mi, c1, cnt1, g0, g1, g2, g3);
}

/** Interleave the i16 quants of whole blocks of 4 rows of q16 [M, K] into x4: pair p
 * (elements 2p, 2p+1) of row 4i+r at x4 + 8K·i + 16p + 4r (a 4×4 transpose of i32 lanes). */
export function interleaveActs4(q16: usize, m: i32, k: i32, x4: usize): void {
  const rs = <usize>k << 1;
  for (let i = 0; i + 4 <= m; i += 4) {
    const r0 = q16 + <usize>i * rs;
    const o = x4 + <usize>i * rs;
    for (let p: usize = 0; p < rs; p += 16) { // 4 pairs of the 4 rows
      const a = v128.load(r0 + p), b = v128.load(r0 + rs + p), c = v128.load(r0 + 2 * rs + p), e = v128.load(r0 + 3 * rs + p);
      const t0 = i32x4.shuffle(a, b, 0, 4, 1, 5), t1 = i32x4.shuffle(a, b, 2, 6, 3, 7);
      const t2 = i32x4.shuffle(c, e, 0, 4, 1, 5), t3 = i32x4.shuffle(c, e, 2, 6, 3, 7);
      const q = o + (p << 2);
      v128.store(q, i32x4.shuffle(t0, t2, 0, 1, 4, 5));
      v128.store(q, i32x4.shuffle(t0, t2, 2, 3, 6, 7), 16);
      v128.store(q, i32x4.shuffle(t1, t3, 0, 1, 4, 5), 32);
      v128.store(q, i32x4.shuffle(t1, t3, 2, 3, 6, 7), 48);
    }
  }
}

/** Rows whose i16 quants fit in ~256 KiB (L2) pass over all of a thread's groups together. */
// @ts-ignore: decorator
@inline function rowBlock(k: i32): i32 {
  return max(4, (<i32>(262144 / (k << 1))) & ~3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q8x4 layout at w;
 * q16/d: quantizeActs of x (its i16 quants and block scales); x4: interleaveActs4 of q16
 * (used when M ≥ 4). Group t of the range runs with group t + half (pairRows4: two long
 * sequential weight streams, as in q8x4wide.ts); an odd last group runs alone. */
export function qmatmulQ8x4(out: usize, q16: usize, x4: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const gb = <usize>(k >> 5) * SB;
  const rb = rowBlock(k);
  const lim = w + <usize>((n1 + 3) >> 2) * gb - SB; // touchAhead stays in the range's weights
  const groups = (n1 - n0 + 3) >> 2;
  const half = groups >> 1;
  const g0 = n0 >> 2;
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let t = 0; t < half; t++) {
      const ca = n0 + 4 * t, cb = ca + 4 * half;
      const ba = w + <usize>(g0 + t) * gb, bb = ba + <usize>half * gb;
      const cnt1 = min(4, n1 - cb);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) pairRows4(out, x4, d, ba, bb, n, k, mi, ca, cb, cnt1, lim);
      for (; mi < r1; mi++) {
        groupRow1(out, q16, d, ba, n, k, mi, ca, 4);
        groupRow1(out, q16, d, bb, n, k, mi, cb, cnt1);
      }
    }
    if (groups & 1) {
      const c = n0 + 4 * (groups - 1);
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, d, wg, n, k, mi, c, cnt, lim);
      for (; mi < r1; mi++) groupRow1(out, q16, d, wg, n, k, mi, c, cnt);
    }
  }
}
