// The commit of a speculative verify round (docs/ARCHITECTURE.md "Recurrent state") — one backend-independent
// function. Verify never touches a working slot: every step's state went to the row's
// scratch. For every real row, in this order:
//   1. tracking snapshot: trackSlot ← scratch[row][trackStep] (before anything else);
//   2. working slot ← scratch[row][lastAcceptedStep] (SSM state and conv window — the
//      copied window ends at the last accepted input, which is the conv rollback).
// A step < 0 (or trackSlot 0) means skip. Padding rows are never passed in.
import type { Tensor } from '../../kernels/types.js';
import type { StatePool } from '../../cache/state-pool.js';

export interface CommitRow {
  /** Batch row: index of the row's private scratch. */
  readonly row: number;
  /** The request's working slot. */
  readonly slot: number;
  /** Verify step of the last accepted input (0 = only the bonus token). */
  readonly lastAcceptedStep: number;
  /** Prefix-cache snapshot destination (0 = none). */
  readonly trackSlot: number;
  /** Verify step whose state the snapshot takes (< 0 = none). */
  readonly trackStep: number;
}

export function commit(pool: StatePool<Tensor>, rows: readonly CommitRow[]): void {
  for (const r of rows) {
    if (r.trackSlot > 0 && r.trackStep >= 0) pool.copyFromScratch(r.trackSlot, r.row, r.trackStep);
  }
  for (const r of rows) {
    if (r.lastAcceptedStep >= 0) pool.copyFromScratch(r.slot, r.row, r.lastAcceptedStep);
  }
}
