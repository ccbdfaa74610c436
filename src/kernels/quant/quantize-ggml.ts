// Quantizers (f32 → GGML blocks) for `--quantize` and `deltaserve quantize`: the reference
// algorithms of GGML's own quantizer, step for step, in float32 arithmetic (every
// intermediate rounded with Math.fround), so the blocks match what llama-quantize writes
// up to the rare tie that a fused multiply-add in a C build rounds differently. The
// reference twin of the wasm quantizer (assembly/quantize.ts), which must give the same bytes.
//  - Q8_0: d = amax/127, q = roundf(x·(1/d)) (half away from zero), all in float32.
//  - Q4_0: d = max/−8, q = trunc(x/d + 8.5) capped at 15, two quants per byte.
//  - Q5_0: d = max/−16 (max = the signed value of largest magnitude), q = trunc(x/d + 16.5)
//    capped at 31, the fifth bits gathered in a u32.
//  - Q6_K: per 16-element group an iterated weighted fit (weights x², 19 candidate inverse
//    scales), group scales coded as int8 against the block's extreme, then requantized.
//  - Q4_K: per 32-element group a weighted least-squares fit x ≈ s·q − m over 21 candidate
//    inverse scales (weights |x| + rms), scales and mins coded in 6 bits, then requantized.
// nearest_int is GGML's: round half to even (the 1.5·2²³ trick), for |v| < 2²².
import { QUANT_FORMATS, type QuantType } from './formats.js';
import { f16ToF32, f32ToF16, scaleMinK4 } from './dequant.js';

const f = Math.fround;
const GROUP_MAX_EPS = f(1e-15);

function nearestInt(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && (r & 1) !== 0 ? r - 1 : r; // Math.round rounds .5 up: fix ties to even
}

function put16(b: Uint8Array, p: number, v: number): void {
  b[p] = v & 0xff;
  b[p + 1] = v >>> 8;
}

/** Types this module quantizes (the rest have no offline quantizer). */
export const OFFLINE_QUANT_TYPES: readonly QuantType[] = ['q8_0', 'q4_0', 'q5_0', 'q6_k', 'q4_k'];

/** Quantize `rows` rows of `cols` floats into dst (rows × row bytes) with GGML's reference
 * algorithm for `type`. */
export function quantizeRowsGgml(type: QuantType, src: Float32Array, rows: number, cols: number, dst: Uint8Array): void {
  const { blockSize, blockBytes } = QUANT_FORMATS[type];
  if (cols % blockSize !== 0) throw new RangeError(`${type}: ${cols} columns are not a whole number of ${blockSize}-element blocks`);
  const nb = (rows * cols) / blockSize;
  const block = { q8_0: quantizeQ8_0, q4_0: quantizeQ4_0, q5_0: quantizeQ5_0, q6_k: quantizeQ6K, q4_k: quantizeQ4KFull }[type as 'q8_0' | 'q4_0' | 'q5_0' | 'q6_k' | 'q4_k'];
  if (!block) throw new Error(`no offline quantizer for ${type} (available: ${OFFLINE_QUANT_TYPES.join(', ')})`);
  for (let b = 0; b < nb; b++) block(src, b * blockSize, dst, b * blockBytes);
}

/** One 32-element block → 34 bytes: d f16 | qs i8[32]. */
function quantizeQ8_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  let amax = 0;
  for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[xo + j]!));
  const d = f(amax / 127);
  const id = d ? f(1 / d) : 0;
  put16(out, o, f32ToF16(d));
  for (let j = 0; j < 32; j++) {
    const v = f(x[xo + j]! * id);
    out[o + 2 + j] = (Math.sign(v) * Math.round(Math.abs(v))) & 0xff;
  }
}

/** The signed value of largest magnitude in x[xo, xo + 32) (the first one on ties). */
function signedMax(x: Float32Array, xo: number): number {
  let amax = 0;
  let max = 0;
  for (let j = 0; j < 32; j++) {
    const v = x[xo + j]!;
    if (amax < Math.abs(v)) { amax = Math.abs(v); max = v; }
  }
  return max;
}

/** One 32-element block → 18 bytes: d f16 | qs[16] (element j low nibble, j+16 high). */
function quantizeQ4_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  const d = f(signedMax(x, xo) / -8);
  const id = d ? f(1 / d) : 0;
  put16(out, o, f32ToF16(d));
  for (let j = 0; j < 16; j++) {
    const q0 = Math.min(15, Math.trunc(f(f(x[xo + j]! * id) + 8.5)));
    const q1 = Math.min(15, Math.trunc(f(f(x[xo + 16 + j]! * id) + 8.5)));
    out[o + 2 + j] = q0 | (q1 << 4);
  }
}

