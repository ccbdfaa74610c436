// The block quantizer in WebAssembly SIMD (assembly/quantize.ts) on all threads: the same
// bytes as the TypeScript reference (quantize-ggml.ts, GGML's algorithms), several times
// faster per thread and run on every core through the wasm kernels' worker pool
// (wasm/pool.ts) on a small memory of its own:
//   [static data | per-thread scratch | 2 × (source slice (f32 or bf16) | output slice)]
// A call walks the tensor in slices of up to SLICE_ELEMS source elements, double-buffered:
// while the workers quantize slice i in one buffer, the main thread copies slice i − 1's
// blocks out of the other and fills it with slice i + 1 (copied from the caller's array by
// quantizeRows, written in place by the RowSource of quantizeFrom), then joins the
// quantizing. Blocks are independent, so the bytes do not depend on the thread count or
// the split.
import { availableParallelism } from 'node:os';
import { DeltaserveError } from '../../util/errors.js';
import { QUANT_FORMATS, quantRowBytes, type QuantType } from '../quant/formats.js';
import { OFFLINE_QUANT_TYPES } from '../quant/quantize-ggml.js';
import { type QuantSource, type RowSource, type StartedQuantizer, quantizeFromBands, refQuantizer, startRefQuantizer } from '../quant/row-quantizer.js';
import { compileKernels, instantiate, WA, type KernelExports, type WasmMemory } from './module.js';
import { Pool } from './pool.js';
import { Cmd } from './exec.js';
import { packArgs } from './commands.js';

/** Source elements per pool run: a multiple of every block size (256). */
const SLICE_ELEMS = 1 << 20;
/** Largest output bytes per source element over the types (Q8_0: 34 per 32). */
const OUT_PER_ELEM = 34 / 32;
const PAGE = 65536;
/** 64 MiB: static data, scratch for hundreds of threads and the two slice buffers fit. */
const MAX_PAGES = 1024;
/** Chunks per thread of one run (dynamic claiming evens out a descheduled thread). */
const CHUNKS_PER_THREAD = 8;

/** One slice's wasm memory: the source elements at `src`, their blocks at `dst`. */
interface SliceBuffer {
  readonly src: number;
  readonly dst: number;
}

