// Causal GQA attention over a paged KV cache, one sequence, units u ∈ [u0, u1) where
// u = i·(nH/per) + s (query token i, run s of `per` consecutive query heads, all of one KV
// head; per divides nH/nKV): the unit scores its heads in one walk over the cache, so each
// K and V row is read once per run instead of once per head (long contexts use whole
// groups; short ones per = 1 for more parallel units). Query i (position start+i) attends to positions
// 0..start+i. Per head the operations and their order are fixed (scores in increasing p,
// max, exp and f64 sum in increasing p, Σ e·v in increasing p): a head's result depends
// only on (q row, cache, n = start+i+1), never on T, the other units or the thread.
//   q: [T, nH, hd] with token stride qStride floats; kc, vc: [rows, nKV, hd];
//   pageTable: i32; out: [T, nH, hd]; scratch (this thread's): f64 sums [group], then f32
//   scores [group, start + T], then i32 cache rows [KEY_BLOCK].
// The walks are register-blocked (4 keys per q load; 16 output lanes per pass over a block
// of keys) with every element's chain unchanged: each score is exactly dot(q, k), each
// output element exactly the axpy chain 0 + e_0·v_0 + e_1·v_1 + … in increasing p.
import { dot, hsum, f32At, f32Set, zero, expf4, expf1 } from './common';

/** Keys per block of the Σ e·v walk (their V rows stay in L1 across the output lanes). */
export const KEY_BLOCK: i32 = 32;

/** Row of position p in the paged cache. */
// @ts-ignore: decorator
@inline function cacheRow(pageTable: usize, pageSize: i32, p: i32): i32 {
  const pg = p / pageSize;
  return load<i32>(pageTable + (<usize>pg << 2)) * pageSize + (p - pg * pageSize);
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

/** dot(q, k_x, hd) for four keys at once (the same chain per key as dot). */
// @ts-ignore: decorator
@inline function dot4(q: usize, k0: usize, k1: usize, k2: usize, k3: usize, hd: i32, out: usize, scale: f32): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const end = q + (<usize>(hd & ~3) << 2);
  let qp = q;
  let o: usize = 0;
  while (qp < end) {
    const qv = v128.load(qp);
    a0 = f32x4.add(a0, f32x4.mul(qv, v128.load(k0 + o)));
    a1 = f32x4.add(a1, f32x4.mul(qv, v128.load(k1 + o)));
    a2 = f32x4.add(a2, f32x4.mul(qv, v128.load(k2 + o)));
    a3 = f32x4.add(a3, f32x4.mul(qv, v128.load(k3 + o)));
    qp += 16;
    o += 16;
  }
  let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
  for (let i = hd & ~3; i < hd; i++) {
    const x = f32At(q, i);
    t0 += x * f32At(k0, i); t1 += x * f32At(k1, i); t2 += x * f32At(k2, i); t3 += x * f32At(k3, i);
  }
  store<f32>(out, (hsum(a0) + t0) * scale);
  store<f32>(out, (hsum(a1) + t1) * scale, 4);
  store<f32>(out, (hsum(a2) + t2) * scale, 8);
  store<f32>(out, (hsum(a3) + t3) * scale, 12);
}

/** o[d] += Σ_{b < nb} e[b] · v_b[d] for d < hd, b ascending (v_b at vc + rows[b]·rowBytes):
 * 16 lanes per pass, then 4-lane vectors, then scalars — per element the axpy chain. */
function weightedRows(o: usize, e: usize, rows: usize, nb: i32, vc: usize, rowBytes: usize, hd: i32): void {
  let d = 0;
  for (; d + 16 <= hd; d += 16) {
    const od = o + (<usize>d << 2);
    let c0 = v128.load(od), c1 = v128.load(od, 16), c2 = v128.load(od, 32), c3 = v128.load(od, 48);
    for (let b = 0; b < nb; b++) {
      const ev = f32x4.splat(load<f32>(e + (<usize>b << 2)));
      const vp = vc + <usize>load<i32>(rows + (<usize>b << 2)) * rowBytes + (<usize>d << 2);
      c0 = f32x4.add(c0, f32x4.mul(ev, v128.load(vp)));
      c1 = f32x4.add(c1, f32x4.mul(ev, v128.load(vp, 16)));
      c2 = f32x4.add(c2, f32x4.mul(ev, v128.load(vp, 32)));
      c3 = f32x4.add(c3, f32x4.mul(ev, v128.load(vp, 48)));
    }
    v128.store(od, c0); v128.store(od, c1, 16); v128.store(od, c2, 32); v128.store(od, c3, 48);
  }
  for (; d + 4 <= hd; d += 4) {
    const od = o + (<usize>d << 2);
    let c = v128.load(od);
    for (let b = 0; b < nb; b++) {
      const vp = vc + <usize>load<i32>(rows + (<usize>b << 2)) * rowBytes + (<usize>d << 2);
      c = f32x4.add(c, f32x4.mul(f32x4.splat(load<f32>(e + (<usize>b << 2))), v128.load(vp)));
    }
    v128.store(od, c);
  }
  for (; d < hd; d++) {
    let c = f32At(o, d);
    for (let b = 0; b < nb; b++) {
      c = c + load<f32>(e + (<usize>b << 2)) * f32At(vc + <usize>load<i32>(rows + (<usize>b << 2)) * rowBytes, d);
    }
    f32Set(o, d, c);
  }
}

