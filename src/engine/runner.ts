// Executes a batch on the model: passes views of the request's KV pages and state slot
// into the forward (no global context), computes the logits rows that sample on the
// kernels, picks the tokens of the rows that take the plain argmax on the kernels
// (device-picks.ts), and reads back what the engine needs in ONE read-back call per step:
// those rows' ids, the other sampling rows' logits rows, and the hidden rows of the rows a
// prefix snapshot may need this step (on CPU backends these are views, returned at once).
// A step whose rows all pick on the kernels and snapshot nothing reads back ids only.
// Sampled decode rows and sampled verify rows that qualify read back their top candidates
// (candidate-step.ts); one the certificate refuses reads its logits rows in a second read-back.
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import type { CandidateDraw, Tensor } from '../kernels/types.js';
import { StepArena } from '../model/arena.js';
import { DEVICE_TOKEN, type DeviceTokens, forwardHidden, lmHeadInto, type SeqInput } from '../model/forward.js';
import type { AnyModel } from '../model/model.js';
import type { Batch, BatchRow } from './batch.js';
import { assert } from '../util/errors.js';
import { idsOf, maskOf, picksOnKernels } from './device-picks.js';
import { FinishGather, finishMask, finishPicks, planFinish, type FinishPlan } from './device-finish.js';
import { committedMatcher, matcherAfterDrafts } from './logits-adjust.js';
import type { VisionEngine } from './vision.js';
import { logitPositions, rowScratch, rowTokens } from './speculative/verify-layout.js';
import type { DraftRound, DraftRoundRead } from './speculative/draft-round.js';
import { deviceRowsOf, draftRoundOf, draftRoundRanges, hostTokensOf } from './speculative/pending-drafts.js';
import { byOwner, CandidateStep, planCandidates, type CandidatePlan, type Certified } from './candidate-step.js';

export interface StepResult {
  /** Per real row (batch order): host logits [V] of every position that needs them — the
   * last position of a sampling row, all n positions of a verify row, none otherwise, and
   * none for a row whose `ids` the kernels picked. Views are valid until the next run. */
  readonly logits: Float32Array[][];
  /** Per real row: the kernels' argmax over the sample vocabulary at each of those
   * positions when the row picks on the kernels (device-picks.ts), else null. */
  readonly ids: (Int32Array | null)[];
  /** Per real row: its certified top candidates, one per logits position (a decode row's
   * one; a sampled verify row's k + 1, its p_i: speculative/sparse-accept.ts), when the row
   * samples from them (sampled-candidates.ts), else null (then `logits` holds its rows). */
  readonly candidates: Certified;
  /** Post-norm hidden of every processed token, [M, H], as a kernel tensor (for the MTP
   * head). */
  readonly hidden: Tensor;
  /** Per real row: its n hidden rows [n, H] on the host (for prefix snapshots; on CPU
   * backends the same memory), or null when `hiddenNeeded` said no snapshot can read them. */
  readonly hostHidden: (Float32Array | null)[];
  readonly offsets: readonly number[];
  /** The pending draft round's ids ([span]) and kept candidates, read back with this step's
   * (null: none passed). */
  readonly draftRead: DraftRoundRead | null;
  /** A chained step's input tokens as it embedded them, per real row (null: not chained, or
   * no row's token was a device draw): the previous step's argmax picks and device draws
   * (overlap.ts), for the engine to check against the tokens that step committed. */
  readonly chainedInputs: Int32Array | null;
  /** Batch rows whose refused candidate rows could not be read whole: a later step, recorded
   * since (overlap.ts), has overwritten their logits. Their requests must recompute. */
  readonly lost: readonly number[];
}

export class Runner {
  readonly ws: StepArena<Tensor, Tensor>;
  private readonly vocab: number;
  /** The kernels' picks of a step, [rows of `all`] (grown on demand). */
  private picks: { t: Tensor; rows: number } | null = null;
  /** The host-finished rows' gathered logits (device-finish.ts). */
  private readonly finishGather: FinishGather;
  /** Sampled rows read as candidates (null: every sampled row reads its logits row). */
  private readonly cands: CandidateStep | null;
  /** The last step's candidate plan (its candidates are still in `cands`' buffers until the
   * next step selects): drawChained draws from it. */
  private lastPlan: CandidatePlan | null = null;
  /** Steps run so far (a step's read-backs after a later step was recorded see its buffers). */
  private serial = 0;
  /** The last drawChained drew a row on the device: the chained step reads its inputs back. */
  private drewChained = false;

