// Block quantizers (f32 or bf16 → GGML blocks): the wasm twin of
// src/kernels/quant/quantize-ggml.ts (GGML's reference algorithms in float32), bit for bit.
// Every float operation of the twin is one f32 operation here, in the same order: the
// searches' running sums are sequential over a group's elements, so they are vectorized
// ACROSS groups — lane g of a vector works on group g of 4 (the block is transposed into
// scratch first) — never within a group (that would reassociate the sums). No fused
// multiply-add anywhere (mac() is not used), so both builds produce the same bytes.
//
// Per-thread scratch (tmp, QUANT_TMP_BYTES):
//   [0, 1024)     X:  the block as f32 (256 elements; bf16 sources are widened here)
//   [1024, 2048)  XT: X transposed, vector (set s, element i) = element i of groups 4s..4s+3
//   [2048, 3072)  WT: the Q4_K weights, transposed like XT
//   [3072, 4096)  AUX: one Q4_K candidate's quants (2 sets × 32 vectors)
//   [4096, 4352)  L: quants u8[256]
//   [4352, 4416)  SC: group scales f32[16];  [4416, 4448) MN: Q4_K group mins f32[8]

import { f16ToF32, f32ToF16, q4_0Block, q5_0Block, q8_0Block, q8_0BlockBf16 } from './quantize32';

const Q4_0: i32 = 2;
const Q5_0: i32 = 6;
const Q8_0: i32 = 8;
const Q4_K: i32 = 12;
const Q6_K: i32 = 14;

const X: usize = 0;
const XT: usize = 1024;
const WT: usize = 2048;
const AUX: usize = 3072;
const L: usize = 4096;
const SC: usize = 4352;
const MN: usize = 4416;
const QUANT_TMP_BYTES: i32 = 4608;
const GROUP_MAX_EPS: f32 = 1e-15;

/** Scratch bytes per thread of quantizeBlocks. */
export function quantizeTmpBytes(): i32 {
  return QUANT_TMP_BYTES;
}

/** Quantize blocks [lo, hi) of a tensor whose elements are at src (bf16 when bf16 != 0,
 * else f32) into GGML blocks of `type` (ggml_type id: 2 q4_0, 6 q5_0, 8 q8_0, 12 q4_k,
 * 14 q6_k) at dst: block b reads elements [b·bs, (b+1)·bs) and writes bytes
 * [b·bb, (b+1)·bb). Blocks are independent, so any split gives the same bytes. */
export function quantizeBlocks(type: i32, src: usize, bf16: i32, dst: usize, lo: i32, hi: i32, tmp: usize): void {
  const bs: i32 = type == Q4_K || type == Q6_K ? 256 : 32;
  const bb: usize = type == Q8_0 ? 34 : type == Q4_0 ? 18 : type == Q5_0 ? 22 : type == Q4_K ? 144 : 210;
  if (type == Q8_0 && bf16) {
    for (let b = lo; b < hi; b++) q8_0BlockBf16(src + (<usize>b << 6), dst + <usize>b * 34);
    return;
  }
  for (let b = lo; b < hi; b++) {
    const x = blockSource(src, bf16, <usize>b * <usize>bs, bs, tmp + X);
    const out = dst + <usize>b * bb;
    if (type == Q8_0) q8_0Block(x, out);
    else if (type == Q4_0) q4_0Block(x, out, tmp + L);
    else if (type == Q5_0) q5_0Block(x, out, tmp + L);
    else if (type == Q4_K) q4kBlock(x, out, tmp);
    else q6kBlock(x, out, tmp);
  }
}

/** Address of the block's n f32 elements starting at element e: in place for f32 sources,
 * widened into x for bf16 (bf16 bits << 16 is the exact f32). */
function blockSource(src: usize, bf16: i32, e: usize, n: i32, x: usize): usize {
  if (!bf16) return src + (e << 2);
  const p = src + (e << 1);
  for (let i = 0; i < n; i += 8) {
    const v = v128.load(p + (<usize>i << 1));
    v128.store(x + (<usize>i << 2), i32x4.shl(i32x4.extend_low_i16x8_u(v), 16));
    v128.store(x + (<usize>i << 2), i32x4.shl(i32x4.extend_high_i16x8_u(v), 16), 16);
  }
  return x;
}

