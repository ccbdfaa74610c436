// Hooks only tests pass to the engine (Engine.load's second argument), kept out of the
// production EngineOptions: the CLI and the server never set them, and they are no part of
// the options the prefix cache's persisted identity hashes.
import type { FileIo } from '../cache/store-io.js';
import type { LogitsAdjust } from './logits-adjust.js';
import type { Clock } from './metrics.js';
import type { SpecSampling } from './speculative/accept.js';

/** What a hook sees of a running request. */
export interface HookRequest {
  readonly promptIds: readonly number[];
  readonly tokens: readonly number[];
}

export interface EngineTestHooks {
  /** Poison slot 0, padding rows' scratch and the stale scratch steps of real rows (steps a
   * row does not write this step) with NaN before every step. */
  readonly poisonPadding?: boolean;
  /** Called for every running request between steps; true preempts it (it frees its memory
   * and recomputes, resuming from the prefix cache when it can). */
  readonly preemptIf?: (req: HookRequest) => boolean;
  /** Replace a request's MTP drafts (same length or shorter). */
  readonly draftOverride?: (req: HookRequest, drafts: number[]) => number[];
  /** Asked every MTP round: true picks the round's drafts on the host from their read-back
   * logits rows (the reference the kernels' draft picks must equal: tests compare the two). */
  readonly hostDrafts?: () => boolean;
  /** Save the prefix cache on the engine's thread through this file system (to inject short
   * writes and failures) instead of the writer thread. */
  readonly prefixCacheIo?: FileIo;
  /** Replace a request's logits adjustment when it starts (e.g. force a constraint into a
   * dead end). */
  readonly adjustOverride?: (adjust: LogitsAdjust | null) => LogitsAdjust | null;
  /** The clock of the engine's rate windows (stats().tokensPerSecond), so a test can pass
   * idle time without sleeping. */
  readonly clock?: Clock;
  /** Sampled decode rows read back their top candidates (engine/candidate-step.ts): true /
   * false forces the path on / off, so a test can compare the two; unset: on for backends
   * whose tensors are not host memory (webgpu), off for ref and wasm. */
  readonly sampledCandidates?: boolean;
  /** MTP drafts of penalised greedy requests chain on the kernels, each pick replayed exactly
   * on the host (speculative/draft-device.ts): true / false forces it on / off; unset: on for
   * backends whose tensors are not host memory (webgpu), off for ref and wasm. */
  readonly penaltyChain?: boolean;
  /** MTP drafts of sampled requests are drawn on the kernels, each draw replayed exactly on the
   * host (speculative/draft-device.ts): true / false forces it on / off; unset: on for backends
   * whose tensors are not host memory (webgpu), off for ref and wasm. */
  readonly sampledChain?: boolean;
  /** Greedy MTP rounds leave their drafts on the kernels for the verify to embed and read back
   * with its picks (speculative/pending-drafts.ts): true / false forces it on / off; unset: on
   * where overlapped decode is (a GPU backend, --overlap on), off for ref and wasm. */
  readonly deferredDrafts?: boolean;
  /** Deferred rounds (deferredDrafts) take sampled chains verified by rejection sampling too,
   * their q's resolved from candidates read with the verify (speculative/deferred-rejection.ts):
   * false keeps them on the replayed path (two read-backs a round); unset: on. */
  readonly deferredRejection?: boolean;
  /** A seeded request verified by rejection sampling (--spec-sampling rejection) defers its
   * rounds like an unseeded one, so a test can compare the deferred path with the replayed one
   * on the same uniforms; unset: it does not (its drafts stay the host path's on every backend). */
  readonly deferSeededRejection?: boolean;
  /** The k of each MTP round in place of the adaptive policy's choice (given the round's
   * decode rows; 0 drafts nothing), so a test can switch speculation off and on mid-run. */
  readonly specK?: (decoding: number) => number;
  /** Overlapped sampled decode: replace the uniform of the device's proposal of a chained row's
   * token (the host's exact draw keeps the true one), so a test can force proposals the host
   * overrules (engine/overlap.ts). */
  readonly chainDrawU?: (u: number) => number;
  /** Asked for each certified candidate row of a step: true refuses it anyway (as ties at the
   * candidates' edge would), so its logits row is read whole — or, when a chained step has
   * overwritten it, its request recomputes (engine/overlap.ts). Also asked for each draft row
   * of a deferred rejection chain as it resolves: a refused one ends the chain before it
   * (speculative/deferred-rejection.ts). */
  readonly refuseCandidate?: () => boolean;
  /** Where sampled drafts take their uniforms (speculative/draft.ts draftUniforms), in place of
   * the verify mode's own: a test measures what the target's uniforms add to acceptance. */
  readonly draftUniforms?: SpecSampling;
}
