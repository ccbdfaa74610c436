// Which rows of a step pick their tokens on the kernels (Kernels.argmaxRows: on a GPU, on the
// device), so the step's read-back carries their ids instead of vocabulary-sized logits rows.
// A row picks on the kernels when its token is the argmax of the raw logits over the sample
// vocabulary, or of those logits under the request's constraint mask (argmaxRowsMasked: the
// masked ids count as −∞, as adjustInPlace writes them): greedy, no penalty, no logit bias, no
// logprobs and no logits capture; or greedy with penalties or a non-empty logit bias, the
// host finishing the pick from a few gathered logits (device-finish.ts). Every other row
// takes the host path (its logits rows read back, then adjusted and sampled by
// step-sampling.ts). Both paths give the same ids: the
// kernels' argmax is the reference's (lowest id among equal maxima; NaN never wins).
// Sampled decode rows read back their top candidates instead (sampledCandidates below).
import type { Matcher } from '../constrain/constraint.js';
import { masksVary } from './logits-adjust.js';
import type { RequestView } from './request.js';
import { isGreedy } from './sampler.js';
import { candidateCount } from './sampled-candidates.js';

/** Greedy, no penalty, and no adjustment but a constraint mask (an empty bias changes nothing
 * yet keeps the host path: tests use it to compare the two). */
function maskedArgmax(req: RequestView): boolean {
  const p = req.sampling;
  return isGreedy(p) && !penalised(p) && (req.adjust === null || !req.adjust.bias);
}

/** Are the request's MTP drafts argmax picks of its logits, or of its logits plus a logit
 * bias the kernels add exactly (no penalty, no constraint), or of its logits under a
 * constraint's mask run (logits-adjust.ts maskRunOf: the closed-think mask of a chat answer, an
 * open reasoning block's none; no bias)? Then they chain on the kernels with no read-back
 * between draft steps (speculative/draft.ts, draft-bias.ts); drafts past a drafted `until` id
 * are proposals under a stale mask, which the verify (per-position masks) rejects or a
 * deferred round's resolution cuts. */
export function draftsOnKernels(req: RequestView): boolean {
  if (req.adjust?.constraint) return !masksVary(req) && maskedArgmax(req);
  const p = req.sampling;
  const bias = req.adjust?.bias;
  if (bias && bias.size > 0) return isGreedy(p) && !penalised(p) && biasAddsExactly(bias);
  return maskedArgmax(req);
}

/** Does an f32 add of these bias values give adjustInPlace's sums (draft-bias.ts says why):
 * every value an f32, and 0 or of magnitude ≥ 2^-103. */
export function biasAddsExactly(bias: ReadonlyMap<number, number>): boolean {
  for (const b of bias.values()) if (Math.fround(b) !== b || (b !== 0 && !(Math.abs(b) >= 2 ** -103))) return false;
  return true;
}

/** Is the request greedy with penalties or a logit bias, and no constraint? Then its MTP drafts
 * can chain on the kernels with f32 penalties and bias, the host replaying each pick exactly
 * (speculative/draft-device.ts). */
export function draftsChainReplayed(req: RequestView): boolean {
  return finishesOnHost(req) && !req.adjust?.constraint;
}

/** Does any penalty apply (repetition ≠ 1, presence or frequency ≠ 0)? */
export function penalised(p: RequestView['sampling']): boolean {
  return p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0;
}

/** Are the request's drafts picked on the kernels: argmax picks under at most its constraint
 * mask, or finished on the host from a few gathered logits (finishesOnHost)? Each draft step
 * then reads back ids (and those logits), not logits rows: its mask, and the penalties' count
 * of the drafts before it, depend on the earlier drafts. */
export function draftPicksOnKernels(req: RequestView): boolean {
  return maskedArgmax(req) || finishesOnHost(req);
}

/** Does the request's next token (decode, or each verify position) come from the kernels'
 * argmax (under its constraint mask), finished on the host when finishesOnHost? */
export function picksOnKernels(req: RequestView): boolean {
  return (maskedArgmax(req) || finishesOnHost(req)) && req.onLogprob === null && req.captureLogits === null;
}

/** A greedy request with penalties or a non-empty logit bias: the kernels pick over the ids
 * neither touches, the host finishes with the touched ids' logits (greedy-finish.ts). */
export function finishesOnHost(req: RequestView): boolean {
  return isGreedy(req.sampling) && (penalised(req.sampling) || (req.adjust?.bias?.size ?? 0) > 0);
}

/** How many top candidates a sampled request's decode row reads back instead of its logits
 * row (Kernels.topCandidates; the host draws exactly from them when they certify the row,
 * its bias, constraint mask and penalties applied to the few ids they touch:
 * sampled-candidates.ts), or 0 for the full row: logprobs (the normaliser sums the whole
 * row), logits capture, and cuts the candidates cannot decide (top-k and min-p both off). */
export function sampledCandidates(req: RequestView, vocab: number): number {
  if (isGreedy(req.sampling) || req.onLogprob !== null || req.captureLogits !== null || req.snapshotOnly) return 0;
  return candidateCount(req.sampling, vocab);
}

/** The mask argmaxRowsMasked applies for a matcher (null: none, or every id allowed). */
export function maskOf(matcher: Matcher | null): Uint32Array | null {
  return matcher ? matcher.mask() : null;
}

/** The ids of an int32 tensor's read-back range: readBack returns f32 arrays, whose bits
 * are the ids (CPU backends hand back the Int32Array view itself). */
export function idsOf(range: Float32Array | Int32Array): Int32Array {
  return range instanceof Int32Array ? range : new Int32Array(range.buffer, range.byteOffset, range.length);
}
