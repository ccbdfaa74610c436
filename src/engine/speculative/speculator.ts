// MTP speculative decoding around the target step (docs/speculative-decoding.md): it owns
// the round draft → verify layout (verify-layout.ts, read by the runner) → accept (here,
// with accept.ts) → commit and tracking snapshot (commit.ts, called by the scheduler's
// update) → draft again. Each step:
//   accept(): a verify row's tokens — accepted drafts, then the bonus — from the target's
//     logits, as a RowOutcome for the update (nothing is written to the request here);
//   draft(): after the update, the MTP head extends over what each request committed and
//     proposes the next round's drafts, sized by the adaptive policy and the request's
//     limits; the scheduler's update records them;
//   observe(): the step's time and tokens feed the adaptive policy.
import type { Tensor } from '../../kernels/types.js';
import type { KvPool } from '../../cache/kv-pool.js';
import type { StepArena } from '../../model/arena.js';
import type { AnyModel } from '../../model/model.js';
import type { Batch, BatchRow } from '../batch.js';
import type { RequestView } from '../request.js';
import { type Argmax, isGreedy } from '../sampler.js';
import { type SampleOutcome, toProbs } from '../sample-batch.js';
import type { CommittedRow, DraftOutcome, RowOutcome } from '../step-output.js';
import { acceptDrafts, acceptPicked, samplingOf, type SpecSampling } from './accept.js';
import { acceptDraftLists, denseOf, isSparse, type SparseDist } from './sparse-accept.js';
import { certifiedDist, type CertifiedRow, drawCertified } from '../sampled-candidates.js';
import type { CandidateStep } from '../candidate-step.js';
import { type ExtendInput, MtpDrafter, type PendingRound } from './draft.js';
import type { DraftRound, DraftRoundRead } from './draft-round.js';
import type { RejectionEnd } from './deferred-rejection.js';
import { pendingProposals, resolvedDrafts } from './pending-drafts.js';
import { assert } from '../../util/errors.js';
import { AdaptiveK } from './policy.js';

export interface SpeculatorOptions {
  /** Draft tokens per round at most (0 = speculation off). */
  readonly k: number;
  readonly adaptive: boolean;
  /** How sampled requests' drafts are verified (accept.ts SpecSampling). */
  readonly sampling: SpecSampling;
  /** Test hook: sampled drafts' uniforms as this mode takes them (default: `sampling`'s). */
  readonly draftUniforms?: SpecSampling | undefined;
  /** Drafts come from ids [0, draftVocab) only (EngineOptions.draftVocab). */
  readonly draftVocab: number;
  readonly sampleVocab: number;
  readonly argmax: Argmax;
  /** Grows a request's page list by up to n free pages (the scheduler's). */
  readonly takeFreePages: (req: RequestView, n: number) => void;
  /** Test hook: replace a request's drafts (same length or shorter). */
  readonly draftOverride?: ((req: RequestView, drafts: number[]) => number[]) | undefined;
  /** Test hook: true picks the round's drafts on the host (MtpDrafter's hostDrafts). */
  readonly hostDrafts?: (() => boolean) | undefined;
  /** Sampled chains' draft rows read back top candidates through this (the runner's; null:
   * every sampled draft row is read whole). */
  readonly candidates?: CandidateStep | null;
  /** Penalised greedy chains draft on the kernels (MtpDrafter's penaltyChain). */
  readonly penaltyChain?: boolean | 'auto';
  /** Sampled chains draft on the kernels (MtpDrafter's sampledChain). */
  readonly sampledChain?: boolean | 'auto';
  /** Passes after the first a round drafted on the kernels may run (draft-device.ts; default 0). */
  readonly redrafts?: number;
  /** Rounds whose chains all defer leave their drafts on the kernels for the verify to read
   * back with its picks (pending-drafts.ts: one read-back a round). */
  readonly deferDrafts?: boolean;
  /** Deferred rounds take sampled chains verified by rejection sampling too (deferred-rejection.ts;
   * never with draftOverride: its host ids have no q). Default: on. */
  readonly deferRejection?: boolean;
  /** Test hook: true refuses a certified candidate row anyway (here: a deferred rejection
   * chain's draft rows, deferred-rejection.ts; the runner's hook refuses verify rows). */
  readonly refuseCandidate?: (() => boolean) | undefined;
  /** Test hook: seeded requests verified by rejection sampling defer like unseeded ones. */
  readonly deferSeededRejection?: boolean;
  /** Test hook: the k of each round in place of the adaptive policy's (given the decode rows). */
  readonly chooseK?: ((decoding: number) => number) | undefined;
}

