// The wasm backend's matmul family (the middle of WasmKernels, backend.ts): float matmuls
// on packed panels, integer matmuls on repacked quantized weights, grouped matmuls of one
// input (one pool run per memory: matmul-group.ts), matmulAdd, and the choice of quantized
// kernel families with its calibration at weightsLoaded().
import type { ConvSeq, GatedInput, GroupConv, GroupNorm, GroupMatmul, Weight } from '../types.js';
import { groupConvByCall, groupInnerSize, matmulAddByCalls, normedInput } from '../matmul-group.js';
import { groupFits, matmulSplit, runMatmulGroup, stageQuantActs } from './matmul-group.js';
import { Cmd } from './exec.js';
import { packArgs } from './commands.js';
import type { Arena } from './memory.js';
import { calibrateQuantKernels, type CalibrationResult } from './calibrate.js';
import { isQuantType } from '../quant/formats.js';
import { DEFAULT_QUANT_KERNELS, quantFormatId, type QuantKernelChoice } from './quant-layouts.js';
import { isBf16, WasmBackendMemory } from './backend-memory.js';

/** The matmuls of the wasm backend, on WasmBackendMemory's pool and memories. */
export abstract class WasmMatmulBackend extends WasmBackendMemory {
  /** Kernel families of the repacked quantized matmuls (same bits; calibrate.ts picks the
   * fastest at start-up, before any model runs). */
  private quantKernels: QuantKernelChoice = DEFAULT_QUANT_KERNELS;
  /** The calibration's timings and choice (null: not calibrated). */
  calibration: CalibrationResult | null = null;
  /** Time the families of the quantized formats packed so far at weightsLoaded() (set by
   * createWasmKernels: off in tests of tiny memories and with calibrate: false). */
  calibrateOnLoad = false;

  // The row ops a group's norm and matmulAdd's gate and add run on (backend.ts).
  abstract rmsNorm(out: Float32Array, x: Float32Array, w: Weight, m: number, eps: number, zeroCentered: boolean): void;
  abstract mulSilu(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  abstract mulSigmoid(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  abstract add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  abstract causalConvSeqs(out: Float32Array, x: Float32Array, w: Weight, seqs: readonly ConvSeq<Float32Array>[]): void;

  /** Calibrate the kernel families of the quantized formats the loaded weights use (each
   * format once per backend; a BF16 model times none). */
  weightsLoaded(): void {
    if (!this.calibrateOnLoad || this.packedQuant.size === 0) return;
    this.calibration = calibrateQuantKernels(this, this.packedQuant, this.calibration);
    this.packedQuant.clear();
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
   * (its own call, into norm.out); the conv after (its own call). */
  matmulGroup(input: Float32Array, m: number, group: readonly GroupMatmul[], norm?: GroupNorm, conv?: GroupConv): void {
    this.matmulGroupOnly(input, m, group, norm);
    groupConvByCall(this, group, conv);
  }

  private matmulGroupOnly(input: Float32Array, m: number, group: readonly GroupMatmul[], norm?: GroupNorm): void {
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

  /** The gate's product, the matmul, then the add (small row ops besides the matmul). */
  matmulAdd(out: Float32Array, x: Float32Array, w: Weight, m: number, tmp: Float32Array, gate?: GatedInput): void {
    matmulAddByCalls(this, out, x, w, m, tmp, gate);
  }
}
