// Sampled MTP drafts from top candidates (draft.ts, sampling chains): a sampled chain's draft
// logits row reads back its top candidates (Kernels.topCandidates, candidate-step.ts) instead
// of the draft head's row, and when the certificate admits it (sampled-candidates.ts) the
// host draws d_i from the list with the chain's next draft uniform, as the full row's sampler draws it
// (one uniform per draft, the same token), and keeps q_i as a list (sparse-accept.ts). The row
// is read under the request's adjustment at that draft: its constraint matcher after the
// drafts before it, its penalties counting them as outputs (pickDrafts' adjustInPlace and
// sampler job). A refused row is read whole in a second read-back and sampled as before.
import type { ReadRange, Tensor } from '../../kernels/types.js';
import type { RequestView } from '../request.js';
import type { Rng } from '../../util/rng.js';
import { isGreedy } from '../sampler.js';
import { candidateCount, certifiedDist, nucleusOnly } from '../sampled-candidates.js';
import { type CandidateItem, type CandidatePlan, type CandidateStep, planOf } from '../candidate-step.js';
import { greedyAdjust } from '../device-finish.js';
import { matcherAfterDrafts } from '../logits-adjust.js';
import type { SparseDist } from './sparse-accept.js';

/** What a draft chain is to this file: its request, the drafts proposed so far and their q. */
export interface SampledChain {
  readonly req: RequestView;
  readonly proposed: number[];
  readonly qs: (Float64Array | SparseDist)[] | null;
  /** Its sampled drafts' uniforms, one a draft in order (draft.ts draftUniforms). */
  readonly rng: Rng;
}

/** One draft step's candidate rows: the chains planned, and the ranges to read back. */
export interface DraftCandidateRead {
  readonly plan: CandidatePlan;
  readonly ranges: ReadRange<Tensor>[];
}

export class DraftCandidates {
  constructor(private readonly cands: CandidateStep, private readonly v: number) {}

  /** Select the candidates of the sampled chains among `chains` that `hostSide` marks (their
   * draft rows j of `t`, [chains, v]); null when none qualifies. Drafts report no logprobs,
   * so a request's cut alone decides (candidateCount); a top-p-only request backing off after
   * refusals (CandidateStep.admits) reads its row. */
  select(chains: readonly SampledChain[], hostSide: readonly boolean[], t: Tensor): DraftCandidateRead | null {
    const items: CandidateItem[] = [];
    chains.forEach((c, j) => {
      const req = c.req;
      if (!hostSide[j] || isGreedy(req.sampling)) return;
      const want = candidateCount(req.sampling, this.v);
      if (want === 0 || (nucleusOnly(req.sampling, this.v) && !this.cands.admits(req))) return;
      const mask = matcherAfterDrafts(req, c.proposed.length, c.proposed)?.mask() ?? null;
      items.push({ req, row: j, pos: 0, at: j, sampling: req.sampling, adjust: greedyAdjust(req, mask, this.v, c.proposed), want });
    });
    const plan = planOf(items, this.v);
    if (!plan) return null;
    this.cands.select(t, plan, this.v, this.v);
    return { plan, ranges: this.cands.ranges(plan) };
  }

  /** From the read ranges: each certified chain's draft drawn (its next draft uniform)
   * and its q recorded; returns the chains refused (ascending; their rows are read whole). */
  finish(chains: readonly SampledChain[], r: DraftCandidateRead, read: readonly Float32Array[]): number[] {
    const got = this.cands.certify(r.plan, read, this.v);
    const refused: number[] = [];
    r.plan.rows.forEach(({ row: j }, i) => {
      const g = got[i];
      const c = chains[j]!;
      if (!g) {
        refused.push(j);
        return;
      }
      const { token, dist } = certifiedDist(g, c.req.sampling, c.rng.next());
      c.proposed.push(token);
      c.qs!.push(dist);
    });
    this.cands.fallback(refused.length);
    return refused;
  }
}