export class Speculator {
  private readonly drafter: MtpDrafter | null;
  private readonly policy: AdaptiveK;
  /** k drafted for the step about to run (what the policy's next measurement used). */
  private draftedK = 0;
  /** p of verify positions 0..k in f64 (reused: one verify row is accepted at a time). */
  private readonly verifyProbs: Float64Array[] = [];
  /** The round drafted on the kernels and not yet read back (pending-drafts.ts). */
  private pendingRound: PendingRound | null = null;
  /** The next draft's k, chosen ahead (chooseNextK), or null: draft() chooses. */
  private chosenK: number | null = null;
  /** Chains of deferred rounds verified by rejection sampling, by how their resolution ended
   * (deferred-rejection.ts): every draft stood, cut before a refused step, or ended by a redraw. */
  readonly deferredRejection: Record<RejectionEnd, number> = { whole: 0, refused: 0, redrawn: 0 };
  /** Chains of deferred rounds cut after a draft that ended their constraint's mask run (a
   * drafted `</think>`: pending-drafts.ts). */
  runCuts = 0;

  /** The sampled chains' counters (draft-device.ts; zeros when that path is off). */
  get sampledDrafts(): { readonly rounds: number; readonly steps: number; readonly passes: number; readonly disagreements: number; readonly refused: number;
    readonly refusedReads: number; readonly ended: number } {
    return { ...(this.drafter?.device?.stats.sampled ?? { rounds: 0, steps: 0, passes: 0, disagreements: 0, refused: 0, refusedReads: 0, ended: 0 }) };
  }

  /** The drafter's penalised and constrained greedy chains' counters (zeros without that path). */
  get penaltyDrafts(): { readonly rounds: number; readonly passes: number; readonly disagreements: number; readonly ended: number } {
    return { ...(this.drafter?.device?.stats.penalised ?? { rounds: 0, passes: 0, disagreements: 0, ended: 0 }) };
  }

  constructor(model: AnyModel, kv: KvPool<Tensor>, ws: StepArena<Tensor, Tensor>, private readonly opts: SpeculatorOptions) {
    this.drafter = opts.k > 0 ? new MtpDrafter(model, kv, ws, opts.sampleVocab, opts.takeFreePages, opts.argmax, opts.draftVocab, opts.hostDrafts,
      opts.candidates ?? null, opts.penaltyChain, opts.sampledChain, {
        matches: (req) => this.matches(req),
        ...(opts.draftUniforms ? { targetUniforms: (req: RequestView) => samplingOf(opts.draftUniforms!, req.seeded) === 'match' } : {}),
        deferSeededRejection: opts.deferSeededRejection ?? false,
        redrafts: opts.redrafts ?? 0,
      }) : null;
    this.policy = new AdaptiveK(opts.k, opts.adaptive);
  }

  /** Draft tokens per round at most (0 = off). */
  get kMax(): number {
    return this.policy.kMax;
  }

  /** The round whose drafts are still on the kernels: the next step reads its ids back (the
   * runner) and resolve() turns them into the drafts before that step is sampled. */
  get pending(): DraftRound | null {
    return this.pendingRound?.round ?? null;
  }

  /** The pending round's drafts from its read-back, for the update (before the step that read
   * them is sampled: its verify rows accept them). */
  resolve(read: DraftRoundRead): DraftOutcome {
    const p = this.pendingRound;
    assert(p !== null, 'draft ids read back with no round pending');
    this.pendingRound = null;
    return resolvedDrafts(p.round, p.members, read, (end) => { this.deferredRejection[end]++; }, this.opts.refuseCandidate ?? null,
      () => { this.runCuts++; });
  }

  /** Make the adaptive policy's choice of the next round's k now, for a step of `decoding`
   * greedy decode rows (the engine asks before recording the step after it ahead:
   * overlap.ts); the next draft() uses it, as it would have chosen then. */
  chooseNextK(decoding: number): number {
    this.chosenK = this.chooseK(decoding);
    return this.chosenK;
  }

  private chooseK(decoding: number): number {
    const hook = this.opts.chooseK;
    return hook ? Math.max(0, Math.min(this.policy.kMax, hook(decoding))) : this.policy.choose(decoding);
  }

  /** The k the drafts verified by the coming step were made with (read before draft()). */
  get verifiedK(): number {
    return this.draftedK;
  }

