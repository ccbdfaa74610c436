// Sampling over logits rows: temperature, max, exp-sum, min-p / top-k / top-p cuts, the
// categorical draw, and the raw log-softmax normaliser + top-N for logprobs. One row per
// call of sampleRows' inner loop; rows are independent (the pool splits a batch by rows).
// Cuts and draw: ./sampling-select.ts. The exact definition (every rounding) is stated in src/kernels/ref/sampling.ts, the
// plain-TS twin; this file computes bit-identical results (f32 ops without FMA, f64 sums
// in the orders stated there).
//
// Row descriptor: DESC f64 slots per row at desc + row·DESC·8 (slot names: D_*).
// Per-thread scratch (tmp): sampleTmpBytes(n) bytes, laid out in sampleRow.
import { drawDense, drawList, filterList, HIST_BYTES, inSet, keptDense, keptList, MODE_COUNT, MODE_MASS, select, selLim, selTau } from './sampling-select';

const D_LOGITS = 0;
const D_N = 1;
const D_INV_T = 2;
const D_TOP_K = 3;
const D_TOP_P = 4;
const D_MIN_P = 5;
const D_U = 6;
const D_PATCH_IDS = 7;
const D_PATCH_VALS = 8;
const D_PATCH_N = 9;
const D_TOP_N = 10;
const D_FLAGS = 11;
const D_TOP_IDS = 12;
const D_TOP_VALS = 13;
const D_DIST = 14;
const D_OUT_TOKEN = 15;
const D_OUT_RAW_MAX = 16;
const D_OUT_RAW_SUM = 17;
const D_OUT_MASS = 18;
export const DESC: i32 = 20;

const F_DRAW = 1;
const F_LOGPROBS = 2;
const F_DIST = 4;

const BLOCK: i32 = 64;

// exp32 constants (Cephes expf): 2^k · p(r), r = y − k·ln2 (ln2 split in C1 + C2)
const EXP_MIN: f32 = -87.0;
const LOG2E: f32 = 1.44269504088896341;
const C1: f32 = 0.693359375;
const C2: f32 = -2.12194440e-4;
const P0: f32 = 1.9875691500e-4;
const P1: f32 = 1.3981999507e-3;
const P2: f32 = 8.3334519073e-3;
const P3: f32 = 4.1665795894e-2;
const P4: f32 = 1.6666665459e-1;
const P5: f32 = 5.0000001201e-1;

// The same constants as data, each broadcast from memory where used (one load uop): V8
// rebuilds a splat of a constant inside the loop every time (movq imm64 + vmovq +
// vpunpcklqdq, two port-5 uops). Same values, so the same bits.
const EXP32_K = memory.data<f32>([EXP_MIN, LOG2E, C1, C2, P0, P1, P2, P3, P4, P5, 1.0, 12582912], 16);
const EXP32_BIAS = memory.data<i32>([0x4b400000 - 127], 4);

/** Lane-broadcast constant i of EXP32_K. */
// @ts-ignore: decorator
@inline function ek(i: i32): v128 {
  return v128.load32_splat(EXP32_K + (<usize>i << 2));
}

/** exp of each lane for y ≤ 0; 0 where y < −87 or NaN. */
// @ts-ignore: decorator
@inline function exp32v(y: v128): v128 {
  const ok = f32x4.ge(y, ek(0));
  const k = f32x4.nearest(f32x4.mul(y, ek(1)));
  let r = f32x4.sub(y, f32x4.mul(k, ek(2)));
  r = f32x4.sub(r, f32x4.mul(k, ek(3)));
  const z = f32x4.mul(r, r);
  let p = f32x4.add(f32x4.mul(ek(4), r), ek(5));
  p = f32x4.add(f32x4.mul(p, r), ek(6));
  p = f32x4.add(f32x4.mul(p, r), ek(7));
  p = f32x4.add(f32x4.mul(p, r), ek(8));
  p = f32x4.add(f32x4.mul(p, r), ek(9));
  p = f32x4.add(f32x4.mul(p, z), r);
  p = f32x4.add(p, ek(10));
  // k is an integer in [−126, 0] wherever ok holds (other lanes are zeroed below): 1.5·2²³ + k
  // holds k + 0x400000 in its mantissa bits, so the exponent field k + 127 is those bits −
  // (0x4b400000 − 127), without trunc_sat's ~8-instruction x64 fix-ups
  const pow = i32x4.shl(i32x4.sub(f32x4.add(k, ek(11)), v128.load32_splat(EXP32_BIAS)), 23);
  return v128.and(f32x4.mul(p, pow), ok);
}