// ---- k-quant searches, 4 groups per vector ----

/** Transpose `groups` groups of n f32 at x into xt: vector (s, i) = element i of groups
 * 4s..4s+3. */
function transpose(x: usize, groups: i32, n: i32, xt: usize): void {
  for (let g = 0; g < groups; g++) {
    const dst = xt + (<usize>((g >> 2) * n) << 4) + (<usize>(g & 3) << 2);
    const s = x + (<usize>(g * n) << 2);
    for (let i = 0; i < n; i++) store<f32>(dst + (<usize>i << 4), load<f32>(s + (<usize>i << 2)));
  }
}

/** The constant of candidate `is` of a search: f32(base + f32(0.1·is)) (0.1·is in f64, as
 * the twin's JS computes it, rounded to f32). */
// @ts-ignore: decorator
@inline function stepConst(base: f32, is: i32): f32 {
  return base + <f32>(0.1 * <f64>is);
}

/** min(hi, max(lo, v)) per lane as the twin's Math.max(lo, Math.min(hi, v)): NaN stays
 * NaN (v is pmin/pmax's first operand, which they return when a comparison is false), and
 * the result differs from f32x4.max/min's only in the sign of a zero when a bound is ±0,
 * which no sum, product or final quant below can see (sums start at +0, and a ±0 quant
 * truncates to 0). One minps + one maxps on x64, where f32x4.min/max cost ~8 each. */
// @ts-ignore: decorator
@inline function clampNaN(v: v128, lo: v128, hi: v128): v128 {
  return f32x4.pmax(f32x4.pmin(v, hi), lo);
}

// Constants the fits use inside their loops, as data: V8 rebuilds a splat of a constant
// inside the loop every time it is used (movq imm64 + vmovq + vpunpcklqdq, two port-5
// uops); a value loaded before the loop stays in a register or one reload away. Same
// values, so the same bits.
const FIT_K = memory.data<f32>([15, 31, 32, -32], 16);

/** Lane-broadcast FIT_K[i] (15, 31, 32, −32). */
// @ts-ignore: decorator
@inline function fitConst(i: i32): v128 {
  return v128.load32_splat(FIT_K + (<usize>i << 2));
}

/** Store lane quants (f32 integral values) of vector i of 4 groups to L bytes: group lane
 * gets L[(g0 + lane)·n + i]. */
// @ts-ignore: decorator
@inline function storeLanes(l: v128, dst: usize, n: i32, i: i32): void {
  const q = i32x4.trunc_sat_f32x4_s(l);
  const p = dst + <usize>i;
  store<u8>(p, <u8>i32x4.extract_lane(q, 0));
  store<u8>(p + <usize>n, <u8>i32x4.extract_lane(q, 1));
  store<u8>(p + <usize>(2 * n), <u8>i32x4.extract_lane(q, 2));
  store<u8>(p + <usize>(3 * n), <u8>i32x4.extract_lane(q, 3));
}

// Results of signedSums4 (wasm globals: per instance, so per thread).
let SUMLX: v128 = f32x4.splat(0);
let SUML2: v128 = f32x4.splat(0);

/** Σ w·x·l and Σ w·l² per lane over the 16 elements of 4 groups, w = x², l =
 * clamp(nearest(iscale·x), −nmax, nmax − 1), into SUMLX / SUML2. */
// @ts-ignore: decorator
@inline function signedSums4(xt: usize, iscale: v128, nmax: f32): void {
  const lo = f32x4.splat(-nmax);
  const hi = f32x4.splat(nmax - 1);
  let sumlx = f32x4.splat(0);
  let suml2 = f32x4.splat(0);
  for (let i = 0; i < 16; i++) {
    const xi = v128.load(xt + (<usize>i << 4));
    const l = clampNaN(f32x4.nearest(f32x4.mul(iscale, xi)), lo, hi);
    const w = f32x4.mul(xi, xi);
    sumlx = f32x4.add(sumlx, f32x4.mul(f32x4.mul(w, xi), l));
    suml2 = f32x4.add(suml2, f32x4.mul(f32x4.mul(w, l), l));
  }
  SUMLX = sumlx;
  SUML2 = suml2;
}

