// Views of weights that share memory, for either layout (see Weight.layout), and storage sizes.
import type { Weight, WeightDType } from './types.js';
import { isQuantType, quantRowBytes } from './quant/formats.js';
import { q8x4Bytes } from './quant/q8x4.js';
import { q4kx4Bytes } from './quant/q4kx4.js';
import { q6kx4Bytes } from './quant/q6kx4.js';

/** Bytes of one stored row of `cols` elements of `dtype` (row-major). */
export function rowBytes(dtype: WeightDType, cols: number): number {
  if (isQuantType(dtype)) return quantRowBytes(dtype, cols);
  return cols * (dtype === 'bf16' ? 2 : 4);
}

/** Bytes a weight's values occupy (rows × rowBytes; panel padding not counted). */
export function weightBytes(w: Weight): number {
  return w.rows * rowBytes(w.dtype, w.cols);
}

/** Bytes of a quantized weight's data as stored (its layout's size). */
export function storedQuantBytes(w: Weight): number {
  if (w.layout === 'q8x4') return q8x4Bytes(w.rows, w.cols);
  if (w.layout === 'q6kx4') return q6kx4Bytes(w.rows, w.cols);
  return w.layout === 'q4kx4' ? q4kx4Bytes(w.rows, w.cols) : weightBytes(w);
}

/** Bytes a matmul streams for this weight as the backend stores it (a repacked layout's
 * size; panel padding not counted). */
export function storedBytes(w: Weight): number {
  return isQuantType(w.dtype) ? storedQuantBytes(w) : weightBytes(w);
}

/** Rows [0, n) of a weight as a weight of its own (same memory, same layout). Row-major:
 * the first n rows (for quantized weights, n rows of blocks); 'panel8' / 'q8x4' and
 * 'q4kx4' / 'q6kx4': the first ⌈n/8⌉ panels / ⌈n/4⌉ groups (a matmul against it writes only its n columns). */
export function rowPrefix(w: Weight, n: number): Weight {
  if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`rowPrefix: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
  if (w.layout === 'q8x4') return { ...w, rows: n, data: w.data.subarray(0, q8x4Bytes(n, w.cols)) };
  if (w.layout === 'q4kx4') return { ...w, rows: n, data: w.data.subarray(0, q4kx4Bytes(n, w.cols)) };
  if (w.layout === 'q6kx4') return { ...w, rows: n, data: w.data.subarray(0, q6kx4Bytes(n, w.cols)) };
  if (isQuantType(w.dtype)) return { ...w, rows: n, data: w.data.subarray(0, n * quantRowBytes(w.dtype, w.cols)) };
  const rows = w.layout === 'panel8' ? Math.ceil(n / 8) * 8 : n;
  return { ...w, rows: n, data: w.data.subarray(0, rows * w.cols) };
}
