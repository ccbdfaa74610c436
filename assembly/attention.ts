// Causal GQA attention over a paged KV cache, one sequence. A unit is a block of up to `qb`
// consecutive query tokens × a run of `per` consecutive query heads of one KV head (per
// divides nH/nKV): its R = tokens·per rows (row r = query i0 + r/per, head h0 + r%per) are
// scored in one walk over K and weighted in one walk over V, so each K and V row is read
// once per unit instead of once per (query, head).
//
// Per row the operations and their order are fixed and the row's own (scores in increasing
// p, max, exp and f64 sum in increasing p, Σ e·v in increasing p, one division): the
// result of query i, head h depends only on (its q row, the cache, n = start+i+1) — never
// on T, qb, per, the other rows of its unit, the unit split or the thread. Blocking shares
// loads between rows, never an accumulator.
//   q: [T, nH, hd] with token stride qStride floats; kc, vc: [rows, nKV, hd];
//   pageTable: i32; out: [T, nH, hd]; scratch (this thread's): f64 sums [R], then f32
//   scores [R, nMax] (nMax = keys of the unit's last query), then i32 cache rows [KEY_BLOCK].
// Each score is exactly (Σ_d mac lanes over d in 4-steps, fixed hsum, + scalar mac tail)·scale;
// each output element exactly the mac chain 0 + e_0·v_0 + e_1·v_1 + … in increasing p.
import { hsum, f32At, f32Set, zero, expf4, expf1 } from './common';

/** acc + a·b per lane, multiply then add in both builds (no fused multiply-add): attention
 * keeps the roundings it had before query blocking. */
// @ts-ignore: decorator
@inline function mac(acc: v128, a: v128, b: v128): v128 {
  return f32x4.add(acc, f32x4.mul(a, b));
}

/** Scalar twin of one mac lane. */
// @ts-ignore: decorator
@inline function mac1(acc: f32, a: f32, b: f32): f32 {
  return acc + a * b;
}

/** Units of at most TOUCH_ROWS rows (decode, verify: few products per cache byte, so
 * memory-bound) touch their K rows K_AHEAD keys ahead of the score walk and each block's
 * V rows before weightBlock (touchRows). Intel Xeon, Node 24, qwen3.5-0.8b at 2048 keys,
 * one stream: attention 5.5–6.1 → 4.2–4.4 ms per decode step (V 20%, K 5–10%); prefill
 * units (many rows per key) were 2–5% slower with them, so they do not touch. */
const TOUCH_ROWS: i32 = 8;
const K_AHEAD: i32 = 32;

/** Keys per block of the Σ e·v walk (row indices resolved once per block). */
export const KEY_BLOCK: i32 = 64;

/** Row of position p in the paged cache. */
// @ts-ignore: decorator
@inline function cacheRow(pageTable: usize, pageSize: i32, p: i32): i32 {
  const pg = p / pageSize;
  return load<i32>(pageTable + (<usize>pg << 2)) * pageSize + (p - pg * pageSize);
}

/** Scalar tail of one score: Σ_{i ≥ hd&~3} q_i·k_i as a mac1 chain from 0. */
// @ts-ignore: decorator
@inline function dotTail(q: usize, k: usize, hd: i32): f32 {
  let t: f32 = 0;
  for (let i = hd & ~3; i < hd; i++) t = mac1(t, f32At(q, i), f32At(k, i));
  return t;
}

/** out = (q · k)·scale for one key (the chain every score uses). */
// @ts-ignore: decorator
@inline function score1(q: usize, k: usize, hd: i32, out: usize, scale: f32): void {
  let a = f32x4.splat(0);
  const n4 = <usize>(hd & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) a = mac(a, v128.load(q + o), v128.load(k + o));
  store<f32>(out, (hsum(a) + dotTail(q, k, hd)) * scale);
}