  constructor(
    readonly model: AnyModel,
    readonly kv: KvPool<Tensor>,
    readonly state: StatePool<Tensor>,
    /** Ids a token may take: [0, sampleVocab) (the lm_head's padded rows are never picked). */
    private readonly sampleVocab: number,
    /** The vision tower (null: text-only; requests with images are refused at build). */
    private readonly vision: VisionEngine | null = null,
    /** Does the step's update possibly read this row's hidden rows (a prefix snapshot)? */
    private readonly hiddenNeeded: (row: BatchRow) => boolean = () => true,
    /** Sampled decode rows read back top candidates: 'auto' when the kernels' tensors are not
     * host memory (a GPU: the read-back is the cost saved; CPU backends read rows in place, and
     * their SIMD sampler beats a host-side select), true / false to force (tests compare). */
    candidates: boolean | 'auto' = 'auto',
    /** Test hook: refuse a certified candidate row anyway (its row then read whole). */
    private readonly refuseCandidate: (() => boolean) | null = null,
  ) {
    this.ws = new StepArena(model);
    this.vocab = model.config.vocabSize;
    this.finishGather = new FinishGather(model.kernels);
    const on = candidates === 'auto' ? !(model.kernels.alloc(1) instanceof Float32Array) : candidates;
    this.cands = on ? new CandidateStep(model.kernels) : null;
  }

  /** Sampled logits rows (decode, verify positions, MTP drafts) that read candidates, and
   * those then read whole. */
  get candidateCounts(): { readonly rows: number; readonly fallbacks: number } {
    return { ...(this.cands?.counts ?? { rows: 0, fallbacks: 0 }) };
  }

  /** The candidate step the MTP drafter shares (null: the path is off). Runner and drafter
   * never overlap: the drafter runs after the step's read-backs are certified. */
  get candidateStep(): CandidateStep | null {
    return this.cands;
  }

