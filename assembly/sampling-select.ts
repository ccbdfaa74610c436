// The cuts and the draw of assembly/sampling.ts over the weights w (f32 bits compared as
// integers: w ≥ 0). A kept set is always {w > tau} ∪ {w = tau, id ≤ lim} (tau = 0, lim = −1:
// every nonzero weight). Sets are walked either over the whole row or over an id list in
// increasing id order (the results are the same bits: a list holds every id that matters,
// and zeros add nothing to a sum). Exact definition: src/kernels/ref/sampling.ts.

export const MODE_COUNT = 0;
export const MODE_MASS = 1;
const BLOCK: i32 = 64;

// @ts-ignore: decorator
@inline function bitsAt(w: usize, i: i32): u32 {
  return load<u32>(w + (<usize>i << 2));
}

// @ts-ignore: decorator
@inline function idAt(list: usize, j: i32): i32 {
  return load<i32>(list + (<usize>j << 2));
}

// @ts-ignore: decorator
@inline export function inSet(k: u32, i: i32, tau: u32, lim: i32): bool {
  return k > tau || (k == tau && i <= lim);
}

// @ts-ignore: decorator
@inline function bump(cnt: usize, mass: usize, b: usize, k: u32): void {
  store<i32>(cnt + (b << 2), load<i32>(cnt + (b << 2)) + 1);
  store<f64>(mass + (b << 3), load<f64>(mass + (b << 3)) + <f64>reinterpret<f32>(k));
}

/** Result of select (globals are per instance, i.e. per thread). */
export let selTau: u32 = 0;
export let selLim: i32 = -1;

/** Bytes of select's histograms (4 × 1024 counts, 4 × 1024 masses). */
export const HIST_BYTES: i32 = 4 * 1024 * 4 + 4 * 1024 * 8;

/** Level-0 histogram (bits 30..20) of the ids in (tau, lim): over `list` (nl ids, one sum
 * per bucket in id order) or, when list = 0, over the whole row as four partial sums by
 * id mod 4, combined (p0 + p1) + (p2 + p3). Result in cnt/mass [1024]. */
function level0(w: usize, n: i32, tau: u32, lim: i32, list: usize, nl: i32, hist: usize): void {
  const cnt = hist;
  const mass = hist + 4 * 4096;
  if (list) {
    memory.fill(cnt, 0, 4096);
    memory.fill(mass, 0, 8192);
    for (let j = 0; j < nl; j++) {
      const id = idAt(list, j);
      const k = bitsAt(w, id);
      if (inSet(k, id, tau, lim)) bump(cnt, mass, <usize>(k >> 20), k);
    }
    return;
  }
  memory.fill(cnt, 0, 4 * 4096);
  memory.fill(mass, 0, 4 * 8192);
  const n4 = n & ~3;
  if (tau == 0 && lim < 0) {
    // every nonzero weight: four ids per step, one partial histogram each
    for (let i = 0; i < n4; i += 4) {
      const v = v128.load(w + (<usize>i << 2));
      const k0 = i32x4.extract_lane(v, 0), k1 = i32x4.extract_lane(v, 1);
      const k2 = i32x4.extract_lane(v, 2), k3 = i32x4.extract_lane(v, 3);
      if (k0) bump(cnt, mass, <usize>(<u32>k0 >> 20), <u32>k0);
      if (k1) bump(cnt, mass, 1024 + <usize>(<u32>k1 >> 20), <u32>k1);
      if (k2) bump(cnt, mass, 2048 + <usize>(<u32>k2 >> 20), <u32>k2);
      if (k3) bump(cnt, mass, 3072 + <usize>(<u32>k3 >> 20), <u32>k3);
    }
  }
  for (let i = tau == 0 && lim < 0 ? n4 : 0; i < n; i++) {
    const k = bitsAt(w, i);
    if (!inSet(k, i, tau, lim)) continue;
    const part = <usize>(i & 3) << 10;
    bump(cnt, mass, part + <usize>(k >> 20), k);
  }
  for (let b = 0; b < 1024; b++) {
    const o = <usize>b;
    const c = load<i32>(cnt + (o << 2)) + load<i32>(cnt + ((o + 1024) << 2)) + load<i32>(cnt + ((o + 2048) << 2)) + load<i32>(cnt + ((o + 3072) << 2));
    const m = (load<f64>(mass + (o << 3)) + load<f64>(mass + ((o + 1024) << 3))) + (load<f64>(mass + ((o + 2048) << 3)) + load<f64>(mass + ((o + 3072) << 3)));
    store<i32>(cnt + (o << 2), c);
    store<f64>(mass + (o << 3), m);
  }
}

