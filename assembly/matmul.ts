// out[m, n] = Σ_k x[m, k] · W[n, k] for output columns n ∈ [n0, n1) (the thread's share).
// x: [M, K] f32 row-major; out: [M, N] f32.
//
// W is PACKED into 8-column panels (packPanels): panel g holds columns 8g..8g+7 as
// [K, 8] — for every k one 8-element row, so a kernel streams one contiguous panel and
// each load feeds 8 output columns. Lane order inside a panel row:
//   bf16: [c0 c4 c1 c5 c2 c6 c3 c7] — one v128 of 8 bf16; `shl 16` widens c0..c3 (low
//         halves of the i32 lanes) and `and 0xFFFF0000` widens c4..c7 (high halves).
//   f16:  the same lane order as bf16. Widening is exact for finite values (subnormals
//         included): the f16 bits, sign at bit 31 and exponent·mantissa at bits 27..13 of an
//         f32 (`shr_s 3`, then a mask), times 2¹¹² — the exponent rebias done by the FPU.
//         Inf / NaN would widen to finite values: the loader refuses them. Single rows
//         (decode) and 4-row blocks move the 2¹¹² onto the activation instead (matmulf16.ts): the same
//         products, two fewer multiplies per panel row.
//   f32:  [c0 c1 c2 c3 | c4 c5 c6 c7] — two v128.
// The element type W is a marker: u16 = bf16, i16 = f16, f32 = f32.
// N is padded up to a multiple of 8 with zero columns (allocWeight reserves them).
//
// Canonical reduction order of EVERY output element (batch invariance): one f32 chain
//     acc = 0; for k = 0 .. K-1: acc = mac(acc, x[k], w[k])
// where mac is a fused multiply-add in the relaxed-SIMD build and mul-then-add otherwise
// (fixed per build). Every blocking below (4 rows × 8 columns, 1 row × 32 columns,
// 1 row × 8 columns) runs exactly this chain per lane, so a result never depends on M, on
// the blocking, or on the column range a thread owns.
import { hsum, HI16, mac } from './common';

/** Bytes of one panel row (8 weights). */
// @ts-ignore: decorator
@inline function rowBytes<W>(): usize {
  return sizeof<W>() << 3;
}

/** f16 bits in the high halves of the i32 lanes of h (low halves ignored) → f32x4 of value
 * w·2⁻¹¹² (exact: subnormal f32 for subnormal f16). fm: the mask 0x8FFFE000. */
// @ts-ignore: decorator
@inline function f16hiUnscaled(h: v128, fm: v128): v128 {
  return v128.and(i32x4.shr_s(h, 3), fm);
}

/** f16 bits in the high halves of the i32 lanes of h (low halves ignored) → f32x4. fm: the
 * mask 0x8FFFE000, fs: 2¹¹² (passed in as values V8 cannot constant-fold). */
// @ts-ignore: decorator
@inline function f16hi(h: v128, fm: v128, fs: v128): v128 {
  return f32x4.mul(f16hiUnscaled(h, fm), fs);
}

/** Columns c0..c3 of a 16-bit panel row (low halves of the lanes) as f32x4. */
// @ts-ignore: decorator
@inline function wideLo<W>(raw: v128, fm: v128, fs: v128): v128 {
  return isSigned<W>() ? f16hi(i32x4.shl(raw, 16), fm, fs) : i32x4.shl(raw, 16);
}

/** Columns c4..c7 of a 16-bit panel row (high halves) as f32x4; hm: the mask 0xFFFF0000. */
// @ts-ignore: decorator
@inline function wideHi<W>(raw: v128, hm: v128, fm: v128, fs: v128): v128 {
  return isSigned<W>() ? f16hi(raw, fm, fs) : v128.and(raw, hm);
}

// P, the single-row path's marker: f32 = weights widened as stored; f64 = f16 weights
// widened without the 2¹¹² (f16hiUnscaled), the activation row times 2¹¹² instead (matmulf16.ts).
// For |x| < 2¹⁶ (checked per row: prescalable) x·2¹¹² is exact, and (x·2¹¹²)·(w·2⁻¹¹²) is
// the real number x·w, so every product, fused or not, rounds to the same bits.

/** Columns c0..c3 of a 16-bit panel row on path P. */
// @ts-ignore: decorator
@inline function loOn<W, P>(raw: v128, fm: v128, fs: v128): v128 {
  return sizeof<P>() == 8 ? f16hiUnscaled(i32x4.shl(raw, 16), fm) : wideLo<W>(raw, fm, fs);
}