/** GGML's make_qx_quants(16, nmax, rmse_type 1) on 4 groups of 16 (the vectors at xt): the
 * group scales; quants l + nmax to L[g·16 + i] (g = 4·set + lane; lo = tmp + L + set·64). */
function fitSigned4(xt: usize, nmax: f32, lq: usize): v128 {
  let amax = f32x4.splat(0);
  let mx = f32x4.splat(0);
  for (let i = 0; i < 16; i++) {
    const xi = v128.load(xt + (<usize>i << 4));
    const ax = f32x4.abs(xi);
    const gt = f32x4.gt(ax, amax);
    amax = v128.bitselect(ax, amax, gt);
    mx = v128.bitselect(xi, mx, gt);
  }
  const live = v128.not(f32x4.lt(amax, f32x4.splat(GROUP_MAX_EPS)));
  let iscale = f32x4.div(f32x4.splat(-nmax), mx);
  signedSums4(xt, iscale, nmax);
  const nz = v128.and(f32x4.ne(SUML2, f32x4.splat(0)), f32x4.eq(SUML2, SUML2)); // the twin's `suml2 ? … : 0`
  let scale = v128.and(f32x4.div(SUMLX, SUML2), nz);
  let best = f32x4.mul(scale, SUMLX);
  let bestIscale = iscale;
  for (let is = -9; is <= 9; is++) {
    if (is == 0) continue;
    iscale = f32x4.div(f32x4.splat(-stepConst(nmax, is)), mx);
    signedSums4(xt, iscale, nmax);
    const take = v128.and(f32x4.gt(SUML2, f32x4.splat(0)), f32x4.gt(f32x4.mul(SUMLX, SUMLX), f32x4.mul(best, SUML2)));
    const s = f32x4.div(SUMLX, SUML2);
    scale = v128.bitselect(s, scale, take);
    best = v128.bitselect(f32x4.mul(s, SUMLX), best, take);
    bestIscale = v128.bitselect(iscale, bestIscale, take);
  }
  // the quants of the best candidate, recomputed (the same f32 operations give the same l)
  const lo = f32x4.splat(-nmax);
  const hi = f32x4.splat(nmax - 1);
  const off = f32x4.splat(nmax);
  for (let i = 0; i < 16; i++) {
    const xi = v128.load(xt + (<usize>i << 4));
    const l = clampNaN(f32x4.nearest(f32x4.mul(bestIscale, xi)), lo, hi);
    storeLanes(v128.and(f32x4.add(l, off), live), lq, 16, i);
  }
  return v128.and(scale, live);
}

/** 210 bytes: ql[128] | qh[64] | scales i8[16] | d f16. */
function q6kBlock(x: usize, out: usize, tmp: usize): void {
  transpose(x, 16, 16, tmp + XT);
  for (let s = 0; s < 4; s++) {
    v128.store(tmp + SC + (<usize>s << 4), fitSigned4(tmp + XT + (<usize>s << 8), 32, tmp + L + (<usize>s << 6)));
  }
  let maxScale: f32 = 0;
  let maxAbsScale: f32 = 0;
  for (let ib = 0; ib < 16; ib++) {
    const s = load<f32>(tmp + SC + (<usize>ib << 2));
    if (abs(s) > maxAbsScale) { maxAbsScale = abs(s); maxScale = s; }
  }
  memory.fill(out, 0, 210);
  if (maxAbsScale < GROUP_MAX_EPS) return;
  const iscale: f32 = <f32>-128 / maxScale;
  const dBits = f32ToF16(<f32>1 / iscale);
  store<u16>(out + 208, <u16>dBits);
  const d0 = f16ToF32(dBits);
  const lo = fitConst(3);
  const hi = fitConst(1);
  const off = fitConst(2);
  for (let ib = 0; ib < 16; ib++) {
    const sc = min(127, <i32>nearest<f32>(iscale * load<f32>(tmp + SC + (<usize>ib << 2))));
    store<u8>(out + 192 + <usize>ib, <u8>sc);
    const d: f32 = d0 * <f32>sc;
    if (!(d != 0 && d == d)) continue;
    const dv = f32x4.splat(d);
    for (let i = 0; i < 16; i += 4) {
      const xi = v128.load(x + (<usize>(16 * ib + i) << 2));
      const l = f32x4.add(clampNaN(f32x4.nearest(f32x4.div(xi, dv)), lo, hi), off);
      const q = i32x4.trunc_sat_f32x4_s(l);
      const b = i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(q, q), i16x8.splat(0));
      store<i32>(tmp + L + <usize>(16 * ib + i), i32x4.extract_lane(b, 0));
    }
  }
  packQ6K(tmp + L, out);
}