/** The cut of the order (weight desc, id asc) among the ids in (tau, lim): the shortest
 * prefix with count ≥ param (MODE_COUNT) or mass ≥ param·(set mass) (MODE_MASS), by a
 * radix walk over the weight bits (levels: bits 30..20, 19..10, 9..0; buckets descending,
 * running sums carried across levels), then the ties in id order. Result in (selTau,
 * selLim); the whole set when no prefix reaches it. cand: scratch for n ids. */
export function select(w: usize, n: i32, mode: i32, param: f64, tau: u32, lim: i32, list: usize, nl: i32, cand: usize, hist: usize): void {
  const cnt = hist;
  const mass = hist + 4 * 4096;
  level0(w, n, tau, lim, list, nl, hist);
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
      memory.fill(cnt, 0, 4096);
      memory.fill(mass, 0, 8192);
      for (let j = 0; j < nc; j++) {
        const k = bitsAt(w, idAt(cand, j));
        bump(cnt, mass, <usize>((k >> shift) & 1023), k);
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
    const hiMask: u32 = level == 0 ? 0xfff00000 : level == 1 ? 0xfffffc00 : 0xffffffff;
    if (level == 0) nc = gatherBucket(w, n, tau, lim, list, nl, key, cand);
    else {
      let o = 0;
      for (let j = 0; j < nc; j++) {
        const id = idAt(cand, j);
        if ((bitsAt(w, id) & hiMask) == key) {
          store<i32>(cand + (<usize>o << 2), id);
          o++;
        }
      }
      nc = o;
    }
  }
  // ties (weight bits == key), in id order
  let last = -1;
  for (let j = 0; j < nc; j++) {
    const id = idAt(cand, j);
    last = id;
    cumC++;
    cumM += <f64>reinterpret<f32>(bitsAt(w, id));
    if (mode == MODE_COUNT ? cumC >= <i32>param : cumM >= target) break;
  }
  selTau = key;
  selLim = last;
}

/** Ids in (tau, lim) whose bits 30..20 equal key's, in id order, into cand; their count. */
function gatherBucket(w: usize, n: i32, tau: u32, lim: i32, list: usize, nl: i32, key: u32, cand: usize): i32 {
  let nc = 0;
  if (list) {
    for (let j = 0; j < nl; j++) {
      const id = idAt(list, j);
      const k = bitsAt(w, id);
      if ((k & 0xfff00000) == key && inSet(k, id, tau, lim)) {
        store<i32>(cand + (<usize>nc << 2), id);
        nc++;
      }
    }
    return nc;
  }
  const n4 = n & ~3;
  const lo = i32x4.splat(<i32>key), hi = i32x4.splat(<i32>(key | 0xfffff));
  for (let i = 0; i < n; i++) {
    if (i < n4 && (i & 3) == 0) {
      const v = v128.load(w + (<usize>i << 2));
      if (!i32x4.bitmask(v128.and(i32x4.ge_s(v, lo), i32x4.le_s(v, hi)))) {
        i += 3;
        continue;
      }
    }
    const k = bitsAt(w, i);
    if ((k & 0xfff00000) == key && inSet(k, i, tau, lim)) {
      store<i32>(cand + (<usize>nc << 2), i);
      nc++;
    }
  }
  return nc;
}

/** Keep only the ids of list in (tau, lim) (order kept); the new length. */
export function filterList(w: usize, list: usize, nl: i32, tau: u32, lim: i32): i32 {
  let o = 0;
  for (let j = 0; j < nl; j++) {
    const id = idAt(list, j);
    if (inSet(bitsAt(w, id), id, tau, lim)) {
      store<i32>(list + (<usize>o << 2), id);
      o++;
    }
  }
  return o;
}

/** Per block of 64 ids: the kept weights summed per id mod 4 in order, (l0 + l1) + (l2 + l3).
 * With dist != 0 also writes the kept weights (0 elsewhere). Returns Σ blocks in order. */
