/// <reference types="@webgpu/types" />
// Operand and counter types of the webgpu backend (backend.ts re-exports them).
import type { GpuTensor } from './tensor.js';
import type { MoeRows } from './wgsl/matmul.js';
/** Paged KV cache of one full-attention layer on the GPU ([numPages·pageSize, nKV, hd]). */
export interface GpuKvLayer {
  readonly k: GpuTensor;
  readonly v: GpuTensor;
  readonly pageSize: number;
}

/** Memory traffic of the recorded dispatches (what a GPU rewards), summed since the last
 * reset: weight bytes the matmuls stream (the weight once per tile of rows: 16, 32 or 64, wgsl/matmul.ts matmulTile) against
 * each distinct weight once per step; KV bytes attention reads (every head reads its KV
 * head's rows) against each cached row once. */
export interface GpuTraffic {
  weightBytesRead: number;
  weightBytesIdeal: number;
  kvBytesRead: number;
  kvBytesIdeal: number;
}

/** A matmulGroup's input norm: the weight widened to f32 (uploadVector), rmsNorm's
 * arguments, and where the normed rows go when the norm runs apart (quantized weights). */
export interface GpuGroupNorm {
  readonly wv: GpuTensor;
  readonly eps: number;
  readonly zeroCentered: boolean;
  readonly out: GpuTensor;
}

/** A matmul input computed element-wise: x ⊙ act(b) (Kernels.matmulAdd's gate). */
export interface GpuGatedInput {
  readonly b: GpuTensor;
  readonly act: 'silu' | 'sigmoid';
}

/** Quantized activations in the scratch (quantActs). */
export interface QuantActs {
  readonly qx: GpuTensor;
  readonly dx: GpuTensor;
  readonly sx: GpuTensor;
}

/** A grouped MoE GEMM's rows (moe.ts): expert `expert` of `experts`, from the plan. */
export interface MoeGemm {
  readonly plan: GpuTensor;
  readonly expert: number;
  readonly experts: number;
  readonly rows: MoeRows;
  /** One workgroup per column runs all the expert's tiles (quantized, or float with K ≤ WHOLE_K). */
  readonly whole: boolean;
  /** Experts expert .. expert + span − 1 in one dispatch (grid z = span · tiles), their
   * weights stacked in the part (moe.ts's stacked experts); absent: 1. */
  readonly span?: number;
}

/** The causal conv folded into a float matmul group's stores (wgsl/conv-fold.ts; decided and
 * built by conv-launch.ts): the segments of the entry whose out is `x` store the conv of
 * their values into `out` and update the windows. */
export interface GpuConvFold {
  readonly x: GpuTensor; // [M, C] the conv's input: a group entry's out (left unwritten)
  readonly out: GpuTensor; // [M, C] post-conv rows
  readonly wc: GpuTensor; // f32 [C, K]
  readonly taps: number;
  readonly window: GPUBuffer; // every row's window ([K−1, C] at its offset)
  readonly table: GpuTensor; // i32 [M]: each row's window offset in `window`, −1 none (steps: [M, CONV_STEP_WORDS])
  readonly steps?: boolean; // a verify's rows / scratch windows (wgsl/conv-fold.ts convFoldSteps; 8-column or quantized acts kernel)
  readonly scratch?: GPUBuffer | null; // steps: the scratch windows' buffer (null: none)
  readonly tile?: number; // quantized steps: rows a workgroup (CONV_STEPS_TILE where a sequence crosses ACTS_TILE rows)
}