export function attention(out: usize, q: usize, qStride: i32, kc: usize, vc: usize, pageTable: usize,
  pageSize: i32, start: i32, nH: i32, nKV: i32, hd: i32, u0: i32, u1: i32, scratch: usize, per: i32): void {
  const group = nH / nKV;
  const kvDim = nKV * hd;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  const unitsPerToken = nH / per;
  const sums = scratch; // f64 [per]
  const scores = scratch + (<usize>per << 3); // f32 [per, n]
  for (let u = u0; u < u1; u++) {
    const i = u / unitsPerToken;
    const h0 = (u - i * unitsPerToken) * per;
    const n = start + i + 1;
    const ko = (h0 / group) * hd;
    const qr = q + ((<usize>i * <usize>qStride + <usize>h0 * <usize>hd) << 2); // head h0+j at qr + j·hd
    const orow = out + ((<usize>i * <usize>nH + <usize>h0) * <usize>hd << 2); // head h0+j at orow + j·hd
    // scores[j, p] = (q_j · k_p)·scale: one walk over the cache for every head of the group
    const rowB = <usize>kvDim << 2;
    const kh = kc + (<usize>ko << 2);
    let p = 0;
    for (; p + 4 <= n; p += 4) {
      const k0 = kh + <usize>cacheRow(pageTable, pageSize, p) * rowB;
      const k1 = kh + <usize>cacheRow(pageTable, pageSize, p + 1) * rowB;
      const k2 = kh + <usize>cacheRow(pageTable, pageSize, p + 2) * rowB;
      const k3 = kh + <usize>cacheRow(pageTable, pageSize, p + 3) * rowB;
      for (let j = 0; j < per; j++) {
        dot4(qr + ((<usize>j * <usize>hd) << 2), k0, k1, k2, k3, hd, scores + ((<usize>(j * n + p)) << 2), scale);
      }
    }
    for (; p < n; p++) {
      const kb = kh + <usize>cacheRow(pageTable, pageSize, p) * rowB;
      for (let j = 0; j < per; j++) {
        f32Set(scores, j * n + p, dot(qr + ((<usize>j * <usize>hd) << 2), kb, hd) * scale);
      }
    }
    for (let j = 0; j < per; j++) {
      const sj = scores + ((<usize>j * <usize>n) << 2);
      let mx: f32 = -Infinity;
      for (let p = 0; p < n; p++) {
        const v = f32At(sj, p);
        if (v > mx) mx = v;
      }
      store<f64>(sums + (<usize>j << 3), expAndSum(sj, n, mx));
      zero(orow + ((<usize>j * <usize>hd) << 2), hd);
    }
    // out_j = (Σ_p e[j, p] · v_p) / sum_j in increasing p: blocks of keys, every head
    const rows = scores + ((<usize>per * <usize>n) << 2); // i32 [KEY_BLOCK]
    const vh = vc + (<usize>ko << 2);
    for (let p0 = 0; p0 < n; p0 += KEY_BLOCK) {
      const nb = min(KEY_BLOCK, n - p0);
      for (let b = 0; b < nb; b++) store<i32>(rows + (<usize>b << 2), cacheRow(pageTable, pageSize, p0 + b));
      for (let j = 0; j < per; j++) {
        weightedRows(orow + ((<usize>j * <usize>hd) << 2), scores + ((<usize>(j * n + p0)) << 2), rows, nb, vh, rowB, hd);
      }
    }
    for (let j = 0; j < per; j++) {
      const inv = <f32>(1.0 / load<f64>(sums + (<usize>j << 3)));
      const oj = orow + ((<usize>j * <usize>hd) << 2);
      for (let d = 0; d < hd; d++) f32Set(oj, d, f32At(oj, d) * inv);
    }
  }
}
