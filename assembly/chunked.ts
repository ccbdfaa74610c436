// Gated DeltaNet, chunked form (C = 64) for value heads [h0, h1) of one sequence: the same
// contract as gdnRecurrent without scratch (state updated in place), same math as the
// reference (MODEL-NOTES "Chunked form"), f32 arithmetic with the cumulative log decay Γ
// in f64 and every exp taken of a difference. Equals the recurrence to rounding (~1e-6).
// Chunk boundaries sit at absolute positions multiple of C (token 0 is at position pos0,
// so the first chunk may be shorter). A chunk reads only its own tokens and the f32 state
// in memory, so splitting a sequence across calls at chunk boundaries is bit-identical
// to one call.
import { dot, hsum, scaleTo, f32At, f32Set } from './common';
import { normQK } from './gdn';

export const CHUNK: i32 = 64;

/** acc + a·b per lane, multiply then add in both builds (no fused multiply-add): the chunk
 * keeps the roundings of its axpy / dot form exactly. */
// @ts-ignore: decorator
@inline function mac(acc: v128, a: v128, b: v128): v128 {
  return f32x4.add(acc, f32x4.mul(a, b));
}

/** Scalar twin of one mac lane. */
// @ts-ignore: decorator
@inline function mac1(acc: f32, a: f32, b: f32): f32 {
  return acc + a * b;
}

// Every product of the chunk runs through rowsTimes: 4 rows × 8 lanes per register tile
// with pointers that advance; the rows, lanes and scalar tails all keep one chain per
// element (start value, then mac(c, a_d, b_d) for d ascending), so an element's value never
// depends on which path computed it.

/** For rows i < n: dst_i[v] = init_i[v] + Σ_d a_i[d] · b_d[v], d < nd ascending, v < nv;
 * init_i = dst_i when `fromDst`, else 0. Row strides in bytes: dst ds, a as, b bs
 * (a_i[d] at a + i·as + 4d). */
function rowsTimes(dst: usize, ds: usize, a: usize, as: usize, b: usize, bs: usize, n: i32, nd: i32, nv: i32, fromDst: bool): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    let v = 0;
    for (; v + 8 <= nv; v += 8) tile4x8(dst + <usize>i * ds + (<usize>v << 2), ds, a + <usize>i * as, as, b + (<usize>v << 2), bs, nd, fromDst);
    for (; v + 4 <= nv; v += 4) {
      for (let r = 0; r < 4; r++) row1x4(dst + <usize>(i + r) * ds + (<usize>v << 2), a + <usize>(i + r) * as, b + (<usize>v << 2), bs, nd, fromDst);
    }
  }
  for (; i < n; i++) {
    for (let v = 0; v + 4 <= nv; v += 4) row1x4(dst + <usize>i * ds + (<usize>v << 2), a + <usize>i * as, b + (<usize>v << 2), bs, nd, fromDst);
  }
  for (let v = nv & ~3; v < nv; v++) { // lanes past the last 4: the same chain in scalar f32
    for (let r = 0; r < n; r++) {
      const o = dst + <usize>r * ds + (<usize>v << 2);
      let c: f32 = fromDst ? load<f32>(o) : 0;
      for (let d = 0; d < nd; d++) c = mac1(c, load<f32>(a + <usize>r * as + (<usize>d << 2)), load<f32>(b + <usize>d * bs + (<usize>v << 2)));
      store<f32>(o, c);
    }
  }
}

