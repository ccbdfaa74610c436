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
//   scores [group, start + T].
import { dot, axpy, f32At, f32Set, zero, expf4, expf1 } from './common';

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
    for (let p = 0; p < n; p++) {
      const kb = kc + ((<usize>cacheRow(pageTable, pageSize, p) * <usize>kvDim + <usize>ko) << 2);
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
    // out_j = (Σ_p e[j, p] · v_p) / sum_j in increasing p: one walk for every head
    for (let p = 0; p < n; p++) {
      const vb = vc + ((<usize>cacheRow(pageTable, pageSize, p) * <usize>kvDim + <usize>ko) << 2);
      for (let j = 0; j < per; j++) axpy(orow + ((<usize>j * <usize>hd) << 2), f32At(scores, j * n + p), vb, hd);
    }
    for (let j = 0; j < per; j++) {
      const inv = <f32>(1.0 / load<f64>(sums + (<usize>j << 3)));
      const oj = orow + ((<usize>j * <usize>hd) << 2);
      for (let d = 0; d < hd; d++) f32Set(oj, d, f32At(oj, d) * inv);
    }
  }
}