/** ql / qh of Q6_K from the 256 quants (0..63) at lq. */
function packQ6K(lq: usize, out: usize): void {
  const m4 = i8x16.splat(0x0f);
  for (let half = 0; half < 2; half++) {
    const j = lq + <usize>(half * 128);
    const ql = out + <usize>(half * 64);
    const qh = out + 128 + <usize>(half * 32);
    for (let l = 0; l < 32; l += 16) {
      const a = v128.load(j + <usize>l);
      const b = v128.load(j + <usize>(l + 32));
      const c = v128.load(j + <usize>(l + 64));
      const e = v128.load(j + <usize>(l + 96));
      v128.store(ql + <usize>l, v128.or(v128.and(a, m4), i8x16.shl(v128.and(c, m4), 4)));
      v128.store(ql + <usize>(l + 32), v128.or(v128.and(b, m4), i8x16.shl(v128.and(e, m4), 4)));
      const h = v128.or(v128.or(i8x16.shr_u(a, 4), i8x16.shl(i8x16.shr_u(b, 4), 2)),
        v128.or(i8x16.shl(i8x16.shr_u(c, 4), 4), i8x16.shl(i8x16.shr_u(e, 4), 6)));
      v128.store(qh + <usize>l, h);
    }
  }
}

/** GGML's make_qkx2_quants(32, 15, x, w, L, &min, Laux, −1, 0.1, 20) on the 8 groups of a
 * Q4_K super-block: set A (groups 0..3, x vectors at xt, weights at wt) and set B (groups
 * 4..7, at +512) run interleaved, so their serial chains (the running sums, the candidate
 * loop's dependence on the min it may update) overlap. Every lane runs the twin's sequence
 * of f32 operations. Out: group scales to sc (f32[8]), (positive) mins to mn (f32[8]),
 * quants to L[g·32 + i] at lq. */
