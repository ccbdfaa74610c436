// The operands of Kernels.mtpInputs: the MTP head's input rows (model/forward.ts mtpForward),
// cat = [rmsNorm_e(embed(x_{t+1})) | rmsNorm_h(h_t)] per row, before its fc matmul.
import type { Tensor, Weight } from './kernel-operands.js';

/** One sequence's hidden rows, in order: `first` (a host row [H]) when given, then rows
 * [row, row + n) of `src` ([*, H]). */
export interface MtpHiddenRun<T extends Tensor = Float32Array> {
  readonly src: T;
  readonly row: number;
  readonly n: number;
  readonly first: Float32Array | null;
}

/** The token ids x_{t+1} of the rows: on the host, or ids[offset + i] of a kernel int32 tensor
 * (drafts chained on the device: embedIds' contract, each id in [0, table.rows)). */
export type MtpTokenIds<I extends Tensor = Int32Array> =
  | { readonly host: ArrayLike<number> }
  | { readonly device: I; readonly offset: number };

/** Kernels.mtpInputs over M = Σ runs' rows (a run's first row included). */
export interface MtpInputs<T extends Tensor = Float32Array, I extends Tensor = Int32Array> {
  readonly cat: T; // out [M, 2H]: normed embedding | normed hidden
  /** [M, H] scratch of the plain form (mtp-inputs-by-calls.ts): the embedding rows, and the
   * hidden rows gathered; a backend that fuses the op may leave them unwritten. */
  readonly e: T;
  readonly hid: T;
  readonly table: Weight; // [V, H] the token embedding
  readonly ids: MtpTokenIds<I>;
  readonly normEmbedding: Weight; // [1, H]
  readonly normHidden: Weight; // [1, H]
  readonly eps: number;
  readonly zeroCentered: boolean;
  readonly runs: readonly MtpHiddenRun<T>[]; // per sequence, rows stacked in order
}

/** M: the rows of the runs (each run's first row included). */
export function mtpInputRows(runs: readonly MtpHiddenRun<Tensor>[]): number {
  return runs.reduce((m, r) => m + r.n + (r.first ? 1 : 0), 0);
}