/** Columns c4..c7 of a 16-bit panel row on path P. */
// @ts-ignore: decorator
@inline function hiOn<W, P>(raw: v128, hm: v128, fm: v128, fs: v128): v128 {
  return sizeof<P>() == 8 ? f16hiUnscaled(raw, fm) : wideHi<W>(raw, hm, fm, fs);
}

/** The f16 constants (fm, fs) of f16hi, derived from k (≥ 0) so V8 keeps them in registers
 * instead of rebuilding a constant every iteration. */
// @ts-ignore: decorator
@inline function f16Mask(k: i32): v128 {
  return i32x4.splat(<i32>0x8fffe000 | (k >> 31));
}
// @ts-ignore: decorator
@inline export function f16Scale(k: i32): v128 {
  return i32x4.splat(<i32>0x77800000 | (k >> 31)); // 2^112 as f32 bits
}

/** Store the 8 results of panel g (lanes c0..3 in a, c4..7 in b) of output row `o`,
 * keeping only columns < n1. */
// @ts-ignore: decorator
@inline function store8(o: usize, g: i32, n1: i32, a: v128, b: v128): void {
  const c = g << 3;
  const p = o + (<usize>c << 2);
  if (c + 8 <= n1) {
    v128.store(p, a);
    v128.store(p, b, 16);
    return;
  }
  const r = n1 - c; // 1..7 valid columns
  store<f32>(p, f32x4.extract_lane(a, 0));
  if (r > 1) store<f32>(p, f32x4.extract_lane(a, 1), 4);
  if (r > 2) store<f32>(p, f32x4.extract_lane(a, 2), 8);
  if (r > 3) store<f32>(p, f32x4.extract_lane(a, 3), 12);
  if (r > 4) store<f32>(p, f32x4.extract_lane(b, 0), 16);
  if (r > 5) store<f32>(p, f32x4.extract_lane(b, 1), 20);
  if (r > 6) store<f32>(p, f32x4.extract_lane(b, 2), 24);
}

/** Rows m0..m0+3 × panel g (8 columns): each weight load feeds 32 multiply-adds. The loop
 * advances pointers (an i32 address sum cannot fold into an x64 addressing mode) and takes
 * the bf16 high-half mask as a value V8 cannot constant-fold (it would rebuild the constant
 * every iteration). */
export function rows4panel<W, P>(out: usize, x: usize, w: usize, n: i32, k: i32, m0: i32, g: i32, n1: i32): void {
  let p = w + <usize>g * <usize>k * rowBytes<W>();
  const xs = <usize>k << 2;
  let x0 = x + <usize>m0 * xs;
  let x1 = x0 + xs;
  let x2 = x1 + xs;
  let x3 = x2 + xs;
  const end = x1;
  const hm = i32x4.splat(<i32>HI16 | (k >> 31)); // = HI16 (k ≥ 0)
  const fm = f16Mask(k), fs = f16Scale(k);
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0), a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0), a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  while (x0 < end) {
    const raw = v128.load(p);
    const wl = sizeof<W>() == 2 ? loOn<W, P>(raw, fm, fs) : raw;
    const wh = sizeof<W>() == 2 ? hiOn<W, P>(raw, hm, fm, fs) : v128.load(p, 16);
    let s = v128.load32_splat(x0);
    a0 = mac(a0, s, wl); b0 = mac(b0, s, wh);
    s = v128.load32_splat(x1);
    a1 = mac(a1, s, wl); b1 = mac(b1, s, wh);
    s = v128.load32_splat(x2);
    a2 = mac(a2, s, wl); b2 = mac(b2, s, wh);
    s = v128.load32_splat(x3);
    a3 = mac(a3, s, wl); b3 = mac(b3, s, wh);
    p += rowBytes<W>();
    x0 += 4;
    x1 += 4;
    x2 += 4;
    x3 += 4;
  }
  const os = <usize>n << 2;
  const o0 = out + <usize>m0 * os;
  store8(o0, g, n1, a0, b0);
  store8(o0 + os, g, n1, a1, b1);
  store8(o0 + 2 * os, g, n1, a2, b2);
  store8(o0 + 3 * os, g, n1, a3, b3);
}

/** Row mi × panels g, g+q, g+2q, g+3q (32 columns). Streaming four panels that are q
 * apart, rather than adjacent ones, keeps four independent sequential streams for the
 * hardware prefetcher (the decode path reads each weight once from memory). Pointers
 * advance as in rows4panel. */