/** Four scores of one q row (keys k0..k3) into out[0..3]. */
function score4(q: usize, k0: usize, k1: usize, k2: usize, k3: usize, hd: i32, out: usize, scale: f32): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const n4 = <usize>(hd & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) {
    const qv = v128.load(q + o);
    a0 = mac(a0, qv, v128.load(k0 + o));
    a1 = mac(a1, qv, v128.load(k1 + o));
    a2 = mac(a2, qv, v128.load(k2 + o));
    a3 = mac(a3, qv, v128.load(k3 + o));
  }
  store<f32>(out, (hsum(a0) + dotTail(q, k0, hd)) * scale);
  store<f32>(out, (hsum(a1) + dotTail(q, k1, hd)) * scale, 4);
  store<f32>(out, (hsum(a2) + dotTail(q, k2, hd)) * scale, 8);
  store<f32>(out, (hsum(a3) + dotTail(q, k3, hd)) * scale, 12);
}

/** Four scores of each of two q rows (qa → outA[0..3], qb → outB[0..3]): eight accumulators
 * sharing each K load. */
function score2x4(qa: usize, qb: usize, k0: usize, k1: usize, k2: usize, k3: usize, hd: i32,
  outA: usize, outB: usize, scale: f32): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
  const n4 = <usize>(hd & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) {
    const qva = v128.load(qa + o);
    const qvb = v128.load(qb + o);
    let kv = v128.load(k0 + o);
    a0 = mac(a0, qva, kv); b0 = mac(b0, qvb, kv);
    kv = v128.load(k1 + o);
    a1 = mac(a1, qva, kv); b1 = mac(b1, qvb, kv);
    kv = v128.load(k2 + o);
    a2 = mac(a2, qva, kv); b2 = mac(b2, qvb, kv);
    kv = v128.load(k3 + o);
    a3 = mac(a3, qva, kv); b3 = mac(b3, qvb, kv);
  }
  store<f32>(outA, (hsum(a0) + dotTail(qa, k0, hd)) * scale);
  store<f32>(outA, (hsum(a1) + dotTail(qa, k1, hd)) * scale, 4);
  store<f32>(outA, (hsum(a2) + dotTail(qa, k2, hd)) * scale, 8);
  store<f32>(outA, (hsum(a3) + dotTail(qa, k3, hd)) * scale, 12);
  store<f32>(outB, (hsum(b0) + dotTail(qb, k0, hd)) * scale);
  store<f32>(outB, (hsum(b1) + dotTail(qb, k1, hd)) * scale, 4);
  store<f32>(outB, (hsum(b2) + dotTail(qb, k2, hd)) * scale, 8);
  store<f32>(outB, (hsum(b3) + dotTail(qb, k3, hd)) * scale, 12);
}

/** Max of n scores (exact: any order gives the same value for non-NaN scores). */
function maxOf(s: usize, n: i32): f32 {
  let mv = f32x4.splat(-Infinity);
  const n4 = n & ~3;
  for (let p = 0; p < n4; p += 4) mv = f32x4.max(mv, v128.load(s + (<usize>p << 2)));
  let mx = max(max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)), max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)));
  for (let p = n4; p < n; p++) mx = max(mx, f32At(s, p));
  return mx;
}

/** e_p = exp(s_p − max) in place over n scores (vectorised; lanes and tail bit-identical),
 * returning Σ e_p in f64, added in increasing p. */
function expAndSum(s: usize, n: i32, mx: f32): f64 {
  let sum = 0.0;
  const n4 = n & ~3;
  const mv = f32x4.splat(mx);
  for (let p = 0; p < n4; p += 4) {
    const sp = s + (<usize>p << 2);
    const e = expf4(f32x4.sub(v128.load(sp), mv));
    v128.store(sp, e);
    sum += <f64>f32x4.extract_lane(e, 0);
    sum += <f64>f32x4.extract_lane(e, 1);
    sum += <f64>f32x4.extract_lane(e, 2);
    sum += <f64>f32x4.extract_lane(e, 3);
  }
  for (let p = n4; p < n; p++) {
    const e = expf1(f32At(s, p) - mx);
    f32Set(s, p, e);
    sum += <f64>e;
  }
  return sum;
}

/** Scratch bytes reserved for the Unit record (≥ offsetof<Unit>()). */
const UNIT_BYTES: i32 = 64;

