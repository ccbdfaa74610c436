// Q6_K repacked for the integer matmul ('q6kx4' layout, set by the wasm backend's
// packWeight): the same 6-bit quants, int8 group scales and d as the GGML Q6_K blocks,
// rearranged so that one 16-byte load feeds 4 output columns × 4 elements.
//
// Layout: groups of 4 weight rows (= output columns; the last group zero-padded), group g
// at g·ns·848 bytes (ns = K/256 super-blocks); super-block b of a group at +b·848:
//   [0, 16)    f32 d of columns 0..3 (the f16 d of their Q6_K block, exactly)
//   [16, 80)   i8 scale of 16-element group t (0..15), column c at 16 + 4t + c
//   [80, 848)  group t at 80 + 48t, 3 vectors qa, qb, qc (u = q + 32 ∈ 0..63, element
//              e = 4p + i of column c in byte 4c + i):
//              bits 0..5 of qa / qb / qc: u of quad p = 0 / 1 / 2
//              bits 6, 7 of qa / qb / qc: bits 0-1 / 2-3 / 4-5 of quad 3's u
// so each u vector (the quad tile [column][4 k] of 4 elements) is one AND for quads 0..2
// and eight bit operations for quad 3 (quadU); the earlier nibble-plane layout took 17 for
// the four. 848 bytes per 1024 weights: 6.625 bits/weight (GGML Q6_K: 6.5625).
//
// Arithmetic: exactly the twin's (src/kernels/ref/quant.ts, decodeSubBlock): per sub-block
// j (groups t = 2j, 2j+1) the exact integer  sumi = Σ_t sc_t · Σ (u − 32)·x
// = Σ_t sc_t · Σ u·x − 32 · Σ_t sc_t · X_t  (X_t = Σ x over group t; |sumi| ≤
// 2·16·32·127·128 < 2²⁴), then per column one f32 chain  acc += (d·d_j)·sumi  (mul, mul,
// add; unfused). Σ u·x, relaxed build: i16x8.relaxed_dot_i8x16_i7x16_s (u ∈ 0..63 the i7
// operand) gives i16 pair sums ≤ 2·63·127; two quads added stay ≤ 32004 (exact in i16);
// dot_i16x8_s with [sc_c, sc_c] lane pairs then scales and sums them per column in i32.
// Plain build: u widened to i16, dotted with a broadcast i16 quad, folded per column, times
// sc_t (i32). The correction: dot_i16x8_s of [sc_2j, sc_2j+1] per column with the
// broadcast pair [X_2j, X_2j+1] (|X| ≤ 2032), shifted by 5. Same integers, same bits.
//
// Activations: as q4kx4 (interleaveQ4kx4Acts: int8 rows / i16 rows, and for whole blocks
// of 4 rows the interleaved quads at q8 + M·K), plus q6kx4ActSums at q8 + 3·M·K, one per
// 16-element group (row mi, group t of the row at +SUMB·(mi·K/16 + t)): the vnni build
// stores −32·X as i32 (SUMB = 4), where a group's dot-add chain starts (one broadcast
// load); the other builds X as i16 (SUMB = 2).
import { f16At } from './qdecode';
import { groupSource, storeCols, storeRows4, TOUCH_AHEAD } from './q8x4';

const SB: usize = 848; // bytes of one (group, super-block)
const QB: usize = 210; // bytes of one GGML Q6_K block
const XB: usize = ASC_FEATURE_RELAXED_SIMD ? 1 : 2; // bytes of one activation quant
export const SUMB: usize = DOT_I32 ? 4 : 2; // bytes of one group sum (q6kx4ActSums)

/** Load the bytes at p and p + 48, results unused: the fma and plain builds' blocks of 4
 * rows touch the weights of a sub-block (96 bytes) TOUCH_AHEAD bytes ahead of use, so their
 * cache misses start before the arithmetic reaches them (see q8x4.ts touchAhead); p is
 * clamped to the caller's weights (lim). Intel Xeon, one thread, out of cache: fma build
 * (Node 20) M = 4 19.5 → 23.4 GMAC/s, M = 8 26.0 → 27.8; the vnni build's blocks lost
 * 0–6% with it, so they do not touch. */
// @ts-ignore: decorator
@inline function touchSubBlock(p: usize): void {
  load<u8>(p);
  load<u8>(p, 48);
}

