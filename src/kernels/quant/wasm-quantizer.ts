// The block quantizer in WebAssembly SIMD (assembly/quantize.ts) on all threads: the same
// bytes as the TypeScript reference (quantize-ggml.ts, GGML's algorithms), several times
// faster per thread and run on every core through the wasm kernels' worker pool
// (wasm/pool.ts) on a small memory of its own:
//   [static data | per-thread scratch | 2 × (source slice (f32 or bf16) | output slice)]
// A call walks the tensor in slices of up to SLICE_ELEMS source elements, double-buffered:
// while the workers quantize slice i in one buffer, the main thread copies slice i − 1's
// blocks out of the other and slice i + 1 into it, then joins the quantizing. Blocks are
// independent, so the bytes do not depend on the thread count or the split.
import { availableParallelism } from 'node:os';
import { DeltaserveError } from '../../util/errors.js';
import { QUANT_FORMATS, type QuantType } from './formats.js';
import { OFFLINE_QUANT_TYPES } from './quantize-ggml.js';
import { type QuantSource, type RowQuantizer, refQuantizer } from './row-quantizer.js';
import { compileKernels, instantiate, WA, type KernelExports, type WasmMemory } from '../wasm/module.js';
import { Pool } from '../wasm/pool.js';
import { Cmd } from '../wasm/exec.js';
import { packArgs } from '../wasm/commands.js';

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

export class WasmQuantizer implements RowQuantizer {
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
    const { blockSize, blockBytes, ggmlType } = QUANT_FORMATS[type];
    if (cols % blockSize !== 0) throw new RangeError(`${type}: ${cols} columns are not a whole number of ${blockSize}-element blocks`);
    const total = rows * cols;
    if (src.length < total) throw new RangeError(`quantize: ${src.length} source elements for ${rows} × ${cols}`);
    if (dst.length < (total / blockSize) * blockBytes) throw new RangeError(`quantize: ${dst.length} output bytes for ${rows} × ${cols} ${type}`);
    const bf16 = src instanceof Uint16Array;
    const item = bf16 ? 2 : 4;
    const heap = new Uint8Array(this.memory.buffer);
    const tmpStride = this.ex.quantizeTmpBytes();
    const slices = Math.ceil(total / SLICE_ELEMS);
    if (slices === 0) return;
    const sliceElems = (i: number): number => Math.min(SLICE_ELEMS, total - i * SLICE_ELEMS);
    const bufferOf = (i: number): SliceBuffer => this.buffers[i & 1]!;
    const copyIn = (i: number): void => {
      const e = i * SLICE_ELEMS;
      heap.set(new Uint8Array(src.buffer, src.byteOffset + e * item, sliceElems(i) * item), bufferOf(i).src);
    };
    const copyOut = (i: number): void => {
      const bytes = (sliceElems(i) / blockSize) * blockBytes;
      const from = bufferOf(i).dst;
      dst.set(heap.subarray(from, from + bytes), ((i * SLICE_ELEMS) / blockSize) * blockBytes);
    };
    copyIn(0);
    for (let i = 0; i < slices; i++) {
      const blocks = sliceElems(i) / blockSize;
      const buf = bufferOf(i);
      packArgs(this.pool.args, 'QUANTIZE', { type: ggmlType, src: buf.src, bf16: bf16 ? 1 : 0, dst: buf.dst, blocks, tmpBase: this.tmpBase, tmpStride });
      this.pool.start(Cmd.QUANTIZE, 0, Math.min(blocks, this.threads * CHUNKS_PER_THREAD));
      // the other buffer is free: slice i − 1's output leaves it, slice i + 1 enters it
      try {
        if (i > 0) copyOut(i - 1);
        if (i + 1 < slices) copyIn(i + 1);
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
 * wasm build is missing (`--kernels ref` from a checkout without `npm run build`). */
export async function startQuantizer(threads: number = availableParallelism()): Promise<RowQuantizer & { dispose(): void }> {
  try {
    return await WasmQuantizer.start(threads);
  } catch (e) {
    if (e instanceof DeltaserveError && e.code === 'bad_config') return { ...refQuantizer, dispose: () => {} };
    throw e;
  }
}
