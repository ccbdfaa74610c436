// Causal GQA attention over a paged KV cache, one sequence, units u ∈ [u0, u1) where
// u = i·nH + h (query token i, head h). Query i (position start+i) attends to positions
// 0..start+i. A unit's result depends only on (q row, cache, n = start+i+1): never on T,
// on the other units, or on the thread — batch- and split-invariant.
//   q: [T, nH, hd] with token stride qStride floats; kc, vc: [rows, nKV, hd];
//   pageTable: i32; out: [T, nH, hd]; scores: f32 scratch [start + T] (this thread's).
import { dot, axpy, f32At, f32Set, zero, expf4, expf1 } from './common';

export function attention(out: usize, q: usize, qStride: i32, kc: usize, vc: usize, pageTable: usize,
  pageSize: i32, start: i32, nH: i32, nKV: i32, hd: i32, u0: i32, u1: i32, scores: usize): void {
  const group = nH / nKV;
  const kvDim = nKV * hd;
  const scale = <f32>(1.0 / Math.sqrt(<f64>hd));
  for (let u = u0; u < u1; u++) {
    const i = u / nH;
    const h = u - i * nH;
    const n = start + i + 1;
    const qr = q + ((<usize>i * <usize>qStride + <usize>h * <usize>hd) << 2);
    const ko = (h / group) * hd;
    // scores and running max
    let mx: f32 = -Infinity;
    for (let p = 0; p < n; p++) {
      const pg = p / pageSize;
      const row = load<i32>(pageTable + (<usize>pg << 2)) * pageSize + (p - pg * pageSize);
      const kb = kc + ((<usize>row * <usize>kvDim + <usize>ko) << 2);
      const s = dot(qr, kb, hd) * scale;
      f32Set(scores, p, s);
      if (s > mx) mx = s;
    }
    // exp and sum (f64 sum, in increasing p)
    // (exp vectorised; lanes and tail are bit-identical, so only n fixes the result)
    let sum = 0.0;
    const n4 = n & ~3;
    const mv = f32x4.splat(mx);
    for (let p = 0; p < n4; p += 4) {
      const sp = scores + (<usize>p << 2);
      const e = expf4(f32x4.sub(v128.load(sp), mv));
      v128.store(sp, e);
      sum += <f64>f32x4.extract_lane(e, 0);
      sum += <f64>f32x4.extract_lane(e, 1);
      sum += <f64>f32x4.extract_lane(e, 2);
      sum += <f64>f32x4.extract_lane(e, 3);
    }
    for (let p = n4; p < n; p++) {
      const e = expf1(f32At(scores, p) - mx);
      f32Set(scores, p, e);
      sum += <f64>e;
    }
    // out = (Σ_p e_p · v_p) / sum, accumulated in increasing p
    const or = out + ((<usize>i * <usize>nH + <usize>h) * <usize>hd << 2);
    zero(or, hd);
    for (let p = 0; p < n; p++) {
      const pg = p / pageSize;
      const row = load<i32>(pageTable + (<usize>pg << 2)) * pageSize + (p - pg * pageSize);
      axpy(or, f32At(scores, p), vc + ((<usize>row * <usize>kvDim + <usize>ko) << 2), hd);
    }
    const inv = <f32>(1.0 / sum);
    for (let d = 0; d < hd; d++) f32Set(or, d, f32At(or, d) * inv);
  }
}
