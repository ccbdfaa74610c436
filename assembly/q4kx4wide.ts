// Q4_K in the q4kx4 layout (q4kx4.ts), "wide" kernel for single rows (decode, M = 1): two
// groups (8 output columns) per pass, so each activation broadcast feeds 8 columns.
// Read from V8 11.3's x64 code for this CPU (node --no-liftoff --print-wasm-code): the
// single-row loop q4kx4.ts had spent ~150 instructions per 64-byte sub-block of one group,
// of which only 8 vpmaddubsw did products. i32x4.relaxed_dot_i8x16_i7x16_add_s lowers to
// vpcmpeqd+vpsrlw (a fresh all-ones i16 constant) + vpmaddubsw + vpmaddwd + vpaddd; the
// nibble shift i8x16.shr_u rebuilds its 0x0f mask (movl+vmovd+vpshufd) each time; the
// load_splat / load32_zero offsets become loop-invariant base registers, which spill.
// Here (and now in q4kx4.ts too): i16x8.relaxed_dot_i8x16_i7x16_s (one vpmaddubsw) summed
// in i16 over the sub-block (each lane: 16 products of ≤ 15·128 → |sum| ≤ 30720, exact),
// one extadd to i32 per sub-block and group; nibbles by i16 shifts and a mask held in a
// register; activations as plain 16-byte loads broadcast by lane shuffles. Measured on an
// AMD EPYC with Node 20, out of cache: 0.87–0.99 of the fixed narrow kernel's time.
// Same integers and the same f32 chain as q4kx4.ts, so the same bits: per (column,
// sub-block) acc += (scale_j·d_j)·sumi; acc += (offset_j·d_j)·s_j (mul, mul, add; unfused).
// Relaxed build only; the plain build runs q4kx4.ts's kernel for this format id.
import { qmatmulQ4kx4, widen16 } from './q4kx4';
import { storeCols } from './q8x4';

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

/** Row mi (int8 quants in q8 [M, K], d / s its block scales and sums) × the 8 columns of
 * the groups at g0 (columns c0..c0+3) and g1 (columns c1.., cnt1 of them valid). */
// @ts-ignore: decorator
@inline function pairRow1(out: usize, q8: usize, d: usize, s: usize, g0: usize, g1: usize, n: i32, k: i32, mi: i32, c0: i32, c1: i32, cnt1: i32, m15: v128): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k; // the row's 32 quants of sub-block j at x + 32j
  let dj = d + <usize>(mi * nb) * 4;
  let sj = s + <usize>(mi * nb) * 4;
  let b0 = g0, b1 = g1;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let w0 = b0 + 96, w1 = b1 + 96, c = 0;
    for (let j = 0; j < 8; j++) {
      // the vnni build's dot-adds are latency chains: vectors v+1 go to g0 / g1
      let h0 = i16x8.splat(0), h1 = i16x8.splat(0), g0 = i16x8.splat(0), g1 = i16x8.splat(0);
      for (let v = 0; v < 4; v += 2) { // vectors v, v+1 of both groups: quads 2v..2v+3
        const xq = v128.load(x); // quads 2v, 2v+1, 2v+2, 2v+3
        let xl = i32x4.shuffle(xq, xq, 0, 0, 0, 0), xh = i32x4.shuffle(xq, xq, 1, 1, 1, 1);
        h0 = vec16(h0, v128.load(w0), xl, xh, m15);
        h1 = vec16(h1, v128.load(w1), xl, xh, m15);
        xl = i32x4.shuffle(xq, xq, 2, 2, 2, 2);
        xh = i32x4.shuffle(xq, xq, 3, 3, 3, 3);
        if (DOT_I32) {
          g0 = vec16(g0, v128.load(w0, 16), xl, xh, m15);
          g1 = vec16(g1, v128.load(w1, 16), xl, xh, m15);
        } else {
          h0 = vec16(h0, v128.load(w0, 16), xl, xh, m15);
          h1 = vec16(h1, v128.load(w1, 16), xl, xh, m15);
        }
        w0 += 32;
        w1 += 32;
        x += 16;
      }
      if (DOT_I32) {
        h0 = i32x4.add(h0, g0);
        h1 = i32x4.add(h1, g1);
      }
      const dx = f32x4.splat(load<f32>(dj));
      const sx = f32x4.splat(<f32>load<i32>(sj));
      f0 = chain(f0, h0, b0, b0 + c, dx, sx);
      f1 = chain(f1, h1, b1, b1 + c, dx, sx);
      c += 4;
      dj += 4;
      sj += 4;
    }
    b0 += SB;
    b1 += SB;
  }
  const o = out + <usize>mi * (<usize>n << 2);
  v128.store(o + (<usize>c0 << 2), f0);
  storeCols(o + (<usize>c1 << 2), f1, cnt1);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [1, N] = x · Wᵀ, W in the q4kx4 layout at
 * w (arguments as q4kx4.ts's qmatmulQ4kx4, M = 1): of the G groups, group t pairs with
 * group t + ⌊G/2⌋ (two long sequential weight streams, as q8x4wide.ts); an odd last group
 * runs q4kx4.ts's kernel. Plain build: q4kx4.ts's kernel throughout. */
export function qmatmulQ4kx4Wide(out: usize, q16: usize, q8: usize, d: usize, s: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const groups = (n1 - n0 + 3) >> 2;
  const half = ASC_FEATURE_RELAXED_SIMD ? groups >> 1 : 0;
  const gb = <usize>(k >> 8) * SB;
  // a mask built from a run-time value: V8 would rematerialise a constant inside the loops
  const m15 = i8x16.splat(<i8>((k >> 31) + 15)); // k ≥ 0
  for (let mi = 0; mi < m; mi++) {
    for (let t = 0; t < half; t++) {
      const ca = n0 + 4 * t, cb = ca + 4 * half;
      const ga = w + <usize>((n0 >> 2) + t) * gb;
      pairRow1(out, q8, d, s, ga, ga + <usize>half * gb, n, k, mi, ca, cb, min(4, n1 - cb), m15);
    }
  }
  if (groups > 2 * half) qmatmulQ4kx4(out, q16, q8, d, s, w, m, n, k, n0 + 8 * half, n1);
}