  /** Forward of a batch: KV written for every processed position, working state slots
   * advanced in place (verify: per-step states to the rows' scratch). A row with n = 0 (a
   * prefix hit that covers the whole prompt) runs no model layer: its logits come from the
   * lm_head over the hit's stored hidden (post-norm, position hit−1), the same bits a cold
   * run computes there. Verify rows are laid out by speculative/verify-layout.ts.
   * `chained`: an overlapped decode step (overlap.ts), recorded before the step before it
   * has been read back: its rows are that step's rows in order, one token each, and their
   * tokens are that step's picks, still on the kernels. Everything up to the read-back is
   * recorded and submitted before this returns its promise.
   * `pending`: an MTP round whose drafts are still on the kernels (speculative/pending-drafts.ts):
   * the verify rows claiming it embed them from there, and its ids come back in this step's
   * read-back (`draftRead`), whether or not a row of this batch claims it. */
  async run(batch: Batch, chained = false, pending: DraftRound | null = null): Promise<StepResult> {
    this.lastPlan = null; // set again once this step selects its candidates
    const serial = ++this.serial;
    const rows = batch.rows.slice(0, batch.nReal);
    const live = rows.filter((r) => r.n > 0);
    const picked = chained ? this.chainedTokens(live) : null;
    // the tokens the chained step embeds, as they are now (its own picks overwrite them); an
    // argmax pick is the exact token, a device draw only a proposal the engine checks
    const inputs = picked && this.drewChained ? this.model.kernels.stage([{ t: picked.ids, offset: 0, length: live.length }]) : null;
    this.drewChained = false;
    const claimed = deviceRowsOf(live, pending);
    const device: DeviceTokens<Tensor> | null = picked ?? (claimed ? { ids: pending!.ids, offset: 0, at: claimed } : null);
    for (const r of live) if (r.req!.vision && this.vision) await this.vision.encodeRows(r.req!.vision, r.start, rowTokens(r).length);
    const seqs: SeqInput<Tensor>[] = live.map((r) => {
      const req = r.req!;
      // slot 0 is the dummy sink: a real request never reads or writes through it
      assert(req.slot > 0, `batch row ${rows.indexOf(r)} (request ${req.id}) has no state slot`);
      const tokens = picked ? DEVICE_TOKEN : hostTokensOf(r);
      // a request with images: image rows and multimodal RoPE (text-only rows: neither)
      const vision = req.vision && this.vision ? { vision: this.vision.rows(req.vision, r.start, tokens.length, this.model.config.hiddenSize) } : {};
      return {
        ...vision,
        tokens,
        start: r.start,
        pageTable: req.pages,
        kv: this.kv.layers,
        state: this.state.view(req.slot),
        scratch: rowScratch(this.state, r, rows.indexOf(r)),
        chunked: r.chunked,
        splits: r.chunked ? req.splits.filter((p) => p > r.start && p < r.start + r.n) : [],
      };
    });
    const fw = seqs.length > 0 ? forwardHidden(this.model, this.ws, seqs, device) : { hidden: this.ws.hidden.rows(0), offsets: [] };
    const offsets = rows.map((r) => (r.n > 0 ? fw.offsets[live.indexOf(r)]! : 0));
    const want = rows.flatMap((r, i) => logitPositions(r, offsets[i]!));
    const all = this.ws.logits.rows(want.length);
    if (want.length > 0) lmHeadInto(this.model, this.ws, fw.hidden, want, all);
    const layout = this.logitsLayout(rows, offsets);
    const finish = planFinish(rows, layout, this.sampleVocab, this.vocab);
    const picks = layout.onKernels.some((x) => x) ? this.pickRows(all, want.length, this.pickMasks(rows, layout, finish)) : null;
    const gathered = finish ? this.finishGather.gather(all, picks!, want.length, this.vocab, finish) : null;
    const cplan = this.cands ? planCandidates(rows, layout, this.sampleVocab, this.vocab, (q) => this.cands!.admits(q)) : null;
    if (cplan) this.cands!.select(all, cplan, this.sampleVocab, this.vocab);
    this.lastPlan = cplan;
    const candRanges = cplan ? this.cands!.ranges(cplan) : [];
    const whole = this.wholePromptHits(rows);
    const h = this.model.config.hiddenSize;
    // the hidden rows a snapshot may read (consecutive rows of fw.hidden per batch row)
    const hiddenRows = rows.map((_, i) => i).filter((i) => rows[i]!.n > 0 && this.hiddenNeeded(rows[i]!));
    // the host-path rows' logits: one range each (their positions are consecutive rows of `all`)
    const hostRows = rows.map((_, i) => i).filter((i) => !layout.onKernels[i] && layout.count[i]! > 0 && !cplan?.rows.some((p) => p.row === i));
    // the step's one read-back (CPU backends: views, at once)
    const read = await this.model.kernels.readBack([
      { t: whole.logits, offset: 0, length: whole.count * this.vocab },
      ...(picks ? [{ t: picks, offset: 0, length: want.length }] : []),
      ...(gathered ? [{ t: gathered.values, offset: 0, length: want.length }, { t: gathered.touched, offset: 0, length: finish!.flat.length }] : []),
      ...candRanges,
      ...hostRows.map((i) => ({ t: all, offset: layout.first[i]! * this.vocab, length: layout.count[i]! * this.vocab })),
      ...hiddenRows.map((i) => ({ t: fw.hidden, offset: offsets[i]! * h, length: rows[i]!.n * h })),
      ...(pending ? draftRoundRanges(pending) : []),
    ]);
    const draftRead = pending ? draftRoundOf(pending, read) : null;
    const [hits] = read;
    const first = (picks ? 2 : 1) + (gathered ? 2 : 0) + candRanges.length;
    // rows the host finishes: their ids from the picks and the gathered logits
    const ids = picks ? (finish ? finishPicks(finish, idsOf(read[1]!), read[2]!, read[3]!) : idsOf(read[1]!)) : null;
    const hostLogits = new Map(hostRows.map((i, r) => [i, read[first + r]!]));
    const hidden = new Map(hiddenRows.map((i, r) => [i, read[first + hostRows.length + r]!]));
    const lost: number[] = [];
    const candidates = cplan ? await this.certifyCandidates(cplan, rows, read.slice(first - candRanges.length, first), all, layout, hostLogits,
      serial === this.serial ? null : lost) : rows.map(() => null);
    const chainedInputs = inputs ? idsOf(inputs.data![0]!) : null;
    return { ...this.result(rows, layout, ids, hostLogits, hits!, rows.map((_, i) => hidden.get(i) ?? null), fw.hidden, offsets, candidates),
      draftRead, chainedInputs, lost };
  }