/** Where the rows of a unit live and how many keys each sees (kept at the start of the
 * thread's scratch). */
@unmanaged class Unit {
  q: usize = 0; // q row of row 0
  out: usize = 0; // out row of row 0
  qStride: usize = 0; // bytes between tokens in q
  outStride: usize = 0; // bytes between tokens in out
  per: i32 = 1;
  rows: i32 = 0; // R
  n0: i32 = 0; // keys of row 0's query; row r sees n0 + r/per
  nMax: i32 = 0;
  hd: i32 = 0;
}

// @ts-ignore: decorator
@inline function keysOf(u: Unit, r: i32): i32 {
  return u.n0 + r / u.per;
}
// @ts-ignore: decorator
@inline function qRow(u: Unit, r: i32): usize {
  const j = r / u.per;
  return u.q + <usize>j * u.qStride + (<usize>((r - j * u.per) * u.hd) << 2);
}
// @ts-ignore: decorator
@inline function outRow(u: Unit, r: i32): usize {
  const j = r / u.per;
  return u.out + <usize>j * u.outStride + (<usize>((r - j * u.per) * u.hd) << 2);
}

/** scores[r, p] = (q_r · k_p)·scale for p < keysOf(r): four keys per K load, two rows at a
 * time where both see all four keys. Rows are in non-decreasing order of keys. */
function scoreRows(u: Unit, scores: usize, kh: usize, rowB: usize, pageTable: usize, pageSize: i32, scale: f32): void {
  const hd = u.hd;
  const rb = <usize>u.nMax << 2; // bytes per score row
  const touch = u.rows <= TOUCH_ROWS;
  for (let p = 0; p < u.nMax; p += 4) {
    const full = p + 4 <= u.nMax;
    const k0 = kh + <usize>cacheRow(pageTable, pageSize, p) * rowB;
    const k1 = full ? kh + <usize>cacheRow(pageTable, pageSize, p + 1) * rowB : k0;
    const k2 = full ? kh + <usize>cacheRow(pageTable, pageSize, p + 2) * rowB : k0;
    const k3 = full ? kh + <usize>cacheRow(pageTable, pageSize, p + 3) * rowB : k0;
    if (touch) {
      for (let a = p + K_AHEAD; a < min(p + K_AHEAD + 4, u.nMax); a++) touchRow(kh + <usize>cacheRow(pageTable, pageSize, a) * rowB, <usize>hd << 2);
    }
    let r = 0;
    while (r < u.rows) {
      const nr = keysOf(u, r);
      const sr = scores + <usize>r * rb + (<usize>p << 2);
      if (p + 4 <= nr) {
        if (r + 1 < u.rows) { // keysOf(r + 1) ≥ nr
          score2x4(qRow(u, r), qRow(u, r + 1), k0, k1, k2, k3, hd, sr, sr + rb, scale);
          r += 2;
        } else {
          score4(qRow(u, r), k0, k1, k2, k3, hd, sr, scale);
          r++;
        }
        continue;
      }
      const qr = qRow(u, r);
      for (let pp = p; pp < nr && pp < p + 4; pp++) {
        score1(qr, kh + <usize>cacheRow(pageTable, pageSize, pp) * rowB, hd, sr + (<usize>(pp - p) << 2), scale);
      }
      r++;
    }
  }
}

/** o[0..16) += Σ_{b < nb} e[b] · v_b[db/4 ..] in increasing b, for one row. */
// @ts-ignore: decorator
@inline function weighted16(o: usize, e: usize, vrows: usize, db: usize, nb: i32): void {
  let c0 = v128.load(o), c1 = v128.load(o, 16), c2 = v128.load(o, 32), c3 = v128.load(o, 48);
  for (let b = 0; b < nb; b++) {
    const ev = v128.load32_splat(e + (<usize>b << 2));
    const vp = load<usize>(vrows + (<usize>b << 2)) + db;
    c0 = mac(c0, ev, v128.load(vp));
    c1 = mac(c1, ev, v128.load(vp, 16));
    c2 = mac(c2, ev, v128.load(vp, 32));
    c3 = mac(c3, ev, v128.load(vp, 48));
  }
  v128.store(o, c0); v128.store(o, c1, 16); v128.store(o, c2, 32); v128.store(o, c3, 48);
}

