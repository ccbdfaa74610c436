// Views of weights that share memory, for either layout (see Weight.layout).
import type { Weight } from './types.js';

/** Rows [0, n) of a weight as a weight of its own (same memory, same layout). Row-major:
 * the first n·cols elements; 'panel8': the first ⌈n/8⌉ panels (a matmul against it writes
 * only its n columns). */
export function rowPrefix(w: Weight, n: number): Weight {
  if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`rowPrefix: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
  const rows = w.layout === 'panel8' ? Math.ceil(n / 8) * 8 : n;
  return { ...w, rows: n, data: w.data.subarray(0, rows * w.cols) };
}
