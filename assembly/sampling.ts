// Sampling over logits rows: temperature, max, exp-sum, min-p / top-k / top-p cuts, the
// categorical draw, and the raw log-softmax normaliser + top-N for logprobs. One row per
// call of sampleRows' inner loop; rows are independent (the pool splits a batch by rows).
// The exact definition (every rounding) is stated in src/kernels/ref/sampling.ts, the
// plain-TS twin; this file computes bit-identical results (f32 ops without FMA, f64 sums
// in the orders stated there).
//
// Row descriptor: DESC f64 slots per row at desc + row·DESC·8 (slot names: D_*).
// Per-thread scratch (tmp): s f32[n4] | cand i32[n4] | cnt i32[1024] | mass f64[1024] |
// blocks f64[ceil(n/64)]  (sampleTmpBytes(n) bytes).

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
const MODE_COUNT = 0;
const MODE_MASS = 1;

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

/** exp of each lane for y ≤ 0; 0 where y < −87 or NaN. */
// @ts-ignore: decorator
@inline function exp32v(y: v128): v128 {
  const ok = f32x4.ge(y, f32x4.splat(EXP_MIN));
  const k = f32x4.nearest(f32x4.mul(y, f32x4.splat(LOG2E)));
  let r = f32x4.sub(y, f32x4.mul(k, f32x4.splat(C1)));
  r = f32x4.sub(r, f32x4.mul(k, f32x4.splat(C2)));
  const z = f32x4.mul(r, r);
  let p = f32x4.add(f32x4.mul(f32x4.splat(P0), r), f32x4.splat(P1));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P2));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P4));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P5));
  p = f32x4.add(f32x4.mul(p, z), r);
  p = f32x4.add(p, f32x4.splat(1.0));
  const pow = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(k), i32x4.splat(127)), 23);
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

