// The wasm Kernels backend: every hot op on AssemblyScript SIMD kernels (build/kernels.wasm),
// the big ones (matmul, attention, Gated DeltaNet, conv) split over a worker pool by output
// elements; small row-wise ops on the main thread. Same contracts as ../types.ts and the
// ref twin; every output element has a fixed reduction order (batch- and split-invariant).
import { performance } from 'node:perf_hooks';
import { HOST_LIMITS } from '../types.js';
import type { AttentionDims, AttentionInputs, BatchSeq, GatedInput, GroupNorm, StepBatch, ConvSeq, ExpertMats, GdnDims, GdnGating, GdnSeq, GroupMatmul, Kernels, KvLayerView, MoeScratch, ReadRange, RopeTable, SampleResult, SampleRow, Weight,
  WeightDType } from '../types.js';
import { groupInnerSize, matmulAddByCalls, normedInput } from '../matmul-group.js';
import { elemBytes, groupFits, matmulSplit, runMatmulGroup, stageQuantActs, type GroupHost } from './matmul-group.js';
import { Cmd, executeAll } from './exec.js';
import { packArgs } from './commands.js';
import * as cpu from '../cpu-ops.js';
import type { Arena, MemorySet } from './memory.js';
import { Operands } from './operands.js';
import { packSampleRows, readSampleResults } from './sample-desc.js';
import { convSeqsDesc, gdnSeqsDesc } from './seqs-desc.js';
import { gdnGatedSeqsByCalls } from '../seqs-by-calls.js';
import { dotAddIsVnni, type KernelVariant } from './module.js';
import type { Pool } from './pool.js';
import { calibrateQuantKernels, type CalibrationResult, PROBE_TYPES, type ProbeType } from './calibrate.js';
import { isQuantType, quantRowBytes, type QuantType } from '../quant/formats.js';
import { f16ToF32 } from '../quant/dequant.js';
import { rowPrefix, storedBytes, type WasmLayout } from './layouts.js';
import { attentionBlocking } from './attention-blocking.js';
import { attentionByCalls, attentionInputsByCalls, kvWriteByCalls, ropeByCalls, stepBatchOnHost } from '../batch-by-calls.js';
import { WasmQuantizer } from './quantizer.js';
import type { StartedQuantizer } from '../quant/row-quantizer.js';
import { DEFAULT_QUANT_KERNELS, dequantizeStoredRow, quantFormatId, repackedBytes, repackedView, repackSpec, repackTmpBytes, type QuantKernelChoice } from './quant-layouts.js';

// Work below these sizes (~10–20 µs on one thread) runs on the main thread alone: a pool
// launch costs a few µs and, on a busy machine, far more (matmuls: matmul-group.ts).
const PAR_ATTN = 1 << 16; // units · keys · hd
const PAR_GDN = 1 << 16; // T · HV · dk · dv
// T · C: one decode token of the qwen3.5-0.8b shape (C = 6144) already gains on the pool
// (its window and taps come from memory: Intel Xeon, 0.82 → 0.59 ms per decode step)
const PAR_CONV = 1 << 12;
const PAR_ROWS = 1 << 15; // elements of an rmsNorm (prefill-sized: pool)
// a·silu(b) / a·sigmoid(b) and gated norms cost ~2 ns per element (an exp each): on the
// Intel Xeon (2 vCPUs) the pool halves them from 8K elements up (8 streams' or a 4-token
// verify's rows), where rmsNorm still loses to the launch
const PAR_EXP_ROWS = 1 << 13;

/** The wBf16 flag of the vector ops (norms, conv, gates), which read bf16 or f32 weights;
 * the loader widens F16 vectors to f32, so an f16 one here is a caller's error. */
