// How a WebGPU backend launches its kernels: every choice that depends on the kind of
// adapter (a GPU, or a CPU emulation such as lavapipe) and never on the batch, in one table.
// Every variant of a choice gives the same bits (each has a test comparing them); they differ
// in dispatches, workgroup shapes and where the work lands. A backend starts with its
// adapter's profile (WebGpuKernels.useLaunches); AcquireOptions.launches / DELTASERVE_LAUNCHES
// pick the other (lavapipe running what a GPU runs: tests, scripts/gpu-bench.sh --dry-run,
// the access-model scripts), and tests override single choices to compare two variants.
import { ACTS_COLUMNS } from './wgsl/qmatmul-acts.js';
import { COLUMN_ACCUMULATORS, FLOAT_COLUMNS } from './wgsl/matmul-columns.js';
import { QUANT_COLUMNS } from './wgsl/qmatmul-columns.js';
import type { QuantLayout } from './wgsl/matmul.js';

/** The recurrent GDN launch (gdn-columns.ts): 'head', one workgroup per (value head,
 * sequence) norming its output row in the workgroup (one dispatch); 'columns', one workgroup
 * per (value head, block of state columns, sequence) and the gated norm as its own pass. */
export type GdnLaunch = 'head' | 'columns';

/** The batched causal conv's launch (conv-launch.ts): 'thread', 64-thread workgroups with the
 * tap count a parameter; 'channels', one-warp workgroups with the taps compiled in. */
export type ConvLaunch = 'thread' | 'channels';

export type LaunchProfile = 'gpu' | 'cpu';

export interface Launches {
  /** 'columns' on GPUs (HV workgroups leave most SMs idle: docs/kernels.md "GPU
   * memory-access model"); 'head' on a CPU adapter (HV workgroups already fill the cores, and
   * a second dispatch and the staging only cost there). */
  gdnLaunch: GdnLaunch;
  /** 'channels' on GPUs (C / 64 workgroups of two warps leave SMs idle and a warp one load in
   * flight); 'thread' on a CPU adapter (its 64-thread workgroups already fill the cores).
   * Past CONV_CHANNELS_MAX_TAPS taps 'thread' either way (convLaunchFor). */
  convLaunch: ConvLaunch;
  /** The GDN causal conv folded into the in_proj matmul's stores at decode and verify
   * (conv-launch.ts convFoldPlan; no dispatch of its own): on GPUs; off on a CPU adapter,
   * where the separate dispatch costs little. */
  convFold: boolean;
  /** At M ≤ ACTS_FOLD_ROWS a quantized group quantizes (and norms) its own input in its
   * matmul (one dispatch, not two or three). On GPUs: with ACTS_COLUMNS output columns a
   * workgroup and vec4 input loads the batch model rates it faster than the lane-parallel
   * quantization + tiled matmul (qwen3.5-4b Q8_0 H200 decode 2.3 – 2.2 against 3.3 – 2.6 ms
   * GPU, 220 dispatches against 349; docs/kernels.md) until a GPU run says otherwise
   * (gpu-bench's `decode-q4_k_m-unfolded`). Off on a CPU adapter: every workgroup's redundant
   * quantization is CPU time (lavapipe, tiny-think Q4_K_M: ~190 → ~325 CPU-ms a decode step).
   * AcquireOptions.foldQuantActs / DELTASERVE_FOLD_QUANT_ACTS override it alone. */
  foldQuantActs: boolean;
  /** Output columns an activation-quantizing workgroup computes (wgsl/qmatmul-acts.ts). */
  actsColumns: number;
  /** How tiled quantized matmuls share weight blocks among threads (wgsl/matmul.ts
   * QuantLayout): 'block' on a CPU adapter (lavapipe, tiny-think Q4_K_M decode: ~3.6 vs ~6.5
   * CPU-s for a 24-token bench with 'lanes'). */
  quantLayout: QuantLayout;
  /** How quant_acts / norm_quant_acts split a 32-block: 'lanes' (8 lanes a block, 8 blocks a
   * workgroup: wgsl/quant-acts-lanes.ts) or 'block' (a thread a block; norm_quant_acts one
   * workgroup a row): 'block' on a CPU adapter (lavapipe, tiny-think Q8_0 decode: 17.9 vs
   * 17.5 process CPU-s, 214 vs 157 ms a step, medians of 5 alternating). */
  actsLayout: QuantLayout;
  /** Output columns a workgroup of a non-MoE float matmul with 4-element loads computes
   * (wgsl/matmul-columns.ts: x loaded once per C columns) from `floatColumnsFromRows` rows
   * on: FLOAT_COLUMNS on both kinds of adapter (1 is the one-column kernel: tests compare the
   * two); the rows it starts from and its accumulators are the adapter's choices. */
  floatColumns: number;
  /** The fewest rows a float matmul takes the multi-column kernel at: 2 on GPUs (at one row
   * the one-column kernel's N workgroups spread the weight reads over every SM); 1 on a CPU
   * adapter, where C columns a workgroup share each x load and the loop's overhead. */
  floatColumnsFromRows: number;
  /** The f32 sums a multi-column thread keeps (columns × its tile of rows): COLUMN_ACCUMULATORS
   * (8 × 16) on GPUs; 32 (8 × 4) on a CPU adapter, whose compile grows with them (8 × 16:
   * 7–13 s a pipeline on lavapipe, a first `generate` with an empty shader cache 103 s). On
   * lavapipe, tiny-think BF16, paced, the one-column kernel → 8 × 4 from 1 row: a decode step
   * 135 → 47 ms, a 4-token verify 273–319 → 63 ms; a 24-token `generate` 6.1 → 2.9 s warm,
   * 19 → 28 s cold (docs/kernels.md, 2026-12-07). */
  floatColumnAccumulators: number;
  /** Output columns a workgroup of a tiled quantized matmul computes at M ≥ 2 rows
   * (wgsl/qmatmul-columns.ts: each activation word loaded once per C columns); 1 on a CPU adapter. */
  quantColumns: number;
}

const PROFILES: Readonly<Record<LaunchProfile, Readonly<Launches>>> = {
  gpu: {
    gdnLaunch: 'columns', convLaunch: 'channels', convFold: true, foldQuantActs: true, actsColumns: ACTS_COLUMNS,
    quantLayout: 'lanes', actsLayout: 'lanes', floatColumns: FLOAT_COLUMNS, floatColumnsFromRows: 2, floatColumnAccumulators: COLUMN_ACCUMULATORS,
    quantColumns: QUANT_COLUMNS,
  },
  cpu: {
    gdnLaunch: 'head', convLaunch: 'thread', convFold: false, foldQuantActs: false, actsColumns: 1,
    quantLayout: 'block', actsLayout: 'block', floatColumns: FLOAT_COLUMNS, floatColumnsFromRows: 1, floatColumnAccumulators: 32,
    quantColumns: 1,
  },
};

/** A copy of `profile`'s launches. */
export function launchesOf(profile: LaunchProfile): Launches {
  return { ...PROFILES[profile] };
}

/** The profile of an adapter: 'cpu' for a CPU emulation, else 'gpu'. */
export function adapterProfile(cpuEmulation: boolean): LaunchProfile {
  return cpuEmulation ? 'cpu' : 'gpu';
}

export const LAUNCH_PROFILES: readonly LaunchProfile[] = ['gpu', 'cpu'];
