// The wasm backend's memory and tensor management (the base of WasmKernels, backend.ts):
// the pool and memories it runs on, the run() that launches a command on the pool or the
// main thread, float / int allocations, data movement on views, weight allocation and
// in-place packing (8-row panels; quantized repacks), embedding rows and the bandwidth probe.
import { performance } from 'node:perf_hooks';
import type { ReadRange, Weight, WeightDType } from '../types.js';
import { elemBytes, type GroupHost } from './matmul-group.js';
import { Cmd, executeAll } from './exec.js';
import { packArgs } from './commands.js';
import * as cpu from '../cpu-ops.js';
import type { Arena, MemorySet } from './memory.js';
import { Operands } from './operands.js';
import { dotAddIsVnni, type KernelVariant } from './module.js';
import type { Pool } from './pool.js';
import { PROBE_TYPES, type ProbeType } from './calibrate.js';
import { isQuantType, quantRowBytes, type QuantType } from '../quant/formats.js';
import { f16ToF32 } from '../quant/dequant.js';
import { rowPrefix, storedBytes, type WasmLayout } from './layouts.js';
import { WasmQuantizer } from './quantizer.js';
import type { StartedQuantizer } from '../quant/row-quantizer.js';
import { dequantizeStoredRow, repackedBytes, repackedView, repackSpec, repackTmpBytes } from './quant-layouts.js';

/** The wBf16 flag of the vector ops (norms, conv, gates), which read bf16 or f32 weights;
 * the loader widens F16 vectors to f32, so an f16 one here is a caller's error. */
export function isBf16(w: Weight): number {
  if (w.dtype === 'f16') throw new Error(`wasm kernels: an f16 [${w.rows}, ${w.cols}] weight is only a matmul / embedding operand (load vectors as f32)`);
  return w.dtype === 'bf16' ? 1 : 0;
}

/** Rows rounded up to whole 8-row panels (the packed matmul layout, assembly/matmul.ts). */
function panelRows(rows: number): number {
  return Math.ceil(rows / 8) * 8;
}

/** Slot of column c (0..7) inside a packed panel row (assembly/matmul.ts panelSlot; bf16
 * and f16 share the 16-bit order). */
function panelSlot(c: number, bits16: boolean): number {
  return bits16 ? (c < 4 ? 2 * c : 2 * (c - 4) + 1) : c;
}

/** State and memory management of the wasm backend; backend-matmul.ts and backend.ts add
 * the ops. */
export abstract class WasmBackendMemory {
  protected readonly ops: Operands;
  /** The backend as runMatmulGroup sees it. */
  protected readonly groupHost: GroupHost;
  private disposed = false;
  /** Quantized formats packWeight has seen since the last weightsLoaded(). */
  protected readonly packedQuant = new Set<ProbeType>();
  /** Whether packWeight repacks Q8_0 into q8u4 (assembly/q8u4.ts) rather than q8x4: only
   * in the vnni build where V8 lowers its dot-add to AVX-VNNI (u8 × s8 in i32; the layout's
   * w + 128 lies outside i7: exact only there; probed once), unless refused. */
  readonly q8u4: boolean;

  constructor(readonly threads: number, readonly mem: MemorySet, readonly pool: Pool,
    /** Which kernel build runs ('fma': relaxed-SIMD fused multiply-add; 'vnni': fma with i32
     * dot-adds; 'plain'). */
    readonly variant: KernelVariant = 'plain',
    /** Repack Q8_0 into q8u4 where it is exact (default true; false: q8x4 everywhere). */
    q8u4Wanted = true) {
    this.ops = new Operands(mem);
    this.q8u4 = q8u4Wanted && variant === 'vnni' && dotAddIsVnni();
    this.groupHost = { threads, args: pool.args, run: (cmd, arena, parallel, chunks) => this.run(cmd, arena, parallel, chunks) };
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pool.dispose();
  }

  /** Run a command as `chunks` chunks: on the pool when `parallel` (and threads > 1),
   * else all on the main thread. Results are identical either way. */
  protected run(cmd: number, arena: Arena, parallel: boolean, chunks: number): void {
    if (this.disposed) throw new Error('wasm kernels used after dispose()');
    if (parallel && this.threads > 1) this.pool.run(cmd, arena.index, arena.exports, chunks);
    else executeAll(arena.exports, cmd, this.pool.args, 1);
  }

  alloc(n: number): Float32Array {
    const { arena, ptr } = this.mem.alloc(n * 4);
    return arena.f32(ptr, n);
  }

