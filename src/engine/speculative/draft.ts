// MTP drafting (docs/ARCHITECTURE.md "Speculative decoding (MTP)"). After every target step's
// update, for each request:
//   extend — the MTP head runs over the positions the step committed, position t fed
//            (target hidden h_t, token x_{t+1}), so the MTP KV always matches the
//            committed tokens; its last output predicts d_1;
//   draft  — k−1 more single-token MTP steps, each fed the previous MTP output and draft.
// Batched across requests. Drafts of greedy requests are argmax picks; when every chain's
// drafts are argmax picks of its logits, or of its logits plus a logit bias added on the
// kernels (device-picks.ts draftsOnKernels, draft-bias.ts), they chain on the kernels —
// draft i's argmaxRows ids feed draft i+1's embedding (Kernels.embedIds) — and all k drafts
// of all chains come back in ONE read-back of ids (with the verify step's, 2 per MTP round).
// Penalised (or biased) greedy chains without a constraint chain too where read-backs are
// transfers (webgpu): f32 penalties and bias on the kernels, each pick replayed exactly on the
// host, a redraft pass per disagreement; so do sampled chains (penalties and bias applied in f32
// on the kernels before the draw; a constraint's mask applied by the replay) with them and plain
// argmax chains: an f32 draw from each row's top candidates with the draft's
// pre-drawn uniform, replayed exactly on the host; and constrained greedy chains: unmasked
// picks after a pass's first, each kept where its exact mask allows it (all: draft-device.ts).
// Otherwise each draft step reads
// back once (a draft feeds the next step's mask and penalties): ids for the greedy chains —
// picked under their constraint mask, or, for a penalised or biased one, over the ids no
// penalty or bias touches and finished on the host from the few gathered logits (device-finish.ts), the drafts so far counted as outputs —
// and logits rows for the sampling chains, which draw d_i from q_i (the request's sampling
// transform of the MTP logits), kept for the rejection test — or, under a top-k or min-p cut,
// the rows' top candidates, q_i then a list (draft-candidates.ts). The drafter writes no request:
// it returns each chain's proposal, which the scheduler's update records as the request's
// drafts (update.ts).
import type { KvPool } from '../../cache/kv-pool.js';
import { DEVICE_TOKEN, lmHeadInto, mtpForward, type MtpDeviceIds, type MtpSeqInput } from '../../model/forward.js';
import type { StepArena } from '../../model/arena.js';
import type { AnyModel } from '../../model/model.js';
import { type Argmax, greedyToken, isGreedy } from '../sampler.js';
import { BatchSampler, type SampleJob, toProbs } from '../sample-batch.js';
import type { ReadRange, Tensor, Weight } from '../../kernels/types.js';
import type { RequestView } from '../request.js';
import type { DraftProposal } from '../step-output.js';
import { adjustInPlace, maskRunOf, matcherAfterDrafts } from '../logits-adjust.js';
import { draftPicksOnKernels, draftsOnKernels, finishesOnHost, idsOf, maskOf } from '../device-picks.js';
import { FinishGather, finishMask, finishPicks, greedyAdjust, planDraftFinish } from '../device-finish.js';
import { DraftBias } from './draft-bias.js';
import { DraftCandidates } from './draft-candidates.js';
import type { CandidateStep } from '../candidate-step.js';
import type { Dist } from './sparse-accept.js';
import { candidateDrawOf, draftCandidateCount } from '../sampled-candidates.js';
import type { Rng } from '../../util/rng.js';
import { DeviceDrafts, type DeviceSteps } from './draft-device.js';
import type { DraftRound } from './draft-round.js';
import { defersDrafts, defersSampledDrafts, type RoundMembers } from './pending-drafts.js';
import { type DeviceChains, deviceRound, maskedRuns } from './draft-rules.js';

export interface ExtendInput {
  readonly req: RequestView;
  /** MTP positions [start, start + n) are (re)computed from target hidden rows. */
  readonly start: number;
  readonly n: number;
  /** Target hidden rows [hiddenRow, hiddenRow + n) of `hidden` ([*, H], a kernel tensor);
   * with `hiddenFirst`, that host row is the first and `hidden` gives the other n − 1. */
  readonly hidden: Tensor;
  readonly hiddenRow: number;
  readonly hiddenFirst?: Float32Array | null;
  /** Drafts to propose after the extend (0 = KV upkeep only). */
  readonly drafts: number;
  /** Page table to write through (default req.pages; a request that finished this step
   * has released its own, and passes the one it ran with). */
  readonly pages?: readonly number[];
}

