// Views of weights that share memory, for either layout (see Weight.layout), and storage sizes.
import type { Weight, WeightDType } from './types.js';
import { isQuantType, quantRowBytes } from './quant/formats.js';

/** Bytes of one stored row of `cols` elements of `dtype` (row-major). */
export function rowBytes(dtype: WeightDType, cols: number): number {
  if (isQuantType(dtype)) return quantRowBytes(dtype, cols);
  return cols * (dtype === 'bf16' ? 2 : 4);
}

/** Bytes a weight's values occupy (rows × rowBytes; panel padding not counted). */
export function weightBytes(w: Weight): number {
  return w.rows * rowBytes(w.dtype, w.cols);
}

/** Rows [0, n) of a weight as a weight of its own (same memory, same layout). Row-major:
 * the first n rows (for quantized weights, n rows of blocks); 'panel8': the first ⌈n/8⌉
 * panels (a matmul against it writes only its n columns). */
export function rowPrefix(w: Weight, n: number): Weight {
  if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`rowPrefix: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
  if (isQuantType(w.dtype)) return { ...w, rows: n, data: w.data.subarray(0, n * quantRowBytes(w.dtype, w.cols)) };
  const rows = w.layout === 'panel8' ? Math.ceil(n / 8) * 8 : n;
  return { ...w, rows: n, data: w.data.subarray(0, rows * w.cols) };
}
