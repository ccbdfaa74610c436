// Gated DeltaNet, chunked form (C = 64) for value heads [h0, h1) of one sequence: the same
// contract as gdnRecurrent without scratch (state updated in place), same math as the
// reference (MODEL-NOTES "Chunked form"), f32 arithmetic with the cumulative log decay Γ
// in f64 and every exp taken of a difference. Equals the recurrence to rounding (~1e-6).
// Chunk boundaries sit at absolute positions multiple of C (token 0 is at position pos0,
// so the first chunk may be shorter). A chunk reads only its own tokens and the f32 state
// in memory, so splitting a sequence across calls at chunk boundaries is bit-identical
// to one call.
import { dot, axpy, scaleTo, zero, f32At, f32Set } from './common';
import { normQK } from './gdn';

export const CHUNK: i32 = 64;

// The chunk's three products with the state (Vnew = U − W·S, O = Q̂·S, S·e^Γ + K̂ᵀ·Vnew)
// run 4 rows × 8 lanes per register tile with pointers that advance. Every element keeps
// exactly the chain of the axpy form it replaces (start value, then + c_d·x_d for d
// ascending, multiply then add), so the results are bit-identical to one axpy per d.

/** For rows i < n: dst_i[v] = init_i[v] + Σ_d (sign·a_i[d]) · b_d[v], d < nd ascending, v < nv
 * init_i = dst_i when `fromDst`, else 0. Row strides in bytes: dst ds,
 * a as, b bs (a_i[d] at a + i·as + 4d). */
function rowsTimes(dst: usize, ds: usize, a: usize, as: usize, neg: bool, b: usize, bs: usize, n: i32, nd: i32, nv: i32, fromDst: bool): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    let v = 0;
    for (; v + 8 <= nv; v += 8) tile4x8(dst + <usize>i * ds + (<usize>v << 2), ds, a + <usize>i * as, as, neg, b + (<usize>v << 2), bs, nd, fromDst);
    for (; v + 4 <= nv; v += 4) {
      for (let r = 0; r < 4; r++) row1x4(dst + <usize>(i + r) * ds + (<usize>v << 2), a + <usize>(i + r) * as, neg, b + (<usize>v << 2), bs, nd, fromDst);
    }
  }
  for (; i < n; i++) {
    for (let v = 0; v + 4 <= nv; v += 4) row1x4(dst + <usize>i * ds + (<usize>v << 2), a + <usize>i * as, neg, b + (<usize>v << 2), bs, nd, fromDst);
  }
  for (let v = nv & ~3; v < nv; v++) { // lanes past the last 4: the same chain in scalar f32
    for (let r = 0; r < n; r++) {
      const o = dst + <usize>r * ds + (<usize>v << 2);
      let c: f32 = fromDst ? load<f32>(o) : 0;
      for (let d = 0; d < nd; d++) {
        const x = load<f32>(a + <usize>r * as + (<usize>d << 2));
        c = c + (neg ? -x : x) * load<f32>(b + <usize>d * bs + (<usize>v << 2));
      }
      store<f32>(o, c);
    }
  }
}

// @ts-ignore: decorator
@inline function coef(p: usize, neg: bool): v128 {
  const c = load<f32>(p);
  return f32x4.splat(neg ? -c : c);
}

/** rowsTimes on rows 0..3 × lanes 0..7 of dst. */
function tile4x8(dst: usize, ds: usize, a: usize, as: usize, neg: bool, b: usize, bs: usize, nd: i32, fromDst: bool): void {
  const z = f32x4.splat(0);
  let c00 = fromDst ? v128.load(dst) : z, c01 = fromDst ? v128.load(dst, 16) : z;
  let c10 = fromDst ? v128.load(dst + ds) : z, c11 = fromDst ? v128.load(dst + ds, 16) : z;
  let c20 = fromDst ? v128.load(dst + 2 * ds) : z, c21 = fromDst ? v128.load(dst + 2 * ds, 16) : z;
  let c30 = fromDst ? v128.load(dst + 3 * ds) : z, c31 = fromDst ? v128.load(dst + 3 * ds, 16) : z;
  let a0 = a, a1 = a + as, a2 = a + 2 * as, a3 = a + 3 * as;
  let bp = b;
  for (let d = 0; d < nd; d++) {
    const b0 = v128.load(bp), b1 = v128.load(bp, 16);
    let s = coef(a0, neg);
    c00 = f32x4.add(c00, f32x4.mul(s, b0)); c01 = f32x4.add(c01, f32x4.mul(s, b1));
    s = coef(a1, neg);
    c10 = f32x4.add(c10, f32x4.mul(s, b0)); c11 = f32x4.add(c11, f32x4.mul(s, b1));
    s = coef(a2, neg);
    c20 = f32x4.add(c20, f32x4.mul(s, b0)); c21 = f32x4.add(c21, f32x4.mul(s, b1));
    s = coef(a3, neg);
    c30 = f32x4.add(c30, f32x4.mul(s, b0)); c31 = f32x4.add(c31, f32x4.mul(s, b1));
    a0 += 4; a1 += 4; a2 += 4; a3 += 4;
    bp += bs;
  }
  v128.store(dst, c00); v128.store(dst, c01, 16);
  v128.store(dst + ds, c10); v128.store(dst + ds, c11, 16);
  v128.store(dst + 2 * ds, c20); v128.store(dst + 2 * ds, c21, 16);
  v128.store(dst + 3 * ds, c30); v128.store(dst + 3 * ds, c31, 16);
}