/** u = q + 32 (0..63) of element e (0..255) of the GGML Q6_K block at src. */
// @ts-ignore: decorator
@inline function q6u(src: usize, e: i32): u32 {
  const half = <usize>(e >> 7), run = (e >> 5) & 3, l = <usize>(e & 31);
  const ql = <u32>load<u8>(src + half * 64 + l + <usize>((run & 1) << 5));
  const qh = <u32>load<u8>(src + 128 + half * 32 + l);
  return (run < 2 ? ql & 15 : ql >> 4) | (((qh >> (<u32>run << 1)) & 3) << 4);
}

/** Repack a GGML Q6_K weight [rows, k] at w in place (the buffer must hold
 * ⌈rows/4⌉·(k/256)·848 bytes). tmp: 4·(k/256)·210 bytes of scratch. Groups run last to
 * first: group g's destination (848 bytes per column-super-block group vs 4·210 = 840 of
 * source) starts at or after the end of group g−1's source; its own source is in tmp. */
export function repackQ6kx4(w: usize, rows: i32, k: i32, tmp: usize): void {
  const ns = k >> 8;
  const rb = <usize>ns * QB;
  for (let g = ((rows + 3) >> 2) - 1; g >= 0; g--) {
    groupSource(w, g, rows, rb, tmp);
    const dst = w + <usize>g * <usize>ns * SB;
    memory.fill(dst, 0, <usize>ns * SB); // the quants are OR-ed in
    for (let b = 0; b < ns; b++) {
      for (let c = 0; c < 4; c++) packColumn(dst + <usize>b * SB, tmp + <usize>c * rb + <usize>b * QB, c);
    }
  }
}

/** Column c's Q6_K block at src → its slots of the group's (zeroed) super-block at o. */
function packColumn(o: usize, src: usize, c: i32): void {
  const cc = <usize>c;
  store<f32>(o + (cc << 2), f16At(src + 208));
  for (let t = 0; t < 16; t++) store<u8>(o + 16 + (<usize>t << 2) + cc, load<u8>(src + 192 + <usize>t));
  for (let e = 0; e < 256; e++) {
    const u = q6u(src, e);
    const p = (e >> 2) & 3, i = <usize>(e & 3);
    const gt = o + 80 + <usize>(e >> 4) * 48 + (cc << 2) + i; // byte 4c + i of qa
    if (p < 3) {
      store<u8>(gt + (<usize>p << 4), load<u8>(gt + (<usize>p << 4)) | <u8>u);
      continue;
    }
    for (let v: usize = 0; v < 3; v++) { // quad 3: two bits of u at the top of each vector
      store<u8>(gt + (v << 4), load<u8>(gt + (v << 4)) | <u8>(((u >> (<u32>v << 1)) & 3) << 6));
    }
  }
}

/** X = Σ x of every 16 int8 activation quants of q8 [M, K], i16 at q8 + 3·M·K. */
export function q6kx4ActSums(q8: usize, m: i32, k: i32): void {
  const n = <usize>m * <usize>k;
  const dst = q8 + 3 * n;
  for (let g: usize = 0; g < n >> 4; g++) {
    const v = i32x4.extadd_pairwise_i16x8_s(i16x8.extadd_pairwise_i8x16_s(v128.load(q8 + (g << 4))));
    const t = i32x4.extract_lane(v, 0) + i32x4.extract_lane(v, 1) + i32x4.extract_lane(v, 2) + i32x4.extract_lane(v, 3);
    if (DOT_I32) store<i32>(dst + (g << 2), -(t << 5));
    else store<i16>(dst + (g << 1), <i16>t);
  }
}

/** u of quad p (0..3) of a group from its vectors qa, qb, qc; lo6 / top2: splats of 0x3f /
 * 0xc0. Quad 3: t = (qc & top2) | (qb & top2) >> 2 | (qa & top2) >> 4 is u << 2 (bits 2..7);
 * i16 lane shifts act as byte shifts here, as only the bits the masks keep can cross. */
// @ts-ignore: decorator
@inline function quadU(qa: v128, qb: v128, qc: v128, p: i32, lo6: v128, top2: v128): v128 {
  if (p == 0) return v128.and(qa, lo6);
  if (p == 1) return v128.and(qb, lo6);
  if (p == 2) return v128.and(qc, lo6);
  const t = v128.or(v128.and(qc, top2), v128.or(i16x8.shr_u(v128.and(qb, top2), 2), i16x8.shr_u(v128.and(qa, top2), 4)));
  return i16x8.shr_u(t, 2);
}