/** A round left on the kernels (run's `defer`): its handle and its requests, by chain. */
export interface PendingRound {
  readonly round: DraftRound;
  readonly members: RoundMembers;
}

/** A request that drafts this round: its extend [start, start + n), its draft count, and
 * the drafts (with q_i for a sampling request) proposed so far. */
interface Chain {
  readonly req: RequestView;
  readonly start: number;
  readonly n: number;
  readonly drafts: number;
  readonly proposed: number[];
  readonly qs: Dist[] | null;
  /** The uniforms of its sampled drafts, one a draft in order (draftUniforms). */
  readonly rng: Rng;
  /** A sampled request verified by matching (accept.ts): any proposal serves, and its q's are
   * not kept (rejection sampling alone reads them). */
  readonly matched: boolean;
}

/** Draft step `step` (1-based) of the `active` chains, fed their MTP hidden rows. */
interface DraftStep {
  readonly active: readonly Chain[];
  readonly hidden: Tensor;
  readonly step: number;
}

export class MtpDrafter {
  private readonly h: number;
  /** Ids a draft can be: the first v rows of the lm_head (the draft head). */
  private readonly v: number;
  private readonly head: Weight;
  /** Sampled drafts: q and the draw on the kernels, one call per draft step. */
  private readonly sampler: BatchSampler;
  /** Per request, q buffers over the sampling vocabulary reused round after round (zero
   * beyond the draft head; update drops req.draftProbs after each verify). */
  private readonly qBuffers = new WeakMap<RequestView, Float64Array[]>();
  /** Greedy draft picks of a round, [draft step][chain] (idsFor). */
  private ids: { t: Tensor; rows: number } | null = null;
  /** The gathered logits of draft picks the host finishes (penalties, bias). */
  private readonly finishGather: FinishGather;
  /** Chained drafts' logit biases, added on the kernels. */
  private readonly bias: DraftBias;
  /** Sampled chains' drafts from top candidates (null: from their logits rows). */
  private readonly candidates: DraftCandidates | null;
  /** Penalised / biased greedy and sampled chains on the kernels, replayed exactly on the host
   * (draft-device.ts; null: neither kind is on, a read-back per step). */
  readonly device: DeviceDrafts | null;
  /** Which kinds of chain draft through `device` (else a read-back per step). */
  private readonly deviceChains: DeviceChains;

  constructor(
    private readonly model: AnyModel,
    private readonly kv: KvPool<Tensor>,
    private readonly ws: StepArena<Tensor, Tensor>,
    private readonly sampleVocab: number,
    /** Grows a request's page list by up to n free pages (the scheduler's: it is the only
     * writer of request progress). */
    private readonly takeFreePages: (req: RequestView, n: number) => void,
    private readonly argmax?: Argmax,
    /** Drafts come from ids [0, draftVocab) only (see EngineOptions.draftVocab). */
    draftVocab = sampleVocab,
    /** Test hook (test-hooks.ts hostDrafts), asked every round: true picks the round's
     * drafts on the host from read-back logits rows, the reference the kernels' picks equal. */
    private readonly hostDrafts: () => boolean = () => false,
    /** Sampled chains' draft rows read top candidates through the runner's candidate step
     * (null: read whole). */
    candidateStep: CandidateStep | null = null,
    /** Penalised greedy chains draft on the kernels (draft-device.ts): 'auto' where the
     * kernels' tensors are device memory (a read-back is a transfer), off on ref and wasm. */
    penaltyChain: boolean | 'auto' = 'auto',
    /** Sampled chains draft on the kernels (draft-device.ts): 'auto' where the kernels' tensors
     * are device memory (a read-back is a transfer), off on ref and wasm. */
    sampledChain: boolean | 'auto' = 'auto',
    /** Is a request's verify matching (Speculator.matches: accept.ts): its drafts take the
     * target's uniforms, keep no q, and serve as proposed; `targetUniforms` (a test hook) may
     * give a chain its uniforms otherwise; `deferSeededRejection` (a test hook) lets a seeded
     * request verified by rejection sampling defer its round (rejectionDefers). */
    private readonly sampling: { readonly matches: (req: RequestView) => boolean; readonly targetUniforms?: (req: RequestView) => boolean;
      readonly deferSeededRejection?: boolean; readonly redrafts?: number } = { matches: () => false },
  ) {
    this.h = model.config.hiddenSize;
    this.v = Math.min(draftVocab, sampleVocab);
    this.head = this.v < model.weights.lmHead.rows ? model.kernels.weightRows(model.weights.lmHead, this.v) : model.weights.lmHead;
    this.sampler = new BatchSampler(model.kernels, argmax);
    this.finishGather = new FinishGather(model.kernels);
    this.bias = new DraftBias(model.kernels, this.v);
    this.candidates = candidateStep ? new DraftCandidates(candidateStep, this.v) : null;
    const auto = model.kernels.limits.deviceMemoryBytes !== null;
    this.deviceChains = { penalties: penaltyChain === 'auto' ? auto : penaltyChain, sampled: sampledChain === 'auto' ? auto : sampledChain };
    const on = this.deviceChains.penalties || this.deviceChains.sampled;
    this.device = on ? new DeviceDrafts(model.kernels, this.v, this.h, candidateStep !== null, sampling.redrafts ?? 0) : null;
  }