/** rowsTimes on rows 0..3 × lanes 0..7 of dst. */
function tile4x8(dst: usize, ds: usize, a: usize, as: usize, b: usize, bs: usize, nd: i32, fromDst: bool): void {
  const z = f32x4.splat(0);
  let c00 = fromDst ? v128.load(dst) : z, c01 = fromDst ? v128.load(dst, 16) : z;
  let c10 = fromDst ? v128.load(dst + ds) : z, c11 = fromDst ? v128.load(dst + ds, 16) : z;
  let c20 = fromDst ? v128.load(dst + 2 * ds) : z, c21 = fromDst ? v128.load(dst + 2 * ds, 16) : z;
  let c30 = fromDst ? v128.load(dst + 3 * ds) : z, c31 = fromDst ? v128.load(dst + 3 * ds, 16) : z;
  let a0 = a, a1 = a + as, a2 = a + 2 * as, a3 = a + 3 * as;
  let bp = b;
  for (let d = 0; d < nd; d++) {
    const b0 = v128.load(bp), b1 = v128.load(bp, 16);
    let s = v128.load32_splat(a0);
    c00 = mac(c00, s, b0); c01 = mac(c01, s, b1);
    s = v128.load32_splat(a1);
    c10 = mac(c10, s, b0); c11 = mac(c11, s, b1);
    s = v128.load32_splat(a2);
    c20 = mac(c20, s, b0); c21 = mac(c21, s, b1);
    s = v128.load32_splat(a3);
    c30 = mac(c30, s, b0); c31 = mac(c31, s, b1);
    a0 += 4; a1 += 4; a2 += 4; a3 += 4;
    bp += bs;
  }
  v128.store(dst, c00); v128.store(dst, c01, 16);
  v128.store(dst + ds, c10); v128.store(dst + ds, c11, 16);
  v128.store(dst + 2 * ds, c20); v128.store(dst + 2 * ds, c21, 16);
  v128.store(dst + 3 * ds, c30); v128.store(dst + 3 * ds, c31, 16);
}

/** rowsTimes on one row × 4 lanes. */
function row1x4(dst: usize, a: usize, b: usize, bs: usize, nd: i32, fromDst: bool): void {
  let c = fromDst ? v128.load(dst) : f32x4.splat(0);
  let ap = a, bp = b;
  for (let d = 0; d < nd; d++) {
    c = mac(c, v128.load32_splat(ap), v128.load(bp));
    ap += 4;
    bp += bs;
  }
  v128.store(dst, c);
}

/** dst_i += Σ_{j < i (+1 when inclusive)} m[i][j] · x_j for rows i < n, j ascending, where
 * rows earlier in dst may be x's rows (dst == x: a forward substitution, each row final
 * before a later row reads it). Blocks of 4 rows: the part j < block start as register
 * tiles, then the triangle inside the block row by row — the same chain per element.
 * m: [n, C] (row stride mb bytes); x, dst: rows of nv floats at strides xs, ds. */
function lowerTimes(dst: usize, ds: usize, m: usize, mb: usize, x: usize, xs: usize, n: i32, nv: i32, inclusive: bool): void {
  for (let i0 = 0; i0 < n; i0 += 4) {
    const nb = min(4, n - i0);
    if (i0 > 0) rowsTimes(dst + <usize>i0 * ds, ds, m + <usize>i0 * mb, mb, x, xs, nb, i0, nv, true);
    for (let i = i0; i < i0 + nb; i++) {
      const end = inclusive ? i + 1 : i;
      for (let j = i0; j < end; j++) macRow(dst + <usize>i * ds, load<f32>(m + <usize>i * mb + (<usize>j << 2)), x + <usize>j * xs, nv);
    }
  }
}

/** dst[i][j] = dot(a_i, b_j) (common.ts dot: its lanes and order) for j ≤ i < n; rows of
 * dst C floats, of a and b `rs` bytes. Two rows × four j per register tile (some j > i are
 * written too, unused). */
function lowerDots(dst: usize, a: usize, b: usize, rs: usize, n: i32, nd: i32): void {
  const cB = <usize>CHUNK << 2;
  let i = 0;
  for (; i + 2 <= n; i += 2) {
    for (let j = 0; j <= i + 1; j += 4) {
      const bj = b + <usize>j * rs;
      dots2x4(a + <usize>i * rs, a + <usize>(i + 1) * rs, bj, bj + rs, bj + 2 * rs, bj + 3 * rs, nd,
        dst + <usize>i * cB + (<usize>j << 2), dst + <usize>(i + 1) * cB + (<usize>j << 2));
    }
  }
  for (; i < n; i++) {
    for (let j = 0; j <= i; j++) f32Set(dst, i * CHUNK + j, dot(a + <usize>i * rs, b + <usize>j * rs, nd));
  }
}

/** dot(x, k_j) for x = qa → outA[0..3] and x = qb → outB[0..3], j < 4: dot's chain each
 * (4-lane accumulators over 4-blocks, fixed hsum, scalar tail), sharing every k load. */