// @ts-ignore: decorator
@inline function exp32(y: f32): f32 {
  return f32x4.extract_lane(exp32v(f32x4.splat(y)), 0);
}

// @ts-ignore: decorator
@inline function dget(d: usize, slot: i32): f64 {
  return load<f64>(d + (<usize>slot << 3));
}

// @ts-ignore: decorator
@inline function dset(d: usize, slot: i32, v: f64): void {
  store<f64>(d + (<usize>slot << 3), v);
}

// @ts-ignore: decorator
@inline function fAt(p: usize, i: i32): f32 {
  return load<f32>(p + (<usize>i << 2));
}

// @ts-ignore: decorator
@inline function iAt(p: usize, i: i32): i32 {
  return load<i32>(p + (<usize>i << 2));
}

/** pmax over lanes, then lanes combined as pmax(pmax(l0, l1), pmax(l2, l3)), then the
 * tail in order; pmax(a, b) = a < b ? b : a (NaN never replaces a number). */
function rowMax(x: usize, n: i32): f32 {
  const n4 = n & ~3;
  let acc = f32x4.splat(-Infinity);
  for (let i = 0; i < n4; i += 4) acc = f32x4.pmax(acc, v128.load(x + (<usize>i << 2)));
  const a = f32x4.extract_lane(acc, 0), b = f32x4.extract_lane(acc, 1);
  const c = f32x4.extract_lane(acc, 2), d = f32x4.extract_lane(acc, 3);
  const ab = a < b ? b : a;
  const cd = c < d ? d : c;
  let m = ab < cd ? cd : ab;
  for (let i = n4; i < n; i++) {
    const v = fAt(x, i);
    if (m < v) m = v;
  }
  return m;
}

/** Σ exp32(x_i − m), f64: ids i ≡ j (mod 4) summed in order into lane j; then
 * (l0 + l1) + (l2 + l3). */
function sumExp(x: usize, n: i32, m: f32): f64 {
  const n4 = n & ~3;
  const mv = f32x4.splat(m);
  let a01 = f64x2.splat(0);
  let a23 = f64x2.splat(0);
  for (let i = 0; i < n4; i += 4) {
    const e = exp32v(f32x4.sub(v128.load(x + (<usize>i << 2)), mv));
    a01 = f64x2.add(a01, f64x2.promote_low_f32x4(e));
    a23 = f64x2.add(a23, f64x2.promote_low_f32x4(v128.shuffle<f32>(e, e, 2, 3, 0, 1)));
  }
  return laneTotal(a01, a23, x, n4, n, m, true);
}

/** (l0 + l1) + (l2 + l3) of lane sums a01 = (l0, l1), a23 = (l2, l3), after adding the
 * tail ids [n4, n) to their lanes (exp32(x − m) when isExp, else x itself). */
function laneTotal(a01: v128, a23: v128, x: usize, n4: i32, n: i32, m: f32, isExp: bool): f64 {
  let l0 = f64x2.extract_lane(a01, 0), l1 = f64x2.extract_lane(a01, 1);
  let l2 = f64x2.extract_lane(a23, 0), l3 = f64x2.extract_lane(a23, 1);
  for (let i = n4; i < n; i++) {
    const e = <f64>(isExp ? exp32(fAt(x, i) - m) : fAt(x, i));
    const j = i & 3;
    if (j == 0) l0 += e;
    else if (j == 1) l1 += e;
    else l2 += e;
  }
  return (l0 + l1) + (l2 + l3);
}

/** The topN largest raw logits (value desc, id asc; NaN skipped) into ids/vals. */
function topRaw(x: usize, n: i32, topN: i32, ids: usize, vals: usize): void {
  let cnt = 0;
  const n4 = n & ~3;
  for (let i = 0; i < n; i++) {
    if (cnt == topN && i < n4 && (i & 3) == 0) {
      const gt = i32x4.bitmask(f32x4.gt(v128.load(x + (<usize>i << 2)), f32x4.splat(fAt(vals, topN - 1))));
      if (!gt) {
        i += 3;
        continue;
      }
    }
    const v = fAt(x, i);
    if (v != v) continue;
    if (cnt == topN && !(v > fAt(vals, topN - 1))) continue;
    let j = cnt < topN ? cnt++ : topN - 1;
    while (j > 0 && fAt(vals, j - 1) < v) {
      store<f32>(vals + (<usize>j << 2), fAt(vals, j - 1));
      store<i32>(ids + (<usize>j << 2), iAt(ids, j - 1));
      j--;
    }
    store<f32>(vals + (<usize>j << 2), v);
    store<i32>(ids + (<usize>j << 2), i);
  }
  for (let j = cnt; j < topN; j++) {
    store<i32>(ids + (<usize>j << 2), -1);
    store<f32>(vals + (<usize>j << 2), -Infinity);
  }
}