  /** Extend, then draft: the proposal of every input that drafts (one read-back in all when
   * every chain picks on the kernels, else one per draft step: its picks feed the next).
   * `defer`: when every chain defers (pending-drafts.ts), nothing is read back: the round stays
   * on the kernels, returned with its members (by chain) for the verify to read. `deferRejection`:
   * sampled chains verified by rejection sampling may defer too (deferred-rejection.ts). */
  async run(inputs: readonly ExtendInput[], defer = false, deferRejection = false): Promise<DraftProposal[] | PendingRound> {
    if (inputs.length === 0) return [];
    const mtpKv = this.kv.mtpLayers[0]!;
    const out = mtpForward(this.model, this.ws, inputs.map((i): MtpSeqInput<Tensor> => ({
      tokens: i.req.tokens.slice(i.start + 1, i.start + i.n + 1), hidden: i.hidden, hiddenRow: i.hiddenRow,
      hiddenFirst: i.hiddenFirst ?? null, start: i.start, pageTable: i.pages ?? i.req.pages, kv: mtpKv,
    })));
    // chains that draft: the last extend row of each predicts d_1
    const active: Chain[] = [];
    const rows: number[] = [];
    let offset = 0;
    for (const i of inputs) {
      if (i.drafts > 0) {
        active.push({ req: i.req, start: i.start, n: i.n, drafts: this.draftRoom(i), proposed: [], qs: isGreedy(i.req.sampling) ? null : [],
          rng: draftUniforms(i.req, (this.sampling.targetUniforms ?? this.sampling.matches)(i.req)), matched: this.sampling.matches(i.req) });
        rows.push(offset + i.n - 1);
      }
      offset += i.n;
    }
    if (active.length === 0) return [];
    // longest chains first (stable): the chains still drafting at any step are a prefix
    const order = active.map((_, i) => i).sort((a, b) => active[b]!.drafts - active[a]!.drafts || a - b);
    const chains = order.map((i) => active[i]!);
    const first = this.pick(out, order.map((i) => rows[i]!));
    const host = this.hostDrafts();
    const rejected = chains.map((c) => deferRejection && !c.matched && this.rejectionDefers(c.req));
    if (!host && defer && chains.every((c, j) => defersDrafts(c.req) || ((c.matched || rejected[j]) && this.device !== null && defersSampledDrafts(c.req)))) {
      const uniforms = chains.map(() => [] as number[]);
      const round = this.recordOnKernels(chains, first, rejected, uniforms);
      return { round, members: chains.map((c, j) => ({ req: c.req, count: c.drafts, run: maskRunOf(c.req)!,
        ...(rejected[j] ? { rejection: { uniforms: uniforms[j]!, vocab: this.v } } : {}) })) };
    }
    if (!host && chains.every((c) => draftsOnKernels(c.req))) await this.draftOnKernels(chains, first);
    else if (!host && this.device && deviceRound(chains.map((c) => c.req), this.v, this.deviceChains)) {
      await this.device.run(chains, first, this.deviceSteps);
    } else {
      // draft step s proposes d_s of every chain still drafting, from its MTP hidden row
      for (let s: DraftStep | null = { active: chains, hidden: first, step: 1 }; s; s = this.nextStep(s)) {
        await this.propose(s.active, s.hidden, host);
      }
    }
    return active.map((a) => ({ req: a.req, tokens: a.proposed, probs: a.qs }));
  }