/** rowsTimes on one row × 4 lanes. */
function row1x4(dst: usize, a: usize, neg: bool, b: usize, bs: usize, nd: i32, fromDst: bool): void {
  let c = fromDst ? v128.load(dst) : f32x4.splat(0);
  let ap = a, bp = b;
  for (let d = 0; d < nd; d++) {
    c = f32x4.add(c, f32x4.mul(coef(ap, neg), v128.load(bp)));
    ap += 4;
    bp += bs;
  }
  v128.store(dst, c);
}

/** Bytes of per-thread scratch gdnChunked needs. */
export function chunkedTmpBytes(dk: i32, dv: i32): i32 {
  const C = CHUNK;
  return 8 * C + 4 * (4 * C * dk + 2 * C * dv + 2 * C * C + 2 * C);
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
  const w = kh + ((<usize>C * <usize>dk) << 2); // [C, dk]
  const u = w + ((<usize>C * <usize>dk) << 2); // [C, dv]
  const vnew = u + ((<usize>C * <usize>dv) << 2); // [C, dv]
  const lmat = vnew + ((<usize>C * <usize>dv) << 2); // [C, C] exp(Γi − Γj), j ≤ i
  const kk = lmat + ((<usize>C * <usize>C) << 2); // [C, C] scratch coefficients
  const eg = kk + ((<usize>C * <usize>C) << 2); // [C] exp(Γi)
  const dl = eg + (<usize>C << 2); // [C] exp(Γlast − Γj)
  const kt = dl + (<usize>C << 2); // [dk, C] k̂_j[d] · exp(Γlast − Γj)
  const dkB = <usize>dk << 2;
  const dvB = <usize>dv << 2;
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
      // U = T·(V⊙β), W = T·(K̂⊙β⊙e^Γ) by forward substitution with
      // A[i][j] = β_i (k̂_i·k̂_j) e^{Γi−Γj}, j < i.
      for (let i = 0; i < n; i++) {
        const bi = f32At(beta, (c0 + i) * hv + h);
        const vr = qkv + ((<usize>(c0 + i) * <usize>width + <usize>(2 * hk * dk + h * dv)) << 2);
        const ui = u + <usize>i * dvB;
        const wi = w + <usize>i * dkB;
        scaleTo(ui, bi, vr, dv);
        scaleTo(wi, bi * f32At(eg, i), kh + <usize>i * dkB, dk);
        for (let j = 0; j < i; j++) {
          const aij = bi * dot(kh + <usize>i * dkB, kh + <usize>j * dkB, dk) * f32At(lmat, i * C + j);
          axpy(ui, -aij, u + <usize>j * dvB, dv);
          axpy(wi, -aij, w + <usize>j * dkB, dk);
        }
      }
      // Vnew = U − W·S
      memory.copy(vnew, u, <usize>n * dvB);
      rowsTimes(vnew, dvB, w, dkB, true, s, dvB, n, dk, dv, true);
      // O = (Q̂⊙e^Γ)·S + lower_incl(Q̂K̂ᵀ ⊙ L)·Vnew
      const os = (<usize>hv * <usize>dv) << 2; // bytes between tokens' rows of head h
      const o0 = out + ((<usize>(c0 * hv + h) * <usize>dv) << 2);
      rowsTimes(o0, os, qh, dkB, false, s, dvB, n, dk, dv, false);
      for (let i = 0; i < n; i++) {
        const or = o0 + <usize>i * os;
        const qi = qh + <usize>i * dkB;
        scaleTo(or, f32At(eg, i), or, dv);
        for (let j = 0; j <= i; j++) {
          axpy(or, dot(qi, kh + <usize>j * dkB, dk) * f32At(lmat, i * C + j), vnew + <usize>j * dvB, dv);
        }
      }
      // S = S·e^{Γlast} + (K̂ ⊙ e^{Γlast − Γ})ᵀ·Vnew
      const gl = load<f64>(gam + (<usize>(n - 1) << 3));
      const el = <f32>Math.exp(gl);
      for (let j = 0; j < n; j++) f32Set(dl, j, <f32>Math.exp(gl - load<f64>(gam + (<usize>j << 3))));
      for (let d = 0; d < dk; d++) {
        const sd = s + <usize>d * dvB;
        scaleTo(sd, el, sd, dv);
        for (let j = 0; j < n; j++) f32Set(kt, d * C + j, f32At(kh + <usize>j * dkB, d) * f32At(dl, j));
      }
      rowsTimes(s, dvB, kt, <usize>C << 2, false, vnew, dvB, dk, n, dv, true);
    }
  }
}