function row1panels4<W, P>(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, g: i32, q: i32, n1: i32): void {
  const pb = <usize>k * rowBytes<W>();
  let w0 = w + <usize>g * pb;
  let w1 = w0 + <usize>q * pb;
  let w2 = w1 + <usize>q * pb;
  let w3 = w2 + <usize>q * pb;
  let xr = x + ((<usize>mi * <usize>k) << 2);
  const end = xr + (<usize>k << 2);
  const hm = i32x4.splat(<i32>HI16 | (k >> 31)); // = HI16 (k ≥ 0), not a constant to V8
  const fm = f16Mask(k), fs = f16Scale(k);
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0), a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0), a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  while (xr < end) {
    const s = v128.load32_splat(xr);
    if (sizeof<W>() == 2) {
      let r = v128.load(w0);
      a0 = mac(a0, s, loOn<W, P>(r, fm, fs)); b0 = mac(b0, s, hiOn<W, P>(r, hm, fm, fs));
      r = v128.load(w1);
      a1 = mac(a1, s, loOn<W, P>(r, fm, fs)); b1 = mac(b1, s, hiOn<W, P>(r, hm, fm, fs));
      r = v128.load(w2);
      a2 = mac(a2, s, loOn<W, P>(r, fm, fs)); b2 = mac(b2, s, hiOn<W, P>(r, hm, fm, fs));
      r = v128.load(w3);
      a3 = mac(a3, s, loOn<W, P>(r, fm, fs)); b3 = mac(b3, s, hiOn<W, P>(r, hm, fm, fs));
    } else {
      a0 = mac(a0, s, v128.load(w0)); b0 = mac(b0, s, v128.load(w0, 16));
      a1 = mac(a1, s, v128.load(w1)); b1 = mac(b1, s, v128.load(w1, 16));
      a2 = mac(a2, s, v128.load(w2)); b2 = mac(b2, s, v128.load(w2, 16));
      a3 = mac(a3, s, v128.load(w3)); b3 = mac(b3, s, v128.load(w3, 16));
    }
    xr += 4;
    w0 += rowBytes<W>();
    w1 += rowBytes<W>();
    w2 += rowBytes<W>();
    w3 += rowBytes<W>();
  }
  const or = out + ((<usize>mi * <usize>n) << 2);
  store8(or, g, n1, a0, b0);
  store8(or, g + q, n1, a1, b1);
  store8(or, g + 2 * q, n1, a2, b2);
  store8(or, g + 3 * q, n1, a3, b3);
}

/** Row mi × panel g (8 columns). */
function row1panel<W, P>(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, g: i32, n1: i32): void {
  let p = w + <usize>g * <usize>k * rowBytes<W>();
  let xr = x + ((<usize>mi * <usize>k) << 2);
  const end = xr + (<usize>k << 2);
  const hm = i32x4.splat(<i32>HI16 | (k >> 31));
  const fm = f16Mask(k), fs = f16Scale(k);
  let a = f32x4.splat(0), b = f32x4.splat(0);
  while (xr < end) {
    const s = v128.load32_splat(xr);
    const raw = v128.load(p);
    a = mac(a, s, sizeof<W>() == 2 ? loOn<W, P>(raw, fm, fs) : raw);
    b = mac(b, s, sizeof<W>() == 2 ? hiOn<W, P>(raw, hm, fm, fs) : v128.load(p, 16));
    xr += 4;
    p += rowBytes<W>();
  }
  store8(out + ((<usize>mi * <usize>n) << 2), g, n1, a, b);
}

/** Row mi × panels [p0, p1) on path P: four panels at a time (q apart), then the leftover
 * panels one by one. */
export function rowByPanels<W, P>(out: usize, x: usize, w: usize, n: i32, k: i32, mi: i32, p0: i32, p1: i32, n1: i32): void {
  const q = (p1 - p0) >> 2;
  for (let g = p0; g < p0 + q; g++) row1panels4<W, P>(out, x, w, n, k, mi, g, q, n1);
  for (let g = p0 + 4 * q; g < p1; g++) row1panel<W, P>(out, x, w, n, k, mi, g, n1);
}

/** Rows [m0, m1) × panels [p0, p1). */
export function rowsByRow<W>(out: usize, x: usize, w: usize, n: i32, k: i32, m0: i32, m1: i32, p0: i32, p1: i32, n1: i32): void {
  for (let mi = m0; mi < m1; mi++) rowByPanels<W, f32>(out, x, w, n, k, mi, p0, p1, n1);
}

