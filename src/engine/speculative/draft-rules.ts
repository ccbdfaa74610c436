// Which MTP rounds draft on the kernels (draft-device.ts runs them; draft.ts asks deviceRound),
// and the constraint-mask facts its replay relies on: a mask only sets ids to −∞, so an unmasked
// argmax that the exact mask allows (its logit above −∞) is the masked argmax, ties to the
// lowest id as argmaxRowsMasked breaks them.
import type { FillRun } from '../../kernels/types.js';
import { MAX_DRAW_CANDIDATES } from '../../kernels/candidate-draws.js';
import type { RequestView } from '../request.js';
import { isGreedy } from '../sampler.js';
import { candidateCount } from '../sampled-candidates.js';
import { draftPicksOnKernels, draftsChainReplayed, draftsOnKernels, penalised } from '../device-picks.js';
import { matcherAfterDrafts } from '../logits-adjust.js';

/** Can the request's drafts be drawn by candidateDraws and replayed here: sampled, and a cut its
 * candidates (at most MAX_DRAW_CANDIDATES) can propose; with penalties or a logit bias only
 * where `penalties` is on (penaltyPicks adjusts its rows). A constraint's mask depends on the
 * drafts before it: the proposals are drawn without it, the replay applies it (see the header). */
export function drawsOnKernels(req: RequestView, vocab: number, penalties: boolean): boolean {
  return !isGreedy(req.sampling) && candidateCount(req.sampling, vocab) <= MAX_DRAW_CANDIDATES && (penalties || !adjusted(req));
}

/** Does a penalty or a non-empty logit bias touch the request's rows (a penaltyPicks table)? */
export function adjusted(req: RequestView): boolean {
  return penalised(req.sampling) || (req.adjust?.bias?.size ?? 0) > 0;
}

/** Is the request a constrained greedy chain picked on the kernels on the host path
 * (argmaxRowsMasked, or with penalties or a bias finished from gathered logits)? Its drafts
 * chain on the kernels, the replay checking each unmasked pick (a finished row's untouched
 * best) against its exact mask (see the header). */
export function maskReplayed(req: RequestView): boolean {
  return isGreedy(req.sampling) && !!req.adjust?.constraint && draftPicksOnKernels(req);
}

/** Which chains draft on the kernels: penalised or biased greedy ones (`penalties`), sampled
 * ones (`sampled`); each off means a read-back per draft step for them. */
export interface DeviceChains {
  readonly penalties: boolean;
  readonly sampled: boolean;
}

/** Does a round of these chains take this path? With a sampled chain (`on.sampled`): each a
 * sampled chain drawsOnKernels admits (a penalised or biased one with `on.penalties`), a plain
 * argmax chain (no bias), or with `on.penalties` a penalised or biased greedy chain without a
 * constraint. Without one (`on.penalties`): each draftsOnKernels (an f32 bias included) or such
 * a penalised or biased greedy chain. */
export function deviceRound(reqs: readonly RequestView[], vocab: number, on: DeviceChains): boolean {
  const replayed = (r: RequestView): boolean => draftsChainReplayed(r) || maskReplayed(r);
  if (!reqs.some((r) => !isGreedy(r.sampling))) return on.penalties && reqs.every((r) => draftsOnKernels(r) || replayed(r));
  const rider = (r: RequestView): boolean => (draftsOnKernels(r) && (r.adjust?.bias?.size ?? 0) === 0) || (on.penalties && replayed(r));
  return on.sampled && reqs.every((r) => rider(r) || drawsOnKernels(r, vocab, on.penalties));
}

/** The runs of ids in [0, v) a mask clears, at `offset` + id (read only: a mask's runs are
 * kept, masks being never written: Matcher.mask; the closed-think mask is one per model). */
export function maskedRuns(mask: Uint32Array, v: number, offset: number): readonly FillRun[] {
  let kept = runsOfMask.get(mask);
  if (!kept || kept.v !== v) runsOfMask.set(mask, (kept = { v, runs: scanMaskedRuns(mask, v) }));
  return offset === 0 ? kept.runs : kept.runs.map((r) => ({ offset: r.offset + offset, length: r.length }));
}

const runsOfMask = new WeakMap<Uint32Array, { readonly v: number; readonly runs: readonly FillRun[] }>();

function scanMaskedRuns(mask: Uint32Array, v: number): FillRun[] {
  const runs: FillRun[] = [];
  let from = -1;
  for (let id = 0; id <= v; id++) {
    const masked = id < v && !allowed(mask, id);
    if (masked && from < 0) from = id;
    else if (!masked && from >= 0) {
      runs.push({ offset: from, length: id - from });
      from = -1;
    }
  }
  return runs;
}

/** Is a constrained greedy chain's unmasked pick (its logit `logit`) the argmax under its mask
 * after the exact drafts `before` (the header's argument)? */
export function maskedPickExact(req: RequestView, before: readonly number[], pick: number, logit: number): boolean {
  return unmaskedPickExact(matcherAfterDrafts(req, before.length, before)?.mask() ?? null, pick, logit);
}

/** Is a row's argmax `pick` (its logit `logit`) also its argmax under `mask` (null: none)?
 * Where it is allowed and its logit is above −∞ (the header's argument). */
export function unmaskedPickExact(mask: Uint32Array | null, pick: number, logit: number): boolean {
  return mask === null || (allowed(mask, pick) && logit > -Infinity);
}

export function allowed(mask: Uint32Array, id: number): boolean {
  return (((mask[id >>> 5] ?? 0) >>> (id & 31)) & 1) === 1;
}
