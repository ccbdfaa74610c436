// The commit of a speculative verify round (docs/ARCHITECTURE.md "Recurrent state") — one backend-independent
// function. Verify never touches a working slot: every step's state went to the row's
// scratch. For every real row, in this order:
//   1. tracking snapshot: trackSlot ← scratch[row][trackStep] (before anything else);
//   2. working slot ← scratch[row][lastAcceptedStep] (SSM state and conv window — the
//      copied window ends at the last accepted input, which is the conv rollback).
// A step < 0 (or trackSlot 0) means skip. Padding rows are never passed in.
import type { Tensor } from '../../kernels/types.js';
import type { StatePool } from '../../cache/state-pool.js';
import { isSnapshotPoint, type PrefixContext, recordSnapshot, snapshotSlot } from '../prefix.js';
import type { RequestView } from '../request.js';

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

/** Commit the verify round of `req` (batch row `row`, verify input at positions start..)
 * that accepted `accepted` drafts. A prefix-cache snapshot point inside the committed run
 * (committed lengths start+1 .. start+accepted+1; the interval ≥ k+1 allows at most one)
 * is tracked: its scratch state goes to a fresh slot first, then into the tree with the
 * hidden of that step. Then the working slot takes the state after the last accepted
 * input. The caller (update.ts) advances req.computed by accepted + 1. */
export function commitRound(pool: StatePool<Tensor>, prefix: PrefixContext | null, req: RequestView, row: number, start: number,
  accepted: number, hiddenAt: (step: number) => Float32Array): void {
  const track = prefix ? trackPoint(prefix, req, start, accepted) : -1;
  const trackSlot = track >= 0 && prefix ? snapshotSlot(prefix) : 0;
  commit(pool, [{ row, slot: req.slot, lastAcceptedStep: accepted, trackSlot, trackStep: trackSlot > 0 ? track : -1 }]);
  if (trackSlot > 0) recordSnapshot(prefix!, req, start + track + 1, trackSlot, hiddenAt(track));
}

/** Verify step whose state is a snapshot point, or −1. */
function trackPoint(prefix: PrefixContext, req: RequestView, start: number, accepted: number): number {
  for (let step = 0; step <= accepted; step++) if (isSnapshotPoint(prefix, req, start + step + 1)) return step;
  return -1;
}
