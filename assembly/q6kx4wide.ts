// Q6_K in the q6kx4 layout (q6kx4.ts), "wide" kernel for single rows (decode, M = 1): two
// groups (8 output columns) per pass, so each activation broadcast feeds 8 columns.
// The per-group work is q6kx4.ts's group16Relaxed (see there for what V8's code showed);
// this kernel shares each activation load and its 4 lane broadcasts between two groups.
// (Writing a sub-block's two 16-element groups out in full spills: V8 hoists every load,
// 75 spill moves per sub-block; so the 2-trip loop stays.) Measured on an AMD EPYC with
// Node 20: no faster than the narrow kernel out of cache; calibration decides per machine.
// Same integers and the same f32 chain as q6kx4.ts, so the same bits: per (column,
// sub-block) sumi = Σ_t sc_t·Σ u·x − 32·Σ_t sc_t·X_t exactly (|sumi| < 2²⁴), then
// acc += (d·d_j)·sumi.
// Relaxed build only; the plain build runs q6kx4.ts's kernel for this format id.
import { SUMB, group16Relaxed as group16, groupSumSplat, qmatmulQ6kx4 } from './q6kx4';
import { storeCols } from './q8x4';

const SB: usize = 848; // bytes of one (group, super-block)

/** One chain step for 4 columns: acc + (d · dx) · sumi. */
// @ts-ignore: decorator
@inline function step(acc: v128, sumi: v128, d: v128, dx: v128): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(d, dx), f32x4.convert_i32x4_s(sumi)));
}

/** Row mi (int8 quants in q8 [M, K], d its block scales, xs the sums of 16 quants) ×
 * the 8 columns of the groups at g0 (columns c0..c0+3) and g1 (columns c1.., cnt1 valid). */
// @ts-ignore: decorator
@inline function pairRow1(out: usize, q8: usize, xs: usize, d: usize, g0: usize, g1: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, cnt1: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k; // the row's 32 quants of sub-block j at x + 32j
  let dj = d + <usize>(mi * nb) * 4;
  let xt = xs + <usize>(mi * nb) * 2 * SUMB; // the row's sum of 16-element group t at xt + SUMB·t
  let b0 = g0, b1 = g1;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let w0 = b0 + 80, w1 = b1 + 80, s0 = b0 + 16, s1 = b1 + 16;
    for (let j = 0; j < 8; j++) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const xq = v128.load(x);
        const x0 = i32x4.shuffle(xq, xq, 0, 0, 0, 0), x1 = i32x4.shuffle(xq, xq, 1, 1, 1, 1);
        const x2 = i32x4.shuffle(xq, xq, 2, 2, 2, 2), x3 = i32x4.shuffle(xq, xq, 3, 3, 3, 3);
        const xx = groupSumSplat(xt);
        a0 = i32x4.add(a0, group16(w0, s0, x0, x1, x2, x3, xx, lo6, top2));
        a1 = i32x4.add(a1, group16(w1, s1, x0, x1, x2, x3, xx, lo6, top2));
        w0 += 48;
        w1 += 48;
        s0 += 4;
        s1 += 4;
        x += 16;
        xt += SUMB;
      }
      const dx = f32x4.splat(load<f32>(dj));
      f0 = step(f0, a0, v128.load(b0), dx);
      f1 = step(f1, a1, v128.load(b1), dx);
      dj += 4;
    }
    b0 += SB;
    b1 += SB;
  }
  const o = out + <usize>mi * (<usize>n << 2);
  v128.store(o + (<usize>c0 << 2), f0);
  storeCols(o + (<usize>c1 << 2), f1, cnt1);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [1, N] = x · Wᵀ, W in the q6kx4 layout at
 * w (arguments as q6kx4.ts's qmatmulQ6kx4, M = 1): of the G groups, group t pairs with
 * group t + ⌊G/2⌋ (two long sequential weight streams, as q8x4wide.ts); an odd last group
 * runs q6kx4.ts's kernel. Plain build: q6kx4.ts's kernel throughout. */
export function qmatmulQ6kx4Wide(out: usize, q16: usize, q8: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const groups = (n1 - n0 + 3) >> 2;
  const half = ASC_FEATURE_RELAXED_SIMD ? groups >> 1 : 0;
  const gb = <usize>(k >> 8) * SB;
  const xs = q8 + 3 * <usize>m * <usize>k;
  // masks built from a run-time value: V8 would rematerialise a constant inside the loops
  const lo6 = i8x16.splat(<i8>((k >> 31) + 63)), top2 = i8x16.splat(<i8>((k >> 31) - 64)); // k ≥ 0: 0x3f, 0xc0
  for (let mi = 0; mi < m; mi++) {
    for (let t = 0; t < half; t++) {
      const ca = n0 + 4 * t, cb = ca + 4 * half;
      const ga = w + <usize>((n0 >> 2) + t) * gb;
      pairRow1(out, q8, xs, d, ga, ga + <usize>half * gb, n, k, mi, ca, cb, min(4, n1 - cb), lo6, top2);
    }
  }
  if (groups > 2 * half) qmatmulQ6kx4(out, q16, q8, d, w, m, n, k, n0 + 8 * half, n1);
}