  /** The MTP steps draft-device.ts chains, and the host path's full-row draw it replays. */
  private readonly deviceSteps: DeviceSteps<Chain> = {
    logits: (hidden, live, into) => void lmHeadInto(this.model, this.ws, hidden, Array.from({ length: live }, (_, j) => j), into, this.head),
    forward: (chains, hidden, step, tokens, device) => this.draftForward(chains, hidden, step,
      tokens ? (c) => [tokens[chains.indexOf(c)]!] : () => DEVICE_TOKEN, device),
    hiddenRows: (n) => this.ws.draftHidden.rows(n),
    drawRow: (c, row, u, index, before) => {
      adjustInPlace(row, this.v, c.req.adjust, matcherAfterDrafts(c.req, before.length, before));
      if (c.req.adjust?.constraint && allMasked(row)) return { token: 0, q: this.maskedDraft(c.req, index), drew: false };
      const [o] = this.sampler.run([{
        logits: row, vocab: this.v, sampling: c.req.sampling, history: c.req.history, extra: before, rng: { next: () => u }, dist: true, logprobs: -1,
      }]);
      return { token: o!.token, q: toProbs(o!.weights!, o!.mass, this.v, this.qBuffer(c.req, index)), drew: true };
    },
  };

  /** The MTP forward of the chains that draft one more step, or null when none does. */
  private nextStep(prev: DraftStep): DraftStep | null {
    const step = prev.step + 1;
    const chains = prev.active.slice(0, drafting(prev.active, step));
    if (chains.length === 0) return null;
    return { active: chains, hidden: this.draftForward(chains, prev.hidden, step, (c) => [c.proposed[step - 2]!]), step };
  }

  /** Draft step `step` (≥ 2) of the chains (a prefix of the previous step's, whose MTP
   * hidden rows `hidden` holds in order): MTP hidden rows [chains, H] fed draft step − 1,
   * whose ids are `tokens` (host) or `deviceIds`. */
  private draftForward(chains: readonly Chain[], hidden: Tensor, step: number, tokens: (c: Chain) => ArrayLike<number>,
    deviceIds: MtpDeviceIds<Tensor> | null = null): Tensor {
    const out = mtpForward(this.model, this.ws, chains.map((c, j): MtpSeqInput<Tensor> => ({
      tokens: tokens(c), hidden, hiddenRow: j, start: c.start + c.n + step - 2, pageTable: c.req.pages, kv: this.kv.mtpLayers[0]!,
    })), 0, deviceIds);
    // rows [0, chains) of the MTP output, in chain order: the next step reads them as they
    // are (its input rows are read before its final norm rewrites the output; nothing reads a
    // step's hidden rows after the next step is recorded)
    return out;
  }

  /** Every draft of every chain (all argmax picks, of the logits plus the chain's bias row
   * when one has a bias) on the kernels: draft step s's argmaxRows ids land in row s − 1 of a
   * [steps, chains] id tensor, the next step embeds them from there, and one read-back brings
   * the whole round's drafts. The ids are argmaxRows' — the reference argmax of the same
   * logits rows (device-picks.ts; the biased rows are adjustInPlace's: draft-bias.ts). */
  private async draftOnKernels(chains: readonly Chain[], first: Tensor): Promise<void> {
    const n = chains.length;
    const round = this.recordOnKernels(chains, first);
    const [read] = await this.model.kernels.readBack([{ t: round.ids, offset: 0, length: round.span }]);
    const picks = idsOf(read!);
    chains.forEach((c, j) => {
      for (let s = 0; s < c.drafts; s++) c.proposed.push(picks[s * n + j]!);
    });
  }

