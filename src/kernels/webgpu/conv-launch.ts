// How the batched causal conv (Kernels.causalConvSeqs) is launched on an adapter:
// 'thread', 64-thread workgroups with the tap count a parameter (CAUSAL_CONV_SEQS), or
// 'channels', one-warp workgroups with the taps compiled in and held in registers
// (convChannelsShader, wgsl/gdn.ts). Both give the same bits (test/webgpu-conv-channels.test.ts).
// At decode a GPU folds it into the in_proj matmul instead (convFoldPlan below; no dispatch).
// The choice depends on the adapter only (and the tap count), never on the batch.
import type { ConvSeq } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import type { GpuConvFold, WebGpuKernels } from './backend.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { CONV_CHANNELS_MAX_TAPS } from './wgsl/gdn.js';

export type ConvLaunch = 'thread' | 'channels';

const forced = new WeakMap<WebGpuKernels, ConvLaunch>();

/** The launch on this adapter: 'thread' on CPU emulations (lavapipe: today's kernel, its
 * 64-thread workgroups already fill the cores), 'channels' on GPUs (C / 64 workgroups of
 * two warps each leave SMs idle and a warp one load in flight: docs/kernels.md
 * "GPU memory-access model"). */
export function convLaunch(g: WebGpuKernels): ConvLaunch {
  return forced.get(g) ?? (g.adapter.cpuEmulation ? 'thread' : 'channels');
}

/** The launch that runs `taps` taps: the adapter's, but 'thread' past CONV_CHANNELS_MAX_TAPS. */
export function convLaunchFor(g: WebGpuKernels, taps: number): ConvLaunch {
  return taps <= CONV_CHANNELS_MAX_TAPS ? convLaunch(g) : 'thread';
}

/** Set the launch of `g` (null: the adapter's default). For tests comparing the two and for
 * scripts/gpu-access-model.mjs, which records on lavapipe what a GPU would run. */
export function forceConvLaunch(g: WebGpuKernels, launch: ConvLaunch | null): void {
  if (launch === null) forced.delete(g);
  else forced.set(g, launch);
}

// The conv folded into the in_proj matmul's stores (Kernels.matmulGroup's conv;
// wgsl/conv-fold.ts): on GPUs by default, off on CPU emulations (the separate dispatch costs
// lavapipe little); forced either way by tests and scripts/gpu-batch-record.mjs.
const foldForced = new WeakMap<WebGpuKernels, boolean>();

/** Whether this adapter folds the conv where a call allows it (convFoldPlan). */
export function convFoldOn(g: WebGpuKernels): boolean {
  return foldForced.get(g) ?? !g.adapter.cpuEmulation;
}

/** Set whether `g` folds the conv (null: the adapter's default). */
export function forceConvFold(g: WebGpuKernels, on: boolean | null): void {
  if (on === null) foldForced.delete(g);
  else foldForced.set(g, on);
}

/** The most taps the fold compiles in (the channel launch's bound: a thread's registers). */
export const CONV_FOLD_MAX_TAPS = CONV_CHANNELS_MAX_TAPS;

/** The fold of a matmulGroup's conv into the float matmul writing `x` (the qkv rows [M, C]),
 * or null where the call takes the separate dispatch (same bits either way): a decode —
 * every live sequence one row, no verify scratch — with all windows in one buffer, a float
 * qkv weight of C rows, a device with the bindings (CONV_FOLD_BINDINGS more), and the fold on. Verify (t > 1 rows a sequence, scratch windows) and prefill keep causalConvSeqs:
 * a sequence's later rows need its earlier rows' pre-conv values, held by other threads. */
export function convFoldPlan(g: WebGpuKernels, put: (data: ArrayLike<number>, elem: 'i32') => GpuTensor, m: number, x: GpuTensor, w: GpuWeight,
  conv: { readonly out: GpuTensor; readonly wc: GpuTensor; readonly seqs: readonly ConvSeq<GpuTensor>[] }): GpuConvFold | null {
  if (!convFoldOn(g) || isQuantType(w.dtype) || g.convGroupSegments < 1) return null;
  const c = w.rows;
  const taps = conv.wc.length / c;
  if (!Number.isInteger(taps) || taps < 1 || taps > CONV_FOLD_MAX_TAPS) return null;
  const live = conv.seqs.filter((s) => s.t > 0);
  if (live.length === 0 || live.some((s) => s.t !== 1 || s.scratch !== undefined || s.window.buffer !== live[0]!.window.buffer)) return null;
  // each matmul row's window offset (−1: no sequence owns the row)
  const table = new Int32Array(m).fill(-1);
  for (const s of live) {
    if (s.row < 0 || s.row >= m || table[s.row] !== -1) throw new RangeError(`matmulGroup conv: row ${s.row} of ${m} rows twice or outside`);
    table[s.row] = s.window.offset;
  }
  return { x, out: conv.out, wc: conv.wc, taps, window: live[0]!.window.buffer, table: put(table, 'i32') };
}
