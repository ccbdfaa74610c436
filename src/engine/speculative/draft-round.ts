// The handle of an MTP round whose drafts are still on the kernels (pending-drafts.ts), and a
// request's claim on it (Request.pendingDrafts). Types only: request.ts and step-output.ts read
// them without importing the engine's speculative code.
import type { Tensor } from '../../kernels/types.js';

/** A round's drafts on the kernels: chain j's draft s (1-based) is ids[(s − 1)·chains + j]. */
export interface DraftRound {
  readonly ids: Tensor;
  readonly chains: number;
  /** Ids the round wrote: steps · chains (every one a valid id). */
  readonly span: number;
  /** Each draft step's top candidates, kept for chains verified by rejection sampling
   * (deferred-rejection.ts): draft s of chain j's at rows (s − 1)·chains + j of [span, c]
   * ids and raw logits, read back with the ids. Null: no such chain. */
  readonly cands: { readonly ids: Tensor; readonly vals: Tensor; readonly c: number } | null;
}

/** What the verify's read-back brings of a pending round. */
export interface DraftRoundRead {
  /** The round's ids ([span]). */
  readonly ids: Int32Array;
  /** Its candidates ([span · c] each) when it kept them. */
  readonly cands: { readonly ids: Int32Array; readonly vals: Float32Array } | null;
}

/** A request's claim on a pending round: its drafts are chain `chain`'s. */
export interface PendingDraft {
  readonly round: DraftRound;
  readonly chain: number;
}
