// Q4_0, Q4_1, Q5_0 and Q5_1 repacked for the integer matmul ('q40x4', 'q41x4', 'q50x4',
// 'q51x4' layouts, set by the wasm backend's packWeight): the same quants and f16 scales as
// the GGML blocks, rearranged so that one 16-byte load feeds 4 output columns with no
// horizontal sums. Exactly as many bytes as the GGML blocks, so the repack is in place.
//
// Layout: groups of 4 weight rows (= output columns; the last group zero-padded), group g at
// g·nb·SB bytes (nb = K/32); sub-block j of a group at +j·SB:
//   [0, 64)       4 nibble vectors (nibx4.ts), the unsigned quants u (Q4_0: q + 8, Q5_0: q + 16)
//   [64, 80)      5-bit formats: the 5th bits (nibx4.ts)
//   [QO, QO + 8)  f16 d of columns 0..3 (QO = 64, or 80 with 5th bits)
//   [QO + 8, +16) Q4_1 / Q5_1: f16 m of columns 0..3
// SB = 72 (Q4_0), 80 (Q4_1), 88 (Q5_0), 96 (Q5_1) = 4 GGML blocks.
//
// Arithmetic: exactly the twin's (src/kernels/ref/quant.ts): an exact integer
// Σ q·x = Σ u·x − intOffset·s_j per sub-block, then per column one f32 chain
//   acc += (d·d_j)·sumi  [Q4_1 / Q5_1: acc += (m·d_j)·s_j]   (mul, mul, add; unfused).
import { Q4_0, Q4_1, Q5_0, Q5_1, blockBytes, hasMin, intOffset } from './qdecode';
import { groupSource, storeCols, storeRows4 } from './q8x4';
import { XB, f16x4At, putQuant, subDot1, subDot4, sum0, sum1, sum2, sum3 } from './nibx4';

/** Whether format T has 5th bits. */
// @ts-ignore: decorator
@inline function five(T: i32): bool {
  return T == Q5_0 || T == Q5_1;
}

/** Offset of the f16 scales inside a (group, sub-block). */
// @ts-ignore: decorator
@inline function scalesAt(T: i32): usize {
  return five(T) ? 80 : 64;
}

/** Bytes of one (group, sub-block). */
// @ts-ignore: decorator
@inline function subBytes(T: i32): usize {
  return scalesAt(T) + (hasMin(T) ? 16 : 8);
}

/** Unsigned quant u (0..31) of element e of the GGML block at p. */
// @ts-ignore: decorator
@inline function ggmlQuant(T: i32, p: usize, e: i32): u32 {
  const qs: usize = T == Q4_0 ? 2 : T == Q4_1 ? 4 : T == Q5_0 ? 6 : 8;
  const byte = <u32>load<u8>(p + qs + <usize>(e & 15));
  const u = e < 16 ? byte & 15 : byte >> 4;
  if (!five(T)) return u;
  const qh = load<u32>(p + (T == Q5_0 ? 2 : 4));
  return u | (((qh >> <u32>e) & 1) << 4);
}

/** Repack a GGML weight of format T [rows, k] at w in place (the buffer holds exactly the
 * GGML bytes, rows padded to a multiple of 4). tmp: 4·(k/32)·blockBytes(T) bytes. */
// @ts-ignore: decorator
@inline function repack(T: i32, w: usize, rows: i32, k: i32, tmp: usize): void {
  const nb = k >> 5;
  const qb = <usize>blockBytes(T);
  const rb = <usize>nb * qb;
  const sb = subBytes(T);
  for (let g = ((rows + 3) >> 2) - 1; g >= 0; g--) {
    groupSource(w, g, rows, rb, tmp);
    const dst = w + <usize>g * <usize>nb * sb;
    memory.fill(dst, 0, <usize>nb * sb);
    for (let j = 0; j < nb; j++) {
      const o = dst + <usize>j * sb;
      for (let c = 0; c < 4; c++) {
        const src = tmp + <usize>c * rb + <usize>j * qb;
        for (let e = 0; e < 32; e++) putQuant(o, c, e, ggmlQuant(T, src, e), five(T));
        store<u16>(o + scalesAt(T) + (<usize>c << 1), load<u16>(src));
        if (hasMin(T)) store<u16>(o + scalesAt(T) + 8 + (<usize>c << 1), load<u16>(src, 2));
      }
    }
  }
}

