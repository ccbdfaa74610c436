// Logits rows for Kernels.topCandidates conformance (ref, wasm, webgpu) and the brute-force
// definition they are checked against: ties on a coarse grid, NaN scattered and a whole
// NaN row, ±∞, ±0, rows shorter than c.
import { orderKey } from '../src/kernels/top-candidates.js';
import { rng } from './numeric.js';

/** m rows of stride n + 3 (the tail past n holds +∞: it must never be picked). */
export function candidateRows(seed: number, m: number, n: number): { x: Float32Array; stride: number } {
  const r = rng(seed);
  const stride = n + 3;
  const x = new Float32Array(m * stride);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < stride; j++) {
      const kind = r();
      const v = j >= n ? Infinity : kind < 0.05 ? NaN : kind < 0.1 ? -Infinity : kind < 0.15 ? (r() < 0.5 ? -0 : 0)
        : i % 2 === 0 ? Math.round(16 * r()) / 4 - 2 : 4 * r() - 2; // even rows: many ties
      x[i * stride + j] = v;
    }
  }
  if (m > 1) for (let j = 0; j < n; j++) x[stride + j] = NaN; // row 1: all NaN
  if (m > 2 && n > 2) { x[2 * stride] = Infinity; x[2 * stride + n - 1] = Infinity; } // row 2: +∞ twice
  return { x, stride };
}

/** The definition by sorting: per row, the first min(c, #non-NaN) ids by (key desc, id asc),
 * ascending; then id −1 / −∞. */
export function bruteCandidates(x: Float32Array, m: number, n: number, stride: number, c: number): { ids: Int32Array; vals: Float32Array } {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const ids = new Int32Array(m * c).fill(-1);
  const vals = new Float32Array(m * c).fill(-Infinity);
  for (let i = 0; i < m; i++) {
    const all = Array.from({ length: n }, (_, j) => j).filter((j) => !Number.isNaN(x[i * stride + j]!));
    all.sort((a, b) => orderKey(bits[i * stride + b]!) - orderKey(bits[i * stride + a]!) || a - b);
    all.slice(0, c).sort((a, b) => a - b).forEach((id, j) => { ids[i * c + j] = id; vals[i * c + j] = x[i * stride + id]!; });
  }
  return { ids, vals };
}