  /** Record the device's proposals of the next tokens of `batch`'s sampled rows (the step just
   * run; a decode step: one logits row a row, row i's at i), drawn from its top candidates with
   * `draws[i]` (null: a row the kernels' argmax picked), into the picks the chained step embeds
   * (overlap.ts). Every drawn row must have had its candidates selected. */
  drawChained(batch: Batch, draws: readonly (CandidateDraw | null)[]): void {
    const n = batch.nReal;
    const plan = this.lastPlan;
    const drawn = draws.map((d, i) => (d ? i : -1)).filter((i) => i >= 0);
    if (drawn.length === 0) return;
    assert(plan !== null && drawn.every((i) => plan.rows.some((p) => p.at === i && p.pos === 0)), 'a chained draw of a row without its candidates');
    if (!this.picks || this.picks.rows < n) this.picks = { t: this.model.kernels.allocI32(Math.max(n, 8)), rows: Math.max(n, 8) };
    const rows = Array.from({ length: plan.span }, (_, r) => draws[plan.lo + r] ?? null);
    this.model.kernels.candidateDraws(this.picks.t, plan.lo, this.cands!.buffers.ids, this.cands!.buffers.vals, 0, plan.c, rows);
    this.drewChained = true;
  }

  /** The planned rows' certificates, by batch row; a row with a refused logits row (a verify
   * row: any of its positions) has all its logits rows read back now (a second read-back, only
   * then) into `hostLogits` — unless a later step has been recorded since (`lost` given: those
   * logits are overwritten), when the refused rows go to `lost` instead. */
  private async certifyCandidates(plan: CandidatePlan, rows: readonly BatchRow[], read: readonly Float32Array[],
    all: Tensor, layout: { first: number[]; count: number[] }, hostLogits: Map<number, Float32Array>, lost: number[] | null): Promise<Certified> {
    const got = this.cands!.certify(plan, read, this.sampleVocab);
    const { certified, refused } = byOwner(plan, this.refuseCandidate ? got.map((g) => (this.refuseCandidate!() ? null : g)) : got, rows.length);
    if (refused.length > 0 && lost) lost.push(...refused);
    else if (refused.length > 0) {
      const ranges = refused.map((i) => ({ t: all, offset: layout.first[i]! * this.vocab, length: layout.count[i]! * this.vocab }));
      const back = await this.model.kernels.readBack(ranges);
      refused.forEach((i, j) => hostLogits.set(i, back[j]!));
      this.cands!.fallback(refused.reduce((n, i) => n + layout.count[i]!, 0));
    }
    return certified;
  }

  /** The tokens of a chained step's rows (one token each): the previous step's picks [M]. */
  private chainedTokens(rows: readonly BatchRow[]): DeviceTokens<Tensor> {
    const m = rows.length;
    assert(rows.every((r) => r.n === 1 && !r.verify && !r.req!.vision), 'a chained step has only one-token decode rows of text');
    assert(this.picks !== null && this.picks.rows >= m, `a chained step of ${m} rows without the previous step's ${m} picks`);
    return { ids: this.picks.t, offset: 0 };
  }