/** Relaxed build: i16 pair sums of quads a, b (x: broadcast int8 quads, u: weights) added:
 * lanes 2c, 2c+1 belong to column c; exact (≤ 32004). */
// @ts-ignore: decorator
@inline function pair16(xa: v128, ua: v128, xb: v128, ub: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.add(i16x8.relaxed_dot_i8x16_i7x16_s(xa, ua), i16x8.relaxed_dot_i8x16_i7x16_s(xb, ub));
  unreachable();
  return xa;
}

/** vnni build: a0 + Σ u·x over four quads per column (i32 lanes): one chain of dot-adds,
 * no zeroing or adding of partial chains (the rows and groups around it run in parallel). */
// @ts-ignore: decorator
@inline function dot4(a0: v128, x0: v128, u0: v128, x1: v128, u1: v128, x2: v128, u2: v128, x3: v128, u3: v128): v128 {
  const a = i32x4.relaxed_dot_i8x16_i7x16_add_s(x1, u1, i32x4.relaxed_dot_i8x16_i7x16_add_s(x0, u0, a0));
  return i32x4.relaxed_dot_i8x16_i7x16_add_s(x3, u3, i32x4.relaxed_dot_i8x16_i7x16_add_s(x2, u2, a));
}

/** A row's group sum at xt (q6kx4ActSums) as group16Relaxed takes it: an i16 splat of X,
 * or (vnni build) an i32 splat of −32·X, where its dot-add chain starts. */
// @ts-ignore: decorator
@inline export function groupSumSplat(xt: usize): v128 {
  return DOT_I32 ? v128.load32_splat(xt) : i16x8.splat(load<i16>(xt));
}

/** Relaxed build: Σ_c-lane sc·(Σ u·x) of one group for one row, quads p at x + st·p. */
// @ts-ignore: decorator
@inline function groupRelaxed(x: usize, st: usize, u0: v128, u1: v128, u2: v128, u3: v128, sv: v128): v128 {
  if (DOT_I32) return i32x4.mul(dot4(i32x4.splat(0), v128.load32_splat(x), u0, v128.load32_splat(x + st), u1, v128.load32_splat(x + 2 * st), u2, v128.load32_splat(x + 3 * st), u3), sv);
  const h0 = pair16(v128.load32_splat(x), u0, v128.load32_splat(x + st), u1);
  const h1 = pair16(v128.load32_splat(x + 2 * st), u2, v128.load32_splat(x + 3 * st), u3);
  return i32x4.add(i32x4.dot_i16x8_s(h0, sv), i32x4.dot_i16x8_s(h1, sv));
}

/** acc + the i16 pair sums of u16 (4 k of 2 columns) · x (a broadcast i16 quad) (plain). */
// @ts-ignore: decorator
@inline function pdot(acc: v128, u16: v128, x: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(u16, x));
}

/** Plain build: Σ u·x of one group for one row (quad p, i16, at x + st·p), per column. */
// @ts-ignore: decorator
@inline function groupPlain(x: usize, st: usize, u0: v128, u1: v128, u2: v128, u3: v128): v128 {
  let y = v128.load64_splat(x);
  let a = pdot(i32x4.splat(0), i16x8.extend_low_i8x16_u(u0), y), b = pdot(i32x4.splat(0), i16x8.extend_high_i8x16_u(u0), y);
  y = v128.load64_splat(x + st);
  a = pdot(a, i16x8.extend_low_i8x16_u(u1), y); b = pdot(b, i16x8.extend_high_i8x16_u(u1), y);
  y = v128.load64_splat(x + 2 * st);
  a = pdot(a, i16x8.extend_low_i8x16_u(u2), y); b = pdot(b, i16x8.extend_high_i8x16_u(u2), y);
  y = v128.load64_splat(x + 3 * st);
  a = pdot(a, i16x8.extend_low_i8x16_u(u3), y); b = pdot(b, i16x8.extend_high_i8x16_u(u3), y);
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** Group t's scales as the kernel multiplies: relaxed: i16 [sc_c, sc_c] lane pairs (dup:
 * the 8 scale bytes of the sub-block doubled); plain: i32 sc_c. raw: those 8 bytes. */
