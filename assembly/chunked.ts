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

/** Bytes of per-thread scratch gdnChunked needs. */
export function chunkedTmpBytes(dk: i32, dv: i32): i32 {
  const C = CHUNK;
  return 8 * C + 4 * (3 * C * dk + 2 * C * dv + 2 * C * C + 2 * C);
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
      for (let i = 0; i < n; i++) {
        const vi = vnew + <usize>i * dvB;
        memory.copy(vi, u + <usize>i * dvB, dvB);
        const wi = w + <usize>i * dkB;
        for (let d = 0; d < dk; d++) axpy(vi, -f32At(wi, d), s + <usize>d * dvB, dv);
      }
      // O = (Q̂⊙e^Γ)·S + lower_incl(Q̂K̂ᵀ ⊙ L)·Vnew
      for (let i = 0; i < n; i++) {
        const or = out + ((<usize>((c0 + i) * hv + h) * <usize>dv) << 2);
        const qi = qh + <usize>i * dkB;
        zero(or, dv);
        for (let d = 0; d < dk; d++) axpy(or, f32At(qi, d), s + <usize>d * dvB, dv);
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
        for (let j = 0; j < n; j++) axpy(sd, f32At(kh + <usize>j * dkB, d) * f32At(dl, j), vnew + <usize>j * dvB, dv);
      }
    }
  }
}
