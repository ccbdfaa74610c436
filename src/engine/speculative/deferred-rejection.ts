// Deferred MTP rounds of sampled requests verified by rejection sampling (accept.ts
// 'rejection': by default a request that did not name its seed). The drafter draws every draft
// on the kernels from its top candidates with the chain's uniforms (draft.ts recordOnKernels,
// Kernels.candidateDraws: an f32 proposal) and keeps each step's candidates; the verify embeds
// the proposals from kernel memory and reads them back, with the candidates, in its one
// read-back (pending-drafts.ts). Here the host turns them into the chain's drafts and q's.
//
// Per draft step s = 1..k in order: the certificate (sampled-candidates.ts certify) turns step
// s's candidates into q_s exactly, and the host draws d_s from it with the same uniform u_s.
//   - Certified, and d_s equals the device's proposal: draft s stands (q_s its list); the
//     verify row that embedded it computed the target after the chain's true prefix.
//   - Certified, and the device drew another token (an f32 draw at a boundary the f64 one
//     falls on the other side of: rare): d_s is the host's draw, and it is the chain's LAST
//     draft. The verify computed p_{s−1} (the target before d_s) on the true prefix, so d_s is
//     tested against it as usual; but the row after it embedded the device's token, so there
//     is no p_s: if d_s is accepted the round ends with it, no bonus (Request.lastDraftUnverified).
//   - Refused (ties at the candidates' edge, or a flat nucleus): q_s is unknown, so the chain
//     ends before step s: drafts 1..s − 1 and the bonus from p_{s−1}, as a shorter round.
//
// Why the output law is the target's (lossless; nothing of an unseeded request is reproducible,
// so only the law matters): rejection sampling emits, at each position it reaches, a token
// distributed as the target's p given the tokens before it, provided the draft tested there is
// distributed as its q given everything the walk has seen. Draft s here is always the host's
// exact draw from q_s with a uniform no earlier decision read (u_s), and whether the walk
// reaches step s depends only on earlier steps (their drafts, whether the device agreed with
// them, their acceptance) and on step s's own candidates (a function of the prefix): so d_s ~ q_s
// there. Where the chain stops (a refusal, or after a redrawn draft) only decides how many
// positions this round fills; the next round drafts afresh from the committed prefix. Keeping
// the device's agreeing drafts and CUTTING BEFORE a disagreement would not be exact: a draft
// kept only when its uniform lies off a boundary is not distributed as q (test/spec-defer-law).
import { certifiedDist, certify } from '../sampled-candidates.js';
import type { SamplingParams } from '../sampler.js';
import type { SparseDist } from './sparse-accept.js';

/** What the verify's read-back brought of one rejection chain. */
export interface RejectionChainRead {
  /** The device's proposals, in step order (the chain's draft count). */
  readonly device: ArrayLike<number>;
  /** Draft step s's candidates (s 0-based): topCandidates' ids (−1 past the last) and raw logits. */
  readonly candidates: (s: number) => { readonly ids: Int32Array; readonly vals: Float32Array };
  /** The uniform each step's proposal was drawn with. */
  readonly uniforms: readonly number[];
  readonly sampling: SamplingParams;
  /** The draft head's vocabulary (the candidates' rows are over it). */
  readonly vocab: number;
  /** The fixed constraint mask the rows were drawn under (masked ids −∞; null: none). */
  readonly mask?: Uint32Array | null;
  /** Test hook (EngineTestHooks.refuseCandidate): true refuses a certified row anyway. */
  readonly refuse?: (() => boolean) | null;
}

/** How a chain's resolution ended: every draft stands; cut before a refused step; or ended by a
 * draft the host redrew (the last one, unverified past it). */
export type RejectionEnd = 'whole' | 'refused' | 'redrawn';

export interface ResolvedRejection {
  readonly tokens: number[];
  readonly qs: SparseDist[];
  /** The last draft is the host's draw where the device embedded another token: the target
   * after it was not computed for it (no bonus if it is accepted). */
  readonly lastUnverified: boolean;
  readonly end: RejectionEnd;
}

/** The chain's drafts and q's (see the header). */
export function resolveRejectionChain(r: RejectionChainRead): ResolvedRejection {
  const tokens: number[] = [];
  const qs: SparseDist[] = [];
  // a mask alone: no touched ids (no bias, no penalty), masked candidates −∞
  const masked = r.mask ? { a: { sampling: r.sampling, history: null, bias: null, mask: r.mask, vocab: r.vocab }, touched: [], raw: [] } : null;
  for (let s = 0; s < r.device.length; s++) {
    const { ids, vals } = r.candidates(s);
    const row = certify(ids, vals, r.sampling, r.vocab, masked);
    if (!row || r.refuse?.()) return { tokens, qs, lastUnverified: false, end: 'refused' };
    const { token, dist } = certifiedDist(row, r.sampling, r.uniforms[s]!);
    tokens.push(token);
    qs.push(dist);
    if (token !== r.device[s]) return { tokens, qs, lastUnverified: true, end: 'redrawn' };
  }
  return { tokens, qs, lastUnverified: false, end: 'whole' };
}