// @ts-ignore: decorator
@inline function groupScales(raw: v128, dup: v128, t: i32): v128 {
  if (ASC_FEATURE_RELAXED_SIMD && !DOT_I32) return t ? i16x8.extend_high_i8x16_s(dup) : i16x8.extend_low_i8x16_s(dup);
  const w = i16x8.extend_low_i8x16_s(raw);
  return t ? i32x4.extend_high_i16x8_s(w) : i32x4.extend_low_i16x8_s(w);
}

/** sumi − 32·(sc_2j·X_2j + sc_2j+1·X_2j+1) per column; sc2: [sc_2j, sc_2j+1] per column
 * (i16), xp: the row's [X_2j, X_2j+1] broadcast. */
// @ts-ignore: decorator
@inline function corrected(sumi: v128, sc2: v128, xp: v128): v128 {
  return i32x4.sub(sumi, i32x4.shl(i32x4.dot_i16x8_s(sc2, xp), 5));
}

/** One chain step for 4 columns: acc + (d · dx) · sumi; dx broadcast from memory at dp
 * (a load-port uop, not a scalar load and a register broadcast). */
// @ts-ignore: decorator
@inline function step(acc: v128, sumi: v128, d: v128, dp: usize): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(d, v128.load32_splat(dp)), f32x4.convert_i32x4_s(sumi)));
}

// The loops below advance pointers and use constant load offsets (wasm offset immediates)
// where they can: an i32 address sum cannot fold into an x64 addressing mode.

/** Σ over one group (weights at wt, scales sv) for one row (its quad p at x + st·p). */
// @ts-ignore: decorator
@inline function group1(wt: usize, x: usize, st: usize, sv: v128, lo6: v128, top2: v128): v128 {
  const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
  const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
  const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
  if (ASC_FEATURE_RELAXED_SIMD) return groupRelaxed(x, st, u0, u1, u2, u3, sv);
  return i32x4.mul(groupPlain(x, st, u0, u1, u2, u3), sv);
}

/** Relaxed build: Σ_lane sc·Σ (u − 32)·x of one 16-element group for 4 columns, exact:
 * weights at wt (qa, qb, qc above), the group's 4 scale bytes at sp (column-minor), x0..x3
 * the row's broadcast int8 quads, xx the row's Σ x over the group (groupSumSplat); lo6 /
 * top2 as quadU takes them. The correction −32·sc·X per group: vnni build, the chain of
 * dot-adds starts at −32·X (exact: |Σ| ≤ 32·2032 + 16·63·127); otherwise dot: 2·sc·X, shifted
 * by 4. */
// @ts-ignore: decorator
@inline export function group16Relaxed(wt: usize, sp: usize, x0: v128, x1: v128, x2: v128, x3: v128, xx: v128, lo6: v128, top2: v128): v128 {
  const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
  const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
  const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
  if (DOT_I32) { // sc·(Σ u·x − 32·X) per column, xx an i32 splat
    const sc = i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load(sp))); // bytes 0..3 used
    return i32x4.mul(dot4(xx, x0, u0, x1, u1, x2, u2, x3, u3), sc);
  }
  const raw = v128.load(sp); // bytes 0..3 used
  const sv = i16x8.extend_low_i8x16_s(i8x16.shuffle(raw, raw, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)); // [sc_c, sc_c] (punpcklbw)
  const s = i32x4.add(i32x4.dot_i16x8_s(pair16(x0, u0, x1, u1), sv), i32x4.dot_i16x8_s(pair16(x2, u2, x3, u3), sv));
  return i32x4.sub(s, i32x4.shl(i32x4.dot_i16x8_s(sv, xx), 4));
}

/** Relaxed build: row mi (int8 quants at q8) × the 4 columns of group wg: one 16-byte
 * activation load per 16-element group broadcast by lane shuffles, scales loaded where used
 * (V8 11.3 turned the 2-trip loop over groupScales into a branch per trip, and each
 * load32_splat offset into an address add). */
