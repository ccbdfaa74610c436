// Reference integer matmul for quantized weights: the exact arithmetic the wasm integer
// kernels (assembly/qmatmul.ts) implement, so the two agree bit for bit.
//
// 1. Activations: every row of x is cut into 32-element blocks; block b gets
//      amax = max|x|, d = f32(amax / 127), id = d ? f32(1 / d) : 0,
//      q = roundHalfEven(f32(x · id)) ∈ [−127, 127], s = Σ q (int).
// 2. Weights: sub-block j of output column n is w = scale_j · q_k + offset_j (decodeSubBlock).
// 3. out[m, n] = one f32 chain over the sub-blocks in order:
//      acc = 0; for j: acc = f32(acc + f32(f32(scale_j · d_j) · Σ_k q_k·qx_k))
//                 (+ for formats with offsets: acc = f32(acc + f32(f32(offset_j · d_j) · s_j)))
//    The integer sums are exact (|Σ| < 2²⁴, so exact in f32 too); each f32 op rounds once.
// A result depends only on its own row and column: batch- and split-invariant.
import type { Weight } from '../types.js';
import { type QuantType } from '../quant/formats.js';
import { decodeSubBlock, hasOffset } from '../quant/dequant.js';

const fr = Math.fround;

/** Round half to even (the wasm f32x4.nearest). */
export function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Int8 activations [M, K] with per-32-block scales d and sums s ([M, K/32]). */
export interface QuantActs {
  readonly q: Int8Array;
  readonly d: Float32Array;
  readonly s: Int32Array;
}

export function quantizeActs(x: Float32Array, m: number, k: number): QuantActs {
  if (k % 32 !== 0) throw new RangeError(`quantized matmul: K = ${k} is not a multiple of 32`);
  const nb = k / 32;
  const q = new Int8Array(m * k);
  const d = new Float32Array(m * nb);
  const s = new Int32Array(m * nb);
  for (let b = 0; b < m * nb; b++) {
    const o = b * 32;
    let amax = 0;
    for (let l = 0; l < 32; l++) amax = Math.max(amax, Math.abs(x[o + l]!));
    const db = fr(amax / 127);
    const id = db !== 0 ? fr(1 / db) : 0;
    let sum = 0;
    for (let l = 0; l < 32; l++) {
      const v = roundHalfEven(fr(x[o + l]! * id));
      q[o + l] = v;
      sum += v;
    }
    d[b] = db;
    s[b] = sum;
  }
  return { q, d, s };
}

/** out[m, n] = Σ_k x[m, k] · W[n, k] for a quantized row-major W [N, K], in the arithmetic above. */
export function matmulQuant(out: Float32Array, x: Float32Array, w: Weight, m: number): void {
  const type = w.dtype as QuantType;
  const n = w.rows;
  const k = w.cols;
  const nb = k / 32;
  const acts = quantizeActs(x, m, k);
  const data = w.data as Uint8Array;
  const offs = hasOffset(type);
  const qw = new Int32Array(32);
  const scale = new Float32Array(nb);
  const offset = new Float32Array(nb);
  const qRow = new Int32Array(k);
  for (let c = 0; c < n; c++) {
    for (let j = 0; j < nb; j++) {
      const sb = decodeSubBlock(type, data, k, c, j, qw);
      scale[j] = sb.scale;
      offset[j] = sb.offset;
      qRow.set(qw, j * 32);
    }
    for (let i = 0; i < m; i++) {
      let acc = 0;
      for (let j = 0; j < nb; j++) {
        const xo = i * k + j * 32;
        let sumi = 0;
        for (let l = 0; l < 32; l++) sumi += qRow[j * 32 + l]! * acts.q[xo + l]!;
        const dx = acts.d[i * nb + j]!;
        acc = fr(acc + fr(fr(scale[j]! * dx) * sumi));
        if (offs) acc = fr(acc + fr(fr(offset[j]! * dx) * acts.s[i * nb + j]!));
      }
      out[i * n + c] = acc;
    }
  }
}
