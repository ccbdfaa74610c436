// Which rows of a step pick their tokens on the kernels (Kernels.argmaxRows: on a GPU, on the
// device), so the step's read-back carries their ids instead of vocabulary-sized logits rows.
// A row picks on the kernels when its token is the plain argmax of the raw logits over the
// sample vocabulary: greedy, no penalty, no logit bias or constraint mask, no logprobs and no
// logits capture. Every other row takes the host path (its logits rows read back, then
// adjusted and sampled by step-sampling.ts). Both paths give the same ids: the kernels'
// argmax is the reference's (lowest id among equal maxima; NaN never wins).
import type { RequestView } from './request.js';
import { isGreedy } from './sampler.js';

/** Are the request's MTP drafts plain argmax picks (greedy, no penalty, bias or constraint)? */
export function draftsOnKernels(req: RequestView): boolean {
  const p = req.sampling;
  return isGreedy(p) && p.repetitionPenalty === 1 && p.presencePenalty === 0 && p.frequencyPenalty === 0 && req.adjust === null;
}

/** Does the request's next token (decode, or each verify position) come from argmaxRows? */
export function picksOnKernels(req: RequestView): boolean {
  return draftsOnKernels(req) && req.onLogprob === null && req.captureLogits === null;
}

/** The ids of an int32 tensor's read-back range: readBack returns f32 arrays, whose bits
 * are the ids (CPU backends hand back the Int32Array view itself). */
export function idsOf(range: Float32Array | Int32Array): Int32Array {
  return range instanceof Int32Array ? range : new Int32Array(range.buffer, range.byteOffset, range.length);
}