// @ts-ignore: decorator
@inline function groupRow1Relaxed(out: usize, q8: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = q8 + <usize>mi * <usize>k;
  let dj = d + <usize>(mi * nb) * 4;
  let xt = xs + <usize>(mi * nb) * 2 * SUMB; // the row's sum of 16-element group t at xt + SUMB·t
  let b = wg;
  let f = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    let wt = b + 80, sp = b + 16;
    for (let j = 0; j < 8; j++) {
      let a = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const xq = v128.load(x);
        a = i32x4.add(a, group16Relaxed(wt, sp, i32x4.shuffle(xq, xq, 0, 0, 0, 0), i32x4.shuffle(xq, xq, 1, 1, 1, 1),
          i32x4.shuffle(xq, xq, 2, 2, 2, 2), i32x4.shuffle(xq, xq, 3, 3, 3, 3), groupSumSplat(xt), lo6, top2));
        wt += 48;
        sp += 4;
        x += 16;
        xt += SUMB;
      }
      f = step(f, a, v128.load(b), dj);
      dj += 4;
    }
    b += SB;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Row mi (its quants at xr: int8 or i16 rows) × the 4 columns of group wg; xs the sums
 * (the plain build's single rows). */
// @ts-ignore: decorator
@inline function groupRow1(out: usize, xr: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = xr + <usize>mi * <usize>k * XB;
  let dj = d + <usize>(mi * nb) * 4;
  let sj = xs + <usize>(mi * nb) * 4;
  let b = wg;
  let f = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b);
    let sp = b, wt = b + 80;
    for (let j = 0; j < 8; j++) {
      const raw = v128.load64_zero(sp, 16);
      const dup = i8x16.shuffle(raw, raw, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      let sumi = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        sumi = i32x4.add(sumi, group1(wt, x, 4 * XB, groupScales(raw, dup, t), lo6, top2));
        wt += 48;
        x += 16 * XB;
      }
      const sc2 = i16x8.extend_low_i8x16_s(i8x16.shuffle(raw, raw, 0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0));
      f = step(f, corrected(sumi, sc2, v128.load32_splat(sj)), dd, dj);
      sp += 8;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeCols(out + <usize>mi * (<usize>n << 2) + (<usize>c0 << 2), f, cnt);
}

/** Rows mi..mi+3 × the 4 columns of group wg; x4 the interleaved quants (see above). */
// @ts-ignore: decorator
@inline function groupRows4(out: usize, x4: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128, lim: usize): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k * XB;
  const ds = <usize>nb << 2; // row stride of d and of the sums
  let dj = d + <usize>(mi * nb) * 4;
  let sj = xs + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  const st: usize = 16 * XB; // quad p of row r of a group at x + st·p + r·st/4
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b);
    let sp = b, wt = b + 80;
    for (let j = 0; j < 8; j++) {
      touchSubBlock(min(wt + TOUCH_AHEAD, lim));
      const raw = v128.load64_zero(sp, 16);
      const dup = i8x16.shuffle(raw, raw, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const sv = groupScales(raw, dup, t);
        const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
        const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
        const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
        if (ASC_FEATURE_RELAXED_SIMD) {
          s0 = i32x4.add(s0, groupRelaxed(x, st, u0, u1, u2, u3, sv));
          s1 = i32x4.add(s1, groupRelaxed(x + 4, st, u0, u1, u2, u3, sv));
          s2 = i32x4.add(s2, groupRelaxed(x + 8, st, u0, u1, u2, u3, sv));
          s3 = i32x4.add(s3, groupRelaxed(x + 12, st, u0, u1, u2, u3, sv));
        } else {
          s0 = i32x4.add(s0, i32x4.mul(groupPlain(x, st, u0, u1, u2, u3), sv));
          s1 = i32x4.add(s1, i32x4.mul(groupPlain(x + 8, st, u0, u1, u2, u3), sv));
          s2 = i32x4.add(s2, i32x4.mul(groupPlain(x + 16, st, u0, u1, u2, u3), sv));
          s3 = i32x4.add(s3, i32x4.mul(groupPlain(x + 24, st, u0, u1, u2, u3), sv));
        }
        wt += 48;
        x += 4 * st;
      }
      const sc2 = i16x8.extend_low_i8x16_s(i8x16.shuffle(raw, raw, 0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0));
      f0 = step(f0, corrected(s0, sc2, v128.load32_splat(sj)), dd, dj);
      f1 = step(f1, corrected(s1, sc2, v128.load32_splat(sj + ds)), dd, dj + ds);
      f2 = step(f2, corrected(s2, sc2, v128.load32_splat(sj + 2 * ds)), dd, dj + 2 * ds);
      f3 = step(f3, corrected(s3, sc2, v128.load32_splat(sj + 3 * ds)), dd, dj + 3 * ds);
      sp += 8;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** fma build: rows mi..mi+7 (two interleaved blocks of 4) × the 4 columns of group wg, as
 * groupRows4 (the same integers and chain per row): each group's 6-bit weights are decoded
 * once for 8 rows rather than per 4. */
// @ts-ignore: decorator
@inline function groupRows8Relaxed(out: usize, x4: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128, lim: usize): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const xb = <usize>k << 2; // the second block of 4 rows
  const ds = <usize>nb << 2; // row stride of d and of the sums
  let dj = d + <usize>(mi * nb) * 4;
  let sj = xs + <usize>(mi * nb) * 4;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  let f4 = f32x4.splat(0), f5 = f32x4.splat(0), f6 = f32x4.splat(0), f7 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b);
    let sp = b, wt = b + 80;
    for (let j = 0; j < 8; j++) {
      touchSubBlock(min(wt + TOUCH_AHEAD, lim));
      const raw = v128.load64_zero(sp, 16);
      const dup = i8x16.shuffle(raw, raw, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
      let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
      let s4 = i32x4.splat(0), s5 = i32x4.splat(0), s6 = i32x4.splat(0), s7 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const sv = groupScales(raw, dup, t);
        const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
        const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
        const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
        s0 = i32x4.add(s0, groupRelaxed(x, 16, u0, u1, u2, u3, sv));
        s1 = i32x4.add(s1, groupRelaxed(x + 4, 16, u0, u1, u2, u3, sv));
        s2 = i32x4.add(s2, groupRelaxed(x + 8, 16, u0, u1, u2, u3, sv));
        s3 = i32x4.add(s3, groupRelaxed(x + 12, 16, u0, u1, u2, u3, sv));
        s4 = i32x4.add(s4, groupRelaxed(x + xb, 16, u0, u1, u2, u3, sv));
        s5 = i32x4.add(s5, groupRelaxed(x + xb + 4, 16, u0, u1, u2, u3, sv));
        s6 = i32x4.add(s6, groupRelaxed(x + xb + 8, 16, u0, u1, u2, u3, sv));
        s7 = i32x4.add(s7, groupRelaxed(x + xb + 12, 16, u0, u1, u2, u3, sv));
        wt += 48;
        x += 64;
      }
      const sc2 = i16x8.extend_low_i8x16_s(i8x16.shuffle(raw, raw, 0, 4, 1, 5, 2, 6, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0));
      f0 = step(f0, corrected(s0, sc2, v128.load32_splat(sj)), dd, dj);
      f1 = step(f1, corrected(s1, sc2, v128.load32_splat(sj + ds)), dd, dj + ds);
      f2 = step(f2, corrected(s2, sc2, v128.load32_splat(sj + 2 * ds)), dd, dj + 2 * ds);
      f3 = step(f3, corrected(s3, sc2, v128.load32_splat(sj + 3 * ds)), dd, dj + 3 * ds);
      f4 = step(f4, corrected(s4, sc2, v128.load32_splat(sj + 4 * ds)), dd, dj + 4 * ds);
      f5 = step(f5, corrected(s5, sc2, v128.load32_splat(sj + 5 * ds)), dd, dj + 5 * ds);
      f6 = step(f6, corrected(s6, sc2, v128.load32_splat(sj + 6 * ds)), dd, dj + 6 * ds);
      f7 = step(f7, corrected(s7, sc2, v128.load32_splat(sj + 7 * ds)), dd, dj + 7 * ds);
      sp += 8;
      dj += 4;
      sj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
  storeRows4(out, n, mi + 4, c0, cnt, f4, f5, f6, f7);
}

