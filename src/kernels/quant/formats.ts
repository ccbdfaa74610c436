// GGML block formats: the on-disk layout of GGUF quantized tensors, kept as-is in backend
// memory (no dequantised copy) and produced by `--quantize` at load. A quantized weight
// [rows, cols] is `rows` rows, each cols/blockSize blocks of blockBytes bytes (little-endian,
// fp16 scales), row-major: exactly a GGUF tensor with ne = {cols, rows}.

export type QuantType = 'q8_0' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q4_k' | 'q5_k' | 'q6_k';

export interface BlockFormat {
  /** Elements per block. */
  readonly blockSize: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  /** The ggml_type id in GGUF tensor infos. */
  readonly ggmlType: number;
}

export const QUANT_FORMATS: Readonly<Record<QuantType, BlockFormat>> = {
  q4_0: { blockSize: 32, blockBytes: 18, ggmlType: 2 }, // d f16, qs[16] (nibbles)
  q4_1: { blockSize: 32, blockBytes: 20, ggmlType: 3 }, // d f16, m f16, qs[16]
  q5_0: { blockSize: 32, blockBytes: 22, ggmlType: 6 }, // d f16, qh u32, qs[16]
  q5_1: { blockSize: 32, blockBytes: 24, ggmlType: 7 }, // d f16, m f16, qh u32, qs[16]
  q8_0: { blockSize: 32, blockBytes: 34, ggmlType: 8 }, // d f16, qs i8[32]
  q4_k: { blockSize: 256, blockBytes: 144, ggmlType: 12 }, // d, dmin f16, scales[12], qs[128]
  q5_k: { blockSize: 256, blockBytes: 176, ggmlType: 13 }, // d, dmin f16, scales[12], qh[32], qs[128]
  q6_k: { blockSize: 256, blockBytes: 210, ggmlType: 14 }, // ql[128], qh[64], scales i8[16], d f16
};

export const QUANT_TYPES = Object.keys(QUANT_FORMATS) as readonly QuantType[];

export function isQuantType(s: string): s is QuantType {
  return Object.prototype.hasOwnProperty.call(QUANT_FORMATS, s);
}

/** Bytes of one row of `cols` elements; cols must be a whole number of blocks. */
export function quantRowBytes(type: QuantType, cols: number): number {
  const f = QUANT_FORMATS[type];
  if (cols % f.blockSize !== 0) throw new RangeError(`${type}: a row of ${cols} elements is not a whole number of ${f.blockSize}-element blocks`);
  return (cols / f.blockSize) * f.blockBytes;
}
