// How the batched causal conv (Kernels.causalConvSeqs) is launched on an adapter:
// 'thread', 64-thread workgroups with the tap count a parameter (CAUSAL_CONV_SEQS), or
// 'channels', one-warp workgroups with the taps compiled in and held in registers
// (convChannelsShader, wgsl/gdn.ts). Both give the same bits (test/webgpu-conv-channels.test.ts).
// At decode and verify a GPU folds it into the in_proj matmul instead (convFoldPlan below; no dispatch).
// The choice is the backend's convLaunch (launches.ts: by adapter, never by batch) and the
// tap count; the fold is its convFold.
import type { ConvSeq } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import type { GpuConvFold, WebGpuKernels } from './backend.js';
import type { ConvLaunch } from './launches.js';
import type { GpuTensor } from './tensor.js';
import type { GpuWeight } from './weights.js';
import { CONV_CHANNELS_MAX_TAPS } from './wgsl/gdn.js';
import { CONV_STEP_WORDS } from './wgsl/conv-fold.js';
import { floatChunkElems, type FloatDType } from './wgsl/float-chunks.js';
import { ACTS_FOLD_ROWS, ACTS_TILE, CONV_STEPS_TILE } from './wgsl/qmatmul-acts.js';

/** The launch that runs `taps` taps: the adapter's, but 'thread' past CONV_CHANNELS_MAX_TAPS. */
export function convLaunchFor(g: WebGpuKernels, taps: number): ConvLaunch {
  return taps <= CONV_CHANNELS_MAX_TAPS ? g.convLaunch : 'thread';
}

/** The most taps the fold compiles in (the channel launch's bound: a thread's registers). */
export const CONV_FOLD_MAX_TAPS = CONV_CHANNELS_MAX_TAPS;

/** The most rows a steps fold takes (a verify of k + 1 ≤ 5 rows, or a few sequences'):
 * within one tile of the 8-column kernel (floatColumnsTile: 16 rows on a GPU; a CPU
 * adapter's 4-row tiles fold up to 4). */
export const CONV_FOLD_MAX_ROWS = 8;

/** The fold of a matmulGroup's conv into the float matmul writing `x` (the qkv rows [M, C]),
 * or null where the call takes the separate dispatch (same bits either way): all windows in
 * one buffer, a float qkv weight of C rows, a device with the bindings, and the fold on; then
 * a decode — every live sequence one row, no verify scratch — folds into either float launch,
 * and otherwise (a verify: t ≥ 1 rows a sequence, scratch windows in one buffer) the steps
 * variant folds into the 8-column launch at 2 ≤ M ≤ CONV_FOLD_MAX_ROWS (one tile: the thread
 * of a sequence's first row reads its other rows' stores; wgsl/conv-fold.ts convFoldSteps).
 * A prompt of ≤ 8 rows folds the same way; longer ones keep causalConvSeqs. A quantized qkv
 * weight folds where matmulGroup runs the activation-quantizing kernels (foldQuantActs,
 * M ≤ ACTS_FOLD_ROWS; wgsl/qmatmul-acts.ts actsStore): a decode as above, a verify on the
 * kernel's ACTS_TILE-row tiles where each sequence lies in one (rows 0–3 or 4–7), else on one
 * tile of CONV_STEPS_TILE rows (`tile`). */
export function convFoldPlan(g: WebGpuKernels, put: (data: ArrayLike<number>, elem: 'i32') => GpuTensor, m: number, x: GpuTensor, w: GpuWeight,
  conv: { readonly out: GpuTensor; readonly wc: GpuTensor; readonly seqs: readonly ConvSeq<GpuTensor>[] }): GpuConvFold | null {
  const quant = isQuantType(w.dtype);
  // a quantized qkv folds into the activation-quantizing kernels only (M ≤ ACTS_FOLD_ROWS)
  if (!g.convFold || (quant && !(g.foldQuantActs && m <= ACTS_FOLD_ROWS))) return null;
  const c = w.rows;
  const taps = conv.wc.length / c;
  if (!Number.isInteger(taps) || taps < 1 || taps > CONV_FOLD_MAX_TAPS) return null;
  const live = conv.seqs.filter((s) => s.t > 0);
  if (live.length === 0 || live.some((s) => s.window.buffer !== live[0]!.window.buffer)) return null;
  for (const s of live) {
    if (s.row < 0 || s.row + s.t > m) throw new RangeError(`matmulGroup conv: rows ${s.row}..${s.row + s.t} outside ${m} rows`);
  }
  const window = live[0]!.window.buffer;
  if (live.every((s) => s.t === 1 && s.scratch === undefined)) {
    if (g.convGroupSegments < 1) return null;
    // each matmul row's window offset (−1: no sequence owns the row)
    const table = new Int32Array(m).fill(-1);
    for (const s of live) {
      if (table[s.row] !== -1) throw new RangeError(`matmulGroup conv: row ${s.row} of ${m} rows twice`);
      table[s.row] = s.window.offset;
    }
    return { x, out: conv.out, wc: conv.wc, taps, window, table: put(table, 'i32') };
  }
  const scratch = live.find((s) => s.scratch)?.scratch?.buffer ?? null;
  if (g.convFoldSegments(true) < 1 || live.some((s) => s.scratch && s.scratch.buffer !== scratch)) return null;
  // the steps variant: a sequence's first-row thread reads its rows' stores, so they must lie in
  // its workgroup's tile — float, the 8-column launch (matmulGroup's choice at M ≥ 2 with
  // chunked loads) in one tile; quantized, the activation-quantizing kernel's ACTS_TILE rows, or
  // where a sequence crosses them every row in one tile of CONV_STEPS_TILE (M ≤ 8)
  if (!quant && (g.floatColumnsAt(m) <= 1 || m < 2 || m > CONV_FOLD_MAX_ROWS || g.floatColumnsTile(g.matmulTile(m, true)) < m
    || w.cols % floatChunkElems(w.dtype as FloatDType) !== 0)) return null;
  const crosses = live.some((s) => Math.floor(s.row / ACTS_TILE) !== Math.floor((s.row + s.t - 1) / ACTS_TILE));
  // per row: window offset (−1: starts no sequence), t, scratch offset, use scratch
  const table = new Int32Array(m * CONV_STEP_WORDS).fill(-1);
  const owned = new Uint8Array(m);
  for (const s of live) {
    for (let r = s.row; r < s.row + s.t; r++) {
      if (owned[r]) throw new RangeError(`matmulGroup conv: row ${r} of ${m} rows twice`);
      owned[r] = 1;
    }
    table.set([s.window.offset, s.t, s.scratch?.offset ?? 0, s.scratch ? 1 : 0], s.row * CONV_STEP_WORDS);
  }
  return { x, out: conv.out, wc: conv.wc, taps, window, table: put(table, 'i32'), steps: true, scratch, ...(quant && crosses ? { tile: CONV_STEPS_TILE } : {}) };
}