  /** Per real row: its first logits row in `all`, how many it has, and whether the kernels
   * pick its tokens (a whole-prompt hit row never does: its logits come from `hits`). */
  private logitsLayout(rows: readonly BatchRow[], offsets: readonly number[]): { first: number[]; count: number[]; onKernels: boolean[] } {
    let j = 0;
    const first: number[] = [];
    const count = rows.map((r, i) => logitPositions(r, offsets[i]!).length);
    count.forEach((c) => { first.push(j); j += c; });
    const onKernels = rows.map((r, i) => count[i]! > 0 && picksOnKernels(r.req!));
    return { first, count, onKernels };
  }

  /** Per logits row of `all`: the constraint mask its kernels pick applies (a decode row's
   * committed matcher, verify position s's matcher after the drafts before it), null for
   * none and for host-path rows (their picks are not used); [] when no row has a mask. */
  private pickMasks(rows: readonly BatchRow[], layout: { first: number[]; count: number[]; onKernels: boolean[] }, finish: FinishPlan | null): (Uint32Array | null)[] {
    const masks = rows.flatMap((r, i) => Array.from({ length: layout.count[i]! }, (_, s): Uint32Array | null => {
      const req = r.req!;
      // a row the host finishes: its allowed ids less the touched ones
      const untouched = finishMask(finish, layout.first[i]! + s);
      if (untouched) return untouched;
      if (!layout.onKernels[i] || !req.adjust?.constraint) return null;
      return maskOf(r.verify ? matcherAfterDrafts(req, s) : committedMatcher(req));
    }));
    return masks.some((m) => m) ? masks : [];
  }

  /** Record the argmax of logits rows [0, n) of `all` over the sample vocabulary (under
   * `masks`, one per row, when given). */
  private pickRows(all: Tensor, n: number, masks: readonly (Uint32Array | null)[]): Tensor {
    if (!this.picks || this.picks.rows < n) {
      const cap = Math.max(n, 2 * (this.picks?.rows ?? 4));
      this.picks = { t: this.model.kernels.allocI32(cap), rows: cap };
    }
    if (masks.length > 0) this.model.kernels.argmaxRowsMasked(this.picks.t, 0, all, n, this.sampleVocab, this.vocab, masks);
    else this.model.kernels.argmaxRows(this.picks.t, 0, all, n, this.sampleVocab, this.vocab);
    return this.picks.t;
  }

  private result(rows: Batch['rows'], layout: { first: number[]; count: number[]; onKernels: boolean[] }, picks: Int32Array | null,
    hostLogits: ReadonlyMap<number, Float32Array>, whole: Float32Array, hostHidden: (Float32Array | null)[], hidden: Tensor,
    offsets: readonly number[], candidates: Certified): Omit<StepResult, 'draftRead' | 'chainedInputs' | 'lost'> {
    let z = 0;
    const ids = rows.map((_, i) => (layout.onKernels[i] ? picks!.slice(layout.first[i]!, layout.first[i]! + layout.count[i]!) : null));
    const logits = rows.map((r, i) => {
      if (r.n === 0) return r.sample ? [whole.subarray(z * this.vocab, ++z * this.vocab)] : [];
      const host = hostLogits.get(i);
      return host ? Array.from({ length: layout.count[i]! }, (_, c) => host.subarray(c * this.vocab, (c + 1) * this.vocab)) : [];
    });
    return { logits, ids, candidates, hidden, hostHidden, offsets };
  }

  /** Logits [Z, V] of the sampling rows with n = 0, in row order: lm_head over each
   * request's hit hidden (written into the arena). */
  private wholePromptHits(rows: readonly BatchRow[]): { logits: Tensor; count: number } {
    const hits = rows.filter((r) => r.n === 0 && r.sample);
    const out = this.ws.hit.logits.rows(hits.length);
    if (hits.length === 0) return { logits: out, count: 0 };
    const h = this.model.config.hiddenSize;
    const hidden = this.ws.hit.hidden.rows(hits.length);
    hits.forEach((r, i) => {
      const hh = r.req!.hitHidden;
      assert(hh !== null && hh.length === h, `request ${r.req!.id}: a whole-prompt hit without its hidden row`);
      this.model.kernels.write(hidden, i * h, hh);
    });
    lmHeadInto(this.model, this.ws, hidden, hits.map((_, i) => i), out);
    return { logits: out, count: hits.length };
  }
}