  /** Walk a verify row's drafts against the target (`logits` and the sampler's outcomes of
   * its k + 1 positions): the tokens it emits are the accepted drafts, then the bonus. */
  accept(row: BatchRow, logits: readonly Float32Array[], picks: readonly SampleOutcome[]): RowOutcome {
    const req = row.req!;
    if (this.matches(req)) {
      // the positions were drawn with the rng's uniforms ahead (step-sampling.ts): it moves by the tokens emitted
      const { tokens, accepted } = acceptPicked(req.drafts, picks.map((o) => o.token), !req.lastDraftUnverified);
      for (let s = 0; s < tokens.length; s++) req.rng.next();
      return { tokens, logprobs: tokens.map((_, s) => picks[s]?.logprobs ?? null), logits: tokens.map((_, s) => logits[s]!), drafted: req.drafts.length, accepted };
    }
    const vocab = this.opts.sampleVocab;
    // a draft's q read as a list (its row certified) meets a full-row p here: as a row
    const chain = { tokens: req.drafts, probs: req.draftProbs?.map((q) => denseOf(q, vocab)) ?? null };
    const targetAt = (s: number): Float64Array => {
      const o = picks[s]!;
      this.verifyProbs[s] ??= new Float64Array(vocab);
      return toProbs(o.weights!, o.mass, vocab, this.verifyProbs[s]!);
    };
    const tokens: number[] = [];
    const walked = acceptDrafts(chain, {
      sampling: req.sampling, history: req.history, vocab, rng: req.rng, argmax: this.opts.argmax,
      ...(isGreedy(req.sampling) ? {} : { targetAt }),
    }, (s) => logits[s]!, (token) => (tokens.push(token), true), !req.lastDraftUnverified);
    return {
      tokens, logprobs: tokens.map((_, s) => picks[s]?.logprobs ?? null), logits: tokens.map((_, s) => logits[s]!),
      drafted: chain.tokens.length, accepted: committedDrafts(walked, tokens.length),
    };
  }

  /** accept() for a sampled verify row whose k + 1 positions were certified from top
   * candidates (`cand[s]`: position s's, its p_s as a list): the same tokens for the same
   * uniforms (sparse-accept.ts). A draft whose q was read whole makes the walk a full-row one. */
  acceptCandidates(row: BatchRow, cand: readonly CertifiedRow[]): RowOutcome {
    const req = row.req!;
    if (this.matches(req)) {
      // position s's draw (the decode path's drawCertified) with the request's next uniform, while the drafts match
      const tokens: number[] = [];
      // (no bonus draw after an unverified last draft: the walk ends with it)
      const last = req.lastDraftUnverified ? req.drafts.length - 1 : req.drafts.length;
      for (let s = 0; s <= last; s++) {
        tokens.push(drawCertified(cand[s]!, req.sampling, req.rng.next()).token);
        if (tokens[s] !== req.drafts[s]) break;
      }
      return { tokens, logprobs: tokens.map(() => null), logits: [], drafted: req.drafts.length, accepted: tokens.length - 1 };
    }
    const vocab = this.opts.sampleVocab;
    const pAt = (s: number): SparseDist => certifiedDist(cand[s]!, req.sampling, null).dist;
    const qs = req.draftProbs ?? [];
    const tokens: number[] = [];
    const emit = (token: number): boolean => (tokens.push(token), true);
    const bonus = !req.lastDraftUnverified;
    const walked = qs.every(isSparse) ? acceptDraftLists(req.drafts, qs, pAt, req.rng, emit, bonus)
      : acceptDrafts({ tokens: req.drafts, probs: qs.map((q) => denseOf(q, vocab)) }, {
        sampling: req.sampling, history: req.history, vocab, rng: req.rng, targetAt: (s) => denseOf(pAt(s), vocab),
      }, () => NO_LOGITS, emit, bonus);
    return { tokens, logprobs: tokens.map(() => null), logits: [], drafted: req.drafts.length, accepted: committedDrafts(walked, tokens.length) };
  }

  /** accept() for a row whose verify positions the kernels picked (device-picks.ts): the
   * same tokens, from ids [k + 1] instead of logits rows. */
  acceptPicks(row: BatchRow, ids: Int32Array): RowOutcome {
    const req = row.req!;
    const drafts = req.drafts;
    assert(req.pendingDrafts === null, `verify row of request ${req.id}: its drafts were never resolved`);
    // a deferred round's chain cut after a draft that ended its mask run has fewer drafts than picks
    if (ids.length !== drafts.length + 1 && !(req.lastDraftUnverified && ids.length > drafts.length)) {
      throw new Error(`verify row of request ${req.id}: ${ids.length} picks for ${drafts.length} drafts`);
    }
    const { tokens, accepted } = acceptPicked(drafts, ids, !req.lastDraftUnverified);
    return { tokens, logprobs: tokens.map(() => null), logits: [], drafted: drafts.length, accepted };
  }

  /** Which requests draft() will run the MTP head for (they fail together if it throws). */
  extending(rows: readonly CommittedRow[]): RequestView[] {
    return this.drafter ? rows.filter(extends_).map((r) => r.req) : [];
  }