function fitAsymmetric8(xt: usize, wt: usize, aux: usize, lq: usize, mn: usize, sc: usize): void {
  const zero = f32x4.splat(0);
  const nmax = fitConst(0);
  const xA0 = v128.load(xt);
  const xB0 = v128.load(xt, 512);
  let mnA = xA0, mxA = xA0, mnB = xB0, mxB = xB0;
  let sumWA = v128.load(wt);
  let sumWB = v128.load(wt, 512);
  let sumXA = f32x4.mul(sumWA, xA0);
  let sumXB = f32x4.mul(sumWB, xB0);
  for (let i = 1; i < 32; i++) {
    const o = <usize>i << 4;
    const xA = v128.load(xt + o), xB = v128.load(xt + o, 512);
    const wA = v128.load(wt + o), wB = v128.load(wt + o, 512);
    mnA = v128.bitselect(xA, mnA, f32x4.lt(xA, mnA));
    mxA = v128.bitselect(xA, mxA, f32x4.gt(xA, mxA));
    mnB = v128.bitselect(xB, mnB, f32x4.lt(xB, mnB));
    mxB = v128.bitselect(xB, mxB, f32x4.gt(xB, mxB));
    sumWA = f32x4.add(sumWA, wA);
    sumWB = f32x4.add(sumWB, wB);
    sumXA = f32x4.add(sumXA, f32x4.mul(wA, xA));
    sumXB = f32x4.add(sumXB, f32x4.mul(wB, xB));
  }
  mnA = v128.bitselect(zero, mnA, f32x4.gt(mnA, zero));
  mnB = v128.bitselect(zero, mnB, f32x4.gt(mnB, zero));
  const flatA = f32x4.eq(mxA, mnA);
  const flatB = f32x4.eq(mxB, mnB);
  const flatMinA = mnA; // a flat group's min output (the twin returns before any search)
  const flatMinB = mnB;
  let iscaleA = f32x4.div(nmax, f32x4.sub(mxA, mnA));
  let iscaleB = f32x4.div(nmax, f32x4.sub(mxB, mnB));
  let scaleA = f32x4.div(f32x4.splat(1), iscaleA);
  let scaleB = f32x4.div(f32x4.splat(1), iscaleB);
  let bestErrA = zero;
  let bestErrB = zero;
  for (let i = 0; i < 32; i++) {
    const o = <usize>i << 4;
    const xA = v128.load(xt + o), xB = v128.load(xt + o, 512);
    const lA = clampNaN(f32x4.nearest(f32x4.mul(iscaleA, f32x4.sub(xA, mnA))), zero, nmax);
    const lB = clampNaN(f32x4.nearest(f32x4.mul(iscaleB, f32x4.sub(xB, mnB))), zero, nmax);
    const dA = f32x4.sub(f32x4.add(f32x4.mul(scaleA, lA), mnA), xA);
    const dB = f32x4.sub(f32x4.add(f32x4.mul(scaleB, lB), mnB), xB);
    bestErrA = f32x4.add(bestErrA, f32x4.mul(v128.load(wt + o), f32x4.mul(dA, dA)));
    bestErrB = f32x4.add(bestErrB, f32x4.mul(v128.load(wt + o, 512), f32x4.mul(dB, dB)));
  }
  let bestIsA = iscaleA, bestIsB = iscaleB;
  let fromA = mnA, fromB = mnB; // the min each best candidate's quants were computed against
  for (let is = 0; is <= 20; is++) {
    const c = f32x4.splat(stepConst(-1, is) + 15);
    iscaleA = f32x4.div(c, f32x4.sub(mxA, mnA));
    iscaleB = f32x4.div(c, f32x4.sub(mxB, mnB));
    let sLA = zero, sL2A = zero, sXLA = zero;
    let sLB = zero, sL2B = zero, sXLB = zero;
    for (let i = 0; i < 32; i++) {
      const o = <usize>i << 4;
      const xA = v128.load(xt + o), xB = v128.load(xt + o, 512);
      const lA = clampNaN(f32x4.nearest(f32x4.mul(iscaleA, f32x4.sub(xA, mnA))), zero, nmax);
      const lB = clampNaN(f32x4.nearest(f32x4.mul(iscaleB, f32x4.sub(xB, mnB))), zero, nmax);
      v128.store(aux + o, lA);
      v128.store(aux + o, lB, 512);
      const wlA = f32x4.mul(v128.load(wt + o), lA);
      const wlB = f32x4.mul(v128.load(wt + o, 512), lB);
      sLA = f32x4.add(sLA, wlA);
      sLB = f32x4.add(sLB, wlB);
      sL2A = f32x4.add(sL2A, f32x4.mul(wlA, lA));
      sL2B = f32x4.add(sL2B, f32x4.mul(wlB, lB));
      sXLA = f32x4.add(sXLA, f32x4.mul(wlA, xA));
      sXLB = f32x4.add(sXLB, f32x4.mul(wlB, xB));
    }
    const DA = f32x4.sub(f32x4.mul(sumWA, sL2A), f32x4.mul(sLA, sLA));
    const DB = f32x4.sub(f32x4.mul(sumWB, sL2B), f32x4.mul(sLB, sLB));
    let tsA = f32x4.div(f32x4.sub(f32x4.mul(sumWA, sXLA), f32x4.mul(sumXA, sLA)), DA);
    let tsB = f32x4.div(f32x4.sub(f32x4.mul(sumWB, sXLB), f32x4.mul(sumXB, sLB)), DB);
    let tmA = f32x4.div(f32x4.sub(f32x4.mul(sL2A, sumXA), f32x4.mul(sLA, sXLA)), DA);
    let tmB = f32x4.div(f32x4.sub(f32x4.mul(sL2B, sumXB), f32x4.mul(sLB, sXLB)), DB);
    const posA = f32x4.gt(tmA, zero);
    const posB = f32x4.gt(tmB, zero);
    tmA = v128.bitselect(zero, tmA, posA);
    tmB = v128.bitselect(zero, tmB, posB);
    tsA = v128.bitselect(f32x4.div(sXLA, sL2A), tsA, posA);
    tsB = v128.bitselect(f32x4.div(sXLB, sL2B), tsB, posB);
    let errA = zero;
    let errB = zero;
    for (let i = 0; i < 32; i++) {
      const o = <usize>i << 4;
      const dA = f32x4.sub(f32x4.add(f32x4.mul(tsA, v128.load(aux + o)), tmA), v128.load(xt + o));
      const dB = f32x4.sub(f32x4.add(f32x4.mul(tsB, v128.load(aux + o, 512)), tmB), v128.load(xt + o, 512));
      errA = f32x4.add(errA, f32x4.mul(v128.load(wt + o), f32x4.mul(dA, dA)));
      errB = f32x4.add(errB, f32x4.mul(v128.load(wt + o, 512), f32x4.mul(dB, dB)));
    }
    const takeA = v128.and(f32x4.gt(DA, zero), f32x4.lt(errA, bestErrA));
    const takeB = v128.and(f32x4.gt(DB, zero), f32x4.lt(errB, bestErrB));
    bestIsA = v128.bitselect(iscaleA, bestIsA, takeA);
    bestIsB = v128.bitselect(iscaleB, bestIsB, takeB);
    fromA = v128.bitselect(mnA, fromA, takeA);
    fromB = v128.bitselect(mnB, fromB, takeB);
    bestErrA = v128.bitselect(errA, bestErrA, takeA);
    bestErrB = v128.bitselect(errB, bestErrB, takeB);
    scaleA = v128.bitselect(tsA, scaleA, takeA);
    scaleB = v128.bitselect(tsB, scaleB, takeB);
    mnA = v128.bitselect(tmA, mnA, takeA);
    mnB = v128.bitselect(tmB, mnB, takeB);
  }
  const liveA = v128.not(flatA);
  const liveB = v128.not(flatB);
  for (let i = 0; i < 32; i++) {
    const o = <usize>i << 4;
    const lA = clampNaN(f32x4.nearest(f32x4.mul(bestIsA, f32x4.sub(v128.load(xt + o), fromA))), zero, nmax);
    const lB = clampNaN(f32x4.nearest(f32x4.mul(bestIsB, f32x4.sub(v128.load(xt + o, 512), fromB))), zero, nmax);
    storeLanes(v128.and(lA, liveA), lq, 32, i);
    storeLanes(v128.and(lB, liveB), lq + 128, 32, i);
  }
  v128.store(mn, f32x4.neg(v128.bitselect(flatMinA, mnA, flatA)));
  v128.store(mn, f32x4.neg(v128.bitselect(flatMinB, mnB, flatB)), 16);
  v128.store(sc, v128.and(scaleA, liveA));
  v128.store(sc, v128.and(scaleB, liveB), 16);
}