  /** Record draftOnKernels' chain: the round's ids [steps, chains] stay on the kernels. Entries
   * of chains shorter than the longest keep the ids an earlier round left, or zeros (the tensor
   * is zeroed when allocated): valid ids, as a pending round's verify embeds them all. A
   * sampled chain (a deferred round only) draws its drafts on the kernels from their top
   * candidates with its uniforms (draftUniforms: one a step): f32 proposals. Matched ones serve
   * as they are, since matching accepts whatever equals the target's exact draw; a chain
   * `rejected` marks (verified by rejection sampling) gets its uniforms pushed to `uniforms[j]`
   * and its candidates kept in the round (the verify reads them: deferred-rejection.ts). */
  private recordOnKernels(chains: readonly Chain[], first: Tensor, rejected: readonly boolean[] = [], uniforms: number[][] = []): DraftRound {
    const n = chains.length;
    const steps = chains[0]!.drafts;
    const rec = this.idsFor(n * steps);
    const bias = this.bias.rowsFor(chains.map((c) => c.req));
    const draws = chains.some((c, j) => c.matched || rejected[j]) ? chains.map((c, j) => (c.matched || rejected[j] ? c.req.sampling : null)) : null;
    const cuts = draws?.filter((p) => p !== null) ?? [];
    const kept = rejected.includes(true) ? this.device!.drawCandidates(cuts) : 0;
    const cands = kept > 0 ? { ...this.device!.candidateRows(n * steps, kept), c: kept } : null;
    // a chain under a constraint's mask run (draftsOnKernels): every step's pick or draw under
    // it (steps past a drafted `until` id too: the round is cut after it, pending-drafts.ts)
    const masks = chains.map((c) => maskRunOf(c.req)?.mask ?? null);
    const masked = masks.some((m) => m !== null);
    const drawnRuns = draws && masked ? chains.map((_, j) => (draws[j] && masks[j] ? maskedRuns(masks[j], this.v, 0) : null)) : null;
    let hidden = first;
    for (let s = 1; s <= steps; s++) {
      const live = drafting(chains, s);
      const t = lmHeadInto(this.model, this.ws, hidden, chains.slice(0, live).map((_, j) => j), this.ws.draftLogits.rows(live), this.head);
      if (bias) this.model.kernels.add(t, t, bias, live * this.v);
      // every live row drawn (a round of sampled chains alone): the draws write every id the argmax would
      if (!draws || draws.slice(0, live).includes(null)) {
        if (masked) this.model.kernels.argmaxRowsMasked(rec, (s - 1) * n, t, live, this.v, this.v, masks.slice(0, live));
        else this.model.kernels.argmaxRows(rec, (s - 1) * n, t, live, this.v, this.v);
      }
      if (drawnRuns) { // masked ids −∞ in the drawn rows, as adjustInPlace writes them
        const runs = drawnRuns.slice(0, live).flatMap((r, j) => (r ? r.map((x) => ({ offset: x.offset + j * this.v, length: x.length })) : []));
        if (runs.length > 0) this.model.kernels.fillRuns(t, runs, -Infinity);
      }
      if (draws) {
        const rows = chains.slice(0, live).map((c, j) => {
          if (!draws[j]) return null;
          const u = c.rng.next();
          if (rejected[j]) uniforms[j]!.push(u);
          return candidateDrawOf(draws[j], u, this.v);
        });
        // kept candidates: step s's rows at (s − 1)·n (reserved above); else each step overwrites the last's
        this.device!.recordDraws(rec, (s - 1) * n, t, rows, cuts, cands ? (s - 1) * n : 0);
      }
      const next = drafting(chains, s + 1);
      if (next > 0) hidden = this.draftForward(chains.slice(0, next), hidden, s + 1, () => DEVICE_TOKEN, { ids: rec, offset: (s - 1) * n });
    }
    return { ids: rec, chains: n, span: n * steps, cands };
  }

  /** May a sampled chain verified by rejection sampling leave its drafts on the kernels
   * (deferred-rejection.ts; defersSampledDrafts decides the rest): its q's come from its draft
   * rows' candidates (a top-k or min-p cut: draftCandidateCount), read with the verify; and it
   * named no seed (a seeded request keeps the replayed drafts, the host path's on every
   * backend, unless a test hook says otherwise). */
  private rejectionDefers(req: RequestView): boolean {
    return !isGreedy(req.sampling) && this.candidates !== null && draftCandidateCount(req.sampling, this.v) > 0
      && (!req.seeded || this.sampling.deferSeededRejection === true);
  }