function dots2x4(qa: usize, qb: usize, k0: usize, k1: usize, k2: usize, k3: usize, nd: i32, outA: usize, outB: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
  const n4 = <usize>(nd & ~3) << 2;
  for (let o: usize = 0; o < n4; o += 16) {
    const qva = v128.load(qa + o);
    const qvb = v128.load(qb + o);
    let kv = v128.load(k0 + o);
    a0 = f32x4.add(a0, f32x4.mul(qva, kv)); b0 = f32x4.add(b0, f32x4.mul(qvb, kv));
    kv = v128.load(k1 + o);
    a1 = f32x4.add(a1, f32x4.mul(qva, kv)); b1 = f32x4.add(b1, f32x4.mul(qvb, kv));
    kv = v128.load(k2 + o);
    a2 = f32x4.add(a2, f32x4.mul(qva, kv)); b2 = f32x4.add(b2, f32x4.mul(qvb, kv));
    kv = v128.load(k3 + o);
    a3 = f32x4.add(a3, f32x4.mul(qva, kv)); b3 = f32x4.add(b3, f32x4.mul(qvb, kv));
  }
  store<f32>(outA, hsum(a0) + dotTail(qa, k0, nd));
  store<f32>(outA, hsum(a1) + dotTail(qa, k1, nd), 4);
  store<f32>(outA, hsum(a2) + dotTail(qa, k2, nd), 8);
  store<f32>(outA, hsum(a3) + dotTail(qa, k3, nd), 12);
  store<f32>(outB, hsum(b0) + dotTail(qb, k0, nd));
  store<f32>(outB, hsum(b1) + dotTail(qb, k1, nd), 4);
  store<f32>(outB, hsum(b2) + dotTail(qb, k2, nd), 8);
  store<f32>(outB, hsum(b3) + dotTail(qb, k3, nd), 12);
}

/** dot's scalar tail: Σ_{d ≥ nd&~3} x_d·k_d, multiply then add, from 0. */
// @ts-ignore: decorator
@inline function dotTail(x: usize, k: usize, nd: i32): f32 {
  let t: f32 = 0;
  for (let d = nd & ~3; d < nd; d++) t += f32At(x, d) * f32At(k, d);
  return t;
}

/** dst[v] = mac(dst[v], s, x[v]) for v < nv (4 lanes, then the scalar twin). */
function macRow(dst: usize, s: f32, x: usize, nv: i32): void {
  const sv = f32x4.splat(s);
  let v = 0;
  for (; v + 4 <= nv; v += 4) {
    const o = <usize>v << 2;
    v128.store(dst + o, mac(v128.load(dst + o), sv, v128.load(x + o)));
  }
  for (; v < nv; v++) f32Set(dst, v, mac1(f32At(dst, v), s, f32At(x, v)));
}

/** Bytes of per-thread scratch gdnChunked needs. */
export function chunkedTmpBytes(dk: i32, dv: i32): i32 {
  const C = CHUNK;
  return 8 * C + 4 * (4 * C * dk + 2 * C * dv + 3 * C * C + 2 * C);
}

