// GGML block decoding (reference, plain TypeScript). Two views of a quantized row:
//  - dequantizeRow: the f32 values exactly as GGML's dequantize_row_* computes them (used by
//    embed and as the oracle of the quantizers);
//  - decodeSubBlock: the integer form the integer matmul uses. Every format splits into
//    32-element sub-blocks j where the weights are  w_k = scale_j · q_k + offset_j  with
//    integer q_k (Q6_K folds its per-16 int8 scales into q_k), so a dot product with an
//    int8-quantized activation block is an exact integer sum times f32 factors.
// Layouts (little-endian, f16 scales), per block (see formats.ts for sizes):
//   q4_0 d, qs[16]: element i = (qs[i] & 15) − 8, element i+16 = (qs[i] >> 4) − 8
//   q4_1 d, m, qs[16]: d·q + m
//   q5_0 d, qh u32, qs[16]: the 5th bit of element e is bit e of qh; value q − 16
//   q5_1 d, m, qh u32, qs[16]: d·q + m
//   q8_0 d, qs i8[32]
//   q4_k d, dmin, scales[12] (8 six-bit scales + 8 six-bit mins), qs[128]: per 64
//        elements, 32 low nibbles then 32 high nibbles; w = d·sc·q − dmin·m
//   q5_k d, dmin, scales[12], qh[32], qs[128]: as q4_k, 5th bit of sub-block j in bit j of qh[l]
//   q6_k ql[128], qh[64], scales i8[16], d: per 128 elements four 32-runs; w = d·sc·(q − 32)
import { QUANT_FORMATS, type QuantType } from './formats.js';

/** Exact f16 → f32 (finite, subnormal, inf, NaN). */
export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

function f16At(b: Uint8Array, p: number): number {
  return f16ToF32(b[p]! | (b[p + 1]! << 8));
}

function u32At(b: Uint8Array, p: number): number {
  return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
}

const fr = Math.fround;

/** Six-bit scale and min of sub-block j (0..7) from the 12 packed bytes at p (Q4_K, Q5_K). */
export function scaleMinK4(b: Uint8Array, p: number, j: number): [number, number] {
  if (j < 4) return [b[p + j]! & 63, b[p + j + 4]! & 63];
  return [(b[p + j + 4]! & 0xf) | ((b[p + j - 4]! >> 6) << 4), (b[p + j + 4]! >> 4) | ((b[p + j]! >> 6) << 4)];
}

/** Integer quant (before scaling) of element e (0..blockSize-1) of the block at p, and the
 * sub-block parameters, in the decodeSubBlock form. Used by both views. */
function elementQ(type: QuantType, b: Uint8Array, p: number, e: number): number {
  switch (type) {
    case 'q8_0': return (b[p + 2 + e]! << 24) >> 24;
    case 'q4_0': case 'q4_1': {
      const qs = p + (type === 'q4_0' ? 2 : 4);
      const byte = b[qs + (e & 15)]!;
      const q = e < 16 ? byte & 15 : byte >> 4;
      return type === 'q4_0' ? q - 8 : q;
    }
    case 'q5_0': case 'q5_1': {
      const o = type === 'q5_0' ? 2 : 4;
      const qh = u32At(b, p + o);
      const byte = b[p + o + 4 + (e & 15)]!;
      const q = (e < 16 ? byte & 15 : byte >> 4) | (((qh >>> e) & 1) << 4);
      return type === 'q5_0' ? q - 16 : q;
    }
    case 'q4_k': case 'q5_k': {
      const j = e >> 5; // sub-block
      const l = e & 31;
      const qs = p + (type === 'q4_k' ? 16 : 48);
      const byte = b[qs + (j >> 1) * 32 + l]!;
      const q = j & 1 ? byte >> 4 : byte & 15;
      return type === 'q4_k' ? q : q | (((b[p + 16 + l]! >> j) & 1) << 4);
    }
    case 'q6_k': {
      const half = e >> 7; // 128-element half
      const r = e & 127;
      const run = r >> 5; // which of the four 32-runs
      const l = r & 31;
      const ql = b[p + half * 64 + l + (run & 1) * 32]!;
      const qh = b[p + 128 + half * 32 + l]!;
      const lo = run < 2 ? ql & 15 : ql >> 4;
      return (lo | (((qh >> (2 * run)) & 3) << 4)) - 32;
    }
  }
}

/** The Q6_K int8 scale of element e (16-element groups). */
function q6Scale(b: Uint8Array, p: number, e: number): number {
  return (b[p + 192 + (e >> 4)]! << 24) >> 24;
}

/** dst[0..cols) = row `r` of a quantized [rows, cols] weight, as GGML dequantizes it. */
export function dequantizeRow(type: QuantType, data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  const { blockSize, blockBytes } = QUANT_FORMATS[type];
  const nb = cols / blockSize;
  for (let bi = 0; bi < nb; bi++) {
    const p = (r * nb + bi) * blockBytes;
    const o = bi * blockSize;
    for (let e = 0; e < blockSize; e++) dst[o + e] = dequantElement(type, data, p, e);
  }
  return dst;
}

function dequantElement(type: QuantType, b: Uint8Array, p: number, e: number): number {
  const q = elementQ(type, b, p, e);
  switch (type) {
    case 'q8_0': case 'q4_0': case 'q5_0': return fr(q * f16At(b, p));
    case 'q4_1': case 'q5_1': return fr(fr(q * f16At(b, p)) + f16At(b, p + 2));
    case 'q4_k': case 'q5_k': {
      const [sc, m] = scaleMinK4(b, p + 4, e >> 5);
      return fr(fr(fr(f16At(b, p) * sc) * q) - fr(f16At(b, p + 2) * m));
    }
    case 'q6_k': return fr(fr(f16At(b, p + 208) * q6Scale(b, p, e)) * q);
  }
}

/** Sub-block parameters: w_k = scale · q_k + offset (offset 0 for symmetric formats). */
export interface SubBlock { scale: number; offset: number }

/** Whether the format has a per-sub-block offset (a min) term. */
export function hasOffset(type: QuantType): boolean {
  return type === 'q4_1' || type === 'q5_1' || type === 'q4_k' || type === 'q5_k';
}

/** Integer form of 32-element sub-block j of row r: q[0..32) and {scale, offset} (f32 values).
 * Q6_K: q_k = sc_group · (q − 32), scale = d. Q4_K/Q5_K: scale = f32(d·sc), offset = −f32(dmin·m). */
export function decodeSubBlock(type: QuantType, data: Uint8Array, cols: number, r: number, j: number, q: Int32Array): SubBlock {
  const { blockSize, blockBytes } = QUANT_FORMATS[type];
  const per = blockSize / 32;
  const p = (r * (cols / blockSize) + Math.floor(j / per)) * blockBytes;
  const e0 = (j % per) * 32;
  for (let l = 0; l < 32; l++) q[l] = elementQ(type, data, p, e0 + l);
  switch (type) {
    case 'q8_0': case 'q4_0': case 'q5_0': return { scale: f16At(data, p), offset: 0 };
    case 'q4_1': case 'q5_1': return { scale: f16At(data, p), offset: f16At(data, p + 2) };
    case 'q4_k': case 'q5_k': {
      const [sc, m] = scaleMinK4(data, p + 4, j % per);
      return { scale: fr(f16At(data, p) * sc), offset: -fr(f16At(data, p + 2) * m) };
    }
    case 'q6_k':
      for (let l = 0; l < 32; l++) q[l] = q[l]! * q6Scale(data, p, e0 + l);
      return { scale: f16At(data, p + 208), offset: 0 };
  }
}

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