/** Repack a GGML Q4_0 / Q4_1 / Q5_0 / Q5_1 weight (type: qdecode.ts id) in place. */
export function repackQ32x4(type: i32, w: usize, rows: i32, k: i32, tmp: usize): void {
  if (type == Q4_0) repack(Q4_0, w, rows, k, tmp);
  else if (type == Q4_1) repack(Q4_1, w, rows, k, tmp);
  else if (type == Q5_0) repack(Q5_0, w, rows, k, tmp);
  else if (type == Q5_1) repack(Q5_1, w, rows, k, tmp);
  else unreachable();
}

/** One sub-block's chain steps for 4 columns (scales at sp): acc + (d·dx)·(Σu·x − off·sx),
 * then with a min acc + (m·dx)·sx. */
// @ts-ignore: decorator
@inline function step(T: i32, acc: v128, sumi: v128, sp: usize, dx: f32, sx: i32): v128 {
  const q = intOffset(T) != 0 ? i32x4.sub(sumi, i32x4.splat(intOffset(T) * sx)) : sumi;
  const x = f32x4.splat(dx);
  const f = f32x4.add(acc, f32x4.mul(f32x4.mul(f16x4At(sp), x), f32x4.convert_i32x4_s(q)));
  if (!hasMin(T)) return f;
  return f32x4.add(f, f32x4.mul(f32x4.mul(f16x4At(sp + 8), x), f32x4.splat(<f32>sx)));
}

/** Row mi (its quants at xr: int8 or i16 rows) × the 4 columns of group wg. */
// @ts-ignore: decorator
@inline function groupRow1(T: i32, out: usize, xr: usize, d: usize, s: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = xr + <usize>mi * <usize>k * XB;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    f = step(T, f, subDot1(five(T), b, x), b + scalesAt(T), load<f32>(dj), load<i32>(sj));
    b += subBytes(T);
    x += 32 * XB;
    dj += 4;
    sj += 4;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 × the 4 columns of group wg; x4 the interleaved quants (nibx4.ts). */
// @ts-ignore: decorator
@inline function groupRows4(T: i32, out: usize, x4: usize, d: usize, s: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k * XB;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    subDot4(five(T), b, x);
    const sp = b + scalesAt(T);
    f0 = step(T, f0, sum0, sp, load<f32>(dj), load<i32>(sj));
    f1 = step(T, f1, sum1, sp, load<f32>(dj + ds), load<i32>(sj + ds));
    f2 = step(T, f2, sum2, sp, load<f32>(dj + 2 * ds), load<i32>(sj + 2 * ds));
    f3 = step(T, f3, sum3, sp, load<f32>(dj + 3 * ds), load<i32>(sj + 3 * ds));
    b += subBytes(T);
    x += 128 * XB;
    dj += 4;
    sj += 4;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the layout of T. */
// @ts-ignore: decorator
@inline function qmm(T: i32, out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const xr = ASC_FEATURE_RELAXED_SIMD ? q8 : q16;
  const x4 = q8 + <usize>m * <usize>k;
  const gb = <usize>(k >> 5) * subBytes(T);
  const rb = max(4, <i32>(<usize>262144 / (<usize>k * XB)) & ~3); // rows whose quants fit in L2
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let c = n0; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      for (; mi + 4 <= r1; mi += 4) groupRows4(T, out, x4, d, s, wg, n, k, mi, c, cnt);
      for (; mi < r1; mi++) groupRow1(T, out, xr, d, s, wg, n, k, mi, c, cnt);
    }
  }
}

/** out [M, N] = x · Wᵀ for columns [n0, n1), W repacked from GGML type `type` (qdecode.ts
 * id); q16/q8/d/s: quantizeActs of x, and (M ≥ 4) interleaveQ4kx4Acts at q8 + M·K. */
export function qmatmulQ32x4(type: i32, out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  if (type == Q4_0) qmm(Q4_0, out, q16, q8, d, s, w, m, n, k, n0, n1);
  else if (type == Q4_1) qmm(Q4_1, out, q16, q8, d, s, w, m, n, k, n0, n1);
  else if (type == Q5_0) qmm(Q5_0, out, q16, q8, d, s, w, m, n, k, n0, n1);
  else if (type == Q5_1) qmm(Q5_1, out, q16, q8, d, s, w, m, n, k, n0, n1);
  else unreachable();
}