/** vnni build: one row's Σ_lane sc·(Σ u·x − 32·X) for a group: quad p of the row at
 * x + 16p, its −32·X at xt. */
// @ts-ignore: decorator
@inline function rowGroupVnni(x: usize, xt: usize, u0: v128, u1: v128, u2: v128, u3: v128, sv: v128): v128 {
  return i32x4.mul(dot4(v128.load32_splat(xt), v128.load32_splat(x), u0, v128.load32_splat(x, 16), u1,
    v128.load32_splat(x, 32), u2, v128.load32_splat(x, 48), u3), sv);
}

/** vnni build: rows mi..mi+3 × the 4 columns of group wg (x4 the interleaved quads, xs the
 * i32 −32·X per group): per row and group one dot-add chain from −32·X times sc, so the
 * correction costs one broadcast load (groupRows4's corrected: a dot, a shift, a sub). */
// @ts-ignore: decorator
@inline function groupRows4Vnni(out: usize, x4: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const ds = <usize>nb << 2; // row stride of d
  const ss = <usize>nb << 3; // row stride of the sums (K/16 i32)
  let dj = d + <usize>(mi * nb) * 4;
  let sj = xs + <usize>mi * ss;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b);
    let sp = b + 16, wt = b + 80;
    for (let j = 0; j < 8; j++) {
      let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const sv = i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(sp)));
        const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
        const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
        const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
        // quad p of row r at x + 16p + 4r
        s0 = i32x4.add(s0, rowGroupVnni(x, sj, u0, u1, u2, u3, sv));
        s1 = i32x4.add(s1, rowGroupVnni(x + 4, sj + ss, u0, u1, u2, u3, sv));
        s2 = i32x4.add(s2, rowGroupVnni(x + 8, sj + 2 * ss, u0, u1, u2, u3, sv));
        s3 = i32x4.add(s3, rowGroupVnni(x + 12, sj + 3 * ss, u0, u1, u2, u3, sv));
        wt += 48;
        sp += 4;
        sj += 4;
        x += 64;
      }
      f0 = step(f0, s0, dd, dj);
      f1 = step(f1, s1, dd, dj + ds);
      f2 = step(f2, s2, dd, dj + 2 * ds);
      f3 = step(f3, s3, dd, dj + 3 * ds);
      dj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
}