/** weighted16 for two rows with the same key count, sharing each V load. */
// @ts-ignore: decorator
@inline function weighted2x16(oa: usize, ob: usize, ea: usize, eb: usize, vrows: usize, db: usize, nb: i32): void {
  let a0 = v128.load(oa), a1 = v128.load(oa, 16), a2 = v128.load(oa, 32), a3 = v128.load(oa, 48);
  let b0 = v128.load(ob), b1 = v128.load(ob, 16), b2 = v128.load(ob, 32), b3 = v128.load(ob, 48);
  for (let b = 0; b < nb; b++) {
    const o = <usize>b << 2;
    const ua = v128.load32_splat(ea + o);
    const ub = v128.load32_splat(eb + o);
    const vp = load<usize>(vrows + o) + db;
    let v = v128.load(vp);
    a0 = mac(a0, ua, v); b0 = mac(b0, ub, v);
    v = v128.load(vp, 16);
    a1 = mac(a1, ua, v); b1 = mac(b1, ub, v);
    v = v128.load(vp, 32);
    a2 = mac(a2, ua, v); b2 = mac(b2, ub, v);
    v = v128.load(vp, 48);
    a3 = mac(a3, ua, v); b3 = mac(b3, ub, v);
  }
  v128.store(oa, a0); v128.store(oa, a1, 16); v128.store(oa, a2, 32); v128.store(oa, a3, 48);
  v128.store(ob, b0); v128.store(ob, b1, 16); v128.store(ob, b2, 32); v128.store(ob, b3, 48);
}

/** o[d] += Σ_{b < nb} e[b]·v_b[d] for d in [d0, hd) (4-lane vectors, then scalars). */
function weightedTail(o: usize, e: usize, vrows: usize, nb: i32, d0: i32, hd: i32): void {
  let d = d0;
  for (; d + 4 <= hd; d += 4) {
    const od = o + (<usize>d << 2);
    let c = v128.load(od);
    for (let b = 0; b < nb; b++) {
      c = mac(c, v128.load32_splat(e + (<usize>b << 2)), v128.load(load<usize>(vrows + (<usize>b << 2)) + (<usize>d << 2)));
    }
    v128.store(od, c);
  }
  for (; d < hd; d++) {
    let c = f32At(o, d);
    for (let b = 0; b < nb; b++) c = mac1(c, load<f32>(e + (<usize>b << 2)), f32At(load<usize>(vrows + (<usize>b << 2)), d));
    f32Set(o, d, c);
  }
}

/** out_r += Σ_p e[r, p]·v_p over keys [p0, p0 + nb_r) for every row (nb_r = its keys in the
 * block); `vrows` holds the V row addresses of the block. Two rows at a time where their
 * counts match. */
function weightBlock(u: Unit, scores: usize, vrows: usize, p0: i32): void {
  const rb = <usize>u.nMax << 2;
  const e0 = scores + (<usize>p0 << 2);
  const hd16 = u.hd & ~15;
  for (let d = 0; d < hd16; d += 16) {
    const db = <usize>d << 2;
    let r = 0;
    while (r < u.rows) {
      const nb = min(KEY_BLOCK, keysOf(u, r) - p0);
      if (nb <= 0) { r++; continue; }
      if (r + 1 < u.rows && min(KEY_BLOCK, keysOf(u, r + 1) - p0) == nb) {
        weighted2x16(outRow(u, r) + db, outRow(u, r + 1) + db, e0 + <usize>r * rb, e0 + <usize>(r + 1) * rb, vrows, db, nb);
        r += 2;
      } else {
        weighted16(outRow(u, r) + db, e0 + <usize>r * rb, vrows, db, nb);
        r++;
      }
    }
  }
  if (hd16 == u.hd) return;
  for (let r = 0; r < u.rows; r++) {
    const nb = min(KEY_BLOCK, keysOf(u, r) - p0);
    if (nb > 0) weightedTail(outRow(u, r), e0 + <usize>r * rb, vrows, nb, hd16, u.hd);
  }
}

