// Q6_K in the q6kx4 layout (q6kx4.ts), "wide" kernel for single rows (decode, M = 1): four
// groups (16 output columns) a quarter of the range apart per pass, so each activation
// broadcast feeds 16 columns and each thread reads four sequential weight streams (see
// q4kx4wide.ts: out of cache the stream rate bounds decode). Intel Xeon, Q4_K_M's Q6_K
// matmuls per decode step: 15.7-17.0 ms with two streams, 14.2-14.4 with four.
// The per-group work is q6kx4.ts's group16Relaxed (see there for what V8's code showed);
// this kernel shares each activation load and its 4 lane broadcasts between the groups.
// (Writing a sub-block's two 16-element groups out in full spills: V8 hoists every load,
// 75 spill moves per sub-block; so the 2-trip loop stays.) Calibration decides per machine.
// Same integers and the same f32 chain as q6kx4.ts, so the same bits: per (column,
// sub-block) sumi = Σ_t sc_t·Σ u·x − 32·Σ_t sc_t·X_t exactly (|sumi| < 2²⁴), then
// acc += (d·d_j)·sumi.
// Relaxed build only; the plain build runs q6kx4.ts's kernel for this format id.
import { SUMB, group16Relaxed as group16, groupSumSplat, qmatmulQ6kx4 } from './q6kx4';
import { storeQuadRow } from './q8x4';

const SB: usize = 848; // bytes of one (group, super-block)

/** One chain step for 4 columns: acc + (d · dx) · sumi. */
// @ts-ignore: decorator
@inline function step(acc: v128, sumi: v128, d: v128, dx: v128): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(d, dx), f32x4.convert_i32x4_s(sumi)));
}

/** Row mi × the 16 columns of the groups at g0 + i·off (i = 0..3; columns c0 + i·cq): four
 * sequential weight streams per thread, each activation broadcast feeding 16 columns. */
// @ts-ignore: decorator
@inline function quadRow1(out: usize, q8: usize, xs: usize, d: usize, g0: usize, off: usize, n: i32, k: i32, mi: i32, c0: i32, cq: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k; // the row's 32 quants of sub-block j at x + 32j
  let dj = d + <usize>(mi * nb) * 4;
  let xt = xs + <usize>(mi * nb) * 2 * SUMB; // the row's sum of 16-element group t at xt + SUMB·t
  let b = g0;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let wt = b + 80, sp = b + 16;
    for (let j = 0; j < 8; j++) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const xq = v128.load(x);
        const x0 = i32x4.shuffle(xq, xq, 0, 0, 0, 0), x1 = i32x4.shuffle(xq, xq, 1, 1, 1, 1);
        const x2 = i32x4.shuffle(xq, xq, 2, 2, 2, 2), x3 = i32x4.shuffle(xq, xq, 3, 3, 3, 3);
        const xx = groupSumSplat(xt);
        a0 = i32x4.add(a0, group16(wt, sp, x0, x1, x2, x3, xx, lo6, top2));
        a1 = i32x4.add(a1, group16(wt + off, sp + off, x0, x1, x2, x3, xx, lo6, top2));
        a2 = i32x4.add(a2, group16(wt + 2 * off, sp + 2 * off, x0, x1, x2, x3, xx, lo6, top2));
        a3 = i32x4.add(a3, group16(wt + 3 * off, sp + 3 * off, x0, x1, x2, x3, xx, lo6, top2));
        wt += 48;
        sp += 4;
        x += 16;
        xt += SUMB;
      }
      const dx = f32x4.splat(load<f32>(dj));
      f0 = step(f0, a0, v128.load(b), dx);
      f1 = step(f1, a1, v128.load(b + off), dx);
      f2 = step(f2, a2, v128.load(b + 2 * off), dx);
      f3 = step(f3, a3, v128.load(b + 3 * off), dx);
      dj += 4;
    }
    b += SB;
  }
  storeQuadRow(out, n, mi, c0, cq, f0, f1, f2, f3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [1, N] = x · Wᵀ, W in the q6kx4 layout at
 * w (arguments as q6kx4.ts's qmatmulQ6kx4, M = 1): of the G groups, group t runs with
 * groups t + ⌊G/4⌋, t + 2⌊G/4⌋, t + 3⌊G/4⌋ (four long sequential weight streams); the last
 * G mod 4 groups run q6kx4.ts's kernel. Plain build: q6kx4.ts's kernel throughout. */
export function qmatmulQ6kx4Wide(out: usize, q16: usize, q8: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const groups = (n1 - n0 + 3) >> 2;
  const q = ASC_FEATURE_RELAXED_SIMD ? groups >> 2 : 0;
  const gb = <usize>(k >> 8) * SB;
  const xs = q8 + 3 * <usize>m * <usize>k;
  // masks built from a run-time value: V8 would rematerialise a constant inside the loops
  const lo6 = i8x16.splat(<i8>((k >> 31) + 63)), top2 = i8x16.splat(<i8>((k >> 31) - 64)); // k ≥ 0: 0x3f, 0xc0
  for (let mi = 0; mi < m; mi++) {
    for (let t = 0; t < q; t++) quadRow1(out, q8, xs, d, w + <usize>((n0 >> 2) + t) * gb, <usize>q * gb, n, k, mi, n0 + 4 * t, 4 * q, lo6, top2);
  }
  if (groups > 4 * q) qmatmulQ6kx4(out, q16, q8, d, w, m, n, k, n0 + 16 * q, n1);
}
