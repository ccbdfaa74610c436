// Where the KV and state pools keep their memory, and the only ways they touch it. The
// engine passes its kernel backend (kernels/types.ts Kernels has exactly these ops), so on
// a GPU backend every pool copy, fill and snapshot restore is a recorded GPU op in program
// order with the model's work, and bytes reach the host only through `readBack` (prefix
// cache persistence). `hostPoolStorage` is plain host memory (tests, tools).
// Defined here, structurally, so cache/ imports nothing from kernels/ (docs/ARCHITECTURE.md
// "Layers and the direction of imports").

/** A pool tensor: backend-owned (a typed array on the CPU, a buffer region on a GPU). */
export interface PoolTensor {
  readonly length: number;
}

export interface PoolRange<T extends PoolTensor> {
  readonly t: T;
  readonly offset: number;
  readonly length: number;
}

export interface PoolStorage<T extends PoolTensor> {
  /** Zero-filled tensor of n f32 elements. */
  alloc(n: number): T;
  /** Elements [offset, offset + length) of t, sharing its memory. */
  view(t: T, offset: number, length: number): T;
  /** Strided row copy between non-overlapping ranges (Kernels.copyRows). */
  copyRows(dst: T, dstOffset: number, dstStride: number, src: T, srcOffset: number, srcStride: number, rows: number, width: number): void;
  fill(dst: T, offset: number, length: number, value: number): void;
  /** fill of every run (not overlapping) in one op (Kernels.fillRuns). */
  fillRuns(dst: T, runs: readonly { readonly offset: number; readonly length: number }[], value: number): void;
  /** Host data in (prefix-cache load). */
  write(dst: T, offset: number, src: ArrayLike<number>): void;
  /** Host copies of ranges; on a CPU backend views at once, on a GPU a promise. */
  readBack(ranges: readonly PoolRange<T>[]): Float32Array[] | Promise<Float32Array[]>;
}

/** dst[dstOffset, +n) ← src[srcOffset, +n) through the storage's row copy. */
export function copyRange<T extends PoolTensor>(s: PoolStorage<T>, dst: T, dstOffset: number, src: T, srcOffset: number, n: number): void {
  if (n > 0) s.copyRows(dst, dstOffset, n, src, srcOffset, n, 1, n);
}

/** Host memory: Float32Array views (allocated by `alloc`, e.g. a CPU backend's). */
export function hostPoolStorage(alloc: (n: number) => Float32Array = (n) => new Float32Array(n)): PoolStorage<Float32Array> {
  return {
    alloc,
    view: (t, offset, length) => t.subarray(offset, offset + length),
    copyRows(dst, dstOffset, dstStride, src, srcOffset, srcStride, rows, width) {
      for (let r = 0; r < rows; r++) {
        const s = srcOffset + r * srcStride;
        dst.set(src.subarray(s, s + width), dstOffset + r * dstStride);
      }
    },
    fill: (dst, offset, length, value) => void dst.fill(value, offset, offset + length),
    fillRuns: (dst, runs, value) => runs.forEach((r) => dst.fill(value, r.offset, r.offset + r.length)),
    write: (dst, offset, src) => void dst.set(src, offset),
    readBack: (ranges) => ranges.map((r) => r.t.subarray(r.offset, r.offset + r.length)),
  };
}
