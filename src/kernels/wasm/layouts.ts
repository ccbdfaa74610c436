// The wasm backend's weight layouts (the `Weight.layout` tags its packWeight sets) and the
// views and sizes that depend on them. 'panel8': bf16 / f32 in 8-row panels (assembly/
// matmul.ts), data padded to whole panels; 'q8x4': Q8_0 regrouped by 4 rows with f32
// scales (assembly/q8x4.ts); 'q8u4': the same, quants as column quads of w + 128
// (assembly/q8u4.ts); 'q4kx4': Q4_K regrouped by 4 rows with unpacked scales
// (assembly/q4kx4.ts); 'q6kx4': Q6_K regrouped by 4 rows, group scales per [group][column]
// (assembly/q6kx4.ts); 'q5kx4': Q5_K as q4kx4 plus 5th bits (assembly/q5kx4.ts); 'q40x4',
// 'q41x4', 'q50x4', 'q51x4': Q4_0 / Q4_1 / Q5_0 / Q5_1 regrouped by 4 rows
// (assembly/q32x4.ts). Sizes and row prefixes of the repacked layouts come from their
// quant-layouts.ts spec. Nothing outside kernels/wasm/ reads these names.
import type { Weight } from '../types.js';
import { isQuantType, quantRowBytes } from '../quant/formats.js';
import { weightBytes } from '../weight-view.js';
import { type RepackedLayout, storedSpec } from './quant-layouts.js';

export type WasmLayout = 'panel8' | RepackedLayout;

/** Bytes of a quantized weight's data as stored (its layout's size). */
export function storedQuantBytes(w: Weight): number {
  const spec = storedSpec(w);
  return spec ? spec.bytes(w.rows, w.cols) : weightBytes(w);
}

/** Bytes a matmul streams for this weight as stored (panel padding not counted). */
export function storedBytes(w: Weight): number {
  return isQuantType(w.dtype) ? storedQuantBytes(w) : weightBytes(w);
}

/** Rows [0, n) of a weight as a weight of its own (same memory, same layout). Row-major:
 * the first n rows (for quantized weights, n rows of blocks); 'panel8' / 'q8x4' and
 * 'q4kx4' / 'q6kx4': the first ⌈n/8⌉ panels / ⌈n/4⌉ groups (a matmul against it writes
 * only its n columns). */
export function rowPrefix(w: Weight, n: number): Weight {
  if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`rowPrefix: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
  const spec = storedSpec(w);
  if (spec) return { ...w, rows: n, data: w.data.subarray(0, spec.bytes(n, w.cols)) };
  if (isQuantType(w.dtype)) return { ...w, rows: n, data: w.data.subarray(0, n * quantRowBytes(w.dtype, w.cols)) };
  const rows = w.layout === 'panel8' ? Math.ceil(n / 8) * 8 : n;
  return { ...w, rows: n, data: w.data.subarray(0, rows * w.cols) };
}
