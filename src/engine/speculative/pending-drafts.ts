// One read-back per MTP round (a GPU): the drafts stay on the kernels until the verify that
// reads them. After a verify's read-back and update, the drafter records the MTP extend and the
// whole draft chain (draft.ts draftOnKernels: argmax picks, each embedded by the next step from
// kernel memory) and reads nothing back; the round's ids, [steps, chains], stay on the kernels.
// The scheduler's next batch verifies them: a row's length is 1 + its draft count, known on the
// host, and the runner embeds the drafts from the kernels (forward.ts DeviceRows) and reads
// the round's ids back in the same read-back as the verify's picks. Before that step is
// sampled, the update records the ids as the requests' drafts (resolvedDrafts), so acceptance
// runs on host ids exactly as before. Without this the round waits on the GPU twice: once for
// the drafts, once for the verify.
//
// A sampled request verified by matching (accept.ts, a seeded one by default) defers too: its
// drafts are drawn on the kernels from their top candidates with the uniforms its verify
// positions will draw with (draft.ts recordOnKernels), and since matching accepts whatever
// equals the target's exact draw, those f32 proposals serve as they are (no replay).
//
// Invariants (why the outputs are the 2-read-back round's, bit for bit):
// - A pending request's drafts are placeholders (PENDING_DRAFT, of the right count; a draft the
//   draftOverride hook set is a host id, embedded from the host) that nothing reads: its verify
//   row embeds them from the kernels, its picks are the plain argmax or its positions'
//   candidates / rows (deferrable: no penalty or bias reads a draft before the read-back; rows
//   read whole for logprobs or capture are sampled after it; and a constraint's mask is a run,
//   logits-adjust.ts maskRunOf, the same at every position of the chain until a draft ends it:
//   the resolution cuts the chain after such a draft, no bonus), and the update resolves them
//   before acceptance. The ids the kernels embed are the ids read back.
// - Every step that runs a batch reads back the pending round (if any) and resolves it before
//   the next round is drafted, so a round's ids tensor is never overwritten while pending.
//   A request preempted since drafting has dropped its claim (preempt sets pendingDrafts to
//   null); the resolution skips it, and any request no longer running.
// - The round's tensor holds valid ids in every entry (argmax picks, or zeros): the verify
//   embeds its whole span, and a shorter chain's unused entries are embedded for nothing.
import type { DeviceRows } from '../../model/forward.js';
import type { BatchRow } from '../batch.js';
import { draftsOnKernels, finishesOnHost, idsOf } from '../device-picks.js';
import { adjusted } from './draft-rules.js';
import { isGreedy, type SamplingParams } from '../sampler.js';
import { type RejectionEnd, type ResolvedRejection, resolveRejectionChain } from './deferred-rejection.js';
import type { SparseDist } from './sparse-accept.js';
import type { RequestView } from '../request.js';
import type { DraftOutcome } from '../step-output.js';
import type { DraftRound, DraftRoundRead } from './draft-round.js';
import type { ReadRange, Tensor } from '../../kernels/types.js';
import { rowTokens } from './verify-layout.js';
import { masksVary, runCut } from '../logits-adjust.js';
import type { MaskRun } from '../../constrain/constraint.js';
import { assert } from '../../util/errors.js';

/** The requests of a pending round, by chain, how many drafts each proposed, and the mask run
 * its drafts and verify positions are recorded under (logits-adjust.ts maskRunOf). A chain
 * verified by rejection sampling also keeps its drafts' uniforms and the draft head's
 * vocabulary: the read-back's candidates are resolved into its drafts (deferred-rejection.ts). */
export type RoundMembers = readonly {
  readonly req: RequestView;
  readonly count: number;
  readonly run: MaskRun;
  readonly rejection?: RejectionMember;
}[];

/** A rejection chain's part of a pending round: its drafts' uniforms and the draft head's
 * vocabulary (its draft rows were drawn under its run's mask). */
export interface RejectionMember {
  readonly uniforms: readonly number[];
  readonly vocab: number;
}