  /** Drafts that fit: each writes MTP KV at one more position, whose page must exist
   * (extra pages are taken only when free — drafting never preempts). */
  private draftRoom(i: ExtendInput): number {
    const lastPos = (d: number): number => i.start + i.n + d - 2; // MTP position of draft step d
    const ps = this.kv.pageSize;
    let d = i.drafts;
    this.takeFreePages(i.req, Math.floor(lastPos(d) / ps) + 1 - i.req.pages.length);
    while (d > 1 && lastPos(d) >= i.req.pages.length * ps) d--;
    return d;
  }

  /** Copy rows of an MTP output to the arena's draft-hidden rows (the next MTP forward
   * reads them into its own input before it overwrites its output). */
  private pick(out: Tensor, rows: readonly number[]): Tensor {
    const dst = this.ws.draftHidden.rows(rows.length);
    this.model.kernels.gatherRows(dst, out, rows, this.h);
    return dst;
  }

  /** One draft token per request from MTP hidden rows [n, H], over the draft head's ids.
   * The draft chain needs each step's picks before the next step: one read-back per step, of
   * ids (and a finished pick's few logits) for the chains that pick on the kernels, of logits
   * rows for the others. A sampled request's proposal q is kept over the whole sampling
   * vocabulary (zero beyond the draft head), as rejection sampling compares it with the
   * target's p id by id. `host`: every chain picks on the host (the hostDrafts hook). */
  private async propose(chains: readonly Chain[], hidden: Tensor, host: boolean): Promise<void> {
    const t = lmHeadInto(this.model, this.ws, hidden, chains.map((_, j) => j), this.ws.draftLogits.rows(chains.length), this.head);
    const onKernels = chains.map((c) => !host && draftPicksOnKernels(c.req));
    const picked = onKernels.some((x) => x) ? this.pickOnKernels(chains, onKernels, t) : null;
    // sampled chains with a top-k or min-p cut: their top candidates, not the row
    const cands = this.candidates && !host ? this.candidates.select(chains, onKernels.map((x) => !x), t) : null;
    const hostRows = chains.map((_, j) => j).filter((j) => !onKernels[j] && !cands?.plan.rows.some((p) => p.row === j));
    const read = await this.model.kernels.readBack([
      ...(picked?.ranges ?? []),
      ...(cands?.ranges ?? []),
      ...hostRows.map((j) => ({ t, offset: j * this.v, length: this.v })),
    ]);
    const picks = picked?.finish(read) ?? null;
    chains.forEach((c, j) => { if (onKernels[j]) c.proposed.push(picks![j]!); });
    const first = (picked?.ranges.length ?? 0) + (cands?.ranges.length ?? 0);
    const rows = hostRows.map((_, r) => read[first + r]!);
    const refused = cands ? this.candidates!.finish(chains, cands, read.slice(first - cands.ranges.length, first)) : [];
    // refused candidate rows: their logits rows in a second read-back
    if (refused.length > 0) rows.push(...await this.model.kernels.readBack(refused.map((j) => ({ t, offset: j * this.v, length: this.v }))));
    this.pickDrafts([...hostRows, ...refused].map((j) => chains[j]!), rows);
  }

  /** Record the kernels' picks of draft logits rows `t` ([chains, V_draft]) for the chains
   * `onKernels` marks: the argmax under the chain's constraint mask after its drafts so far
   * (as pickDrafts applies it on the host), or for a penalised / biased greedy chain over its
   * untouched ids, finished on the host from the gathered logits (device-finish.ts) with the
   * drafts so far counted as outputs (greedyToken's `extra`, as pickDrafts counts them). The
   * ranges to read back, and the picks (by chain; others' entries unused) from what they read. */
  private pickOnKernels(chains: readonly Chain[], onKernels: readonly boolean[], t: Tensor):
    { ranges: ReadRange<Tensor>[]; finish: (read: readonly Float32Array[]) => Int32Array } {
    const n = chains.length;
    const ids = this.idsFor(n);
    const constraint = chains.map((c, j) => (onKernels[j] && c.req.adjust?.constraint ? maskOf(matcherAfterDrafts(c.req, c.proposed.length, c.proposed)) : null));
    const plan = planDraftFinish(chains.map((c, j) => (onKernels[j] && finishesOnHost(c.req) ? greedyAdjust(c.req, constraint[j]!, this.v, c.proposed) : null)), this.v);
    const masks = chains.map((_, j) => finishMask(plan, j) ?? constraint[j]!);
    if (masks.some((m) => m)) this.model.kernels.argmaxRowsMasked(ids, 0, t, n, this.v, this.v, masks);
    else this.model.kernels.argmaxRows(ids, 0, t, n, this.v, this.v);
    if (!plan) return { ranges: [{ t: ids, offset: 0, length: n }], finish: (read) => idsOf(read[0]!) };
    const { values, touched } = this.finishGather.gather(t, ids, n, this.v, plan);
    return {
      ranges: [{ t: ids, offset: 0, length: n }, { t: values, offset: 0, length: n }, { t: touched, offset: 0, length: plan.flat.length }],
      finish: (read) => finishPicks(plan, idsOf(read[0]!), read[1]!, read[2]!),
    };
  }

