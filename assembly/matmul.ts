// out[m, n] = Σ_k x[m, k] · W[n, k] for output columns n ∈ [n0, n1) (the thread's share).
// x: [M, K] f32, W: [N, K] bf16 (u16 bits) or f32, out: [M, N] f32.
//
// Canonical reduction order of EVERY output element (batch invariance): one f32x4
// accumulator `acc` over the full 8-blocks of k in increasing order,
//     acc = (acc + xe·we) + xo·wo
// where (xe, xo) / (we, wo) are two 4-lane halves of the block; then a scalar tail
// t = Σ_{k8 ≤ p < K} x[p]·w[p] in increasing p from t = 0; result = hsum(acc) + t.
// For bf16 weights the halves are the even and odd elements of the block (widened with one
// shift / one mask), so x must be "prepped" (prepBf16X) to the same even/odd layout.
// For f32 weights the halves are elements 0..3 and 4..7 and x is used as is.
// Every register-blocked variant below (4 rows × 2 cols, 1 row × 4 cols, 1 × 1) performs
// exactly this sequence per element, so a row's result never depends on M, on the
// blocking, or on the column range a thread owns.
import { hsum, HI16, bf16At } from './common';

/** dst[M, K] = src with each full 8-block of a row permuted to
 * [x0 x2 x4 x6 | x1 x3 x5 x7]; the K % 8 tail is copied unchanged. */
export function prepBf16X(dst: usize, src: usize, m: i32, k: i32): void {
  const k8 = k & ~7;
  for (let r = 0; r < m; r++) {
    const s = src + ((<usize>r * <usize>k) << 2);
    const d = dst + ((<usize>r * <usize>k) << 2);
    let i = 0;
    for (; i < k8; i += 8) {
      const o = <usize>i << 2;
      const a = v128.load(s + o);
      const b = v128.load(s + o, 16);
      v128.store(d + o, v128.shuffle<f32>(a, b, 0, 2, 4, 6));
      v128.store(d + o, v128.shuffle<f32>(a, b, 1, 3, 5, 7), 16);
    }
    for (; i < k; i++) store<f32>(d + (<usize>i << 2), load<f32>(s + (<usize>i << 2)));
  }
}

// @ts-ignore: decorator
@inline function wScalar<W>(row: usize, i: i32): f32 {
  if (sizeof<W>() == 2) return bf16At(row + (<usize>i << 1));
  return load<f32>(row + (<usize>i << 2));
}

// @ts-ignore: decorator
@inline function evenHalf<W>(p: usize): v128 {
  if (sizeof<W>() == 2) return i32x4.shl(v128.load(p), 16);
  return v128.load(p);
}

// @ts-ignore: decorator
@inline function oddHalf<W>(p: usize): v128 {
  if (sizeof<W>() == 2) return v128.and(v128.load(p), i32x4.splat(HI16));
  return v128.load(p, 16);
}

/** acc = (acc + xe·we) + xo·wo — the one accumulation step of the canonical order. */
// @ts-ignore: decorator
@inline function step(acc: v128, xe: v128, xo: v128, we: v128, wo: v128): v128 {
  return f32x4.add(f32x4.add(acc, f32x4.mul(xe, we)), f32x4.mul(xo, wo));
}

/** One output element (row mi, column j). */
function row1x1<W>(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, j: i32): void {
  const wr = w + <usize>j * <usize>k * sizeof<W>();
  const xr = x + ((<usize>mi * <usize>k) << 2);
  const k8 = k & ~7;
  let a = f32x4.splat(0);
  for (let i = 0; i < k8; i += 8) {
    const xp = xr + (<usize>i << 2);
    const wp = wr + <usize>i * sizeof<W>();
    a = step(a, v128.load(xp), v128.load(xp, 16), evenHalf<W>(wp), oddHalf<W>(wp));
  }
  let t: f32 = 0;
  for (let i = k8; i < k; i++) t += load<f32>(xr + (<usize>i << 2)) * wScalar<W>(wr, i);
  store<f32>(out + ((<usize>mi * <usize>n + <usize>j) << 2), hsum(a) + t);
}

/** Row mi, columns j, j+q, j+2q, j+3q: four weight rows streamed together (decode path).
 * The rows are q apart, not adjacent: interleaving adjacent rows defeats the hardware
 * prefetcher (measured ~14 vs ~25 GB/s per thread). */