/** What a pending request's drafts hold until resolved (no valid id: a read of one fails). */
export const PENDING_DRAFT = -1;

/** May the request's drafts stay on the kernels until its verify: argmax picks chained on the
 * kernels, and a verify that reads no draft on the host before the round resolves: its picks
 * are the plain argmax, or masked by a constraint's mask run (no penalty or bias: a finish
 * plan counts the drafts), or its rows come back whole (logprobs, capture) and are sampled
 * after the update has resolved the drafts; and no image. */
export function defersDrafts(req: RequestView): boolean {
  return draftsOnKernels(req) && !finishesOnHost(req) && !masksVary(req) && req.vision === null;
}

/** May a sampled request leave its drafts on the kernels (the caller knows how it is verified:
 * matching takes the kernels' draws as they are, rejection sampling resolves them from the
 * candidates read back with the verify): its verify reads what a plain sampled step reads
 * (candidates, or whole rows: logprobs, capture) with nothing that reads a draft before the
 * update resolves them: no penalty or bias (a candidate plan counts the drafts), no constraint
 * but a mask run, no image. */
export function defersSampledDrafts(req: RequestView): boolean {
  return !isGreedy(req.sampling) && !adjusted(req) && !masksVary(req) && req.vision === null;
}



/** The members' drafts as placeholders, each with its claim on `round` (the update records
 * them). `override` (the draftOverride test hook, bench --mode mtp --accept-rate) may replace
 * drafts by host ids (same count or fewer): a position it leaves a placeholder keeps the
 * model's own draft, on the kernels; a request with none left claims nothing. */
export function pendingProposals(round: DraftRound, members: RoundMembers,
  override?: (req: RequestView, drafts: number[]) => number[]): DraftOutcome {
  return {
    kind: 'drafts',
    proposals: members.map((m, chain) => {
      const placeholders = new Array<number>(m.count).fill(PENDING_DRAFT);
      const tokens = override ? override(m.req, placeholders).slice(0, m.count) : placeholders;
      return { req: m.req, tokens, probs: null, ...(tokens.includes(PENDING_DRAFT) ? { pending: { round, chain } } : {}) };
    }),
  };
}

/** The round's drafts from its read-back in place of the placeholders, for the requests still
 * claiming them (the update skips the others): a chain's ids as read, or, for a chain verified
 * by rejection sampling, the drafts and q's its candidates resolve to (deferred-rejection.ts;
 * `ended` hears how each such chain ended). */
export function resolvedDrafts(round: DraftRound, members: RoundMembers, read: DraftRoundRead,
  ended: (end: RejectionEnd) => void = () => undefined, refuse: (() => boolean) | null = null, runCut: () => void = () => undefined): DraftOutcome {
  const cut = (run: MaskRun, tokens: number[], qs: SparseDist[] | null, lastUnverified: boolean) => {
    const r = withinRun(run, tokens, qs, lastUnverified);
    if (r.runEnded) runCut();
    return { tokens: r.tokens, probs: r.probs, ...(r.lastUnverified ? { lastUnverified: true } : {}) };
  };
  const { ids } = read;
  assert(ids.length === round.span, `a draft round of ${round.span} ids read back as ${ids.length}`);
  return {
    kind: 'drafts',
    resolves: round,
    proposals: members.map((m, chain) => {
      const device = m.req.drafts.map((d, s) => (d === PENDING_DRAFT ? ids[s * round.chains + chain]! : d));
      // (a request no longer claiming the round is skipped by the update: nothing to resolve)
      if (m.req.pendingDrafts?.round !== round) return { req: m.req, tokens: device, probs: null };
      if (!m.rejection) return { req: m.req, ...cut(m.run, device, null, false) };
      const r = rejectionChain(round, read, chain, device, m.req.sampling, m.rejection, m.run.mask, refuse);
      ended(r.end);
      return { req: m.req, ...cut(m.run, r.tokens, r.qs, r.lastUnverified) };
    }),
  };
}