/** Load one byte of every 64 of the row at p (rowBytes), in order, results unused (a wasm
 * load may trap, so V8 keeps it): the row's cache misses start now. */
// @ts-ignore: decorator
@inline function touchRow(p: usize, rowBytes: usize): void {
  for (let o: usize = 0; o < rowBytes; o += 64) load<u8>(p + o);
}

/** touchRow of each of the nb V rows at vrows, in row order: weightBlock then walks the
 * rows 64 bytes at a time per 16-element slice (64 rows at once), which the hardware
 * prefetchers do not follow; read whole and in order first, the block's rows are in cache
 * when it does. */
function touchRows(vrows: usize, nb: i32, rowBytes: usize): void {
  for (let b = 0; b < nb; b++) touchRow(load<usize>(vrows + (<usize>b << 2)), rowBytes);
}

export function attention(out: usize, q: usize, qStride: i32, kc: usize, vc: usize, pageTable: usize,
  pageSize: i32, start: i32, nH: i32, nKV: i32, hd: i32, u0: i32, u1: i32, scratch: usize, per: i32, qb: i32, t: i32): void {
  const group = nH / nKV;
  const rowB = <usize>(nKV * hd) << 2;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  const runsPerBlock = nH / per;
  const blocks = (t + qb - 1) / qb;
  const u = changetype<Unit>(scratch);
  const sums = scratch + UNIT_BYTES; // f64 [R]
  for (let unit = u0; unit < u1; unit++) {
    // the costliest (latest) query blocks first, so the last chunks claimed are short
    const blk = blocks - 1 - unit / runsPerBlock;
    const h0 = (unit % runsPerBlock) * per;
    const i0 = blk * qb;
    const nq = min(qb, t - i0);
    u.q = q + ((<usize>i0 * <usize>qStride + <usize>h0 * <usize>hd) << 2);
    u.out = out + ((<usize>i0 * <usize>nH + <usize>h0) * <usize>hd << 2);
    u.qStride = <usize>qStride << 2;
    u.outStride = <usize>(nH * hd) << 2;
    u.per = per;
    u.rows = nq * per;
    u.n0 = start + i0 + 1;
    u.nMax = start + i0 + nq;
    u.hd = hd;
    const scores = sums + (<usize>u.rows << 3); // f32 [R, nMax]
    const vrows = scores + ((<usize>u.rows * <usize>u.nMax) << 2); // usize [KEY_BLOCK]
    const ko = <usize>((h0 / group) * hd) << 2;
    scoreRows(u, scores, kc + ko, rowB, pageTable, pageSize, scale);
    for (let r = 0; r < u.rows; r++) {
      const n = keysOf(u, r);
      const sr = scores + ((<usize>r * <usize>u.nMax) << 2);
      store<f64>(sums + (<usize>r << 3), expAndSum(sr, n, maxOf(sr, n)));
      zero(outRow(u, r), hd);
    }
    for (let p0 = 0; p0 < u.nMax; p0 += KEY_BLOCK) {
      const nb = min(KEY_BLOCK, u.nMax - p0);
      for (let b = 0; b < KEY_BLOCK; b++) {
        store<usize>(vrows + (<usize>b << 2), vc + ko + <usize>cacheRow(pageTable, pageSize, p0 + min(b, nb - 1)) * rowB);
      }
      if (u.rows <= TOUCH_ROWS) touchRows(vrows, nb, <usize>hd << 2);
      weightBlock(u, scores, vrows, p0);
    }
    for (let r = 0; r < u.rows; r++) {
      const inv = <f32>(1.0 / load<f64>(sums + (<usize>r << 3)));
      const o = outRow(u, r);
      for (let d = 0; d < hd; d++) f32Set(o, d, f32At(o, d) * inv);
    }
  }
}

/** Bytes of one thread's scratch for units of R rows over at most nMax keys. */
export function attentionTmpBytes(rows: i32, nMax: i32): i32 {
  return UNIT_BYTES + rows * 8 + rows * nMax * 4 + KEY_BLOCK * 4;
}