/** Σ exp32(x_i − m), f64: even ids summed in order, odd ids in order, then even + odd. */
function sumExp(x: usize, n: i32, m: f32): f64 {
  const n4 = n & ~3;
  const mv = f32x4.splat(m);
  let acc = f64x2.splat(0);
  for (let i = 0; i < n4; i += 4) {
    const e = exp32v(f32x4.sub(v128.load(x + (<usize>i << 2)), mv));
    acc = f64x2.add(acc, f64x2.promote_low_f32x4(e));
    acc = f64x2.add(acc, f64x2.promote_low_f32x4(v128.shuffle<f32>(e, e, 2, 3, 0, 1)));
  }
  let se = f64x2.extract_lane(acc, 0), so = f64x2.extract_lane(acc, 1);
  for (let i = n4; i < n; i++) {
    const e = <f64>exp32(fAt(x, i) - m);
    if (i & 1) so += e;
    else se += e;
  }
  return se + so;
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

/** s[i] = exp32((s[i] − m)·invT), then 0 where below minP (f32 compares). */
function weights(s: usize, n: i32, m: f32, invT: f32, minP: f32): void {
  const n4 = n & ~3;
  const mv = f32x4.splat(m), tv = f32x4.splat(invT), pv = f32x4.splat(minP);
  for (let i = 0; i < n4; i += 4) {
    const p = s + (<usize>i << 2);
    const e = exp32v(f32x4.mul(f32x4.sub(v128.load(p), mv), tv));
    v128.store(p, v128.andnot(e, f32x4.lt(e, pv)));
  }
  for (let i = n4; i < n; i++) {
    const e = exp32((fAt(s, i) - m) * invT);
    store<f32>(s + (<usize>i << 2), e < minP ? 0 : e);
  }
}

// Selection state (one row at a time per thread; globals are per instance = per thread)
let selTau: u32 = 0;
let selLim: i32 = -1;

// @ts-ignore: decorator
@inline function inSet(k: u32, i: i32, tau: u32, lim: i32): bool {
  return k > tau || (k == tau && i <= lim);
}

/** The cut of the order (weight desc, id asc) among ids in the set (tau, lim): the shortest
 * prefix with count ≥ param (MODE_COUNT) or mass ≥ param·(mass of the set) (MODE_MASS),
 * by a 3-level radix walk over the weight bits (10 bits per level) and then over ties in
 * id order. Result in (selTau, selLim); the whole set when no prefix reaches it. */
function select(s: usize, n: i32, mode: i32, param: f64, tau: u32, lim: i32, cand: usize, cnt: usize, mass: usize): void {
  memory.fill(cnt, 0, 4096);
  memory.fill(mass, 0, 8192);
  for (let i = 0; i < n; i++) {
    const k = load<u32>(s + (<usize>i << 2));
    if (!inSet(k, i, tau, lim)) continue;
    const b = <usize>(k >> 20);
    store<i32>(cnt + (b << 2), load<i32>(cnt + (b << 2)) + 1);
    store<f64>(mass + (b << 3), load<f64>(mass + (b << 3)) + <f64>reinterpret<f32>(k));
  }
  let target = param;
  if (mode == MODE_MASS) {
    let total: f64 = 0;
    for (let b = 1023; b >= 0; b--) total += load<f64>(mass + (<usize>b << 3));
    target = param * total;
  }
  let cumC: i32 = 0;
  let cumM: f64 = 0;
  let key: u32 = 0;
  let nc = 0;
  for (let level = 0; level < 3; level++) {
    const shift: u32 = level == 0 ? 20 : level == 1 ? 10 : 0;
    if (level > 0) {
      // histogram of the next 10 bits over the candidates
      memory.fill(cnt, 0, 4096);
      memory.fill(mass, 0, 8192);
      for (let j = 0; j < nc; j++) {
        const k = load<u32>(s + (<usize>iAt(cand, j) << 2));
        const b = <usize>((k >> shift) & 1023);
        store<i32>(cnt + (b << 2), load<i32>(cnt + (b << 2)) + 1);
        store<f64>(mass + (b << 3), load<f64>(mass + (b << 3)) + <f64>reinterpret<f32>(k));
      }
    }
    let hit = -1;
    let lowest = -1;
    let beforeC: i32 = 0;
    let beforeM: f64 = 0;
    for (let b = 1023; b >= 0; b--) {
      const c = load<i32>(cnt + (<usize>b << 2));
      if (c == 0) continue;
      lowest = b;
      beforeC = cumC;
      beforeM = cumM;
      const m = load<f64>(mass + (<usize>b << 3));
      if (mode == MODE_COUNT ? cumC + c >= <i32>param : cumM + m >= target) {
        hit = b;
        break;
      }
      cumC += c;
      cumM += m;
    }
    if (level == 0 && hit < 0) {
      selTau = tau;
      selLim = lim;
      return;
    }
    if (hit < 0) {
      // rounding (the sub-buckets sum below the bucket): the cut is in the lowest sub-bucket
      hit = lowest;
      cumC = beforeC;
      cumM = beforeM;
    }
    key |= (<u32>hit) << shift;
    // candidates of the next level: ids in the crossing bucket, in id order
    const hiMask: u32 = level == 0 ? 0xfff00000 : level == 1 ? 0xfffffc00 : 0xffffffff;
    if (level == 0) {
      for (let i = 0; i < n; i++) {
        const k = load<u32>(s + (<usize>i << 2));
        if ((k & hiMask) == key && inSet(k, i, tau, lim)) {
          store<i32>(cand + (<usize>nc << 2), i);
          nc++;
        }
      }
    } else {
      let w = 0;
      for (let j = 0; j < nc; j++) {
        const id = iAt(cand, j);
        if ((load<u32>(s + (<usize>id << 2)) & hiMask) == key) {
          store<i32>(cand + (<usize>w << 2), id);
          w++;
        }
      }
      nc = w;
    }
  }
  // ties (weight bits == key), in id order
  let last = -1;
  for (let j = 0; j < nc; j++) {
    const id = iAt(cand, j);
    last = id;
    cumC++;
    cumM += <f64>fAt(s, id);
    if (mode == MODE_COUNT ? cumC >= <i32>param : cumM >= target) break;
  }
  selTau = key;
  selLim = last;
}

/** Per block of 64 ids: Σ of kept weights (even ids in order, odd ids in order, even + odd).
 * With dist != 0 also writes the kept weights (0 elsewhere) there. Returns Σ blocks in order. */
function keptBlocks(s: usize, n: i32, tau: u32, lim: i32, blocks: usize, dist: usize): f64 {
  const tv = i32x4.splat(<i32>tau), lv = i32x4.splat(lim);
  let total: f64 = 0;
  const nb = (n + BLOCK - 1) / BLOCK;
  for (let b = 0; b < nb; b++) {
    const lo = b * BLOCK;
    const hi = min(n, lo + BLOCK);
    const hi4 = lo + ((hi - lo) & ~3);
    let acc = f64x2.splat(0);
    let idv = i32x4.add(i32x4.splat(lo), i32x4(0, 1, 2, 3));
    for (let i = lo; i < hi4; i += 4) {
      const e = v128.load(s + (<usize>i << 2));
      const keep = v128.or(i32x4.gt_s(e, tv), v128.and(i32x4.eq(e, tv), i32x4.le_s(idv, lv)));
      const w = v128.and(e, keep);
      if (dist) v128.store(dist + (<usize>i << 2), w);
      acc = f64x2.add(acc, f64x2.promote_low_f32x4(w));
      acc = f64x2.add(acc, f64x2.promote_low_f32x4(v128.shuffle<f32>(w, w, 2, 3, 0, 1)));
      idv = i32x4.add(idv, i32x4.splat(4));
    }
    let se = f64x2.extract_lane(acc, 0), so = f64x2.extract_lane(acc, 1);
    for (let i = hi4; i < hi; i++) {
      const k = load<u32>(s + (<usize>i << 2));
      const w: f32 = inSet(k, i, tau, lim) ? reinterpret<f32>(k) : 0;
      if (dist) store<f32>(dist + (<usize>i << 2), w);
      if (i & 1) so += <f64>w;
      else se += <f64>w;
    }
    const bs = se + so;
    store<f64>(blocks + (<usize>b << 3), bs);
    total += bs;
  }
  return total;
}

/** First kept id whose running kept mass (blocks in order, then ids in order inside the
 * crossing block) exceeds target; the last kept id of that block (or of the row) when
 * rounding leaves none. */
function drawKept(s: usize, n: i32, tau: u32, lim: i32, blocks: usize, target: f64): i32 {
  const nb = (n + BLOCK - 1) / BLOCK;
  let cum: f64 = 0;
  for (let b = 0; b < nb; b++) {
    const bs = load<f64>(blocks + (<usize>b << 3));
    if (!(cum + bs > target)) {
      cum += bs;
      continue;
    }
    const lo = b * BLOCK;
    const hi = min(n, lo + BLOCK);
    let last = -1;
    for (let i = lo; i < hi; i++) {
      const k = load<u32>(s + (<usize>i << 2));
      if (!inSet(k, i, tau, lim)) continue;
      cum += <f64>reinterpret<f32>(k);
      last = i;
      if (cum > target) return i;
    }
    if (last >= 0) return last;
  }
  for (let i = n - 1; i >= 0; i--) if (inSet(load<u32>(s + (<usize>i << 2)), i, tau, lim)) return i;
  return 0;
}

/** Bytes of per-thread scratch for rows of up to n ids. */
export function sampleTmpBytes(n: i32): i32 {
  const n4 = (n + 3) & ~3;
  return n4 * 8 + 4096 + 8192 + ((n + BLOCK - 1) / BLOCK) * 8 + 64;
}

/** One row (descriptor d) with per-thread scratch tmp. */
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
  const s = tmp;
  const cand = s + (<usize>n4 << 2);
  const cnt = cand + (<usize>n4 << 2);
  const mass = cnt + 4096;
  const blocks = mass + 8192;
  memory.copy(s, x, <usize>n << 2);
  const pn = <i32>dget(d, D_PATCH_N);
  const pIds = <usize>dget(d, D_PATCH_IDS), pVals = <usize>dget(d, D_PATCH_VALS);
  for (let j = 0; j < pn; j++) store<f32>(s + (<usize>iAt(pIds, j) << 2), fAt(pVals, j));
  const m = rowMax(s, n);
  let tau: u32 = 0;
  let lim: i32 = -1;
  if (!(m > -Infinity && m < Infinity)) {
    // degenerate row (all −inf / NaN, or +inf present): one-hot on the first maximum
    let t = 0;
    for (let i = 0; i < n; i++) if (fAt(s, i) == m) {
      t = i;
      break;
    }
    memory.fill(s, 0, <usize>n << 2);
    store<f32>(s + (<usize>t << 2), 1);
  } else {
    weights(s, n, m, <f32>dget(d, D_INV_T), <f32>dget(d, D_MIN_P));
    const topK = <i32>dget(d, D_TOP_K);
    const topP = dget(d, D_TOP_P);
    if (topK > 0 && topK < n) {
      select(s, n, MODE_COUNT, <f64>topK, tau, lim, cand, cnt, mass);
      tau = selTau;
      lim = selLim;
    }
    if (topP < 1) {
      select(s, n, MODE_MASS, topP, tau, lim, cand, cnt, mass);
      tau = selTau;
      lim = selLim;
    }
  }
  const total = keptBlocks(s, n, tau, lim, blocks, flags & F_DIST ? <usize>dget(d, D_DIST) : 0);
  dset(d, D_OUT_MASS, total);
  if (flags & F_DRAW) dset(d, D_OUT_TOKEN, drawKept(s, n, tau, lim, blocks, dget(d, D_U) * total));
}

/** Rows [r0, r1) of the batch described at desc. */
export function sampleRows(desc: usize, r0: i32, r1: i32, tmp: usize): void {
  for (let r = r0; r < r1; r++) sampleRow(desc + <usize>(r * DESC) * 8, tmp);
}