  /** MTP extend over what each request committed (`hidden`: the step's target hidden
   * rows, row i's first at offsets[i]), then drafts for its next verify; null when no
   * request drafts. */
  async draft(rows: readonly CommittedRow[], hidden: Tensor, offsets: readonly number[]): Promise<DraftOutcome | null> {
    const chosen = this.chosenK;
    this.chosenK = null;
    const extend = this.drafter ? rows.filter(extends_) : [];
    if (extend.length === 0) return null;
    const decoding = extend.filter((e) => !e.req.prefilling).length;
    const k = chosen ?? this.chooseK(decoding);
    this.draftedK = k;
    // Seeded sampling must be reproducible: under rejection sampling the draws a round consumes
    // depend on k, so a seeded request verified that way drafts the configured k, never the
    // adaptive one (matching draws MTP off's tokens at any k; an unseeded request has nothing to
    // reproduce).
    const kFor = (r: RequestView): number => (this.fixedK(r) ? this.policy.kMax : k);
    // When the policy has turned speculation off and no request needs drafts, the MTP
    // head is skipped entirely: its KV for these positions goes stale, which can only
    // lower the acceptance of later drafts (outputs are lossless either way).
    if (k === 0 && extend.every((e) => kFor(e.req) === 0)) return null;
    const inputs = extend.map((c) => extendInput(c, hidden, offsets[c.row]!,
      c.req.prefilling || c.req.status !== 'running' ? 0 : draftRoom(c.req, kFor(c.req))));
    const o = this.opts.draftOverride;
    assert(this.pendingRound === null, 'an MTP round drafted with the last one still pending');
    const proposals = await this.drafter!.run(inputs, this.opts.deferDrafts ?? false, (this.opts.deferRejection ?? true) && !o);
    if (!Array.isArray(proposals)) {
      this.pendingRound = proposals;
      return pendingProposals(proposals.round, proposals.members, o);
    }
    return {
      kind: 'drafts',
      proposals: o ? proposals.map((p) => ({ ...p, tokens: o(p.req, [...p.tokens]).slice(0, p.tokens.length) })) : proposals,
    };
  }

  /** A request that drafts the configured k whatever the policy chooses: a seeded sampled one
   * verified by rejection sampling (its draws, so its tokens, depend on k). */
  fixedK(req: RequestView): boolean {
    return !isGreedy(req.sampling) && req.seeded && !this.matches(req);
  }

  /** A sampled request whose verify emits the plain loop's draws (accept.ts 'match'). */
  matches(req: RequestView): boolean {
    return !isGreedy(req.sampling) && samplingOf(this.opts.sampling, req.seeded) === 'match';
  }

  /** A decode / verify step of `batch` made `generated` tokens in `ms`, with drafts of
   * `k` (verifiedK before the step drafted). */
  observe(batch: Batch, k: number, generated: number, ms: number): void {
    if (batch.kind !== 'prefill') this.policy.observe(batch.nReal, k, generated, ms);
  }
}

/** The drafts a verify row commits past its first input, for the update (RowOutcome.accepted):
 * the walk's accepted count, but one fewer when it ended with no bonus (an accepted last draft
 * the verify row did not embed: Request.lastDraftUnverified). That draft then stands where the
 * bonus stands, the round's last token, the next step's input: the update commits the state
 * after the verify input before it, as for any bonus. */
function committedDrafts(walked: number, emitted: number): number {
  return emitted === walked ? walked - 1 : walked;
}

/** The logits a sampled walk with p given ahead never reads. */
const NO_LOGITS = new Float32Array(0);

/** The MTP head extends a row's committed positions while its request runs. A request that
 * just finished still gets its MTP KV written when it snapshotted this step: the rows
 * [start, computed) live in pages the snapshot keeps, and a hit reads them. */
function extends_(c: CommittedRow): boolean {
  return c.req.status === 'running' || (c.snapshotted && c.req.status === 'finished' && !c.req.aborted && c.n > 0);
}

/** MTP positions to (re)compute after a step; the first chunk after a prefix hit also
 * recomputes position hit−1 from the snapshot's hidden (its MTP KV depends on the token
 * after the cached prefix). */
function extendInput(c: CommittedRow, hidden: Tensor, hiddenRow: number, drafts: number): ExtendInput {
  const base = { req: c.req, hidden, hiddenRow, drafts, pages: c.pages };
  if (!c.hitHidden || c.start === 0) return { ...base, start: c.start, n: c.n };
  // the snapshot's hidden (host) is the first row, then the step's rows
  return { ...base, start: c.start - 1, n: c.n + 1, hiddenFirst: c.hitHidden };
}

/** Drafts worth proposing: a round emits up to k+1 tokens, never past the limits. */
function draftRoom(req: RequestView, k: number): number {
  return Math.max(0, Math.min(k, req.maxTokens - req.numGenerated - 1, req.maxLength - req.tokens.length - 1));
}
