// The wasm backend's repacked Q4_K layout ('q4kx4', assembly/q4kx4.ts): groups of 4 rows;
// per 256-element super-block 16 bytes of f32 d, 16 of f32 −dmin (4 columns), 32 + 32 bytes
// of unpacked six-bit scales / mins ([sub-block][column]), then per 32-element sub-block 4
// vectors of nibbles (byte 4c + i of vector v: element 8v + i of column c low, 8v + 4 + i
// high). Same values as the GGML blocks; only the order (and the scale packing) differs.

const SB = 608; // bytes of one (group, super-block)

/** Bytes of a [rows, cols] weight in the q4kx4 layout (rows padded to a multiple of 4). */
export function q4kx4Bytes(rows: number, cols: number): number {
  return Math.ceil(rows / 4) * (cols / 256) * SB;
}

const fr = Math.fround;

/** Row r of a q4kx4 weight as f32: the same values as dequantizeRow on its Q4_K blocks,
 * fr(fr(fr(d·sc)·u) − fr(dmin·m)) (adding fr(−dmin·m) is the same operation). */
export function dequantizeQ4kx4Row(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  const ns = cols / 256;
  const c = r & 3;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let b = 0; b < ns; b++) {
    const o = ((r >> 2) * ns + b) * SB;
    const d = view.getFloat32(o + 4 * c, true);
    const nmin = view.getFloat32(o + 16 + 4 * c, true);
    for (let j = 0; j < 8; j++) {
      const scale = fr(d * data[o + 32 + 4 * j + c]!);
      const offset = fr(nmin * data[o + 64 + 4 * j + c]!);
      for (let e = 0; e < 32; e++) {
        const byte = data[o + 96 + 64 * j + 16 * (e >> 3) + 4 * c + (e & 3)]!;
        const u = e & 4 ? byte >> 4 : byte & 15;
        dst[b * 256 + j * 32 + e] = fr(fr(scale * u) + offset);
      }
    }
  }
  return dst;
}