/** One 32-element block → 22 bytes: d f16 | qh u32 | qs[16]. */
function quantizeQ5_0(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  const d = f(signedMax(x, xo) / -16);
  const id = d ? f(1 / d) : 0;
  put16(out, o, f32ToF16(d));
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const x0 = f(x[xo + j]! * id);
    const x1 = f(x[xo + 16 + j]! * id);
    const q0 = Math.min(31, Math.trunc(f(x0 + 16.5)));
    const q1 = Math.min(31, Math.trunc(f(x1 + 16.5)));
    out[o + 6 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
    qh |= ((q0 & 0x10) >> 4) << j;
    qh |= ((q1 & 0x10) >> 4) << (j + 16);
  }
  out[o + 2] = qh & 0xff;
  out[o + 3] = (qh >>> 8) & 0xff;
  out[o + 4] = (qh >>> 16) & 0xff;
  out[o + 5] = (qh >>> 24) & 0xff;
}

const QX_L = new Int8Array(16);
const QX_SUMS = new Float64Array(2);

/** GGML's make_qx_quants(n = 16, nmax, rmse_type 1): signed quants l + nmax in L[lo, lo+16);
 * returns the group scale. */
function fitSigned(x: Float32Array, xo: number, nmax: number, L: Uint8Array, lo: number): number {
  const n = 16;
  let max = 0;
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const ax = Math.abs(x[xo + i]!);
    if (ax > amax) { amax = ax; max = x[xo + i]!; }
  }
  if (amax < GROUP_MAX_EPS) {
    L.fill(0, lo, lo + n);
    return 0;
  }
  let iscale = f(-nmax / max);
  signedSums(x, xo, iscale, nmax);
  for (let i = 0; i < n; i++) L[lo + i] = QX_L[i]! + nmax;
  let scale = QX_SUMS[1]! ? f(QX_SUMS[0]! / QX_SUMS[1]!) : 0;
  let best = f(scale * QX_SUMS[0]!);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    iscale = f(-f(nmax + f(0.1 * is)) / max);
    signedSums(x, xo, iscale, nmax);
    const sumlx = QX_SUMS[0]!;
    const suml2 = QX_SUMS[1]!;
    if (suml2 > 0 && f(sumlx * sumlx) > f(best * suml2)) {
      for (let i = 0; i < n; i++) L[lo + i] = QX_L[i]! + nmax;
      scale = f(sumlx / suml2);
      best = f(scale * sumlx);
    }
  }
  return scale;
}

/** Σ w·x·l and Σ w·l² (w = x²) over the 16 values at xo quantized with `iscale` (quants
 * in QX_L, the sums in QX_SUMS). */
function signedSums(x: Float32Array, xo: number, iscale: number, nmax: number): void {
  let sumlx = 0;
  let suml2 = 0;
  for (let i = 0; i < 16; i++) {
    const xi = x[xo + i]!;
    const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(f(iscale * xi))));
    QX_L[i] = l;
    const w = f(xi * xi);
    sumlx = f(sumlx + f(f(w * xi) * l));
    suml2 = f(suml2 + f(f(w * l) * l));
  }
  QX_SUMS[0] = sumlx;
  QX_SUMS[1] = suml2;
}

const Q6_L = new Uint8Array(256);
const Q6_SCALES = new Float32Array(16);

/** One 256-element super-block → 210 bytes: ql[128] | qh[64] | scales i8[16] | d f16. */
function quantizeQ6K(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  const L = Q6_L;
  let maxScale = 0;
  let maxAbsScale = 0;
  for (let ib = 0; ib < 16; ib++) {
    const s = fitSigned(x, xo + 16 * ib, 32, L, 16 * ib);
    Q6_SCALES[ib] = s;
    if (Math.abs(s) > maxAbsScale) { maxAbsScale = Math.abs(s); maxScale = s; }
  }
  out.fill(0, o, o + 210);
  if (maxAbsScale < GROUP_MAX_EPS) return;
  const iscale = f(-128 / maxScale);
  const dBits = f32ToF16(f(1 / iscale));
  put16(out, o + 208, dBits);
  const d0 = f16ToF32(dBits);
  for (let ib = 0; ib < 16; ib++) {
    const sc = Math.min(127, nearestInt(f(iscale * Q6_SCALES[ib]!)));
    out[o + 192 + ib] = sc & 0xff;
    const d = f(d0 * sc);
    if (!d) continue;
    for (let ii = 0; ii < 16; ii++) {
      const l = Math.max(-32, Math.min(31, nearestInt(f(x[xo + 16 * ib + ii]! / d))));
      L[16 * ib + ii] = l + 32;
    }
  }
  for (let half = 0; half < 2; half++) {
    const j = half * 128;
    const ql = o + half * 64;
    const qh = o + 128 + half * 32;
    for (let l = 0; l < 32; l++) {
      const a = L[j + l]!, b = L[j + l + 32]!, c = L[j + l + 64]!, e = L[j + l + 96]!;
      out[ql + l] = (a & 0xf) | ((c & 0xf) << 4);
      out[ql + l + 32] = (b & 0xf) | ((e & 0xf) << 4);
      out[qh + l] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
    }
  }
}

const K4_W = new Float32Array(32);
const K4_AUX = new Uint8Array(32);
const K4_L = new Uint8Array(256);
const K4_SCALES = new Float32Array(8);
const K4_MINS = new Float32Array(8);
const K4_MIN = new Float32Array(1);

