// The wasm backend's repacked Q5_K layout ('q5kx4', assembly/q5kx4.ts): the q4kx4 layout
// (groups of 4 rows; per 256-element super-block f32 d, f32 −dmin, unpacked six-bit scales
// and mins [sub-block][column]) with sub-blocks of 80 bytes: 4 nibble vectors (byte
// 16v + 4c + i: element 8v + i of column c low, 8v + 4 + i high), then 16 bytes of 5th bits
// (byte 4c + i: bit v for element 8v + i, bit 4 + v for 8v + 4 + i). Same values as the
// GGML blocks; only the order (and the scale packing) differs.

const SB = 736; // bytes of one (group, super-block)

/** Bytes of a [rows, cols] weight in the q5kx4 layout (rows padded to a multiple of 4). */
export function q5kx4Bytes(rows: number, cols: number): number {
  return Math.ceil(rows / 4) * (cols / 256) * SB;
}

const fr = Math.fround;

/** Row r of a q5kx4 weight as f32: the same values as dequantizeRow on its Q5_K blocks,
 * fr(fr(fr(d·sc)·u) − fr(dmin·m)) (adding fr(−dmin·m) is the same operation). */
export function dequantizeQ5kx4Row(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
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
      const q = o + 96 + 80 * j;
      for (let e = 0; e < 32; e++) {
        const v = e >> 3;
        const high = (e & 4) !== 0;
        const byte = data[q + 16 * v + 4 * c + (e & 3)]!;
        const bit = (data[q + 64 + 4 * c + (e & 3)]! >> (high ? 4 + v : v)) & 1;
        const u = (high ? byte >> 4 : byte & 15) | (bit << 4);
        dst[b * 256 + j * 32 + e] = fr(fr(scale * u) + offset);
      }
    }
  }
  return dst;
}
