// The block quantizer in WebAssembly SIMD (assembly/quantize.ts) on all threads: the same
// bytes as the TypeScript reference (quantize-ggml.ts, GGML's algorithms), several times
// faster per thread and run on every core through the wasm kernels' worker pool
// (wasm/pool.ts) on a small memory of its own:
//   [static data | per-thread scratch | source slice (f32 or bf16) | output slice]
// A call copies up to SLICE_ELEMS source elements in, splits their blocks into chunks that
// every thread claims, and copies the blocks out; blocks are independent, so the bytes do
// not depend on the thread count or the split.
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
/** 64 MiB: static data, scratch for hundreds of threads and the two slices fit. */
const MAX_PAGES = 1024;
/** Chunks per thread of one run (dynamic claiming evens out a descheduled thread). */
const CHUNKS_PER_THREAD = 8;

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
    private readonly srcBase: number,
    private readonly dstBase: number,
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
    const srcBase = align(tmpBase + n * ex.quantizeTmpBytes(), 64);
    const dstBase = srcBase + SLICE_ELEMS * 4;
    const end = dstBase + Math.ceil(SLICE_ELEMS * OUT_PER_ELEM);
    if (end > MAX_PAGES * PAGE) throw new RangeError(`wasm quantizer: ${n} threads need more than ${MAX_PAGES * PAGE} bytes`);
    memory.grow(Math.ceil(end / PAGE) - memory.buffer.byteLength / PAGE);
    const pool = await Pool.start(n, module, [memory]);
    return new WasmQuantizer(n, memory, ex, pool, tmpBase, srcBase, dstBase);
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
    for (let e = 0; e < total; e += SLICE_ELEMS) {
      const n = Math.min(SLICE_ELEMS, total - e);
      const blocks = n / blockSize;
      heap.set(new Uint8Array(src.buffer, src.byteOffset + e * item, n * item), this.srcBase);
      packArgs(this.pool.args, 'QUANTIZE', {
        type: ggmlType, src: this.srcBase, bf16: bf16 ? 1 : 0, dst: this.dstBase, blocks, tmpBase: this.tmpBase, tmpStride,
      });
      this.pool.run(Cmd.QUANTIZE, 0, this.ex, Math.min(blocks, this.threads * CHUNKS_PER_THREAD));
      dst.set(heap.subarray(this.dstBase, this.dstBase + blocks * blockBytes), (e / blockSize) * blockBytes);
    }
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