function isBf16(w: Weight): number {
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

export class WasmKernels implements Kernels {
  readonly name = 'wasm';
  private readonly ops: Operands;
  /** The backend as runMatmulGroup sees it. */
  private readonly groupHost: GroupHost;
  private disposed = false;
  /** Kernel families of the repacked quantized matmuls (same bits; calibrate.ts picks the
   * fastest at start-up, before any model runs). */
  private quantKernels: QuantKernelChoice = DEFAULT_QUANT_KERNELS;
  /** The calibration's timings and choice (null: not calibrated). */
  calibration: CalibrationResult | null = null;
  /** Time the families of the quantized formats packed so far at weightsLoaded() (set by
   * createWasmKernels: off in tests of tiny memories and with calibrate: false). */
  calibrateOnLoad = false;
  /** Quantized formats packWeight has seen since the last weightsLoaded(). */
  private readonly packedQuant = new Set<ProbeType>();
  /** Whether packWeight repacks Q8_0 into q8u4 (assembly/q8u4.ts) rather than q8x4: only
   * in the vnni build where V8 lowers its dot-add to AVX-VNNI (u8 × s8 in i32; the layout's
   * w + 128 lies outside i7: exact only there; probed once), unless refused. */
  readonly q8u4: boolean;

  readonly limits = HOST_LIMITS;

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
  private run(cmd: number, arena: Arena, parallel: boolean, chunks: number): void {
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

  write(dst: Float32Array, offset: number, src: ArrayLike<number>): void {
    cpu.write(dst, offset, src);
  }

  readBack(ranges: readonly ReadRange<Float32Array>[]): Float32Array[] {
    return cpu.readBack(ranges);
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

  /** Calibrate the kernel families of the quantized formats the loaded weights use (each
   * format once per backend; a BF16 model times none). */
  weightsLoaded(): void {
    if (!this.calibrateOnLoad || this.packedQuant.size === 0) return;
    this.calibration = calibrateQuantKernels(this, this.packedQuant, this.calibration);
    this.packedQuant.clear();
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

  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number): void {
    if (m <= 0) return;
    if (isQuantType(w.dtype)) return this.matmulQuant(out, x, w, m);
    if (w.layout !== 'panel8') throw new Error(`wasm matmul: weight [${w.rows}, ${w.cols}] is not packed (call packWeight once after loading it)`);
    const n = w.rows;
    const k = w.cols;
    const arena = this.ops.target(w.data, x, out);
    const f16 = w.dtype === 'f16';
    // per-thread scratch: prescaled rows (f16) and tiles widened to f32 (assembly/matmul.ts)
    const c = this.ops.begin(arena, m > 1 || f16 ? arena.exports.panelTmpBytes(k) : 0, this.threads);
    const args = { out: c.out(out, m * n), x: c.in(x, m * k), w: c.weight(w), m, n, k, tmpBase: c.tmp.base, tmpStride: c.tmp.stride };
    if (f16) packArgs(this.pool.args, 'MATMUL_F16', args);
    else packArgs(this.pool.args, 'MATMUL', { ...args, bf16: isBf16(w) });
    const { chunks } = matmulSplit(w, this.threads, m); // chunks are claimed dynamically
    this.run(f16 ? Cmd.MATMUL_F16 : Cmd.MATMUL, c.arena, chunks >= 2, chunks);
    c.end();
  }

  /** Several matmuls of one input x [M, K] (Kernels.matmulGroup): the weights of each
   * arena as one pool run (matmul-group.ts; the same bits as separate calls), a weight
   * alone in its arena (or outside wasm memory) as a plain matmul call. A norm runs first
   * (its own call, into norm.out). */
  matmulGroup(input: Float32Array, m: number, group: readonly GroupMatmul[], norm?: GroupNorm): void {
    const k = groupInnerSize(group, m);
    if (m === 0 || group.length === 0) return;
    const x = normedInput(this, input, m, norm);
    if (group.length === 1 || !groupFits(group, this.threads, m)) {
      for (const g of group) this.matmul(g.out, x, g.w, m);
      return;
    }
    const arena = this.mem.locate(group[0]!.w.data);
    if (arena && group.every((g) => this.mem.locate(g.w.data) === arena)) { // the usual case: one memory
      runMatmulGroup(this.groupHost, this.quantKernels, this.ops, arena, x, m, k, group);
      return;
    }
    const byArena = new Map<Arena, GroupMatmul[]>();
    for (const g of group) {
      const a = this.mem.locate(g.w.data);
      if (!a) this.matmul(g.out, x, g.w, m);
      else {
        const part = byArena.get(a);
        if (part) part.push(g);
        else byArena.set(a, [g]);
      }
    }
    for (const [a, part] of byArena) {
      if (part.length === 1) this.matmul(part[0]!.out, x, part[0]!.w, m);
      else runMatmulGroup(this.groupHost, this.quantKernels, this.ops, a, x, m, k, part);
    }
  }

  /** Give back the memory of `view` if it is its arena's newest allocation (else no-op).
   * The view is zeroed first: alloc() hands out zeroed memory (memory.ts), and released
   * bytes are handed out again. `view` must not be used afterwards. */
  releaseLast(view: ArrayBufferView): void {
    const arena = this.mem.locate(view);
    if (!arena) return;
    new Uint8Array(view.buffer, view.byteOffset, view.byteLength).fill(0);
    arena.release(view.byteOffset, view.byteLength);
  }

  /** The kernel families the quantized matmuls use from now on (every family computes the
   * same bits, so switching never changes a result). */
  setQuantKernels(choice: QuantKernelChoice): void {
    this.quantKernels = choice;
  }

  get quantKernelChoice(): QuantKernelChoice {
    return this.quantKernels;
  }

  /** Integer matmul (assembly/qmatmul.ts): x quantized to int8 blocks of 32 on this thread
   * (plus the layout's interleaved copies: stageQuantActs), then columns split over the
   * pool in groups of 4. */
  private matmulQuant(out: Float32Array, x: Float32Array, w: Weight, m: number): void {
    const n = w.rows;
    const k = w.cols;
    const arena = this.ops.target(w.data, x, out);
    const c = this.ops.begin(arena, arena.exports.qmatmulTmpBytes(k), this.threads);
    const { q16, d, s, q8For } = stageQuantActs(c.arena, c.in(x, m * k), m, k, [w]);
    packArgs(this.pool.args, 'QMATMUL', {
      out: c.out(out, m * n), q16, d, s, w: c.weight(w), m, n, k, type: quantFormatId(w, m, this.quantKernels), tmpBase: c.tmp.base, tmpStride: c.tmp.stride, q8: q8For(w),
    });
    const { chunks } = matmulSplit(w, this.threads, m);
    this.run(Cmd.QMATMUL, c.arena, chunks >= 2, chunks);
    c.end();
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

  rmsNorm(out: Float32Array, x: Float32Array, w: Weight, m: number, eps: number, zeroCentered: boolean): void {
    if (m <= 0) return;
    const d = w.cols;
    const c = this.ops.begin(this.ops.target(x, out));
    const xp = c.in(x, m * d);
    const wp = c.weight(w);
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'RMS_NORM', { out: op, x: xp, w: wp, wBf16: isBf16(w), m, d, eps, zeroCentered: zeroCentered ? 1 : 0 });
    this.run(Cmd.RMS_NORM, c.arena, m > 1 && m * d >= PAR_ROWS, Math.min(m, 4 * this.threads));
    c.end();
  }

  gatedRmsNorm(out: Float32Array, o: Float32Array, z: Float32Array, w: Weight, m: number, eps: number): void {
    if (m <= 0) return;
    const d = w.cols;
    const c = this.ops.begin(this.ops.target(o, out));
    const opIn = c.in(o, m * d);
    const zp = c.in(z, m * d);
    const wp = c.weight(w);
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'GATED_RMS_NORM', { out: op, o: opIn, z: zp, w: wp, wBf16: isBf16(w), m, d, eps });
    this.run(Cmd.GATED_RMS_NORM, c.arena, m > 1 && m * d >= PAR_EXP_ROWS, Math.min(m, 4 * this.threads));
    c.end();
  }

  rope(x: Float32Array, positions: ArrayLike<number>, t: number, heads: number, headDim: number,
    table: RopeTable, stride: number): void {
    if (t <= 0) return;
    const c = this.ops.begin(this.ops.target(x));
    const xp = c.inout(x, (t - 1) * stride + heads * headDim);
    const pp = c.ints(positions, t);
    const fp = c.f64(table.invFreq);
    c.arena.exports.rope(xp, pp, t, heads, headDim, fp, table.invFreq.length, table.scale, stride);
    c.end();
  }

  causalConv(out: Float32Array, x: Float32Array, window: Float32Array, w: Weight, t: number,
    scratch?: Float32Array): void {
    if (t <= 0) return;
    const ch = w.rows;
    const kw = w.cols;
    const hist = (kw - 1) * ch;
    const c = this.ops.begin(this.ops.target(x, window, out));
    packArgs(this.pool.args, 'CONV', {
      out: c.out(out, t * ch), x: c.in(x, t * ch), window: scratch ? c.in(window, hist) : c.inout(window, hist), w: c.weight(w),
      wBf16: isBf16(w), t, c: ch, kw, scratch: scratch ? c.out(scratch, t * hist) : 0,
    });
    this.run(Cmd.CONV, c.arena, t * ch >= PAR_CONV, Math.min(4 * this.threads, Math.ceil(ch / 16)));
    c.end();
  }

  causalConvSeqs(out: Float32Array, x: Float32Array, w: Weight, seqs: readonly ConvSeq<Float32Array>[]): void {
    const live = seqs.filter((s) => s.t > 0);
    if (live.length === 0) return;
    const ch = w.rows;
    const c = this.ops.begin(this.ops.target(x, live[0]!.window, out));
    const { desc, rows } = convSeqsDesc(c, out, x, ch, (w.cols - 1) * ch, live);
    packArgs(this.pool.args, 'CONV_SEQS', {
      desc: c.ints(desc, desc.length), count: live.length, w: c.weight(w), wBf16: isBf16(w), c: ch, kw: w.cols,
    });
    this.run(Cmd.CONV_SEQS, c.arena, rows * ch >= PAR_CONV, Math.min(4 * this.threads, Math.ceil(ch / 16)));
    c.end();
  }

  gdnGates(g: Float32Array, beta: Float32Array, a: Float32Array, b: Float32Array, aLog: Weight, dtBias: Weight,
    t: number): void {
    if (t <= 0) return;
    const hv = aLog.cols;
    const n = t * hv;
    const c = this.ops.begin(this.ops.target(a, g));
    const ap = c.in(a, n);
    const bp = c.in(b, n);
    const al = c.weight(aLog);
    const db = c.weight(dtBias);
    const gp = c.out(g, n);
    const bt = c.out(beta, n);
    c.arena.exports.gdnGates(gp, bt, ap, bp, al, isBf16(aLog), db, isBf16(dtBias), t, hv);
    c.end();
  }

  gdnRecurrent(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, state: Float32Array,
    dims: GdnDims, t: number, scratch?: Float32Array): void {
    if (t <= 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const ss = hv * dk * dv;
    const c = this.ops.begin(this.ops.target(state, qkv), (2 * dk + 2 * dv) * 4, this.threads);
    packArgs(this.pool.args, 'GDN_RECURRENT', {
      out: c.out(out, t * hv * dv), qkv: c.in(qkv, t * (2 * hk * dk + hv * dv)), g: c.in(g, t * hv), beta: c.in(beta, t * hv),
      state: scratch ? c.in(state, ss) : c.inout(state, ss), scratch: scratch ? c.out(scratch, t * ss) : 0,
      t, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride,
    });
    // contiguous runs of heads per chunk: one head per chunk, alternating between threads,
    // measured ~1.9× slower (T = 1, 16 heads of 128×128) than two runs per thread
    this.run(Cmd.GDN_RECURRENT, c.arena, hv > 1 && t * ss >= PAR_GDN, Math.min(hv, 2 * this.threads));
    c.end();
  }

  gdnRecurrentSeqs(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, dims: GdnDims,
    seqs: readonly GdnSeq<Float32Array>[]): void {
    const live = seqs.filter((s) => s.t > 0);
    if (live.length === 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const c = this.ops.begin(this.ops.target(live[0]!.state, qkv), (2 * dk + 2 * dv) * 4, this.threads);
    const { desc, rows } = gdnSeqsDesc(c, out, qkv, g, beta, dims, live);
    const units = live.length * hv;
    packArgs(this.pool.args, 'GDN_RECURRENT_SEQS', {
      desc: c.ints(desc, desc.length), count: live.length, units, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride,
    });
    // contiguous runs of (sequence, head) units per chunk, as gdnRecurrent's heads
    this.run(Cmd.GDN_RECURRENT_SEQS, c.arena, units > 1 && rows * hv * dk * dv >= PAR_GDN, Math.min(units, 2 * this.threads));
    c.end();
  }

  /** The plain form (gates, recurrence, norm as three calls). */
  gdnRecurrentGatedSeqs(out: Float32Array, qkv: Float32Array, gating: GdnGating<Float32Array>, dims: GdnDims, seqs: readonly GdnSeq<Float32Array>[]): void {
    gdnGatedSeqsByCalls(this, out, qkv, gating, dims, seqs);
  }

  gdnChunked(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, state: Float32Array,
    dims: GdnDims, t: number, pos0 = 0): void {
    if (t <= 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const ss = hv * dk * dv;
    const arena = this.ops.target(state, qkv);
    const c = this.ops.begin(arena, arena.exports.chunkedTmpBytes(dk, dv), this.threads);
    packArgs(this.pool.args, 'GDN_CHUNKED', {
      out: c.out(out, t * hv * dv), qkv: c.in(qkv, t * (2 * hk * dk + hv * dv)), g: c.in(g, t * hv), beta: c.in(beta, t * hv),
      state: c.inout(state, ss), t, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride, pos0,
    });
    this.run(Cmd.GDN_CHUNKED, c.arena, hv > 1 && t * ss >= PAR_GDN, hv);
    c.end();
  }

  kvWrite(kv: KvLayerView, pageTable: ArrayLike<number>, start: number, k: Float32Array, v: Float32Array, t: number,
    kvDim: number): void {
    const ps = kv.pageSize;
    for (let i = 0; i < t; i++) {
      const pos = start + i;
      const row = pageTable[Math.floor(pos / ps)]! * ps + (pos % ps);
      kv.k.set(k.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
      kv.v.set(v.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
    }
  }

  attention(out: Float32Array, q: Float32Array, qStride: number, kv: KvLayerView, pageTable: ArrayLike<number>,
    start: number, t: number, dims: AttentionDims): void {
    if (t <= 0) return;
    const { numHeads: nH, numKvHeads: nKV, headDim: hd } = dims;
    const n = start + t;
    const { per, qb } = attentionBlocking(t, n, nH, nKV, this.threads);
    const units = Math.ceil(t / qb) * (nH / per);
    const arena = this.ops.target(kv.k, q);
    const c = this.ops.begin(arena, arena.exports.attentionTmpBytes(qb * per, n), this.threads);
    packArgs(this.pool.args, 'ATTENTION', {
      out: c.out(out, t * nH * hd), q: c.in(q, (t - 1) * qStride + nH * hd), qStride, kc: c.in(kv.k, kv.k.length),
      vc: c.in(kv.v, kv.v.length), pageTable: c.ints(pageTable, Math.floor((n - 1) / kv.pageSize) + 1), pageSize: kv.pageSize,
      start, nH, nKV, hd, units, tmpBase: c.tmp.base, tmpStride: c.tmp.stride, per, qb, t,
    });
    this.run(Cmd.ATTENTION, c.arena, units > 1 && t * nH * n * hd >= PAR_ATTN, Math.min(units, 16 * this.threads));
    c.end();
  }

  /** The gate's product, the matmul, then the add (small row ops besides the matmul). */
  matmulAdd(out: Float32Array, x: Float32Array, w: Weight, m: number, tmp: Float32Array, gate?: GatedInput): void {
    matmulAddByCalls(this, out, x, w, m, tmp, gate);
  }

  /** The batched calls run per sequence (each call already splits over the pool). */
  stepBatch(seqs: readonly BatchSeq[], rope: RopeTable | null): StepBatch {
    return stepBatchOnHost(seqs, rope);
  }
  ropeBatch(x: Float32Array, batch: StepBatch, heads: number, headDim: number, stride: number): void {
    ropeByCalls(this, x, batch, heads, headDim, stride);
  }
  kvWriteBatch(kv: readonly KvLayerView[], batch: StepBatch, k: Float32Array, v: Float32Array, kvDim: number): void {
    kvWriteByCalls(this, kv, batch, k, v, kvDim);
  }
  attentionBatch(out: Float32Array, q: Float32Array, qStride: number, kv: readonly KvLayerView[], batch: StepBatch, dims: AttentionDims): void {
    attentionByCalls(this, out, q, qStride, kv, batch, dims);
  }
  attentionInputs(a: AttentionInputs, batch: StepBatch, dims: AttentionDims): void {
    attentionInputsByCalls(this, a, batch, dims);
  }

  moeRoute(ids: Int32Array, weights: Float32Array, logits: Float32Array, m: number, e: number, topK: number,
    renormalize: boolean): void {
    if (m <= 0) return;
    const c = this.ops.begin(this.ops.target(logits), e * 9);
    const lp = c.in(logits, m * e);
    const ip = c.out(ids, m * topK);
    const wp = c.out(weights, m * topK);
    c.arena.exports.moeRoute(ip, wp, lp, m, e, topK, renormalize ? 1 : 0, c.tmp.base);
    c.end();
  }

  argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride = n): void {
    if (m <= 0) return;
    if (n <= 0) throw new RangeError('argmax: empty rows');
    const c = this.ops.begin(this.ops.target(x));
    const xp = c.in(x, (m - 1) * stride + n);
    const op = c.out(out, m);
    c.arena.exports.argmax(op, xp, m, n, stride);
    c.end();
  }

  sample(rows: readonly SampleRow[], results: readonly SampleResult[]): void {
    const m = rows.length;
    if (m === 0) return;
    const maxN = rows.reduce((x, r) => Math.max(x, r.n), 0);
    const arena = this.ops.target(rows[0]!.logits);
    const c = this.ops.begin(arena, arena.exports.sampleTmpBytes(maxN), this.threads);
    const desc = packSampleRows(c, rows);
    packArgs(this.pool.args, 'SAMPLE', { desc: desc.ptr, rows: m, tmpBase: c.tmp.base, tmpStride: c.tmp.stride });
    this.run(Cmd.SAMPLE, c.arena, m > 1, m);
    readSampleResults(c.arena, desc, rows, results);
    c.end();
  }

  moeExperts(out: Float32Array, x: Float32Array, ids: Int32Array, weights: Float32Array, m: number, topK: number,
    experts: readonly ExpertMats[], scratch: MoeScratch): void {
    cpu.moeExperts(this, out, x, ids, weights, m, topK, experts, scratch);
  }

  addSigmoidScaled(out: Float32Array, y: Float32Array, g: Float32Array, m: number, d: number): void {
    cpu.addSigmoidScaled(out, y, g, m, d);
  }

  mulSilu(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 0);
  }

  mulSigmoid(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 1);
  }

  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 2);
  }

  private elementwise(out: Float32Array, a: Float32Array, b: Float32Array, n: number, op: number): void {
    if (n <= 0) return;
    const c = this.ops.begin(this.ops.target(out, a));
    const ap = c.in(a, n);
    const bp = c.in(b, n);
    const o = c.out(out, n);
    if (op === 2) c.arena.exports.add(o, ap, bp, n);
    else {
      packArgs(this.pool.args, 'MUL_ACT', { out: o, a: ap, b: bp, n, sigmoid: op === 1 ? 1 : 0 });
      this.run(Cmd.MUL_ACT, c.arena, n >= PAR_EXP_ROWS, 4 * this.threads);
    }
    c.end();
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
      arena.u8(ptr, total).fill(0); // alloc() hands out zeroed memory: restore before reuse
      arena.release(ptr, total);
    }
  }
}