/** A resolved chain cut where its mask run ends (`runEnded`: after a drafted `</think>` in an
 * open reasoning block, or at the reasoning budget's end): the verify positions past it were
 * masked as inside the run, so the chain ends with its last draft inside, no bonus (the target
 * after it is computed again next step, under its own mask: Request.lastDraftUnverified).
 * Whether the walk goes on past a draft depends only on the drafts up to it, so the emitted
 * tokens keep their law (and greedy ids, MTP off's). */
function withinRun(run: MaskRun, tokens: number[], qs: SparseDist[] | null, lastUnverified: boolean):
  { tokens: number[]; probs: SparseDist[] | null; lastUnverified: boolean; runEnded: boolean } {
  const { keep, ended } = runCut(run, tokens);
  // a rejection chain already cut before the run's end keeps its own last-draft status
  return { tokens: tokens.slice(0, keep), probs: qs ? qs.slice(0, keep) : null, lastUnverified: lastUnverified || ended, runEnded: ended };
}

/** resolveRejectionChain over chain `chain`'s rows of the read-back. */
function rejectionChain(round: DraftRound, read: DraftRoundRead, chain: number, device: readonly number[], sampling: SamplingParams,
  r: RejectionMember, mask: Uint32Array | null, refuse: (() => boolean) | null): ResolvedRejection {
  const cands = read.cands;
  assert(round.cands !== null && cands !== null, 'a rejection chain of a round that kept no candidates');
  const c = round.cands.c;
  return resolveRejectionChain({
    device, uniforms: r.uniforms, sampling, vocab: r.vocab, refuse, mask,
    candidates: (s) => {
      const at = (s * round.chains + chain) * c;
      return { ids: cands.ids.subarray(at, at + c), vals: cands.vals.subarray(at, at + c) };
    },
  });
}

/** The read-back ranges of a pending round: its ids, then its kept candidates (if any), last
 * in the verify's read-back (draftRoundOf reads them from its end). */
export function draftRoundRanges(round: DraftRound): ReadRange<Tensor>[] {
  const c = round.cands;
  return [{ t: round.ids, offset: 0, length: round.span },
    ...(c ? [{ t: c.ids, offset: 0, length: round.span * c.c }, { t: c.vals, offset: 0, length: round.span * c.c }] : [])];
}

/** The round's part of a read-back whose last ranges are draftRoundRanges(round). */
export function draftRoundOf(round: DraftRound, read: readonly Float32Array[]): DraftRoundRead {
  const n = round.cands ? 3 : 1;
  const [ids, cIds, cVals] = read.slice(read.length - n);
  return { ids: idsOf(ids!), cands: round.cands ? { ids: idsOf(cIds!), vals: cVals! } : null };
}

/** The stacked rows of a step (live rows, in order) whose drafts are on the kernels in
 * `round`: a pending verify row's positions 1..k take the round's ids; null when no row's do. */
export function deviceRowsOf(rows: readonly BatchRow[], round: DraftRound | null): DeviceRows | null {
  const index: number[] = [];
  let any = false;
  for (const r of rows) {
    const claim = r.req!.pendingDrafts;
    const mine = r.verify && claim !== null;
    assert(!mine || claim!.round === round, `request ${r.req!.id}: a verify row whose drafts are on the kernels in a round not read back now`);
    const drafts = r.req!.drafts;
    for (let s = 0; s < r.n; s++) index.push(mine && s > 0 && drafts[s - 1] === PENDING_DRAFT ? (s - 1) * claim!.round.chains + claim!.chain : -1);
    any ||= mine;
  }
  return any ? { index: Int32Array.from(index), span: round!.span } : null;
}

/** A row's host token ids: a pending verify row's placeholders as id 0, which its DeviceRows
 * replace (embedded for nothing), else verify-layout's rowTokens. */
export function hostTokensOf(row: BatchRow): number[] {
  const req = row.req!;
  if (!(row.verify && req.pendingDrafts)) return rowTokens(row);
  return [req.tokens[row.start]!, ...req.drafts.map((d) => (d === PENDING_DRAFT ? 0 : d))];
}