function row1x4<W>(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, j: i32, q: i32): void {
  const rb = <usize>k * sizeof<W>();
  const qb = <usize>q * rb;
  const w0 = w + <usize>j * rb;
  const w1 = w0 + qb;
  const w2 = w1 + qb;
  const w3 = w2 + qb;
  const xr = x + ((<usize>mi * <usize>k) << 2);
  const k8 = k & ~7;
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  for (let i = 0; i < k8; i += 8) {
    const xp = xr + (<usize>i << 2);
    const xe = v128.load(xp);
    const xo = v128.load(xp, 16);
    const wo = <usize>i * sizeof<W>();
    a0 = step(a0, xe, xo, evenHalf<W>(w0 + wo), oddHalf<W>(w0 + wo));
    a1 = step(a1, xe, xo, evenHalf<W>(w1 + wo), oddHalf<W>(w1 + wo));
    a2 = step(a2, xe, xo, evenHalf<W>(w2 + wo), oddHalf<W>(w2 + wo));
    a3 = step(a3, xe, xo, evenHalf<W>(w3 + wo), oddHalf<W>(w3 + wo));
  }
  let t0: f32 = 0;
  let t1: f32 = 0;
  let t2: f32 = 0;
  let t3: f32 = 0;
  for (let i = k8; i < k; i++) {
    const xv = load<f32>(xr + (<usize>i << 2));
    t0 += xv * wScalar<W>(w0, i);
    t1 += xv * wScalar<W>(w1, i);
    t2 += xv * wScalar<W>(w2, i);
    t3 += xv * wScalar<W>(w3, i);
  }
  const o = out + ((<usize>mi * <usize>n + <usize>j) << 2);
  const qs = <usize>q << 2;
  store<f32>(o, hsum(a0) + t0);
  store<f32>(o + qs, hsum(a1) + t1);
  store<f32>(o + 2 * qs, hsum(a2) + t2);
  store<f32>(o + 3 * qs, hsum(a3) + t3);
}

/** Rows m0..m0+3, columns j and j+h: each weight block is widened once and used 4 times
 * (the two weight rows are h apart, see row1x4). */
function rows4x2<W>(out: usize, x: usize, w: usize, n: i32, k: i32, m0: i32, j: i32, h: i32): void {
  const rb = <usize>k * sizeof<W>();
  const wA = w + <usize>j * rb;
  const wB = wA + <usize>h * rb;
  const xs = <usize>k << 2;
  const x0 = x + <usize>m0 * xs;
  const x1 = x0 + xs;
  const x2 = x1 + xs;
  const x3 = x2 + xs;
  const k8 = k & ~7;
  let a0 = f32x4.splat(0);
  let a1 = f32x4.splat(0);
  let a2 = f32x4.splat(0);
  let a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0);
  let b1 = f32x4.splat(0);
  let b2 = f32x4.splat(0);
  let b3 = f32x4.splat(0);
  for (let i = 0; i < k8; i += 8) {
    const wo = <usize>i * sizeof<W>();
    const ae = evenHalf<W>(wA + wo);
    const ao = oddHalf<W>(wA + wo);
    const be = evenHalf<W>(wB + wo);
    const bo = oddHalf<W>(wB + wo);
    const xo = <usize>i << 2;
    let e = v128.load(x0 + xo);
    let d = v128.load(x0 + xo, 16);
    a0 = step(a0, e, d, ae, ao);
    b0 = step(b0, e, d, be, bo);
    e = v128.load(x1 + xo);
    d = v128.load(x1 + xo, 16);
    a1 = step(a1, e, d, ae, ao);
    b1 = step(b1, e, d, be, bo);
    e = v128.load(x2 + xo);
    d = v128.load(x2 + xo, 16);
    a2 = step(a2, e, d, ae, ao);
    b2 = step(b2, e, d, be, bo);
    e = v128.load(x3 + xo);
    d = v128.load(x3 + xo, 16);
    a3 = step(a3, e, d, ae, ao);
    b3 = step(b3, e, d, be, bo);
  }
  // Scalar tails, each element in increasing k from 0 (same as row1x1).
  let ta0: f32 = 0, ta1: f32 = 0, ta2: f32 = 0, ta3: f32 = 0;
  let tb0: f32 = 0, tb1: f32 = 0, tb2: f32 = 0, tb3: f32 = 0;
  for (let i = k8; i < k; i++) {
    const wa = wScalar<W>(wA, i);
    const wb = wScalar<W>(wB, i);
    const xo = <usize>i << 2;
    const v0 = load<f32>(x0 + xo);
    const v1 = load<f32>(x1 + xo);
    const v2 = load<f32>(x2 + xo);
    const v3 = load<f32>(x3 + xo);
    ta0 += v0 * wa; tb0 += v0 * wb;
    ta1 += v1 * wa; tb1 += v1 * wb;
    ta2 += v2 * wa; tb2 += v2 * wb;
    ta3 += v3 * wa; tb3 += v3 * wb;
  }
  const os = <usize>n << 2;
  const o0 = out + ((<usize>m0 * <usize>n + <usize>j) << 2);
  const o1 = o0 + (<usize>h << 2);
  store<f32>(o0, hsum(a0) + ta0);
  store<f32>(o1, hsum(b0) + tb0);
  store<f32>(o0 + os, hsum(a1) + ta1);
  store<f32>(o1 + os, hsum(b1) + tb1);
  store<f32>(o0 + 2 * os, hsum(a2) + ta2);
  store<f32>(o1 + 2 * os, hsum(b2) + tb2);
  store<f32>(o0 + 3 * os, hsum(a3) + ta3);
  store<f32>(o1 + 3 * os, hsum(b3) + tb3);
}