  allocI32(n: number): Int32Array {
    const { arena, ptr } = this.mem.alloc(n * 4);
    return arena.i32(ptr, n);
  }

  // Data movement on the views themselves (cpu-ops.ts, shared with the ref backend).
  view(t: Float32Array, offset: number, length: number): Float32Array {
    return cpu.view(t, offset, length);
  }

  copyRows(dst: Float32Array, dstOffset: number, dstStride: number, src: Float32Array, srcOffset: number, srcStride: number,
    rows: number, width: number): void {
    cpu.copyRows(dst, dstOffset, dstStride, src, srcOffset, srcStride, rows, width);
  }

  gatherRows(dst: Float32Array, src: Float32Array, rows: ArrayLike<number>, width: number): void {
    cpu.gatherRows(dst, src, rows, width);
  }

  fill(dst: Float32Array, offset: number, length: number, value: number): void {
    cpu.fill(dst, offset, length, value);
  }

  fillRuns(dst: Float32Array, runs: readonly { readonly offset: number; readonly length: number }[], value: number): void {
    cpu.fillRuns(dst, runs, value);
  }

  write(dst: Float32Array, offset: number, src: ArrayLike<number>): void {
    cpu.write(dst, offset, src);
  }

  readBack(ranges: readonly ReadRange<Float32Array>[]): Float32Array[] {
    return cpu.readBack(ranges);
  }

  stage(ranges: readonly ReadRange<Float32Array>[]): { readonly data: Float32Array[] } {
    return cpu.stage(ranges);
  }

  allocWeight(dtype: WeightDType, rows: number, cols: number): { weight: Weight; bytes: Uint8Array } {
    if (isQuantType(dtype)) { // GGML blocks, row-major; Q8_0 / Q4_K / Q6_K with room to repack in place
      const size = rows * quantRowBytes(dtype, cols);
      const room = Math.max(size, repackedBytes(dtype, rows, cols));
      const { arena, ptr } = this.mem.alloc(room);
      return { weight: { dtype, rows, cols, data: arena.u8(ptr, room) }, bytes: arena.u8(ptr, size) };
    }
    const n = rows * cols;
    const size = elemBytes(dtype);
    // Room for whole 8-row panels (zero rows), so packWeight can repack in place.
    const { arena, ptr } = this.mem.alloc(panelRows(rows) * cols * size);
    const buf = arena.buffer();
    const data = dtype === 'f32' ? new Float32Array(buf, ptr, n) : new Uint16Array(buf, ptr, n);
    return { weight: { dtype, rows, cols, data }, bytes: new Uint8Array(buf, ptr, n * size) };
  }

  quantWeightBytes(dtype: WeightDType, rows: number, cols: number): number {
    return repackedBytes(dtype, rows, cols) || rows * quantRowBytes(dtype as QuantType, cols);
  }

  /** The SIMD block quantizer on this backend's thread count, with workers and a memory of
   * its own (the kernels' memories hold only the model). */
  startQuantizer(): Promise<StartedQuantizer> {
    return WasmQuantizer.start(this.threads);
  }

  packWeight(w: Weight): Weight {
    if (w.layout !== undefined) return w;
    if (isQuantType(w.dtype)) {
      if ((PROBE_TYPES as readonly string[]).includes(w.dtype)) this.packedQuant.add(w.dtype as ProbeType);
      let src = w;
      const roomy = w.data.byteLength >= repackedBytes(w.dtype, w.rows, w.cols);
      if (!this.mem.locate(w.data) || !roomy) {
        const copy = this.allocWeight(w.dtype, w.rows, w.cols);
        copy.bytes.set(new Uint8Array(w.data.buffer, w.data.byteOffset, copy.bytes.byteLength));
        src = copy.weight;
      }
      return this.repack(src);
    }
    let src = w;
    if (!this.mem.locate(w.data)) { // not ours (e.g. the JS heap): copy into wasm memory first
      const copy = this.allocWeight(w.dtype, w.rows, w.cols);
      copy.bytes.set(new Uint8Array(w.data.buffer, w.data.byteOffset, w.rows * w.cols * w.data.BYTES_PER_ELEMENT));
      src = copy.weight;
    }
    const size = elemBytes(src.dtype);
    const n = panelRows(src.rows) * src.cols;
    const c = this.ops.begin(this.ops.target(src.data), 8 * src.cols * size);
    c.arena.exports.packPanels(src.data.byteOffset, n / (8 * src.cols), src.cols, size, c.tmp.base);
    c.end();
    const buf = src.data.buffer;
    const data = src.dtype === 'f32' ? new Float32Array(buf, src.data.byteOffset, n) : new Uint16Array(buf, src.data.byteOffset, n);
    return { dtype: src.dtype, rows: src.rows, cols: src.cols, data, layout: 'panel8' satisfies WasmLayout };
  }

