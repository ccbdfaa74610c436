// Sizes and views of weights as loaded (row-major, or GGML blocks row by row). A backend's
// packed layouts (Weight.layout) and their views live with that backend (Kernels.weightRows,
// Kernels.storedWeightBytes).
import type { Weight, WeightDType } from './types.js';
import { isQuantType, quantRowBytes } from './quant/formats.js';

/** Bytes of one stored row of `cols` elements of `dtype` (row-major). */
export function rowBytes(dtype: WeightDType, cols: number): number {
  if (isQuantType(dtype)) return quantRowBytes(dtype, cols);
  return cols * (dtype === 'f32' ? 4 : 2);
}

/** Bytes a weight's values occupy (rows × rowBytes; panel padding not counted). */
export function weightBytes(w: Weight): number {
  return w.rows * rowBytes(w.dtype, w.cols);
}

/** Rows [0, n) of a row-major weight (no backend layout) as a weight of its own, same memory. */
export function rowMajorPrefix(w: Weight, n: number): Weight {
  if (w.layout !== undefined) throw new Error(`rowMajorPrefix: weight is in the backend layout ${w.layout}`);
  if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`rowPrefix: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
  const end = isQuantType(w.dtype) ? n * quantRowBytes(w.dtype, w.cols) : n * w.cols;
  return { ...w, rows: n, data: w.data.subarray(0, end) };
}