/** Columns [n0, n1) of out = x · Wᵀ (n0 a multiple of 8). M = 1: one streaming pass over
 * the weights (decode). 1 < M < WIDE_MIN_M: tiled over panels so a tile (~128 KiB of
 * weights, ≥ 4 panels) stays in L2 while every 4-row block of x, then every leftover row,
 * passes over it. M ≥ WIDE_MIN_M: wideTiles. tmp: panelTmpBytes(k) bytes (this thread's). */
function mm<W>(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  const g0 = n0 >> 3;
  const g1 = (n1 + 7) >> 3;
  if (m == 1) {
    rowsByRow<W>(out, x, w, n, k, 0, 1, g0, g1, n1);
    return;
  }
  if (m >= WIDE_MIN_M) {
    wideTiles<W>(out, x, w, m, n, k, n0, n1, tmp);
    return;
  }
  const tile = panelsPerTile(k * <i32>rowBytes<W>());
  const m4 = m & ~3;
  for (let t0 = g0; t0 < g1; t0 += tile) {
    const t1 = min(t0 + tile, g1);
    for (let mb = 0; mb < m4; mb += 4) {
      for (let g = t0; g < t1; g++) rows4panel<W, f32>(out, x, w, n, k, mb, g, n1);
    }
    rowsByRow<W>(out, x, w, n, k, m4, m, t0, t1, n1);
  }
}

/** M from which wideTiles runs (prefill, large batches). AMD EPYC (Zen 4), Node 24, one thread,
 * M = 64..512: f16 tiles widened to f32 in 6-row blocks 23–27 GMAC/s, in 4-row blocks 18–25;
 * bf16 in 4-row blocks without widening 15–20. */
export const WIDE_MIN_M = 12;

/** Panels of panelBytes each per L2 tile: ~128 KiB, at least 4 panels (a tile's leftover
 * rows then run row1panels4's 8 chains rather than row1panel's 2, which left them bound by
 * the FMA latency). */
// @ts-ignore: decorator
@inline export function panelsPerTile(panelBytes: i32): i32 {
  return max(4, 131072 / max(1, panelBytes));
}

/** f32 panels per tile of wideTiles. */
// @ts-ignore: decorator
@inline function wideTile(k: i32): i32 {
  return panelsPerTile(k << 5);
}

/** Per-thread scratch bytes of matmulF32 / matmulBf16 / matmulF16 for inner size k. */
export function panelTmpBytes(k: i32): i32 {
  return wideTile(k) * (k << 5);
}

/** M ≥ WIDE_MIN_M: each tile of panels (16-bit ones widened once into f32 panels in tmp;
 * f32 ones read in place) stays in L2 while every 6-row block of x, then a 4-row block, then
 * the leftover rows pass over it. Widening is exact, so every lane is the f32 chain. */
export function wideTiles<W>(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  const g0 = n0 >> 3;
  const g1 = (n1 + 7) >> 3;
  const pb = <usize>k << 5; // bytes of one f32 panel
  const tile = wideTile(k);
  const m6 = m - m % 6;
  const m4 = m6 + ((m - m6) & ~3);
  for (let t0 = g0; t0 < g1; t0 += tile) {
    const t1 = min(t0 + tile, g1);
    let wt = w;
    if (sizeof<W>() == 2) {
      widenPanels<W>(tmp, w + <usize>t0 * (<usize>k << 4), (t1 - t0) * k, k);
      wt = tmp - <usize>t0 * pb; // panel g of the tile at wt + g·pb (address arithmetic mod 2³²)
    }
    for (let mb = 0; mb < m6; mb += 6) {
      for (let g = t0; g < t1; g++) rows6panelF32(out, x, wt, n, k, mb, g, n1);
    }
    for (let mb = m6; mb < m4; mb += 4) {
      for (let g = t0; g < t1; g++) rows4panel<f32, f32>(out, x, wt, n, k, mb, g, n1);
    }
    rowsByRow<f32>(out, x, wt, n, k, m4, m, t0, t1, n1);
  }
}