export function keptDense(w: usize, n: i32, tau: u32, lim: i32, blocks: usize, dist: usize): f64 {
  const tv = i32x4.splat(<i32>tau), lv = i32x4.splat(lim);
  let total: f64 = 0;
  const nb = (n + BLOCK - 1) / BLOCK;
  for (let b = 0; b < nb; b++) {
    const lo = b * BLOCK;
    const hi = min(n, lo + BLOCK);
    const hi4 = lo + ((hi - lo) & ~3);
    let a01 = f64x2.splat(0);
    let a23 = f64x2.splat(0);
    let idv = i32x4.add(i32x4.splat(lo), i32x4(0, 1, 2, 3));
    for (let i = lo; i < hi4; i += 4) {
      const e = v128.load(w + (<usize>i << 2));
      const keep = v128.or(i32x4.gt_s(e, tv), v128.and(i32x4.eq(e, tv), i32x4.le_s(idv, lv)));
      const v = v128.and(e, keep);
      if (dist) v128.store(dist + (<usize>i << 2), v);
      a01 = f64x2.add(a01, f64x2.promote_low_f32x4(v));
      a23 = f64x2.add(a23, f64x2.promote_low_f32x4(v128.shuffle<f32>(v, v, 2, 3, 0, 1)));
      idv = i32x4.add(idv, i32x4.splat(4));
    }
    let l0 = f64x2.extract_lane(a01, 0), l1 = f64x2.extract_lane(a01, 1);
    let l2 = f64x2.extract_lane(a23, 0), l3 = f64x2.extract_lane(a23, 1);
    for (let i = hi4; i < hi; i++) {
      const k = bitsAt(w, i);
      const v: f32 = inSet(k, i, tau, lim) ? reinterpret<f32>(k) : 0;
      if (dist) store<f32>(dist + (<usize>i << 2), v);
      const j = i & 3;
      if (j == 0) l0 += <f64>v;
      else if (j == 1) l1 += <f64>v;
      else l2 += <f64>v;
    }
    const bs = (l0 + l1) + (l2 + l3);
    store<f64>(blocks + (<usize>b << 3), bs);
    total += bs;
  }
  return total;
}

/** First kept id whose running kept mass (whole blocks, then ids in order inside the
 * crossing block) exceeds target; the last kept id of that block (or of the row) when
 * rounding leaves none. */
export function drawDense(w: usize, n: i32, tau: u32, lim: i32, blocks: usize, target: f64): i32 {
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
      const k = bitsAt(w, i);
      if (!inSet(k, i, tau, lim)) continue;
      cum += <f64>reinterpret<f32>(k);
      last = i;
      if (cum > target) return i;
    }
    if (last >= 0) return last;
  }
  for (let i = n - 1; i >= 0; i--) if (inSet(bitsAt(w, i), i, tau, lim)) return i;
  return 0;
}

/** keptDense over a list of kept ids (increasing): the same block sums (zeros add
 * nothing), stored per list entry's block in blocks[b]; returns the total. */
export function keptList(w: usize, list: usize, nl: i32, blocks: usize, dist: usize, n: i32): f64 {
  if (dist) memory.fill(dist, 0, <usize>n << 2);
  let total: f64 = 0;
  let j = 0;
  while (j < nl) {
    const b = idAt(list, j) / BLOCK;
    let l0: f64 = 0, l1: f64 = 0, l2: f64 = 0, l3: f64 = 0;
    for (; j < nl && idAt(list, j) / BLOCK == b; j++) {
      const id = idAt(list, j);
      const v = reinterpret<f32>(bitsAt(w, id));
      if (dist) store<f32>(dist + (<usize>id << 2), v);
      const r = id & 3;
      if (r == 0) l0 += <f64>v;
      else if (r == 1) l1 += <f64>v;
      else if (r == 2) l2 += <f64>v;
      else l3 += <f64>v;
    }
    const bs = (l0 + l1) + (l2 + l3);
    store<f64>(blocks + (<usize>b << 3), bs);
    total += bs;
  }
  return total;
}

/** drawDense over a list of kept ids (blocks from keptList). */
export function drawList(w: usize, list: usize, nl: i32, blocks: usize, target: f64): i32 {
  let cum: f64 = 0;
  let j = 0;
  while (j < nl) {
    const b = idAt(list, j) / BLOCK;
    const bs = load<f64>(blocks + (<usize>b << 3));
    if (!(cum + bs > target)) {
      cum += bs;
      while (j < nl && idAt(list, j) / BLOCK == b) j++;
      continue;
    }
    let last = -1;
    for (; j < nl && idAt(list, j) / BLOCK == b; j++) {
      const id = idAt(list, j);
      cum += <f64>reinterpret<f32>(bitsAt(w, id));
      last = id;
      if (cum > target) return id;
    }
    return last;
  }
  return nl > 0 ? idAt(list, nl - 1) : 0;
}
