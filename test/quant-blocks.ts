// Hand-built GGML blocks for tests: encoders written field by field from the format spec
// (ggml-common.h), independent of the decoder under test, with the exact values they hold.
import { QUANT_FORMATS, quantRowBytes, type QuantType } from '../src/kernels/quant/formats.js';
import { randomWeight, rng } from './numeric.js';
import type { Kernels, Weight, WeightDType } from '../src/kernels/types.js';
import { quantizeRowsGgml } from '../src/kernels/quant/quantize-ggml.js';

// Exactly representable f16 scales: bits → value.
const F16 = { half: 0x3800, quarter: 0x3400, minusOne: 0xbc00, two: 0x4000, eighth: 0x3000, oneHalf: 0x3e00 } as const;

function put16(b: Uint8Array, p: number, v: number): void {
  b[p] = v & 0xff;
  b[p + 1] = (v >> 8) & 0xff;
}

/** A random integer in [lo, hi]. */
function ri(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

interface Built { bytes: Uint8Array; values: number[] }

// ---- independent encoders: one block each, from the layout in ggml-common.h ----

function q8_0(r: () => number): Built {
  const b = new Uint8Array(34);
  put16(b, 0, F16.quarter);
  const values: number[] = [];
  for (let i = 0; i < 32; i++) {
    const q = ri(r, -128, 127);
    b[2 + i] = q & 0xff;
    values.push(0.25 * q);
  }
  return { bytes: b, values };
}

function q4(r: () => number, withMin: boolean): Built {
  const b = new Uint8Array(withMin ? 20 : 18);
  put16(b, 0, F16.half);
  if (withMin) put16(b, 2, F16.minusOne);
  const qs = withMin ? 4 : 2;
  const q = Array.from({ length: 32 }, () => ri(r, 0, 15));
  for (let i = 0; i < 16; i++) b[qs + i] = q[i]! | (q[i + 16]! << 4);
  return { bytes: b, values: q.map((v) => (withMin ? 0.5 * v - 1 : 0.5 * (v - 8))) };
}

function q5(r: () => number, withMin: boolean): Built {
  const b = new Uint8Array(withMin ? 24 : 22);
  put16(b, 0, F16.two);
  if (withMin) put16(b, 2, F16.half);
  const o = withMin ? 4 : 2;
  const q = Array.from({ length: 32 }, () => ri(r, 0, 31));
  let qh = 0;
  for (let i = 0; i < 32; i++) qh = (qh | ((q[i]! >> 4) << i)) >>> 0;
  b[o] = qh & 0xff; b[o + 1] = (qh >>> 8) & 0xff; b[o + 2] = (qh >>> 16) & 0xff; b[o + 3] = qh >>> 24;
  for (let i = 0; i < 16; i++) b[o + 4 + i] = (q[i]! & 15) | ((q[i + 16]! & 15) << 4);
  return { bytes: b, values: q.map((v) => (withMin ? 2 * v + 0.5 : 2 * (v - 16))) };
}

/** 12 bytes holding 8 six-bit scales and 8 six-bit mins (get_scale_min_k4's inverse). */
function packScalesK(sc: number[], mn: number[]): Uint8Array {
  const s = new Uint8Array(12);
  for (let j = 0; j < 4; j++) {
    s[j] = (sc[j]! & 63) | ((sc[j + 4]! >> 4) << 6);
    s[j + 4] = (mn[j]! & 63) | ((mn[j + 4]! >> 4) << 6);
    s[j + 8] = (sc[j + 4]! & 15) | ((mn[j + 4]! & 15) << 4);
  }
  return s;
}

function qk(r: () => number, five: boolean): Built {
  const b = new Uint8Array(five ? 176 : 144);
  put16(b, 0, F16.eighth); // d
  put16(b, 2, F16.quarter); // dmin
  const sc = Array.from({ length: 8 }, () => ri(r, 0, 63));
  const mn = Array.from({ length: 8 }, () => ri(r, 0, 63));
  b.set(packScalesK(sc, mn), 4);
  const q = Array.from({ length: 256 }, () => ri(r, 0, five ? 31 : 15));
  const qs = five ? 48 : 16;
  // per 64 elements: 32 bytes, low nibble = sub-block 2p, high nibble = sub-block 2p+1
  for (let pair = 0; pair < 4; pair++) {
    for (let l = 0; l < 32; l++) {
      b[qs + pair * 32 + l] = (q[pair * 64 + l]! & 15) | ((q[pair * 64 + 32 + l]! & 15) << 4);
    }
  }
  if (five) for (let e = 0; e < 256; e++) b[16 + (e & 31)] = b[16 + (e & 31)]! | ((q[e]! >> 4) << (e >> 5));
  const values = q.map((v, e) => 0.125 * sc[e >> 5]! * v - 0.25 * mn[e >> 5]!);
  return { bytes: b, values };
}

function q6k(r: () => number): Built {
  const b = new Uint8Array(210);
  const sc = Array.from({ length: 16 }, () => ri(r, -128, 127));
  sc.forEach((v, i) => (b[192 + i] = v & 0xff));
  put16(b, 208, F16.oneHalf);
  const q = Array.from({ length: 256 }, () => ri(r, 0, 63));
  for (let half = 0; half < 2; half++) {
    for (let l = 0; l < 32; l++) {
      const [a, c, e, g] = [0, 32, 64, 96].map((o) => q[half * 128 + o + l]!);
      b[half * 64 + l] = (a! & 15) | ((e! & 15) << 4);
      b[half * 64 + 32 + l] = (c! & 15) | ((g! & 15) << 4);
      b[128 + half * 32 + l] = (a! >> 4) | ((c! >> 4) << 2) | ((e! >> 4) << 4) | ((g! >> 4) << 6);
    }
  }
  return { bytes: b, values: q.map((v, e) => 1.5 * sc[e >> 4]! * (v - 32)) };
}

const BUILD: Record<QuantType, (r: () => number) => Built> = {
  q8_0, q4_0: (r) => q4(r, false), q4_1: (r) => q4(r, true), q5_0: (r) => q5(r, false), q5_1: (r) => q5(r, true),
  q4_k: (r) => qk(r, false), q5_k: (r) => qk(r, true), q6_k: q6k,
};

/** A [rows, cols] weight of hand-built blocks and its exact values. */
export function builtMatrix(type: QuantType, rows: number, cols: number, seed: number): { bytes: Uint8Array; values: Float32Array } {
  const r = rng(seed);
  const { blockSize } = QUANT_FORMATS[type];
  const bytes = new Uint8Array(rows * quantRowBytes(type, cols));
  const values = new Float32Array(rows * cols);
  for (let i = 0; i < (rows * cols) / blockSize; i++) {
    const blk = BUILD[type](r);
    bytes.set(blk.bytes, i * blk.bytes.length);
    values.set(blk.values, i * blockSize);
  }
  return { bytes, values };
}


/** Byte offsets of the f16 scale fields in a block. */
const SCALE_FIELDS: Record<QuantType, number[]> = {
  q8_0: [0], q4_0: [0], q5_0: [0], q4_1: [0, 2], q5_1: [0, 2], q4_k: [0, 2], q5_k: [0, 2], q6_k: [208],
};

/** Like builtMatrix (bytes only), with every f16 scale field replaced by a random normal f16
 * in ±[2⁻¹⁰, 2) with a random mantissa, so products of scales round in f32. */
export function randomScaleMatrix(type: QuantType, rows: number, cols: number, seed: number): Uint8Array {
  const { bytes } = builtMatrix(type, rows, cols, seed);
  const r = rng(seed ^ 0x5bd1e995);
  const { blockSize, blockBytes } = QUANT_FORMATS[type];
  for (let b = 0; b < (rows * cols) / blockSize; b++) {
    for (const f of SCALE_FIELDS[type]) {
      const exp = 5 + Math.floor(r() * 11); // 2^-10 .. 2^0
      const bits = (r() < 0.2 ? 0x8000 : 0) | (exp << 10) | Math.floor(r() * 1024);
      put16(bytes, b * blockBytes + f, bits);
    }
  }
  return bytes;
}

/** A random [rows, cols] weight of any dtype, values drawn from r: float types uniform in
 * [−1, 1); q8_0 and q4_k those values quantized by ggml's rules; other quant types random
 * scales over random codes (randomScaleMatrix). */
export function randomAnyWeight(ref: Pick<Kernels, 'allocWeight'>, dtype: WeightDType, rows: number, cols: number, r: () => number): Weight {
  const sym = (): number => 2 * r() - 1;
  if (dtype === 'bf16' || dtype === 'f32' || dtype === 'f16') return randomWeight(ref, dtype, rows, cols, sym);
  const { weight, bytes } = ref.allocWeight(dtype, rows, cols);
  if (dtype === 'q8_0' || dtype === 'q4_k') quantizeRowsGgml(dtype, Float32Array.from({ length: rows * cols }, sym), rows, cols, bytes);
  else bytes.set(randomScaleMatrix(dtype, rows, cols, Math.floor(r() * 2 ** 31)));
  return weight as Weight;
}