/** s[i] = exp32((x[i] − m)·invT), then 0 where below minP (f32 compares); s may be x. */
function weights(s: usize, x: usize, n: i32, m: f32, invT: f32, minP: f32): void {
  const n4 = n & ~3;
  const mv = f32x4.splat(m), tv = f32x4.splat(invT), pv = f32x4.splat(minP);
  for (let i = 0; i < n4; i += 4) {
    const o = <usize>i << 2;
    const e = exp32v(f32x4.mul(f32x4.sub(v128.load(x + o), mv), tv));
    v128.store(s + o, v128.andnot(e, f32x4.lt(e, pv)));
  }
  for (let i = n4; i < n; i++) store<f32>(s + (<usize>i << 2), weight1(fAt(x, i), m, invT, minP));
}

// @ts-ignore: decorator
@inline function weight1(x: f32, m: f32, invT: f32, minP: f32): f32 {
  const e = exp32((x - m) * invT);
  return e < minP ? 0 : e;
}

/** Bytes of per-thread scratch for rows of up to n ids. */
export function sampleTmpBytes(n: i32): i32 {
  const n4 = (n + 3) & ~3;
  return n4 * 12 + HIST_BYTES + ((n + BLOCK - 1) / BLOCK) * 8 + 64;
}

/** Largest top-k served from candidates (s ≥ the k-th largest logit − δ) instead of the
 * whole row; results are the same bits either way. */
const TOPK_FAST: i32 = 64;

/** Top-k (then top-p) from a short candidate list: every id whose weight can reach the
 * k-th largest weight has s ≥ s_k − δ (δ ≫ the f32 rounding of (s − m)·invT and exp32).
 * Weights of the candidates are written to w at their ids. Returns the kept ids' count
 * in list (increasing ids), or −1 when the row needs the whole-row path. */
function topKList(w: usize, src: usize, n: i32, m: f32, invT: f32, minP: f32, topK: i32, topP: f64,
  list: usize, cand: usize, hist: usize): i32 {
  const ids = cand;
  const vals = cand + (<usize>topK << 2);
  topRaw(src, n, topK, ids, vals);
  const sk = load<f32>(vals + (<usize>(topK - 1) << 2));
  if (!(sk > -Infinity)) return -1;
  const delta = <f32>(1e-3 / <f64>invT + 1e-5 * <f64>(m - sk));
  const lo = f32x4.splat(sk - delta);
  const n4 = n & ~3;
  let nl = 0;
  for (let i = 0; i < n4; i += 4) {
    let mask = i32x4.bitmask(f32x4.ge(v128.load(src + (<usize>i << 2)), lo));
    while (mask) {
      store<i32>(list + (<usize>nl << 2), i + ctz(mask));
      nl++;
      mask &= mask - 1;
    }
  }
  for (let i = n4; i < n; i++) {
    if (fAt(src, i) >= sk - delta) {
      store<i32>(list + (<usize>nl << 2), i);
      nl++;
    }
  }
  for (let j = 0; j < nl; j++) {
    const id = load<i32>(list + (<usize>j << 2));
    store<f32>(w + (<usize>id << 2), weight1(fAt(src, id), m, invT, minP));
  }
  select(w, n, MODE_COUNT, <f64>topK, 0, -1, list, nl, cand, hist);
  nl = filterList(w, list, nl, selTau, selLim);
  if (topP < 1) {
    select(w, n, MODE_MASS, topP, 0, -1, list, nl, cand, hist);
    nl = filterList(w, list, nl, selTau, selLim);
  }
  return nl;
}

/** One row (descriptor d) with per-thread scratch tmp:
 * w f32[n4] | list i32[n4] | cand i32[n4] | histograms | blocks f64[⌈n/64⌉]. */