export function gdnChunked(out: usize, qkv: usize, g: usize, beta: usize, state: usize, t: i32, hk: i32, hv: i32,
  dk: i32, dv: i32, h0: i32, h1: i32, tmp: usize, pos0: i32): void {
  const C = CHUNK;
  const width = 2 * hk * dk + hv * dv;
  const ratio = hv / hk;
  // tmp layout (f64 first for alignment)
  const gam = tmp; // f64 [C] cumulative log decay
  const qh = gam + (<usize>C << 3); // [C, dk]
  const kh = qh + ((<usize>C * <usize>dk) << 2); // [C, dk]
  const w = kh + ((<usize>C * <usize>dk) << 2); // [C, dk]  −W
  const u = w + ((<usize>C * <usize>dk) << 2); // [C, dv]
  const vnew = u + ((<usize>C * <usize>dv) << 2); // [C, dv]
  const lmat = vnew + ((<usize>C * <usize>dv) << 2); // [C, C] exp(Γi − Γj), j ≤ i
  const kk = lmat + ((<usize>C * <usize>C) << 2); // [C, C] k̂_i·k̂_j, then −A
  const qk = kk + ((<usize>C * <usize>C) << 2); // [C, C] q̂_i·k̂_j, then P = q̂_i·k̂_j·L
  const eg = qk + ((<usize>C * <usize>C) << 2); // [C] exp(Γi)
  const dl = eg + (<usize>C << 2); // [C] exp(Γlast − Γj)
  const kt = dl + (<usize>C << 2); // [dk, C] k̂_j[d] · exp(Γlast − Γj)
  const dkB = <usize>dk << 2;
  const dvB = <usize>dv << 2;
  const cB = <usize>C << 2;
  for (let h = h0; h < h1; h++) {
    const s = state + ((<usize>h * <usize>dk * <usize>dv) << 2); // S [dk, dv], in place
    const first = C - pos0 % C;
    for (let c0 = 0, n = 0; c0 < t; c0 += n) {
      n = min(c0 == 0 ? first : C, t - c0);
      let cum = 0.0;
      for (let i = 0; i < n; i++) {
        normQK(qkv, width, c0 + i, h / ratio, hk, dk, qh + <usize>i * dkB, kh + <usize>i * dkB);
        cum += <f64>f32At(g, (c0 + i) * hv + h);
        store<f64>(gam + (<usize>i << 3), cum);
        f32Set(eg, i, <f32>Math.exp(cum));
      }
      for (let i = 0; i < n; i++) {
        const gi = load<f64>(gam + (<usize>i << 3));
        for (let j = 0; j <= i; j++) f32Set(lmat, i * C + j, <f32>Math.exp(gi - load<f64>(gam + (<usize>j << 3))));
      }
      // the chunk's dot products Q̂K̂ᵀ and K̂K̂ᵀ (lower triangles)
      lowerDots(qk, qh, kh, dkB, n, dk);
      lowerDots(kk, kh, kh, dkB, n, dk);
      // U = T·(V⊙β), −W = T·(−K̂⊙β⊙e^Γ) by forward substitution with
      // A[i][j] = β_i (k̂_i·k̂_j) e^{Γi−Γj}, j < i (kk holds −A): row i = init_i + Σ_j −A_ij·row_j.
      for (let i = 0; i < n; i++) {
        const bi = f32At(beta, (c0 + i) * hv + h);
        const vr = qkv + ((<usize>(c0 + i) * <usize>width + <usize>(2 * hk * dk + h * dv)) << 2);
        scaleTo(u + <usize>i * dvB, bi, vr, dv);
        scaleTo(w + <usize>i * dkB, -(bi * f32At(eg, i)), kh + <usize>i * dkB, dk);
        for (let j = 0; j < i; j++) f32Set(kk, i * C + j, -(bi * f32At(kk, i * C + j) * f32At(lmat, i * C + j)));
        for (let j = 0; j <= i; j++) f32Set(qk, i * C + j, f32At(qk, i * C + j) * f32At(lmat, i * C + j));
      }
      lowerTimes(u, dvB, kk, cB, u, dvB, n, dv, false);
      lowerTimes(w, dkB, kk, cB, w, dkB, n, dk, false);
      // Vnew = U − W·S = U + (−W)·S
      memory.copy(vnew, u, <usize>n * dvB);
      rowsTimes(vnew, dvB, w, dkB, s, dvB, n, dk, dv, true);
      // O = (Q̂⊙e^Γ)·S + lower_incl(Q̂K̂ᵀ ⊙ L)·Vnew
      const os = (<usize>hv * <usize>dv) << 2; // bytes between tokens' rows of head h
      const o0 = out + ((<usize>(c0 * hv + h) * <usize>dv) << 2);
      rowsTimes(o0, os, qh, dkB, s, dvB, n, dk, dv, false);
      for (let i = 0; i < n; i++) scaleTo(o0 + <usize>i * os, f32At(eg, i), o0 + <usize>i * os, dv);
      lowerTimes(o0, os, qk, cB, vnew, dvB, n, dv, true);
      // S = S·e^{Γlast} + (K̂ ⊙ e^{Γlast − Γ})ᵀ·Vnew
      const gl = load<f64>(gam + (<usize>(n - 1) << 3));
      const el = <f32>Math.exp(gl);
      for (let j = 0; j < n; j++) f32Set(dl, j, <f32>Math.exp(gl - load<f64>(gam + (<usize>j << 3))));
      for (let d = 0; d < dk; d++) {
        const sd = s + <usize>d * dvB;
        scaleTo(sd, el, sd, dv);
        for (let j = 0; j < n; j++) f32Set(kt, d * C + j, f32At(kh + <usize>j * dkB, d) * f32At(dl, j));
      }
      rowsTimes(s, dvB, kt, cB, vnew, dvB, dk, n, dv, true);
    }
  }
}
