// The wasm backend's repacked Q8_0 layout ('q8x4', assembly/q8x4.ts): groups of 4 rows,
// per 32-element sub-block 16 bytes of f32 scales then 128 bytes of column-interleaved
// int8 quants. Same values as the GGML blocks; only the order differs. 'q8u4'
// (assembly/q8u4.ts): the same, quants as column quads of w + 128.

/** Bytes of a [rows, cols] weight in the q8x4 layout (rows padded to a multiple of 4). */
export function q8x4Bytes(rows: number, cols: number): number {
  return Math.ceil(rows / 4) * (cols / 32) * 144;
}

/** Row r of a weight in a Q8_0 layout grouped by 4 rows (144 bytes per group and 32-block:
 * 4 f32 scales, then 128 quant bytes), quant e of column c read by `quant`. */
function dequantizeGroupedRow(data: Uint8Array, cols: number, r: number, dst: Float32Array,
  quant: (view: DataView, block: number, e: number, c: number) => number): Float32Array {
  const nb = cols / 32;
  const c = r & 3;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let j = 0; j < nb; j++) {
    const o = ((r >> 2) * nb + j) * 144;
    const scale = view.getFloat32(o + 4 * c, true);
    for (let e = 0; e < 32; e++) dst[j * 32 + e] = Math.fround(quant(view, o + 16, e, c) * scale);
  }
  return dst;
}

/** Row r of a q8x4 weight as f32 (the same values as dequantizeRow on its Q8_0 blocks):
 * element pairs per column, 4 columns per 16 bytes. */
export function dequantizeQ8x4Row(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  return dequantizeGroupedRow(data, cols, r, dst, (view, q, e, c) => view.getInt8(q + ((e >> 2) << 4) + (((e & 3) >> 1) << 3) + (c << 1) + (e & 1)));
}

/** Row r of a q8u4 weight as f32 (the same values): column quads of w + 128. */
export function dequantizeQ8u4Row(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  return dequantizeGroupedRow(data, cols, r, dst, (view, q, e, c) => view.getUint8(q + ((e >> 2) << 4) + (c << 2) + (e & 3)) - 128);
}