  /** A kernel int32 tensor of at least n ids for a draft step's picks (grown on demand). */
  private idsFor(n: number): Tensor {
    if (!this.ids || this.ids.rows < n) this.ids = { t: this.model.kernels.allocI32(Math.max(n, 8)), rows: Math.max(n, 8) };
    return this.ids.t;
  }

  /** Each chain's next draft from its host logits row (`rows[j]`: chain j's, [V_draft]). */
  private pickDrafts(chains: readonly Chain[], rows: readonly Float32Array[]): void {
    const sampled: { c: Chain; job: SampleJob }[] = [];
    chains.forEach((c, j) => {
      const req = c.req;
      // drafts are proposed under the request's adjustment, its matcher forked past the
      // committed ids and advanced by the drafts before this one, and its penalties counting
      // those drafts as outputs (as the verify position after them does)
      const l = rows[j]!;
      adjustInPlace(l, this.v, req.adjust, matcherAfterDrafts(req, c.proposed.length, c.proposed));
      if (isGreedy(req.sampling)) c.proposed.push(greedyToken(l, req.sampling, req.history, this.v, this.argmax, c.proposed));
      else if (req.adjust?.constraint && allMasked(l)) {
        // the constraint allows no id of the draft head: a sure-to-be-rejected draft keeps
        // the chain shape (rejection then samples from the target's p, still lossless)
        if (!c.matched) c.qs!.push(this.maskedDraft(req, c.qs!.length));
        c.proposed.push(0);
      } else {
        sampled.push({ c, job: {
          logits: l, vocab: this.v, sampling: req.sampling, history: req.history, extra: c.proposed, rng: c.rng, dist: !c.matched, logprobs: -1,
        } });
      }
    });
    const out = this.sampler.run(sampled.map((s) => s.job));
    sampled.forEach(({ c }, j) => {
      const o = out[j]!;
      c.proposed.push(o.token);
      if (!c.matched) c.qs!.push(toProbs(o.weights!, o.mass, this.v, this.qBuffer(c.req, c.qs!.length)));
    });
  }

  /** q of draft i of a row the constraint masks whole: all mass on id 0 (the draft proposed). */
  private maskedDraft(req: RequestView, i: number): Float64Array {
    const q = this.qBuffer(req, i);
    q.fill(0);
    q[0] = 1;
    return q;
  }

  /** The request's i-th reusable q buffer (zero beyond the draft vocabulary). */
  private qBuffer(req: RequestView, i: number): Float64Array {
    let list = this.qBuffers.get(req);
    if (!list) this.qBuffers.set(req, (list = []));
    return (list[i] ??= new Float64Array(this.sampleVocab));
  }
}


/** How many of `chains` (longest first) draft at step `step`. */
function drafting(chains: readonly Chain[], step: number): number {
  let n = 0;
  while (n < chains.length && chains[n]!.drafts >= step) n++;
  return n;
}

function allMasked(l: Float32Array): boolean {
  for (let i = 0; i < l.length; i++) if (l[i] !== -Infinity) return false;
  return true;
}

/** Where a chain's sampled drafts take their uniforms, one a draft in order. `target` (a
 * request verified by matching): the target's own, looked ahead at on a fork of the request's
 * rng (draft i takes the uniform verify position i − 1 will draw with, so a draft head whose
 * distribution is the target's proposes the very token the target draws; the fork leaves the
 * request's rng as it is). Else (rejection): the request's draft rng, which moves by the
 * uniforms used. */
export function draftUniforms(req: RequestView, target: boolean): Rng {
  return target ? req.rng.fork() : req.draftRng;
}