function align(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

export class WasmQuantizer implements StartedQuantizer {
  private constructor(
    readonly threads: number,
    private readonly memory: WasmMemory,
    private readonly ex: KernelExports,
    private readonly pool: Pool,
    private readonly tmpBase: number,
    /** The two slice buffers: source at `src`, output at `dst`. */
    private readonly buffers: readonly [SliceBuffer, SliceBuffer],
  ) {}

  /** Compile the kernels and start threads − 1 workers (the caller's thread is the last). */
  static async start(threads: number = availableParallelism()): Promise<WasmQuantizer> {
    const n = Math.max(1, Math.floor(threads));
    // the variant the kernels use (the same wire bytes, which V8 may compile once); the
    // quantizer never uses the fused multiply-add, so both builds give the same bytes
    const { module } = await compileKernels('auto');
    const memory = new WA.Memory({ initial: 1, maximum: MAX_PAGES, shared: true });
    const ex = instantiate(module, memory);
    const tmpBase = align(ex.heapBase(), 64);
    const first = align(tmpBase + n * ex.quantizeTmpBytes(), 64);
    const bufferBytes = align(SLICE_ELEMS * 4 + Math.ceil(SLICE_ELEMS * OUT_PER_ELEM), 64);
    const buffers: [SliceBuffer, SliceBuffer] = [0, 1].map((i) => {
      const src = first + i * bufferBytes;
      return { src, dst: src + SLICE_ELEMS * 4 };
    }) as [SliceBuffer, SliceBuffer];
    const end = first + 2 * bufferBytes;
    if (end > MAX_PAGES * PAGE) throw new RangeError(`wasm quantizer: ${n} threads need more than ${MAX_PAGES * PAGE} bytes`);
    memory.grow(Math.ceil(end / PAGE) - memory.buffer.byteLength / PAGE);
    const pool = await Pool.start(n, module, [memory]);
    return new WasmQuantizer(n, memory, ex, pool, tmpBase, buffers);
  }

  quantizeRows(type: QuantType, src: QuantSource, rows: number, cols: number, dst: Uint8Array): void {
    if (!OFFLINE_QUANT_TYPES.includes(type)) {
      refQuantizer.quantizeRows(type, src, rows, cols, dst); // throws the reference's message
      return;
    }
    this.check(type, rows, cols, dst);
    const total = rows * cols;
    if (src.length < total) throw new RangeError(`quantize: ${src.length} source elements for ${rows} × ${cols}`);
    const bf16 = src instanceof Uint16Array;
    // slices of SLICE_ELEMS elements (whole blocks, not necessarily whole rows) copied in
    this.pipeline(type, bf16, total, SLICE_ELEMS, dst, (e, n, into) => into.set(src.subarray(e, e + n)));
  }

  quantizeFrom(type: QuantType, source: RowSource, rows: number, cols: number, dst: Uint8Array): void {
    if (!OFFLINE_QUANT_TYPES.includes(type) || cols > SLICE_ELEMS) {
      // a row longer than a slice (bands of one row, each sliced by quantizeRows), or a
      // type only the reference has (it throws the reference's message)
      quantizeFromBands(this, type, source, rows, cols, dst, quantRowBytes(type, cols));
      return;
    }
    this.check(type, rows, cols, dst);
    // slices of whole rows, filled straight into the quantizer's memory
    const per = Math.floor(SLICE_ELEMS / cols);
    this.pipeline(type, source.kind === 'bf16', rows * cols, per * cols, dst, (e, n, into) => source.fill(e / cols, n / cols, into));
  }

  private check(type: QuantType, rows: number, cols: number, dst: Uint8Array): void {
    const { blockSize, blockBytes } = QUANT_FORMATS[type];
    if (cols % blockSize !== 0) throw new RangeError(`${type}: ${cols} columns are not a whole number of ${blockSize}-element blocks`);
    if (dst.length < ((rows * cols) / blockSize) * blockBytes) throw new RangeError(`quantize: ${dst.length} output bytes for ${rows} × ${cols} ${type}`);
  }

  /** Quantize `total` source elements in slices of `slice` (a multiple of the block size,
   * ≤ SLICE_ELEMS), double-buffered: `fill(e, n, into)` writes elements [e, e + n) into
   * the view `into` of a slice buffer while the workers quantize the previous slice from
   * the other one. */
  private pipeline(type: QuantType, bf16: boolean, total: number, slice: number, dst: Uint8Array,
    fill: (e: number, n: number, into: QuantSource) => void): void {
    const { blockSize, blockBytes, ggmlType } = QUANT_FORMATS[type];
    const slices = Math.ceil(total / slice);
    if (slices === 0) return;
    const heap = new Uint8Array(this.memory.buffer);
    const tmpStride = this.ex.quantizeTmpBytes();
    const sliceElems = (i: number): number => Math.min(slice, total - i * slice);
    const bufferOf = (i: number): SliceBuffer => this.buffers[i & 1]!;
    const fillSlice = (i: number): void => {
      const n = sliceElems(i);
      const at = bufferOf(i).src;
      fill(i * slice, n, bf16 ? new Uint16Array(this.memory.buffer, at, n) : new Float32Array(this.memory.buffer, at, n));
    };
    const copyOut = (i: number): void => {
      const bytes = (sliceElems(i) / blockSize) * blockBytes;
      const from = bufferOf(i).dst;
      dst.set(heap.subarray(from, from + bytes), ((i * slice) / blockSize) * blockBytes);
    };
    fillSlice(0);
    for (let i = 0; i < slices; i++) {
      const blocks = sliceElems(i) / blockSize;
      const buf = bufferOf(i);
      packArgs(this.pool.args, 'QUANTIZE', { type: ggmlType, src: buf.src, bf16: bf16 ? 1 : 0, dst: buf.dst, blocks, tmpBase: this.tmpBase, tmpStride });
      this.pool.start(Cmd.QUANTIZE, 0, Math.min(blocks, this.threads * CHUNKS_PER_THREAD));
      // the other buffer is free: slice i − 1's output leaves it, slice i + 1 enters it
      try {
        if (i > 0) copyOut(i - 1);
        if (i + 1 < slices) fillSlice(i + 1);
      } finally {
        this.pool.join(this.ex);
      }
    }
    copyOut(slices - 1);
  }

  dispose(): void {
    this.pool.dispose();
  }
}

/** A quantizer for `threads` threads: the wasm one, or the TypeScript reference when the
 * wasm build is missing (a checkout without `npm run build`): `deltaserve quantize` and
 * the webgpu backend's Kernels.startQuantizer. */
export async function startQuantizer(threads: number = availableParallelism()): Promise<StartedQuantizer> {
  try {
    return await WasmQuantizer.start(threads);
  } catch (e) {
    if (e instanceof DeltaserveError && e.code === 'bad_config') return startRefQuantizer();
    throw e;
  }
}
