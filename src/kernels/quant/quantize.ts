// Quantizers (f32 → GGML blocks) for `--quantize`: Q8_0, and Q4_K with a per-sub-block
// scale/min search. Output bytes are exactly GGML's block layouts (dequant.ts decodes them).
//  - Q8_0: d = amax/127 (stored f16), q = round(x/d) — GGML's reference quantizer.
//  - Q4_K: per 32-element sub-block, a weighted least-squares fit x ≈ s·q + m (q ∈ 0..15,
//    m ≤ 0) over a small grid of candidate inverse scales (the same search GGML's
//    make_qkx2_quants performs; weights |x| + rms(x) favour large values); the 8 scales and
//    8 mins of a super-block are then coded in 6 bits against their maxima (d, dmin f16),
//    and q is recomputed with the coded values.
import { QUANT_FORMATS, type QuantType } from './formats.js';
import { f16ToF32 } from './dequant.js';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 → f16 bits, round to nearest even (overflow → ±inf, tiny → subnormal/0). */
export function f32ToF16(v: number): number {
  f32[0] = v;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) { // subnormal half (or zero): value = m · 2⁻²⁴
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e; // 24-bit mantissa → (10 + e)-bit
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && (h & 1))) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++; // may carry into the exponent: still right
  return sign | h;
}

function put16(b: Uint8Array, p: number, v: number): void {
  b[p] = v & 0xff;
  b[p + 1] = v >>> 8;
}

/** Round half away from zero (C roundf / GGML nearest_int for our ranges). */
function roundAway(v: number): number {
  return Math.sign(v) * Math.round(Math.abs(v));
}

/** Quantize `rows` rows of `cols` floats (src, row-major) into dst (rows × rowBytes). */
export function quantizeRows(type: QuantType, src: Float32Array, rows: number, cols: number, dst: Uint8Array): void {
  const { blockSize, blockBytes } = QUANT_FORMATS[type];
  const nb = (rows * cols) / blockSize;
  if (cols % blockSize !== 0) throw new RangeError(`${type}: ${cols} columns are not a whole number of ${blockSize}-element blocks`);
  if (type !== 'q8_0' && type !== 'q4_k') throw new Error(`no quantizer for ${type} (available: q8_0, q4_k)`);
  for (let b = 0; b < nb; b++) {
    if (type === 'q8_0') quantizeQ8_0(src, b * 32, dst, b * 34);
    else quantizeQ4K(src, b * blockSize, dst, b * blockBytes);
  }
}

function quantizeQ8_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  let amax = 0;
  for (let i = 0; i < 32; i++) {
    const v = x[xo + i]!;
    const a = v < 0 ? -v : v;
    if (!(a <= amax)) amax = a; // NaN propagates, as Math.max
  }
  const d = amax / 127;
  const id = d ? 1 / d : 0;
  put16(out, o, f32ToF16(d));
  for (let i = 0; i < 32; i++) {
    const v = x[xo + i]! * id;
    const a = v < 0 ? -v : v;
    // roundAway(v), 3× faster than Math.round here: a + 0.5 is exact for a ≥ 0.5 (a ≤ 127),
    // and below 0.5 it could round up to 1.0, so that case is 0 explicitly
    const r = a < 0.5 ? 0 : (a + 0.5) | 0;
    out[o + 2 + i] = (v < 0 ? -r : r) & 0xff;
  }
}

// A coarser grid than GGML's 21 steps (quantizing at load must stay quick: measured ~4×
// faster, with rms error within a few % of the full grid).
const STEPS = [-1, 0, 4, 8, 12, 16, 20];
const L_SCRATCH = new Uint8Array(32);

/** Result of fitSubBlock: [scale, min]. */
const FIT = new Float64Array(2);

/** Math.round(v) for 0 ≤ v < 2³¹ without the call (the hot loop of --quantize q4_k): v + 0.5
 * is exact there except just below 0.5, where it could round up to 1.0. */
function roundNonNeg(v: number): number {
  return v < 0.5 ? 0 : (v + 0.5) | 0;
}

/** Best (scale, min ≤ 0) with x ≈ scale·q + min, q ∈ 0..15, over x[xo, xo + 32) weighted by
 * w; the result in FIT, the quants in q. */