/** vnni build: rows mi..mi+7 (two interleaved blocks of 4) × the 4 columns of group wg:
 * each group's weights are decoded once for 8 rows (groupRows4Vnni decodes them per 4). */
// @ts-ignore: decorator
@inline function groupRows8Vnni(out: usize, x4: usize, xs: usize, d: usize, wg: usize, n: i32, k: i32, mi: i32, c0: i32, cnt: i32, lo6: v128, top2: v128): void {
  const nb = k >> 5;
  let x = x4 + <usize>mi * <usize>k;
  const xb = <usize>k << 2; // the second block of 4 rows
  const ds = <usize>nb << 2; // row stride of d
  const ss = <usize>nb << 3; // row stride of the sums (K/16 i32)
  let dj = d + <usize>(mi * nb) * 4;
  let sj = xs + <usize>mi * ss;
  let b = wg;
  let f0 = f32x4.splat(0), f1 = f32x4.splat(0), f2 = f32x4.splat(0), f3 = f32x4.splat(0);
  let f4 = f32x4.splat(0), f5 = f32x4.splat(0), f6 = f32x4.splat(0), f7 = f32x4.splat(0);
  for (let sb = 0; sb < (k >> 8); sb++) {
    const dd = v128.load(b);
    let sp = b + 16, wt = b + 80;
    for (let j = 0; j < 8; j++) {
      let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
      let s4 = i32x4.splat(0), s5 = i32x4.splat(0), s6 = i32x4.splat(0), s7 = i32x4.splat(0);
      for (let t = 0; t < 2; t++) { // the sub-block's two 16-element groups
        const sv = i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(sp)));
        const qa = v128.load(wt), qb = v128.load(wt, 16), qc = v128.load(wt, 32);
        const u0 = quadU(qa, qb, qc, 0, lo6, top2), u1 = quadU(qa, qb, qc, 1, lo6, top2);
        const u2 = quadU(qa, qb, qc, 2, lo6, top2), u3 = quadU(qa, qb, qc, 3, lo6, top2);
        s0 = i32x4.add(s0, rowGroupVnni(x, sj, u0, u1, u2, u3, sv));
        s1 = i32x4.add(s1, rowGroupVnni(x + 4, sj + ss, u0, u1, u2, u3, sv));
        s2 = i32x4.add(s2, rowGroupVnni(x + 8, sj + 2 * ss, u0, u1, u2, u3, sv));
        s3 = i32x4.add(s3, rowGroupVnni(x + 12, sj + 3 * ss, u0, u1, u2, u3, sv));
        s4 = i32x4.add(s4, rowGroupVnni(x + xb, sj + 4 * ss, u0, u1, u2, u3, sv));
        s5 = i32x4.add(s5, rowGroupVnni(x + xb + 4, sj + 5 * ss, u0, u1, u2, u3, sv));
        s6 = i32x4.add(s6, rowGroupVnni(x + xb + 8, sj + 6 * ss, u0, u1, u2, u3, sv));
        s7 = i32x4.add(s7, rowGroupVnni(x + xb + 12, sj + 7 * ss, u0, u1, u2, u3, sv));
        wt += 48;
        sp += 4;
        sj += 4;
        x += 64;
      }
      f0 = step(f0, s0, dd, dj);
      f1 = step(f1, s1, dd, dj + ds);
      f2 = step(f2, s2, dd, dj + 2 * ds);
      f3 = step(f3, s3, dd, dj + 3 * ds);
      f4 = step(f4, s4, dd, dj + 4 * ds);
      f5 = step(f5, s5, dd, dj + 5 * ds);
      f6 = step(f6, s6, dd, dj + 6 * ds);
      f7 = step(f7, s7, dd, dj + 7 * ds);
      dj += 4;
    }
    b += SB;
  }
  storeRows4(out, n, mi, c0, cnt, f0, f1, f2, f3);
  storeRows4(out, n, mi + 4, c0, cnt, f4, f5, f6, f7);
}