/** `rows` 16-bit panel rows at src → f32 panel rows at dst (exact). */
function widenPanels<W>(dst: usize, src: usize, rows: i32, k: i32): void {
  const hm = i32x4.splat(<i32>HI16 | (k >> 31));
  const fm = f16Mask(k), fs = f16Scale(k);
  let s = src;
  let d = dst;
  const end = src + (<usize>rows << 4);
  while (s < end) {
    const raw = v128.load(s);
    v128.store(d, wideLo<W>(raw, fm, fs));
    v128.store(d, wideHi<W>(raw, hm, fm, fs), 16);
    s += 16;
    d += 32;
  }
}

/** Rows m0..m0+5 × f32 panel g: 12 accumulator chains (two per FMA unit with slack for its
 * latency) where rows4panel has 8; 15 live vectors, V8's x64 SIMD register budget. */
function rows6panelF32(out: usize, x: usize, w: usize, n: i32, k: i32, m0: i32, g: i32, n1: i32): void {
  let p = w + <usize>g * (<usize>k << 5);
  const xs = <usize>k << 2;
  let x0 = x + <usize>m0 * xs;
  const end = x0 + xs;
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0), a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let a2 = f32x4.splat(0), b2 = f32x4.splat(0), a3 = f32x4.splat(0), b3 = f32x4.splat(0);
  let a4 = f32x4.splat(0), b4 = f32x4.splat(0), a5 = f32x4.splat(0), b5 = f32x4.splat(0);
  while (x0 < end) {
    const wl = v128.load(p);
    const wh = v128.load(p, 16);
    let s = v128.load32_splat(x0);
    a0 = mac(a0, s, wl); b0 = mac(b0, s, wh);
    s = v128.load32_splat(x0 + xs);
    a1 = mac(a1, s, wl); b1 = mac(b1, s, wh);
    s = v128.load32_splat(x0 + 2 * xs);
    a2 = mac(a2, s, wl); b2 = mac(b2, s, wh);
    s = v128.load32_splat(x0 + 3 * xs);
    a3 = mac(a3, s, wl); b3 = mac(b3, s, wh);
    s = v128.load32_splat(x0 + 4 * xs);
    a4 = mac(a4, s, wl); b4 = mac(b4, s, wh);
    s = v128.load32_splat(x0 + 5 * xs);
    a5 = mac(a5, s, wl); b5 = mac(b5, s, wh);
    p += 32;
    x0 += 4;
  }
  const os = <usize>n << 2;
  const o0 = out + <usize>m0 * os;
  store8(o0, g, n1, a0, b0);
  store8(o0 + os, g, n1, a1, b1);
  store8(o0 + 2 * os, g, n1, a2, b2);
  store8(o0 + 3 * os, g, n1, a3, b3);
  store8(o0 + 4 * os, g, n1, a4, b4);
  store8(o0 + 5 * os, g, n1, a5, b5);
}

/** w: [ceil(N/8), K, 8] bf16 panels. */
export function matmulBf16(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  mm<u16>(out, x, w, m, n, k, n0, n1, tmp);
}

/** w: [ceil(N/8), K, 8] f32 panels. */
export function matmulF32(out: usize, x: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32, tmp: usize): void {
  mm<f32>(out, x, w, m, n, k, n0, n1, tmp);
}

/** Slot of column c (0..7) inside a panel row. */
// @ts-ignore: decorator
@inline export function panelSlot(c: i32, bf16: bool): i32 {
  return bf16 ? (c < 4 ? c << 1 : ((c - 4) << 1) + 1) : c;
}

/** Repack `panels` × 8 row-major rows of length k at w (elemBytes 2 = bf16 / f16, 4 = f32) into
 * the panel layout above, in place; tmp: 8·k·elemBytes bytes of scratch. Rows beyond the
 * weight's real row count must already be zero. */
export function packPanels(w: usize, panels: i32, k: i32, elemBytes: i32, tmp: usize): void {
  const bf16 = elemBytes == 2;
  const pb = <usize>k * <usize>elemBytes * 8;
  for (let g = 0; g < panels; g++) {
    const p = w + <usize>g * pb;
    memory.copy(tmp, p, pb);
    for (let c = 0; c < 8; c++) {
      const src = tmp + <usize>c * <usize>k * <usize>elemBytes;
      const slot = <usize>panelSlot(c, bf16);
      if (bf16) {
        for (let i = 0; i < k; i++) store<u16>(p + ((<usize>i * 8 + slot) << 1), load<u16>(src + (<usize>i << 1)));
      } else {
        for (let i = 0; i < k; i++) store<f32>(p + ((<usize>i * 8 + slot) << 2), load<f32>(src + (<usize>i << 2)));
      }
    }
  }
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