function fitSubBlock(x: Float32Array, xo: number, w: Float64Array, q: Uint8Array): void {
  const n = 32;
  let lo = x[xo]!;
  let hi = x[xo]!;
  for (let i = 1; i < n; i++) {
    lo = Math.min(lo, x[xo + i]!);
    hi = Math.max(hi, x[xo + i]!);
  }
  if (lo > 0) lo = 0;
  if (hi === lo) {
    q.fill(0);
    FIT[0] = 0;
    FIT[1] = lo;
    return;
  }
  let bestScale = (hi - lo) / 15;
  let bestMin = lo;
  let bestErr = Infinity;
  const l = L_SCRATCH;
  for (let si = 0; si < STEPS.length; si++) {
    const step = STEPS[si]!;
    // step −1: the plain min/max grid; then inverse scales (15 + (−1 + 0.1·step)) / range
    const iscale = step < 0 ? 15 / (hi - lo) : (15 - 1 + 0.1 * step) / (hi - lo);
    let sw = 0, sx = 0, sl = 0, sl2 = 0, sxl = 0;
    for (let i = 0; i < n; i++) {
      const xi = x[xo + i]!;
      const r = roundNonNeg(iscale * (xi - lo)); // ≥ 0: xi ≥ lo
      const li = r > 15 ? 15 : r;
      const wi = w[i]!;
      l[i] = li;
      sw += wi; sx += wi * xi; sl += wi * li; sl2 += wi * li * li; sxl += wi * li * xi;
    }
    const det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    let scale = (sw * sxl - sx * sl) / det;
    let min = (sl2 * sx - sl * sxl) / det;
    if (min > 0) {
      min = 0;
      scale = sxl / sl2;
    }
    let err = 0;
    for (let i = 0; i < n; i++) {
      const e = scale * l[i]! + min - x[xo + i]!;
      err += w[i]! * e * e;
    }
    if (err < bestErr) {
      bestScale = scale;
      bestMin = min;
      bestErr = err;
      q.set(l);
    }
  }
  FIT[0] = bestScale;
  FIT[1] = bestMin;
}

// Scratch of quantizeQ4K (single-threaded JS: reused across calls).
const K_SCALES = new Float64Array(8);
const K_MINS = new Float64Array(8); // stored positive: w = d·sc·q − dmin·m
const K_W = new Float64Array(32);
const K_Q = new Uint8Array(32);
const K_LS = new Uint8Array(8);
const K_LM = new Uint8Array(8);
const K_ALL = new Uint8Array(256);

/** One 256-element super-block: x[xo, xo + 256) → out[o, o + 144). */
function quantizeQ4K(x: Float32Array, xo0: number, out: Uint8Array, o: number): void {
  const scales = K_SCALES;
  const mins = K_MINS;
  const w = K_W;
  const q = K_Q;
  for (let j = 0; j < 8; j++) {
    const xo = xo0 + j * 32;
    let ss = 0;
    for (let i = 0; i < 32; i++) ss += x[xo + i]! * x[xo + i]!;
    const av = Math.sqrt(ss / 32);
    for (let i = 0; i < 32; i++) w[i] = av + Math.abs(x[xo + i]!);
    fitSubBlock(x, xo, w, q);
    scales[j] = Math.max(0, FIT[0]!);
    mins[j] = -FIT[1]!;
  }
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    maxScale = Math.max(maxScale, scales[j]!);
    maxMin = Math.max(maxMin, mins[j]!);
  }
  const ls = K_LS;
  const lm = K_LM;
  for (let j = 0; j < 8; j++) {
    ls[j] = maxScale > 0 ? Math.min(63, Math.round((63 / maxScale) * scales[j]!)) : 0;
    lm[j] = maxMin > 0 ? Math.min(63, Math.round((63 / maxMin) * mins[j]!)) : 0;
  }
  const dBits = f32ToF16(maxScale / 63);
  const mBits = f32ToF16(maxMin / 63);
  put16(out, o, dBits);
  put16(out, o + 2, mBits);
  for (let j = 0; j < 4; j++) {
    out[o + 4 + j] = (ls[j]! & 63) | ((ls[j + 4]! >> 4) << 6);
    out[o + 8 + j] = (lm[j]! & 63) | ((lm[j + 4]! >> 4) << 6);
    out[o + 12 + j] = (ls[j + 4]! & 15) | ((lm[j + 4]! & 15) << 4);
  }
  // requantize with the coded scales and mins
  const d = f16ToF32(dBits);
  const dmin = f16ToF32(mBits);
  const all = K_ALL;
  for (let j = 0; j < 8; j++) {
    const s = d * ls[j]!;
    const m = dmin * lm[j]!;
    for (let i = 0; i < 32; i++) all[j * 32 + i] = s > 0 ? Math.max(0, Math.min(15, Math.round((x[xo0 + j * 32 + i]! + m) / s))) : 0;
  }
  for (let p = 0; p < 4; p++) {
    for (let l = 0; l < 32; l++) out[o + 16 + p * 32 + l] = all[p * 64 + l]! | (all[p * 64 + 32 + l]! << 4);
  }
}