function sampleRow(d: usize, tmp: usize): void {
  const x = <usize>dget(d, D_LOGITS);
  const n = <i32>dget(d, D_N);
  const flags = <i32>dget(d, D_FLAGS);
  if (flags & F_LOGPROBS) {
    const m = rowMax(x, n);
    dset(d, D_OUT_RAW_MAX, m);
    dset(d, D_OUT_RAW_SUM, m > -Infinity && m < Infinity ? sumExp(x, n, m) : 0);
    const topN = <i32>dget(d, D_TOP_N);
    if (topN > 0) topRaw(x, n, topN, <usize>dget(d, D_TOP_IDS), <usize>dget(d, D_TOP_VALS));
  }
  if (!(flags & (F_DRAW | F_DIST))) return;
  const n4 = (n + 3) & ~3;
  const w = tmp;
  const list = w + (<usize>n4 << 2);
  const cand = list + (<usize>n4 << 2);
  const hist = cand + (<usize>n4 << 2);
  const blocks = hist + HIST_BYTES;
  const dist = flags & F_DIST ? <usize>dget(d, D_DIST) : 0;
  // the penalised row: the logits themselves, or a patched copy in w
  let src = x;
  const pn = <i32>dget(d, D_PATCH_N);
  if (pn > 0) {
    memory.copy(w, x, <usize>n << 2);
    const pIds = <usize>dget(d, D_PATCH_IDS), pVals = <usize>dget(d, D_PATCH_VALS);
    for (let j = 0; j < pn; j++) store<f32>(w + (<usize>load<i32>(pIds + (<usize>j << 2)) << 2), fAt(pVals, j));
    src = w;
  }
  const m = rowMax(src, n);
  const invT = <f32>dget(d, D_INV_T), minP = <f32>dget(d, D_MIN_P);
  const topK = <i32>dget(d, D_TOP_K);
  const topP = dget(d, D_TOP_P);
  let total: f64;
  let token = 0;
  const finite = m > -Infinity && m < Infinity;
  const nl = finite && topK > 0 && topK <= TOPK_FAST && topK < n
    ? topKList(w, src, n, m, invT, minP, topK, topP, list, cand, hist) : -1;
  if (nl >= 0) {
    total = keptList(w, list, nl, blocks, dist, n);
    if (flags & F_DRAW) token = drawList(w, list, nl, blocks, dget(d, D_U) * total);
  } else {
    let tau: u32 = 0;
    let lim: i32 = -1;
    if (!finite) {
      // degenerate row (all −inf / NaN, or +inf present): one-hot on the first maximum
      let t = 0;
      for (let i = 0; i < n; i++) if (fAt(src, i) == m) {
        t = i;
        break;
      }
      memory.fill(w, 0, <usize>n << 2);
      store<f32>(w + (<usize>t << 2), 1);
    } else {
      weights(w, src, n, m, invT, minP);
      if (topK > 0 && topK < n) {
        select(w, n, MODE_COUNT, <f64>topK, 0, -1, 0, 0, cand, hist);
        tau = selTau;
        lim = selLim;
        if (topP < 1) {
          // top-p over the top-k set as a list (increasing ids)
          const nk = gatherSet(w, n, tau, lim, list);
          select(w, n, MODE_MASS, topP, tau, lim, list, nk, cand, hist);
          tau = selTau;
          lim = selLim;
        }
      } else if (topP < 1) {
        select(w, n, MODE_MASS, topP, 0, -1, 0, 0, cand, hist);
        tau = selTau;
        lim = selLim;
      }
    }
    total = keptDense(w, n, tau, lim, blocks, dist);
    if (flags & F_DRAW) token = drawDense(w, n, tau, lim, blocks, dget(d, D_U) * total);
  }
  dset(d, D_OUT_MASS, total);
  if (flags & F_DRAW) dset(d, D_OUT_TOKEN, token);
}

/** Ids in (tau, lim), increasing, into list; their count. */
function gatherSet(w: usize, n: i32, tau: u32, lim: i32, list: usize): i32 {
  let nl = 0;
  for (let i = 0; i < n; i++) {
    if (inSet(load<u32>(w + (<usize>i << 2)), i, tau, lim)) {
      store<i32>(list + (<usize>nl << 2), i);
      nl++;
    }
  }
  return nl;
}

/** Rows [r0, r1) of the batch described at desc. */
export function sampleRows(desc: usize, r0: i32, r1: i32, tmp: usize): void {
  for (let r = r0; r < r1; r++) sampleRow(desc + <usize>(r * DESC) * 8, tmp);
}