  weightRows(w: Weight, n: number): Weight {
    return rowPrefix(w, n);
  }

  storedWeightBytes(w: Weight): number {
    return storedBytes(w);
  }

  /** A quantized weight in its repacked layout (quant-layouts.ts), in place: allocWeight
   * reserved the room. Types without one stay as GGML blocks. */
  private repack(w: Weight): Weight {
    const spec = repackSpec(w.dtype, this.q8u4);
    if (!spec) return w;
    const c = this.ops.begin(this.ops.target(w.data), repackTmpBytes(spec, w.cols));
    spec.repack(c.arena.exports, w.data.byteOffset, w.rows, w.cols, c.tmp.base);
    c.end();
    return repackedView(w, spec);
  }

  /** Give back the allocation `view` starts (zeroed, to the arena's free list: memory.ts);
   * no-op for memory not allocated here. `view` must not be used afterwards. */
  releaseLast(view: ArrayBufferView): void {
    this.mem.locate(view)?.release(view.byteOffset);
  }

  embed(out: Float32Array, table: Weight, ids: ArrayLike<number>): void {
    const d = table.cols;
    if (out.length < ids.length * d) throw new RangeError('embed: out too small');
    if (isQuantType(table.dtype)) {
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        if (!(id >= 0 && id < table.rows)) throw new RangeError(`embed: token id ${id} out of range [0, ${table.rows})`);
        dequantizeStoredRow(table, id, out.subarray(i * d, (i + 1) * d));
      }
      return;
    }
    const bits = new Uint32Array(out.buffer, out.byteOffset, ids.length * d);
    const packed = table.layout === 'panel8';
    const bf16 = table.dtype === 'bf16';
    const f16 = table.dtype === 'f16';
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!(id >= 0 && id < table.rows)) throw new RangeError(`embed: token id ${id} out of range [0, ${table.rows})`);
      // Element (id, p) sits at base + p·stride: row-major (stride 1) or inside panel id/8.
      const base = packed ? (id >> 3) * 8 * d + panelSlot(id & 7, bf16 || f16) : id * d;
      const stride = packed ? 8 : 1;
      const o = i * d;
      if (f16) {
        const src = table.data as Uint16Array;
        for (let p = 0; p < d; p++) out[o + p] = f16ToF32(src[base + p * stride]!);
      } else if (!bf16) {
        const src = table.data as Float32Array;
        for (let p = 0; p < d; p++) out[o + p] = src[base + p * stride]!;
      } else {
        const src = table.data as Uint16Array;
        for (let p = 0; p < d; p++) bits[o + p] = src[base + p * stride]! << 16;
      }
    }
  }

  /** Streaming-read bandwidth (GB/s) over `bytes` on all threads: best of `repeat`. The
   * buffer is borrowed from the first memory with room (weights may fill memory 0), else
   * a new memory; never shrunk, so it cannot end up cache-resident. */
  probeBandwidth(bytes: number, repeat = 5): number {
    const chunks = 4 * this.threads;
    const per = Math.max(4096, Math.floor(bytes / chunks / 4096) * 4096);
    let found: { arena: Arena; ptr: number } | null = null;
    for (const a of this.mem.arenas) {
      const p = a.reserve(per * chunks);
      if (p >= 0) {
        found = { arena: a, ptr: p };
        break;
      }
    }
    const { arena, ptr } = found ?? this.mem.alloc(per * chunks);
    const total = per * chunks;
    try {
      arena.u8(ptr, total).fill(1); // touch every page (untouched pages read as the shared zero page)
      let best = Infinity;
      for (let r = 0; r <= repeat; r++) {
        packArgs(this.pool.args, 'PROBE', { base: ptr, bytes: per, chunks });
        const t0 = performance.now();
        if (this.threads > 1) this.pool.run(Cmd.PROBE, arena.index, arena.exports, chunks);
        else executeAll(arena.exports, Cmd.PROBE, this.pool.args, chunks);
        const dt = performance.now() - t0;
        if (r > 0) best = Math.min(best, dt); // r = 0 warms up
      }
      return total / (best * 1e6);
    } finally {
      arena.release(ptr); // zeroed: alloc() hands out zeroed memory
    }
  }
}
