// Q4_K in the q4kx4 layout (q4kx4.ts), "wide" kernel for single rows (decode, M = 1): four
// groups (16 output columns) a quarter of the range apart per pass, so each activation
// broadcast feeds 16 columns and each thread reads four sequential weight streams. Out of
// cache a thread's stream rate, not its arithmetic, bounds decode (Intel Xeon, one thread,
// 584 MB of Q4_K: 10.4 GB/s for the kernel with its f32 chain, 11.0 with the dot-adds alone,
// 13.7 for the dot-adds over four streams): four streams against two took Q4_K_M's Q4_K
// matmuls 11.2-12.1 -> 9.5-10.0 ms per decode step (Node 24; Node 20's fma build alike).
// Read from V8 11.3's x64 code for this CPU (node --no-liftoff --print-wasm-code): the
// single-row loop q4kx4.ts had spent ~150 instructions per 64-byte sub-block of one group,
// of which only 8 vpmaddubsw did products. i32x4.relaxed_dot_i8x16_i7x16_add_s lowers to
// vpcmpeqd+vpsrlw (a fresh all-ones i16 constant) + vpmaddubsw + vpmaddwd + vpaddd; the
// nibble shift i8x16.shr_u rebuilds its 0x0f mask (movl+vmovd+vpshufd) each time; the
// load_splat / load32_zero offsets become loop-invariant base registers, which spill.
// Here (and now in q4kx4.ts too): i16x8.relaxed_dot_i8x16_i7x16_s (one vpmaddubsw) summed
// in i16 over the sub-block (each lane: 16 products of ≤ 15·128 → |sum| ≤ 30720, exact),
// one extadd to i32 per sub-block and group; nibbles by i16 shifts and a mask held in a
// register; activations broadcast by load32_splat.
// Same integers and the same f32 chain as q4kx4.ts, so the same bits: per (column,
// sub-block) acc += (scale_j·d_j)·sumi; acc += (offset_j·d_j)·s_j (mul, mul, add; unfused).
// Relaxed build only; the plain build runs q4kx4.ts's kernel for this format id.
import { qmatmulQ4kx4, widen16 } from './q4kx4';
import { sumsF32 } from './qdecode';
import { storeQuadRow } from './q8x4';

const SB: usize = 608; // bytes of one (group, super-block)

/** acc + the i16 pair sums of one weight vector's two quads: its low nibbles times the
 * broadcast int8 quad xl, its high nibbles times xh (m15: a splat of 15). */
// @ts-ignore: decorator
@inline function vec16(acc: v128, w: v128, xl: v128, xh: v128, m15: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD && DOT_I32) { // vnni build: i32 lanes, two dot-adds
    return i32x4.relaxed_dot_i8x16_i7x16_add_s(xh, v128.and(i16x8.shr_u(w, 4), m15), i32x4.relaxed_dot_i8x16_i7x16_add_s(xl, v128.and(w, m15), acc));
  }
  if (ASC_FEATURE_RELAXED_SIMD) {
    const lo = i16x8.relaxed_dot_i8x16_i7x16_s(xl, v128.and(w, m15));
    const hi = i16x8.relaxed_dot_i8x16_i7x16_s(xh, v128.and(i16x8.shr_u(w, 4), m15));
    return i16x8.add(acc, i16x8.add(lo, hi));
  }
  unreachable();
  return acc;
}

/** Four u8 at the low bytes of v → f32x4 (exact). */
// @ts-ignore: decorator
@inline function bytes4(v: v128): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v)));
}

/** One sub-block's chain steps for 4 columns: h the i16 pair sums, sb the group's
 * super-block, cp = sb + 4j; dx / sx the row's splat d_j and s_j (f32). */