/** The 6-bit scale (min = false) or min of sub-block j from the 12 coded bytes at p. */
// @ts-ignore: decorator
@inline function scaleMinK4(p: usize, j: i32, isMin: bool): i32 {
  if (j < 4) return <i32>load<u8>(p + <usize>(j + (isMin ? 4 : 0))) & 63;
  if (!isMin) return (<i32>load<u8>(p + <usize>(j + 4)) & 0xf) | ((<i32>load<u8>(p + <usize>(j - 4)) >> 6) << 4);
  return (<i32>load<u8>(p + <usize>(j + 4)) >> 4) | ((<i32>load<u8>(p + <usize>j) >> 6) << 4);
}

/** 144 bytes: d, dmin f16 | scales[12] (6-bit) | qs[128]. */
function q4kBlock(x: usize, out: usize, tmp: usize): void {
  transpose(x, 8, 32, tmp + XT);
  for (let s = 0; s < 2; s++) {
    const xt = tmp + XT + (<usize>s << 9);
    const wt = tmp + WT + (<usize>s << 9);
    let sumX2 = f32x4.splat(0);
    for (let i = 0; i < 32; i++) {
      const xi = v128.load(xt + (<usize>i << 4));
      sumX2 = f32x4.add(sumX2, f32x4.mul(xi, xi));
    }
    const av = f32x4.sqrt(f32x4.div(sumX2, f32x4.splat(32)));
    for (let i = 0; i < 32; i++) v128.store(wt + (<usize>i << 4), f32x4.add(av, f32x4.abs(v128.load(xt + (<usize>i << 4)))));
  }
  fitAsymmetric8(tmp + XT, tmp + WT, tmp + AUX, tmp + L, tmp + MN, tmp + SC);
  let maxScale: f32 = 0;
  let maxMin: f32 = 0;
  for (let j = 0; j < 8; j++) {
    const s = load<f32>(tmp + SC + (<usize>j << 2));
    const m = load<f32>(tmp + MN + (<usize>j << 2));
    if (s > maxScale) maxScale = s;
    if (m > maxMin) maxMin = m;
  }
  const invScale: f32 = maxScale > 0 ? <f32>63 / maxScale : 0;
  const invMin: f32 = maxMin > 0 ? <f32>63 / maxMin : 0;
  const sc = out + 4;
  memory.fill(sc, 0, 12);
  for (let j = 0; j < 8; j++) {
    const ls = min(63, <i32>nearest<f32>(invScale * load<f32>(tmp + SC + (<usize>j << 2))));
    const lm = min(63, <i32>nearest<f32>(invMin * load<f32>(tmp + MN + (<usize>j << 2))));
    if (j < 4) {
      store<u8>(sc + <usize>j, <u8>ls);
      store<u8>(sc + <usize>(j + 4), <u8>lm);
    } else {
      store<u8>(sc + <usize>(j + 4), <u8>((ls & 0xf) | ((lm & 0xf) << 4)));
      store<u8>(sc + <usize>(j - 4), load<u8>(sc + <usize>(j - 4)) | <u8>((ls >> 4) << 6));
      store<u8>(sc + <usize>j, load<u8>(sc + <usize>j) | <u8>((lm >> 4) << 6));
    }
  }
  const dBits = f32ToF16(maxScale / 63);
  const mBits = f32ToF16(maxMin / 63);
  store<u16>(out, <u16>dBits);
  store<u16>(out + 2, <u16>mBits);
  const d0 = f16ToF32(dBits);
  const m0 = f16ToF32(mBits);
  const zero = f32x4.splat(0);
  const top = fitConst(0);
  for (let j = 0; j < 8; j++) {
    const d: f32 = d0 * <f32>scaleMinK4(sc, j, false);
    if (!(d != 0 && d == d)) continue;
    const dv = f32x4.splat(d);
    const dm = f32x4.splat(m0 * <f32>scaleMinK4(sc, j, true));
    const lq = tmp + L + <usize>(32 * j);
    for (let i = 0; i < 32; i += 16) {
      const p = x + (<usize>(32 * j + i) << 2);
      const q0 = i32x4.trunc_sat_f32x4_s(clampNaN(f32x4.nearest(f32x4.div(f32x4.add(v128.load(p), dm), dv)), zero, top));
      const q1 = i32x4.trunc_sat_f32x4_s(clampNaN(f32x4.nearest(f32x4.div(f32x4.add(v128.load(p, 16), dm), dv)), zero, top));
      const q2 = i32x4.trunc_sat_f32x4_s(clampNaN(f32x4.nearest(f32x4.div(f32x4.add(v128.load(p, 32), dm), dv)), zero, top));
      const q3 = i32x4.trunc_sat_f32x4_s(clampNaN(f32x4.nearest(f32x4.div(f32x4.add(v128.load(p, 48), dm), dv)), zero, top));
      v128.store(lq + <usize>i, i8x16.narrow_i16x8_u(i16x8.narrow_i32x4_s(q0, q1), i16x8.narrow_i32x4_s(q2, q3)));
    }
  }
  const qs = out + 16;
  for (let j = 0; j < 256; j += 64) {
    for (let l = 0; l < 32; l += 16) {
      const a = v128.load(tmp + L + <usize>(j + l));
      const b = v128.load(tmp + L + <usize>(j + l + 32));
      v128.store(qs + <usize>((j >> 1) + l), v128.or(a, i8x16.shl(b, 4)));
    }
  }
}
