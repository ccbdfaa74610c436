// Numeric helpers shared by the tests.
import assert from 'node:assert/strict';
import type { Kernels, Weight, WeightDType } from '../src/kernels/types.js';
import { f32ToF16 } from '../src/kernels/quant/dequant.js';

/** Deterministic uniform [0, 1) generator (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** max |got − want| / max |want| over the first n elements (0 when want is all zero). */
export function relErr(got: ArrayLike<number>, want: ArrayLike<number>, n = want.length): number {
  let d = 0;
  let m = 0;
  for (let i = 0; i < n; i++) {
    d = Math.max(d, Math.abs(got[i]! - want[i]!));
    m = Math.max(m, Math.abs(want[i]!));
  }
  return m === 0 ? d : d / m;
}

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);

/** A [rows, cols] weight in backend `k` filled from `f` (bf16: the top 16 bits of the f32;
 * f16: the nearest f16, except every 7th element, which is f16 bits spread over every finite
 * exponent (subnormals and ±0 included), magnitude ≤ 2 so no one element dominates). */
export function randomWeight(k: Pick<Kernels, 'allocWeight'>, dtype: WeightDType, rows: number, cols: number, f: () => number): Weight {
  const { weight: w } = k.allocWeight(dtype, rows, cols);
  for (let i = 0; i < rows * cols; i++) {
    f32Bits[0] = f();
    if (dtype === 'f32') (w.data as Float32Array)[i] = f32Bits[0];
    else if (dtype === 'f16') (w.data as Uint16Array)[i] = i % 7 === 3 ? anyF16Bits(f()) : f32ToF16(f32Bits[0]);
    else (w.data as Uint16Array)[i] = u32Bits[0]! >>> 16;
  }
  return w;
}

/** Finite f16 bits of magnitude < 2 with any exponent (0..15) and mantissa, from u ∈ [−1, 1). */
function anyF16Bits(u: number): number {
  const bits = Math.floor(Math.abs(u) * 0x4000) & 0x3fff; // exponent 0..15, any mantissa
  return (u < 0 ? 0x8000 : 0) | bits;
}

/** Fails unless `got` and `want` hold the same f32 bit patterns, element by element (naming
 * the first that differs). */
export function assertSameBits(got: Float32Array, want: Float32Array, what: string): void {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  assert.equal(a.length, b.length, `${what}: length`);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]} (not bit-identical)`);
}