// @ts-ignore: decorator
@inline function chain(acc: v128, h: v128, sb: usize, cp: usize, dx: v128, sx: v128): v128 {
  const sumi = widen16(h);
  const sc = f32x4.mul(v128.load(sb), bytes4(v128.load(cp, 32)));
  const mn = f32x4.mul(v128.load(sb, 16), bytes4(v128.load(cp, 64)));
  const f = f32x4.add(acc, f32x4.mul(f32x4.mul(sc, dx), f32x4.convert_i32x4_s(sumi)));
  return f32x4.add(f, f32x4.mul(f32x4.mul(mn, dx), sx));
}

/** Row mi × the 16 columns of the groups at g0 + i·off (i = 0..3; columns c0 + i·cq): four
 * sequential weight streams per thread, each activation broadcast feeding 16 columns. One
 * dot-add chain per group and sub-block (four independent chains; the relaxed non-vnni
 * build's i16 sums hold the sub-block exactly, see vec16). */
// @ts-ignore: decorator
@inline function quadRow1(out: usize, q8: usize, d: usize, sf: usize, g0: usize, off: usize, n: i32, k: i32, mi: i32, c0: i32, cq: i32, m15: v128): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k; // the row's 32 quants of sub-block j at x + 32j
  let dj = d + <usize>(mi * nb) * 4;
  let sj = sf + <usize>(mi * nb) * 4;
  let b = g0;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let wv = b + 96, c = 0;
    for (let j = 0; j < 8; j++) {
      let h0 = i32x4.splat(0), h1 = i32x4.splat(0), h2 = i32x4.splat(0), h3 = i32x4.splat(0);
      for (let v = 0; v < 4; v++) { // vector v of each group: quads 2v, 2v + 1
        const xl = v128.load32_splat(x), xh = v128.load32_splat(x, 4);
        h0 = vec16(h0, v128.load(wv), xl, xh, m15);
        h1 = vec16(h1, v128.load(wv + off), xl, xh, m15);
        h2 = vec16(h2, v128.load(wv + 2 * off), xl, xh, m15);
        h3 = vec16(h3, v128.load(wv + 3 * off), xl, xh, m15);
        wv += 16;
        x += 8;
      }
      const dx = v128.load32_splat(dj), sx = v128.load32_splat(sj); // d_j, f32 s_j
      f0 = chain(f0, h0, b, b + c, dx, sx);
      f1 = chain(f1, h1, b + off, b + off + c, dx, sx);
      f2 = chain(f2, h2, b + 2 * off, b + 2 * off + c, dx, sx);
      f3 = chain(f3, h3, b + 3 * off, b + 3 * off + c, dx, sx);
      c += 4;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeQuadRow(out, n, mi, c0, cq, f0, f1, f2, f3);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [1, N] = x · Wᵀ, W in the q4kx4 layout at
 * w (arguments as q4kx4.ts's qmatmulQ4kx4, M = 1): of the G groups, group t runs with
 * groups t + ⌊G/4⌋, t + 2⌊G/4⌋, t + 3⌊G/4⌋ (four long sequential weight streams); the last
 * G mod 4 groups run q4kx4.ts's kernel. Plain build: q4kx4.ts's kernel throughout. */
export function qmatmulQ4kx4Wide(out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const groups = (n1 - n0 + 3) >> 2;
  const q = ASC_FEATURE_RELAXED_SIMD ? groups >> 2 : 0;
  const gb = <usize>(k >> 8) * SB;
  // a mask built from a run-time value: V8 would rematerialise a constant inside the loops
  const m15 = i8x16.splat(<i8>((k >> 31) + 15)); // k ≥ 0
  const sf = sumsF32(s, m, k);
  for (let mi = 0; mi < m; mi++) {
    for (let t = 0; t < q; t++) quadRow1(out, q8, d, sf, w + <usize>((n0 >> 2) + t) * gb, <usize>q * gb, n, k, mi, n0 + 4 * t, 4 * q, m15);
  }
  if (groups > 4 * q) qmatmulQ4kx4(out, q16, q8, d, s, w, m, n, k, n0 + 16 * q, n1);
}
