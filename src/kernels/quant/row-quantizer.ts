// The block quantizer interface of `--quantize` (model/quantize-load.ts) and
// `deltaserve quantize` (tools/quantize-gguf.ts), and its reference implementation: GGML's
// algorithms in plain TypeScript (quantize-ggml.ts). The wasm quantizer
// (wasm-quantizer.ts) produces the same bytes on all threads.
import type { QuantType } from './formats.js';
import { quantizeRowsGgml } from './quantize-ggml.js';

/** Source elements: f32, or bf16 bits (a Uint16Array; the f32 value is bits << 16). */
export type QuantSource = Float32Array | Uint16Array;

export interface RowQuantizer {
  /** Quantize `rows` rows of `cols` elements of src (row-major) into dst (rows × row bytes
   * of `type`). */
  quantizeRows(type: QuantType, src: QuantSource, rows: number, cols: number, dst: Uint8Array): void;
}

/** bf16 bits → f32 values (exact). */
export function widenBf16(src: Uint16Array, dst: Float32Array = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(dst.buffer, dst.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) bits[i] = src[i]! << 16;
  return dst;
}

/** The TypeScript reference: single-threaded, the bytes every other quantizer must match. */
export const refQuantizer: RowQuantizer = {
  quantizeRows(type, src, rows, cols, dst) {
    const x = src instanceof Uint16Array ? widenBf16(src.subarray(0, rows * cols)) : src;
    quantizeRowsGgml(type, x, rows, cols, dst);
  },
};
