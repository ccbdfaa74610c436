// Q8_0 in the q8x4 layout (q8x4.ts), "dot" kernel for blocks of 4 rows (M ≥ 4: prefill,
// verify, batched decode) in the vnni build, run only where V8 lowers the relaxed i8×i7
// dot-add to AVX-VNNI (`vpdpbusd`: the second operand unsigned, i32 sums, no saturation;
// module.ts dotAddIsVnni, the backend's `q8x4Dot`). The int8 weights are the signed
// operand; the activations enter as u = x + 128 ∈ 1..255 (x ^ 0x80), outside i7, which is
// why this kernel needs that lowering: per column and 32-block
//   Σ w·x = Σ w·u − 128·Σ w,
// Σ w from a dot-add with a vector of ones. Both sums are exact in i32 (|Σ w·u| ≤
// 32·127·255), so sumi is the narrow kernel's exact integer and the f32 chain is the same
// (acc += (scale_j·d_j)·sumi: mul, mul, add; unfused): the same bits.
// Per 16-byte weight vector: one byte shuffle to column-major quads (the layout keeps k
// pairs for dot_i16x8_s), one dot-add for Σ w, then per row a lane broadcast and a dot-add:
// 4 rows × 16 multiply-adds in 13 instructions (2 loads, 1 xor, 1 vpshufb, 4 lane broadcasts,
// 5 vpdpbusd), against 26 for the i16 pairs.
// Activations: the int8 rows interleaved by 4 (q4kx4.ts interleaveQ4kx4Acts, at q8 + M·K):
// quad q of row 4i+r at x4 + 4K·i + 16q + 4r. Rows past the last block of 4 run q8x4.ts's
// single-row kernel on the i16 quants.
import { groupRow1I16, storeRows4 } from './q8x4';

const SB: usize = 144; // bytes of one (group, sub-block)

/** Rows mi..mi+3 × the 4 columns of group wg (see above). ones / m80: splats of 1 / 0x80;
 * perm: the byte permutation from k pairs to column quads (kept in a register). */
// @ts-ignore: decorator
@inline function groupRows4Dot(out: usize, x4: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, ones: v128, m80: v128, perm: v128): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const ds = <usize>nb << 2;
  let dj = d + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let j = 0; j < nb; j++) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0), sw = i32x4.splat(0);
    let wp = b;
    for (let v = 0; v < 8; v++) { // one weight vector (4 k of 4 columns) × 4 rows per pass
      const raw = v128.load(wp, 16);
      const w = i8x16.relaxed_swizzle(raw, perm); // column c's 4 k at 4c (indices < 16: one vpshufb)
      const xq = v128.xor(v128.load(x), m80); // u of quad v of rows 0..3 at 4r
      sw = i32x4.relaxed_dot_i8x16_i7x16_add_s(w, ones, sw);
      a0 = i32x4.relaxed_dot_i8x16_i7x16_add_s(w, i32x4.shuffle(xq, xq, 0, 0, 0, 0), a0);
      a1 = i32x4.relaxed_dot_i8x16_i7x16_add_s(w, i32x4.shuffle(xq, xq, 1, 1, 1, 1), a1);
      a2 = i32x4.relaxed_dot_i8x16_i7x16_add_s(w, i32x4.shuffle(xq, xq, 2, 2, 2, 2), a2);
      a3 = i32x4.relaxed_dot_i8x16_i7x16_add_s(w, i32x4.shuffle(xq, xq, 3, 3, 3, 3), a3);
      wp += 16;
      x += 16;
    }
    const corr = i32x4.shl(sw, 7);
    const sc = v128.load(b);
    f0 = chain(f0, i32x4.sub(a0, corr), sc, load<f32>(dj));
    f1 = chain(f1, i32x4.sub(a1, corr), sc, load<f32>(dj + ds));
    f2 = chain(f2, i32x4.sub(a2, corr), sc, load<f32>(dj + 2 * ds));
    f3 = chain(f3, i32x4.sub(a3, corr), sc, load<f32>(dj + 3 * ds));
    b += SB;
    dj += 4;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** One chain step: acc + (sc · dx) · sumi for 4 columns (q8x4.ts's). */
// @ts-ignore: decorator
@inline function chain(acc: v128, sumi: v128, sc: v128, dx: f32): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(sc, f32x4.splat(dx)), f32x4.convert_i32x4_s(sumi)));
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q8x4 layout at w;
 * q16/q8/d: quantizeActs of x, and interleaveQ4kx4Acts at q8 + M·K. vnni build only (the
 * others never get this format id; they run q8x4.ts's kernel if they do). */
export function qmatmulQ8x4Dot(out: usize, q16: usize, q8: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const x4 = q8 + <usize>m * <usize>k;
  const gb = <usize>(k >> 5) * SB;
  // splats built from a run-time value: V8 would rematerialise a constant inside the loops
  // (a constant i8x16.shuffle mask was rebuilt from two 64-bit immediates on every use)
  const z = k >> 31; // 0: k ≥ 0
  const ones = i8x16.splat(<i8>(z + 1)), m80 = i8x16.splat(<i8>(z + 0x80));
  const perm = v128.xor(i8x16(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15), i8x16.splat(<i8>z));
  const rb = max(4, <i32>(<usize>262144 / <usize>k) & ~3); // rows whose quants fit in ~256 KiB
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let c = n0; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      if (DOT_I32) for (; mi + 4 <= r1; mi += 4) groupRows4Dot(out, x4, d, wg, n, k, mi, c, cnt, ones, m80, perm);
      for (; mi < r1; mi++) groupRow1I16(out, q16, d, wg, n, k, mi, c, cnt);
    }
  }
}