/** GGML's make_qkx2_quants(32, 15, x, w, L, &min, Laux, −1, 0.1, 20): the scale returned,
 * the (positive) min in K4_MIN[0], quants in L[lo, lo + 32). */
function fitAsymmetric(x: Float32Array, xo: number, w: Float32Array, L: Uint8Array, lo: number): number {
  const n = 32;
  const nmax = 15;
  let min = x[xo]!;
  let max = x[xo]!;
  let sumW = w[0]!;
  let sumX = f(sumW * x[xo]!);
  for (let i = 1; i < n; i++) {
    const xi = x[xo + i]!;
    if (xi < min) min = xi;
    if (xi > max) max = xi;
    sumW = f(sumW + w[i]!);
    sumX = f(sumX + f(w[i]! * xi));
  }
  if (min > 0) min = 0;
  if (max === min) {
    L.fill(0, lo, lo + n);
    K4_MIN[0] = -min;
    return 0;
  }
  let iscale = f(nmax / f(max - min));
  let scale = f(1 / iscale);
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(x[xo + i]! - min)))));
    L[lo + i] = l;
    const diff = f(f(f(scale * l) + min) - x[xo + i]!);
    bestError = f(bestError + f(w[i]! * f(diff * diff)));
  }
  for (let is = 0; is <= 20; is++) {
    iscale = f(f(f(-1 + f(0.1 * is)) + nmax) / f(max - min));
    let sumL = 0, sumL2 = 0, sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(f(iscale * f(x[xo + i]! - min)))));
      K4_AUX[i] = l;
      const wi = w[i]!;
      sumL = f(sumL + f(wi * l));
      sumL2 = f(sumL2 + f(f(wi * l) * l));
      sumXL = f(sumXL + f(f(wi * l) * x[xo + i]!));
    }
    const D = f(f(sumW * sumL2) - f(sumL * sumL));
    if (!(D > 0)) continue;
    let thisScale = f(f(f(sumW * sumXL) - f(sumX * sumL)) / D);
    let thisMin = f(f(f(sumL2 * sumX) - f(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = f(sumXL / sumL2);
    }
    let curError = 0;
    for (let i = 0; i < n; i++) {
      const diff = f(f(f(thisScale * K4_AUX[i]!) + thisMin) - x[xo + i]!);
      curError = f(curError + f(w[i]! * f(diff * diff)));
    }
    if (curError < bestError) {
      L.set(K4_AUX, lo);
      bestError = curError;
      scale = thisScale;
      min = thisMin;
    }
  }
  K4_MIN[0] = -min;
  return scale;
}

/** One 256-element super-block → 144 bytes: d, dmin f16 | scales[12] (6-bit) | qs[128]. */
function quantizeQ4KFull(x: Float32Array, xo: number, out: Uint8Array, o: number): void {
  const L = K4_L;
  let maxScale = 0;
  let maxMin = 0;
  for (let j = 0; j < 8; j++) {
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 = f(sumX2 + f(x[xo + 32 * j + l]! * x[xo + 32 * j + l]!));
    const av = f(Math.sqrt(f(sumX2 / 32)));
    for (let l = 0; l < 32; l++) K4_W[l] = f(av + Math.abs(x[xo + 32 * j + l]!));
    K4_SCALES[j] = fitAsymmetric(x, xo + 32 * j, K4_W, L, 32 * j);
    K4_MINS[j] = K4_MIN[0]!;
    if (K4_SCALES[j]! > maxScale) maxScale = K4_SCALES[j]!;
    if (K4_MINS[j]! > maxMin) maxMin = K4_MINS[j]!;
  }
  const invScale = maxScale > 0 ? f(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? f(63 / maxMin) : 0;
  const sc = o + 4;
  out.fill(0, sc, sc + 12);
  for (let j = 0; j < 8; j++) {
    const ls = Math.min(63, nearestInt(f(invScale * K4_SCALES[j]!)));
    const lm = Math.min(63, nearestInt(f(invMin * K4_MINS[j]!)));
    if (j < 4) {
      out[sc + j] = ls;
      out[sc + j + 4] = lm;
    } else {
      out[sc + j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
      out[sc + j - 4]! |= (ls >> 4) << 6;
      out[sc + j]! |= (lm >> 4) << 6;
    }
  }
  const dBits = f32ToF16(f(maxScale / 63));
  const mBits = f32ToF16(f(maxMin / 63));
  put16(out, o, dBits);
  put16(out, o + 2, mBits);
  const d0 = f16ToF32(dBits);
  const m0 = f16ToF32(mBits);
  for (let j = 0; j < 8; j++) {
    const [s, m] = scaleMinK4(out, sc, j);
    const d = f(d0 * s);
    if (!d) continue;
    const dm = f(m0 * m);
    for (let ii = 0; ii < 32; ii++) {
      L[32 * j + ii] = Math.max(0, Math.min(15, nearestInt(f(f(x[xo + 32 * j + ii]! + dm) / d))));
    }
  }
  const qs = o + 16;
  for (let j = 0; j < 256; j += 64) {
    for (let l = 0; l < 32; l++) out[qs + j / 2 + l] = L[j + l]! | (L[j + l + 32]! << 4);
  }
}