/** Rows [0, m) × columns [c0, c1) with one pass over those weight rows: 4 columns at a time
 * (a quarter of the range apart) for every row, then the leftover columns one by one. */
function fewRows<W>(out: usize, x: usize, w: usize, n: i32, k: i32, m0: i32, m: i32, c0: i32, c1: i32): void {
  const q = (c1 - c0) >> 2;
  for (let j = c0; j < c0 + q; j++) {
    for (let mi = m0; mi < m; mi++) row1x4<W>(out, x, w, n, k, mi, j, q);
  }
  for (let j = c0 + 4 * q; j < c1; j++) {
    for (let mi = m0; mi < m; mi++) row1x1<W>(out, x, w, n, k, mi, j);
  }
}

/** Columns [n0, n1) of out = x · Wᵀ. M < 4: one streaming pass over the weights (decode,
 * small batches). M ≥ 4: cache-tiled over columns so a tile of weight rows (~128 KiB) stays
 * in L2 while every 4-row block of x passes over it. */
function mm<W>(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  if (m < 4) {
    fewRows<W>(out, x, w, n, k, 0, m, n0, n1);
    return;
  }
  const rowBytes = k * <i32>sizeof<W>();
  let tile = (131072 / (rowBytes > 0 ? rowBytes : 1)) & ~3;
  if (tile < 4) tile = 4;
  const m4 = m & ~3;
  for (let t0 = n0; t0 < n1; t0 += tile) {
    const t1 = min(t0 + tile, n1);
    const h = (t1 - t0) >> 1;
    for (let mb = 0; mb < m4; mb += 4) {
      for (let j = t0; j < t0 + h; j++) rows4x2<W>(out, x, w, n, k, mb, j, h);
      for (let j = t0 + 2 * h; j < t1; j++) {
        for (let r = 0; r < 4; r++) row1x1<W>(out, x, w, n, k, mb + r, j);
      }
    }
    fewRows<W>(out, x, w, n, k, m4, m, t0, t1);
  }
}

/** x must be prepped with prepBf16X. w: [N, K] bf16 bits. */
export function matmulBf16(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  mm<u16>(out, x, w, m, n, k, n0, n1);
}

/** x as is. w: [N, K] f32. */
export function matmulF32(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  mm<f32>(out, x, w, m, n, k, n0, n1);
}

/** Streaming SIMD read of [p, p + bytes) (bytes a multiple of 256) as four concurrent
 * sequential streams, one per quarter (the access pattern of the decode matmul); returns a
 * value that depends on every byte so the loads cannot be removed. Bandwidth probe. */
export function streamRead(p: usize, bytes: usize): f32 {
  let a = f32x4.splat(0);
  let b = f32x4.splat(0);
  let c = f32x4.splat(0);
  let d = f32x4.splat(0);
  const q = bytes >> 2;
  const p1 = p + q;
  const p2 = p1 + q;
  const p3 = p2 + q;
  for (let o: usize = 0; o < q; o += 32) {
    a = f32x4.add(a, f32x4.add(v128.load(p + o), v128.load(p + o, 16)));
    b = f32x4.add(b, f32x4.add(v128.load(p1 + o), v128.load(p1 + o, 16)));
    c = f32x4.add(c, f32x4.add(v128.load(p2 + o), v128.load(p2 + o, 16)));
    d = f32x4.add(d, f32x4.add(v128.load(p3 + o), v128.load(p3 + o, 16)));
  }
  return hsum(f32x4.add(f32x4.add(a, b), f32x4.add(c, d)));
}
