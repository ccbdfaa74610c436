// The wasm backend's repacked Q6_K layout ('q6kx4', assembly/q6kx4.ts): groups of 4 rows;
// per 256-element super-block 16 bytes of f32 d (4 columns), 64 bytes of int8 group scales
// ([16-element group][column]), then per 16-element group 48 bytes: three vectors qa, qb,
// qc of u = q + 32 (byte 4c + i of each: element 4p + i of column c); bits 0..5 of qa / qb /
// qc hold u of quad p = 0 / 1 / 2, and their bits 6-7 hold bits 0-1 / 2-3 / 4-5 of quad 3's
// u. Same values as the GGML blocks; only the order differs.

const SB = 848; // bytes of one (group, super-block)

/** Bytes of a [rows, cols] weight in the q6kx4 layout (rows padded to a multiple of 4). */
export function q6kx4Bytes(rows: number, cols: number): number {
  return Math.ceil(rows / 4) * (cols / 256) * SB;
}

const fr = Math.fround;

/** Row r of a q6kx4 weight as f32: the same values as dequantizeRow on its Q6_K blocks,
 * fr(fr(d·sc)·(u − 32)). */
export function dequantizeQ6kx4Row(data: Uint8Array, cols: number, r: number, dst: Float32Array): Float32Array {
  const ns = cols / 256;
  const c = r & 3;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  for (let b = 0; b < ns; b++) {
    const o = ((r >> 2) * ns + b) * SB;
    const d = view.getFloat32(o + 4 * c, true);
    for (let t = 0; t < 16; t++) {
      const scale = fr(d * view.getInt8(o + 16 + 4 * t + c));
      const g = o + 80 + 48 * t + 4 * c;
      for (let e = 0; e < 16; e++) {
        const p = e >> 2;
        const i = g + (e & 3);
        const u = p < 3 ? data[i + 16 * p]! & 63 : (data[i]! >> 6) | ((data[i + 16]! >> 6) << 2) | ((data[i + 32]! >> 6) << 4);
        dst[b * 256 + t * 16 + e] = fr(scale * (u - 32));
      }
    }
  }
  return dst;
}