/** Columns [n0, n1) (n0 a multiple of 4) of out [M, N] = x · Wᵀ, W in the q6kx4 layout at
 * w; q16/q8/d: quantizeActs of x, q6kx4ActSums, and (M ≥ 4) interleaveQ4kx4Acts at
 * q8 + M·K. Rows whose quants fit in ~256 KiB (L2) pass over all of the thread's groups
 * together. */
export function qmatmulQ6kx4(out: usize, q16: usize, q8: usize, d: usize, w: usize, m: i32, n: i32, k: i32, n0: i32, n1: i32): void {
  const xr = ASC_FEATURE_RELAXED_SIMD ? q8 : q16;
  const mk = <usize>m * <usize>k;
  const x4 = q8 + mk;
  const xs = q8 + 3 * mk;
  // masks built from a run-time value: V8 would rematerialise a constant inside the loops
  const lo6 = i8x16.splat(<i8>((k >> 31) + 63)), top2 = i8x16.splat(<i8>((k >> 31) - 64)); // k ≥ 0: 0x3f, 0xc0
  const gb = <usize>(k >> 8) * SB;
  const rb = max(4, <i32>(<usize>262144 / (<usize>k * XB)) & ~3);
  const lim = w + <usize>((n1 + 3) >> 2) * gb - 64; // touchSubBlock stays in the range's weights
  for (let r0 = 0; r0 < m; r0 += rb) {
    const r1 = min(m, r0 + rb);
    for (let c = n0; c < n1; c += 4) {
      const wg = w + <usize>(c >> 2) * gb;
      const cnt = min(4, n1 - c);
      let mi = r0;
      if (DOT_I32) {
        for (; mi + 8 <= r1; mi += 8) groupRows8Vnni(out, x4, xs, d, wg, n, k, mi, c, cnt, lo6, top2);
        for (; mi + 4 <= r1; mi += 4) groupRows4Vnni(out, x4, xs, d, wg, n, k, mi, c, cnt, lo6, top2);
      }
      else {
        if (ASC_FEATURE_RELAXED_SIMD) for (; mi + 8 <= r1; mi += 8) groupRows8Relaxed(out, x4, xs, d, wg, n, k, mi, c, cnt, lo6, top2, lim);
        for (; mi + 4 <= r1; mi += 4) groupRows4(out, x4, xs, d, wg, n, k, mi, c, cnt, lo6, top2, lim);
      }
      for (; mi < r1; mi++) {
        if (ASC_FEATURE_RELAXED_SIMD) groupRow1Relaxed(out, q8, xs, d, wg, n, k, mi, c, cnt, lo6, top2);
        else groupRow1(out, xr, xs, d, wg, n, k, mi, c, cnt, lo6, top2);
      }
    }
  }
}
