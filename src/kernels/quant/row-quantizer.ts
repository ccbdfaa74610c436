// The block quantizer interface of `--quantize` (checkpoint/quantize-load.ts) and
// `deltaserve quantize` (tools/quantize-gguf.ts), and its reference implementation: GGML's
// algorithms in plain TypeScript (quantize-ggml.ts). The wasm quantizer
// (kernels/wasm/quantizer.ts) produces the same bytes on all threads.
import { quantRowBytes, type QuantType } from './formats.js';
import { quantizeRowsGgml } from './quantize-ggml.js';

/** Source elements: f32, or bf16 bits (a Uint16Array; the f32 value is bits << 16). */
export type QuantSource = Float32Array | Uint16Array;

/** A tensor's rows produced band by band (read from a file, gathered, converted):
 * `fill(r0, n, into)` writes rows [r0, r0 + n) into `into`, exactly n·cols elements — bf16
 * bits (a Uint16Array) when `kind` is 'bf16', else floats (a Float32Array). */
export interface RowSource {
  readonly kind: 'bf16' | 'f32';
  fill(r0: number, n: number, into: QuantSource): void;
}

export interface RowQuantizer {
  /** Quantize `rows` rows of `cols` elements of src (row-major) into dst (rows × row bytes
   * of `type`). */
  quantizeRows(type: QuantType, src: QuantSource, rows: number, cols: number, dst: Uint8Array): void;
  /** The same for rows that `source` produces band by band: an implementation may produce
   * the next band while it quantizes this one, so `fill` must not touch dst. */
  quantizeFrom(type: QuantType, source: RowSource, rows: number, cols: number, dst: Uint8Array): void;
}

/** A quantizer that holds resources (threads, memory) until `dispose`: what
 * Kernels.startQuantizer gives. */
export interface StartedQuantizer extends RowQuantizer {
  dispose(): void;
}

/** Source elements per band of quantizeFromBands (~4 MiB of f32). */
const BAND_ELEMS = 1 << 20;

/** quantizeFrom on any quantizeRows: bands of whole rows (~BAND_ELEMS elements, at least
 * one row) filled into one buffer, then quantized, in turn. */
export function quantizeFromBands(q: Pick<RowQuantizer, 'quantizeRows'>, type: QuantType, source: RowSource, rows: number,
  cols: number, dst: Uint8Array, rowBytes: number): void {
  const per = Math.max(1, Math.min(rows, Math.floor(BAND_ELEMS / cols)));
  const band = source.kind === 'bf16' ? new Uint16Array(per * cols) : new Float32Array(per * cols);
  for (let r = 0; r < rows; r += per) {
    const n = Math.min(per, rows - r);
    const into = band.subarray(0, n * cols);
    source.fill(r, n, into);
    q.quantizeRows(type, into, n, cols, dst.subarray(r * rowBytes, (r + n) * rowBytes));
  }
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
  quantizeFrom(type, source, rows, cols, dst) {
    quantizeFromBands(refQuantizer, type, source, rows, cols, dst, quantRowBytes(type, cols));
  },
};

/** The reference as a started quantizer (it holds nothing to dispose): the ref backend's
 * Kernels.startQuantizer. */
export function startRefQuantizer(): Promise<StartedQuantizer> {
  return Promise.resolve({ ...refQuantizer, dispose: () => {} });
}
