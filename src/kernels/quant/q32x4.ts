// The wasm backend's repacked Q4_0 / Q4_1 / Q5_0 / Q5_1 layouts ('q40x4', 'q41x4', 'q50x4',
// 'q51x4'; assembly/q32x4.ts): groups of 4 rows; per 32-element sub-block 4 nibble vectors
// (byte 16v + 4c + i: element 8v + i of column c low, 8v + 4 + i high), the 5th bits (5-bit
// formats: byte 64 + 4c + i, bit v for element 8v + i, bit 4 + v for 8v + 4 + i), then the
// f16 d of the 4 columns and (Q4_1 / Q5_1) their f16 m. Same bytes as the GGML blocks, only
// reordered: q32x4RowBlocks undoes it, so the dequantized values are GGML's exactly.
import { QUANT_FORMATS, type QuantType } from './formats.js';
import { dequantizeRow } from './dequant.js';

export type Q32Type = 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1';

const five = (t: Q32Type): boolean => t === 'q5_0' || t === 'q5_1';
const withMin = (t: Q32Type): boolean => t === 'q4_1' || t === 'q5_1';

/** Bytes of one (group, sub-block): 4 GGML blocks. */
function subBytes(t: Q32Type): number {
  return 4 * QUANT_FORMATS[t].blockBytes;
}

/** Bytes of a [rows, cols] weight in the layout (rows padded to a multiple of 4). */
export function q32x4Bytes(t: Q32Type, rows: number, cols: number): number {
  return Math.ceil(rows / 4) * (cols / 32) * subBytes(t);
}

/** Row r of a repacked weight as its GGML blocks (the inverse of the repack). */
export function q32x4RowBlocks(t: Q32Type, data: Uint8Array, cols: number, r: number): Uint8Array {
  const nb = cols / 32;
  const qb = QUANT_FORMATS[t].blockBytes;
  const sb = subBytes(t);
  const scales = five(t) ? 80 : 64;
  const qs = t === 'q4_0' ? 2 : t === 'q4_1' ? 4 : t === 'q5_0' ? 6 : 8; // GGML offsets
  const c = r & 3;
  const out = new Uint8Array(nb * qb);
  for (let j = 0; j < nb; j++) {
    const o = ((r >> 2) * nb + j) * sb;
    const p = j * qb;
    out[p] = data[o + scales + 2 * c]!;
    out[p + 1] = data[o + scales + 2 * c + 1]!;
    if (withMin(t)) {
      out[p + 2] = data[o + scales + 8 + 2 * c]!;
      out[p + 3] = data[o + scales + 9 + 2 * c]!;
    }
    let qh = 0;
    for (let e = 0; e < 32; e++) {
      const v = e >> 3;
      const high = (e & 4) !== 0;
      const byte = data[o + 16 * v + 4 * c + (e & 3)]!;
      out[p + qs + (e & 15)]! |= (high ? byte >> 4 : byte & 15) << (e < 16 ? 0 : 4);
      if (five(t)) qh |= ((data[o + 64 + 4 * c + (e & 3)]! >> (high ? 4 + v : v)) & 1) << e;
    }
    if (five(t)) new DataView(out.buffer).setUint32(p + qs - 4, qh >>> 0, true);
  }
  return out;
}

/** Row r of a repacked weight as f32: exactly dequantizeRow on its GGML blocks. */
export function dequantizeQ32x4Row(t: QuantType, data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  return dequantizeRow(t, q32x4RowBlocks(t as Q32Type, data, cols, r), cols, 0, dst);
}
