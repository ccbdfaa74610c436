// MTP drafts chained on the kernels, in one read-back per pass (draft.ts calls it when every chain
// is a sampled request drawsOnKernels admits (penalties, bias and constraints included), a
// penalised, biased or constrained greedy request, or a plain argmax chain; deviceRound in
// draft-rules.ts says which rounds, per the engine's switches).
//
// Uniforms: the host path draws each sampled draft with ONE uniform of the chain's (draft.ts draftUniforms)
// (draft-candidates.ts, or the full row's sampler), in step order, except a draft whose row its
// constraint masks whole (draft 0, no uniform: draft.ts pickDrafts). So the round looks ahead at
// `drafts` uniforms on a fork of the rng (Rng.fork); a pass step uses the next one after those
// the chain's exact drafts used; the replay records which drafts used one (a masked-whole row
// counts as a disagreement, so the steps after it redraft with the uniforms shifted), and the
// chain's uniforms then advance by the number used, as on the host path.
//
// Constraints: the mask of draft s depends on drafts 1..s−1, so the device draws a pass's later
// proposals WITHOUT it (over the raw or penalty-adjusted row); the pass's first step, whose
// drafts before it are exact, is drawn under its mask (masked ids set to −∞ by one fillRuns, as
// adjustInPlace writes them: the replay masks them anyway). The replay computes each step's mask from
// the matcher after the chain's exact drafts and certifies the candidates under it (masked
// candidates at −∞: sampled-candidates.ts); where the mask changes the draw, the proposal
// differs, the host's draw wins and the chain redrafts. A step after a proposal its mask refuses
// is never reached (the exact draft differs there), so it is neither certified nor read whole.
// Constrained GREEDY chains (maskReplayed) chain the same way: the pass's
// first step is picked under its mask (exact), a later step's pick is unmasked, and the replay
// keeps it iff the step's exact mask allows it and its logit (penaltyPicks' gathered best, an
// empty table) is above −∞. Then it IS the masked argmax: a mask only sets ids to −∞, the pick
// holds the row's maximum M > −∞ at the lowest id, so the masked maximum is M and no allowed id
// below it holds M (the reference's ties: lowest id). An all −∞/NaN row fails the test (there
// the masked argmax can differ: the first masked id). Else the chain redrafts FROM that step,
// whose next pass masks it exactly (the host holds no row to pick from). A penalised or biased
// one is finished from its gathered logits under the mask (replayPick with the mask: its touched
// ids masked exactly), which is exact where its untouched best is allowed with a logit above −∞
// (then it is the best allowed untouched id, by the same argument); else it redrafts likewise.
//
// A pass runs draft steps start..k with no read-back between them: step s's logits go to the
// one draft logits buffer (draft-memory.ts), overwriting step s − 1's; a penalised or biased
// greedy row picks with Kernels.penaltyPicks (its penalties in f32, the drafts before s counted
// as outputs; it also gathers the untouched best and the raw logits of every touched id), a
// plain argmax row with argmaxRows (or penaltyPicks' empty table); a sampled row's candidates come from Kernels.topCandidates and Kernels.
// candidateDraws draws an f32 proposal from them with u_s; the next MTP step embeds the pick
// from kernel memory. One read-back brings every step's picks, the penalised rows' gathered
// values, and per sampled row what the host's exact draw reads: its candidates (the chain
// certifies rows from them: sampled-candidates.ts), or its logits row (top-p alone: staged by
// Kernels.stage right after its step, before the next overwrites it). The host
// then REPLAYS each chain's steps in order: a penalised or biased row's exact pick (f64,
// greedyToken's: device-finish.ts replayPick), a sampled row's exact f64 draw (certifiedDist, or
// the full row's sampler through `drawRow`) with the same u_s, recording q_s as the host path
// does; a plain argmax row's pick is exact as it comes. Where every pick agrees, the pass's
// drafts are the round's; at the first step s where they differ, the host's pick replaces the
// device's and the chain redrafts from s + 1 in one more pass (its step-s MTP hidden row kept)
// while the round has a redraft pass left (EngineOptions.specRedrafts; default none). Past
// them the chain ENDS with its exact drafts: the host's pick at s its last (a refused
// constrained greedy pick: the drafts before s), a shorter chain the verify embeds as it is.
// That keeps the law of a chain verified by rejection sampling: d_s is still the exact draw
// from q_s, and where the chain stops only decides whether position s + 1 is a draft or the
// bonus, each drawn from the target given the tokens before it (test/spec-defer-law,
// 'ended-host-embedded'). A seeded one verified that way redrafts whatever the option says
// (mustRedraft: its drafts decide its tokens, and a seed gives the same on every backend).
// Rows the certificate refuses are read whole (one more read-back for all of a pass's): the
// draft lm_head recomputes them from their kept MTP hidden rows (refusedRows; the kernels'
// batch invariance makes them the pass's rows bit for bit), and they are drawn from the full
// row, as the host path does. So the
// drafts and q's are the host path's as far as each chain goes, and a round costs 2 read-backs
// (drafts + verify) plus one per redraft pass and one per pass with refused rows.
//
// A sampled chain verified by matching (accept.ts; draft.ts Chain.matched) and not constrained
// is TAKEN: matching accepts any draft, so its device draws are its drafts as they are. Nothing
// of its rows is read back (no candidates, no rows) and the replay confirms nothing: one pass a
// round. (A constrained one is replayed as above: its later steps' draws are unmasked, and a
// refused draw would waste the rest of its chain.)
//
// A biased chain that is not penalised has a table of its bias ids only (its drafts change
// nothing); its f32 sum is adjustInPlace's when the values are f32s (draft-bias.ts), and the
// replay checks it either way. A sampled chain with penalties or a bias has a table too, and a
// pass with a sampled chain calls penaltyPicks with `apply`: the touched ids' f32-adjusted
// values overwrite the step's logits rows before topCandidates and candidateDraws, so the
// proposal is drawn from the adjusted row. Its replay certifies the candidates with the touched
// ids' raw logits (gathered by the same call) adjusted exactly (replayTouched: the certificate's
// touched ids, sampled-candidates.ts); a row read whole gets those raw logits back (rawRow) and
// is adjusted and drawn by the host path's sampler (a refused row, recomputed from its hidden
// row, is raw already: putting the raw logits back changes nothing). Untouched ids are raw in both rows, and
// every candidate outside the touched ids holds its raw logit, so the certificate's argument
// (outside ids ≤ the smallest candidate) is unchanged. A round without a sampled chain runs no candidate kernels and
// counts in `stats.penalised`; one with a sampled chain counts in `stats.sampled`.
import type { MtpDeviceIds } from '../../model/forward.js';
import type { AnyKernels, CandidateDraw, FillRun, PenaltyPickRow, PenaltyPicksCall, ReadRange, StagedRead, Tensor } from '../../kernels/types.js';
import { MAX_DRAW_CANDIDATES } from '../../kernels/candidate-draws.js';
import { adjusted, allowed, maskReplayed, maskedPickExact, maskedRuns, unmaskedPickExact } from './draft-rules.js';
import type { RequestView } from '../request.js';
import type { Rng } from '../../util/rng.js';
import { isGreedy, type SamplingParams } from '../sampler.js';
import { candidateCount, candidateDrawOf, certifiedDist, certify, draftCandidateCount, type CertifiedRow, type TouchedLogits } from '../sampled-candidates.js';
import { finishesOnHost, idsOf } from '../device-picks.js';
import { greedyAdjust, penaltyRow, replayPick, replayTouched } from '../device-finish.js';
import { matcherAfterDrafts } from '../logits-adjust.js';
import { penaltyValsAt } from '../../kernels/penalty-picks.js';
import type { Dist } from './sparse-accept.js';
import { type DraftPassMemory, draftPassMemory } from '../draft-memory.js';

/** A chain of the round: its request, how many drafts it proposes, its exact drafts and q's. */
export interface SampledChain {
  readonly req: RequestView;
  readonly drafts: number;
  readonly proposed: number[];
  readonly qs: Dist[] | null;
  /** Its sampled drafts' uniforms, one a draft in order (draft.ts draftUniforms). */
  readonly rng: Rng;
  /** Verified by matching (accept.ts): any proposal serves, no q is read (draft.ts). */
  readonly matched?: boolean;
}

/** The drafter's MTP steps, over the first rows of a hidden tensor. */
export interface DeviceSteps<C extends SampledChain> {
  /** Draft logits of hidden rows [0, live) into `into` ([≥ live, V_draft]). */
  logits(hidden: Tensor, live: number, into: Tensor): void;
  /** MTP hidden rows of draft step `step` of `chains`, their previous draft given on the host
   * (`tokens`) or in kernel memory (`device`). */
  forward(chains: readonly C[], hidden: Tensor, step: number, tokens: readonly number[] | null, device: MtpDeviceIds<Tensor> | null): Tensor;
  /** The arena's draft-hidden rows (where a redraft gathers its kept hidden rows). */
  hiddenRows(n: number): Tensor;
  /** The host path's draw of chain c's draft `index` (0-based) from its full raw logits row
   * (adjusted here: bias and constraint mask after `before`, the drafts before it, then
   * penalties counting them) with uniform u: the token and q, and whether u was used (not for a
   * row the constraint masks whole: draft 0, sure to be rejected). The row may be modified. */
  drawRow(c: C, row: Float32Array, u: number, index: number, before: readonly number[]): { token: number; q: Dist; drew: boolean };
}

/** A pass's penaltyPicks calls (when a greedy chain of it is penalised or biased): the rows'
 * tables (every member's; a sampled one's is empty, its pick overwritten by the draw) and each
 * pass step's call. */
interface PassPenalties {
  readonly tables: PenaltyPickRow[];
  readonly calls: PenaltyPicksCall[];
  readonly bestBase: number;
}

/** How many of `chains` (longest first) draft at step `step`. */
function drafting(chains: readonly SampledChain[], step: number): number {
  let n = 0;
  while (n < chains.length && chains[n]!.drafts >= step) n++;
  return n;
}

/** A round's state across its passes. */
interface Round<C extends SampledChain> {
  readonly chains: readonly C[];
  readonly steps: DeviceSteps<C>;
  /** The counters the round adds to (DeviceDrafts.stats: sampled or penalised). */
  readonly stats: { passes: number; disagreements: number; refused?: number; refusedReads?: number; ended: number };
  /** us[j][u]: chain j's u-th uniform of the round (looked ahead at on a fork of its uniforms;
   * empty for an argmax chain). A draft uses the next one unless its row is all masked. */
  readonly us: readonly number[][];
  /** drew[j][s − 1]: did chain j's exact draft s use a uniform (parallel to exact[j]). */
  readonly drew: boolean[][];
  /** Per chain: candidates read back (its candidateCount), or 0 (its logits rows). */
  readonly want: readonly number[];
  /** Per chain: its device proposals are its drafts as they are (a matched sampled chain without
   * a constraint: matching accepts any draft, so nothing is read back for it or replayed). */
  readonly taken: readonly boolean[];
  /** Candidates per row of the round's topCandidates calls (0: no sampled chain, none run). */
  readonly c: number;
  /** exact[j] / exactQ[j]: chain j's drafts (and q's) the replay confirmed or replaced so far. */
  readonly exact: number[][];
  readonly exactQ: Dist[][];
  /** savedAt[j][s − 1]: chain j's MTP hidden row of draft step s in the kept rows. */
  readonly savedAt: number[][];
  savedRows: number;
}

/** What the replay reads of a sampled row: its certified candidates, else its raw logits row;
 * and an adjusted row's touched ids with their raw logits (null: none). */
interface StepRead {
  readonly cert: CertifiedRow | null;
  row: Float32Array | null;
  readonly touched: TouchedLogits | null;
}

export class DeviceDrafts {
  /** The backend's draft-pass buffers (draft-memory.ts: sized once at engine start): picks and
   * bests, candidates, penaltyPicks' values, one draft logits buffer [rows, v] (each pass step
   * overwrites it), kept MTP hidden rows. */
  private readonly mem: DraftPassMemory;
  private ids: Tensor | null = null;
  private cands: { ids: Tensor; vals: Tensor } | null = null;
  private saved: Tensor | null = null;
  /** Since construction, of rounds with a sampled chain: rounds, their draft steps (the host
   * path reads back once a step), passes (one read-back each), chains whose replay disagreed,
   * rows the certificate refused (read whole) and the read-backs that brought them; of rounds
   * of greedy chains alone: rounds, passes, chains whose replay disagreed. */
  readonly stats = {
    sampled: { rounds: 0, steps: 0, passes: 0, disagreements: 0, refused: 0, refusedReads: 0, ended: 0 },
    penalised: { rounds: 0, passes: 0, disagreements: 0, ended: 0 },
  };

  constructor(private readonly k: AnyKernels, private readonly v: number, private readonly h: number,
    /** Replay sampled rows from their candidates (else from their logits rows). */
    private readonly fromCandidates: boolean,
    /** Passes after the first a round may run: past them, a chain whose replay disagreed ends
     * where its exact drafts end (`ended`; but a chain that must keep the host path's drafts,
     * mustRedraft, redrafts on). */
    private readonly redrafts = 0) {
    this.mem = draftPassMemory(k, v);
  }

  /** Candidates a row of a recorded round's draw steps holds (recordDraws): enough for every
   * sampled chain's cut (`cuts`), at least 64. */
  drawCandidates(cuts: readonly SamplingParams[]): number {
    return Math.min(MAX_DRAW_CANDIDATES, Math.max(64, ...cuts.map((p) => candidateCount(p, this.v) || MAX_DRAW_CANDIDATES)));
  }

  /** The candidate buffers holding `rows` rows of `c` for a recorded round (reserved before its
   * first step: a later step's call must not move the rows an earlier one wrote). */
  candidateRows(rows: number, c: number): { ids: Tensor; vals: Tensor } {
    return { ids: this.mem.candIds.atLeast(rows * c), vals: this.mem.candVals.atLeast(rows * c) };
  }

  /** Record the draws of a draft step's sampled rows into ids[offset + j] (rows[j] non-null;
   * the others keep what is there): the top candidates of logits rows [rows.length, v] of `x`
   * into candidate rows [at, at + rows.length) (c = drawCandidates(cuts) each), then
   * Kernels.candidateDraws. Nothing is read back or replayed here: a deferred round takes the
   * f32 proposals of chains verified by matching as its drafts, and reads the candidates of
   * those verified by rejection sampling back with the verify (deferred-rejection.ts). */
  recordDraws(ids: Tensor, offset: number, x: Tensor, rows: readonly (CandidateDraw | null)[], cuts: readonly SamplingParams[], at = 0): void {
    const m = rows.length;
    const c = this.drawCandidates(cuts);
    const { ids: cIds, vals: cVals } = this.candidateRows(at + m, c);
    this.k.topCandidates(cIds, cVals, at * c, x, m, this.v, this.v, c);
    this.k.candidateDraws(ids, offset, cIds, cVals, at * c, c, rows);
  }

  /** Every draft of `chains` (longest first; hidden rows [0, n) of `first` predict d_1). */
  async run<C extends SampledChain>(chains: readonly C[], first: Tensor, steps: DeviceSteps<C>): Promise<void> {
    const n = chains.length;
    const k = chains[0]!.drafts;
    const sampled = chains.map((c) => !isGreedy(c.req.sampling));
    const anySampled = sampled.includes(true);
    const stats = anySampled ? this.stats.sampled : this.stats.penalised;
    stats.rounds++;
    if (anySampled) this.stats.sampled.steps += k;
    const taken = chains.map((ch, j) => sampled[j]! && ch.matched === true && !ch.req.adjust?.constraint);
    const want = chains.map((ch, j) => (sampled[j] && !taken[j] && this.fromCandidates ? draftCandidateCount(ch.req.sampling, this.v) : 0));
    const c = anySampled ? this.drawCandidates(chains.filter((_, j) => sampled[j]).map((ch) => ch.req.sampling)) : 0;
    this.reserve(n, k, c);
    const us = chains.map((ch, j) => {
      const rng = ch.rng.fork();
      return sampled[j] ? Array.from({ length: ch.drafts }, () => rng.next()) : [];
    });
    const round: Round<C> = {
      chains, steps, stats, us, want, taken, c, exact: chains.map(() => []), exactQ: chains.map(() => []), drew: chains.map(() => []), savedAt: chains.map(() => []), savedRows: 0,
    };
    let group = chains.map((_, j) => j);
    let start = 1;
    let hidden = first;
    for (let pass = 0; ; pass++) {
      const restart = await this.pass(round, group, start, hidden);
      let again = group.filter((j) => restart.has(j));
      if (pass >= this.redrafts) { // no redraft left: a chain ends with its exact drafts
        for (const j of again) if (!mustRedraft(chains[j]!)) keepExact(round, j, restart.get(j)! - 1);
        stats.ended += again.filter((j) => !mustRedraft(chains[j]!)).length;
        again = again.filter((j) => mustRedraft(chains[j]!));
      }
      if (again.length === 0) break;
      start = Math.min(...again.map((j) => restart.get(j)!));
      for (const j of again) keepExact(round, j, start - 1);
      const dst = steps.hiddenRows(again.length);
      this.k.gatherRows(dst, this.saved!, again.map((j) => round.savedAt[j]![start - 2]!), this.h);
      group = again;
      hidden = steps.forward(again.map((j) => chains[j]!), dst, start, again.map((j) => round.exact[j]![start - 2]!), null);
    }
    chains.forEach((ch, j) => {
      ch.proposed.push(...round.exact[j]!);
      if (!sampled[j]) return;
      ch.qs!.push(...round.exactQ[j]!);
      // the chain's uniforms move by those the exact drafts used, as on the host path
      for (const d of round.drew[j]!) if (d) ch.rng.next();
    });
  }

  /** Draft steps start.. of the chains `group` on the kernels, then the replay: appends each
   * chain's exact drafts; returns, per chain whose device pick differed before its last draft,
   * the step to redraft from. */
  private async pass<C extends SampledChain>(round: Round<C>, group: readonly number[], start: number, first: Tensor): Promise<Map<number, number>> {
    const { chains, steps, us, want, taken, c, savedAt } = round;
    const g = group.length;
    const members = group.map((j) => chains[j]!);
    const k = members[0]!.drafts;
    const ids = this.ids!;
    const cIds = this.cands?.ids;
    const cVals = this.cands?.vals;
    const lives: number[] = [];
    /** Rows read whole (sampled, no candidates), by t·g + i: staged at their step. */
    const whole = new Map<number, StagedRead>();
    // a constrained greedy chain's picks gather their logits (penaltyPicks, an empty table)
    const pen = members.some((m) => adjusted(m.req) || maskReplayed(m.req)) ? this.penaltiesFor(round, group, start) : null;
    let vo = 0;
    let hidden = first;
    for (let s = start; s <= k; s++) {
      const t = s - start;
      const live = drafting(members, s);
      lives.push(live);
      this.k.copyRows(this.saved!, round.savedRows * this.h, this.h, hidden, 0, this.h, live, this.h);
      for (let i = 0; i < live; i++) savedAt[group[i]!]![s - 1] = round.savedRows + i;
      round.savedRows += live;
      const x = this.logitsFor(g);
      steps.logits(hidden, live, x);
      if (t === 0) this.maskFirst(round, group, start, live, x);
      const rows = members.slice(0, live).map((m, i): CandidateDraw | null => (isGreedy(m.req.sampling) ? null
        : candidateDrawOf(m.req.sampling, us[group[i]!]![usedBefore(round, group[i]!, start) + t]!, this.v)));
      if (pen) {
        // the same row objects every step (a prefix of them): the device may keep their table
        // with a sampled row, x becomes the f32-adjusted rows its candidates and draw read
        const call: PenaltyPicksCall = {
          m: live, n: this.v, stride: this.v, steps: t, idsStride: g, bestOffset: pen.bestBase + t * g, valsOffset: vo, rows: pen.tables.slice(0, live), apply: c > 0,
        };
        vo = penaltyValsAt(call, live);
        pen.calls.push(call);
        this.k.penaltyPicks(ids, x, this.mem.vals.t!, call);
      } else if (rows.some((r) => r === null)) this.k.argmaxRows(ids, t * g, x, live, this.v, this.v);
      if (c > 0) {
        this.k.topCandidates(cIds!, cVals!, t * g * c, x, live, this.v, this.v, c);
        this.k.candidateDraws(ids, t * g, cIds!, cVals!, t * g * c, c, rows);
      }
      for (let i = 0; i < live; i++) {
        if (rows[i] && want[group[i]!] === 0 && !taken[group[i]!]) whole.set(t * g + i, this.k.stage([{ t: x, offset: i * this.v, length: this.v }]));
      }
      const next = drafting(members, s + 1);
      if (next > 0) hidden = steps.forward(members.slice(0, next), hidden, s + 1, null, { ids, offset: t * g });
    }
    // one read-back: every pick, then per sampled row its candidates or its logits row
    const ranges: ReadRange<Tensor>[] = [{ t: ids, offset: 0, length: lives.length * g }];
    if (pen) ranges.push({ t: ids, offset: pen.bestBase, length: lives.length * g }, { t: this.mem.vals.t!, offset: 0, length: Math.max(vo, 1) });
    const at: { t: number; i: number; cands: boolean }[] = [];
    lives.forEach((live, t) => {
      for (let i = 0; i < live; i++) {
        const j = group[i]!;
        if (isGreedy(chains[j]!.req.sampling) || taken[j]) continue;
        const o = (t * g + i) * c;
        if (want[j]! > 0) ranges.push({ t: cIds!, offset: o, length: c }, { t: cVals!, offset: o, length: c });
        at.push({ t, i, cands: want[j]! > 0 });
      }
    });
    const read = await this.k.readBack(ranges);
    round.stats.passes++;
    const picks = idsOf(read[0]!);
    const penRead = pen ? { ...pen, bests: idsOf(read[1]!), vals: read[2]! } : null;
    const data = new Map<number, { ids: Int32Array; vals: Float32Array } | Float32Array>();
    let r = pen ? 3 : 1;
    for (const a of at) data.set(a.t * g + a.i, a.cands ? { ids: idsOf(read[r++]!), vals: read[r++]! } : whole.get(a.t * g + a.i)!.data![0]!);
    const got = new Map<number, StepRead>();
    group.forEach((j, i) => {
      const req = chains[j]!.req;
      if (isGreedy(req.sampling) || round.taken[j]) return;
      for (let t = 0; t < lives.length && i < lives[t]!; t++) {
        // the row's adjustment as it stands if the replay reaches it (the pass's picks before it
        // then are the chain's exact drafts)
        const adjust = this.stepAdjust(round, j, i, start, Array.from({ length: t }, (_, u) => picks[u * g + i]!), penRead, t);
        const d = data.get(t * g + i)!;
        const cert = d instanceof Float32Array ? null : certify(d.ids, d.vals, req.sampling, this.v, adjust);
        got.set(t * g + i, { cert, row: d instanceof Float32Array ? rawRow(d, adjust) : null, touched: adjust });
        // a pick the constraint refuses: the exact draft differs there, the replay stops there
        if (adjust?.a.mask && !allowed(adjust.a.mask, picks[t * g + i]!)) break;
      }
    });
    // rows the certificate refuses (that the replay can reach): read whole, all in one more read-back
    const refused = at.filter((a) => a.cands && got.has(a.t * g + a.i) && !got.get(a.t * g + a.i)!.cert);
    if (refused.length > 0) {
      const rows = await this.refusedRows(round, group, start, refused);
      const st = round.stats;
      st.refused = (st.refused ?? 0) + refused.length;
      st.refusedReads = (st.refusedReads ?? 0) + 1;
      refused.forEach(({ i, t }, j) => {
        const rd = got.get(t * g + i)!;
        rd.row = rawRow(rows[j]!, rd.touched);
      });
    }
    return this.replay(round, group, start, picks, got, penRead);
  }

  /** The pass's first step under the constraint masks of its constrained members (known: the
   * drafts before it are exact): masked ids of their logits rows set to −∞ (one fillRuns), as
   * adjustInPlace writes them. The replay masks them too, so only the proposal changes. */
  private maskFirst<C extends SampledChain>(round: Round<C>, group: readonly number[], start: number, live: number, x: Tensor): void {
    const runs: FillRun[] = [];
    for (let i = 0; i < live; i++) {
      const j = group[i]!;
      const req = round.chains[j]!.req;
      if (!req.adjust?.constraint) continue;
      const mask = matcherAfterDrafts(req, start - 1, round.exact[j]!.slice(0, start - 1))?.mask();
      if (mask) runs.push(...maskedRuns(mask, this.v, i * this.v));
    }
    if (runs.length > 0) this.k.fillRuns(x, runs, -Infinity);
  }

  /** What the replay applies to chain j's (pass member i's) sampled row at pass step t, its pass
   * drafts before it `drafts`: the constraint's mask after the drafts before it, and for a
   * penalised or biased chain the touched ids with the raw logits its penaltyPicks call gathered
   * (null: neither). */
  private stepAdjust<C extends SampledChain>(round: Round<C>, j: number, i: number, start: number, drafts: readonly number[],
    pen: (PassPenalties & { vals: Float32Array }) | null, t: number): TouchedLogits | null {
    const req = round.chains[j]!.req;
    const prefix = round.exact[j]!.slice(0, start - 1);
    const mask = req.adjust?.constraint ? (matcherAfterDrafts(req, prefix.length + t, [...prefix, ...drafts])?.mask() ?? null) : null;
    if (pen && adjusted(req)) {
      const x = replayTouched(req, this.v, pen.tables[i]!, prefix, drafts, pen.vals, penaltyValsAt(pen.calls[t]!, i));
      return { ...x, a: { ...x.a, mask } };
    }
    return mask ? { a: greedyAdjust(req, mask, this.v, [...prefix, ...drafts]), touched: [], raw: [] } : null;
  }

  /** The penaltyPicks tables of a pass's members (their exact drafts before `start` counted) and
   * its values buffer, sized for every step: grown here (before the pass records anything) when
   * the tables pass the reservation's bound (draft-memory.ts: a logit bias of ids outside the
   * context). */
  private penaltiesFor<C extends SampledChain>(round: Round<C>, group: readonly number[], start: number): PassPenalties {
    const members = group.map((j) => round.chains[j]!);
    const tables = members.map((m, i) => penaltyRow(m.req, this.v, round.exact[group[i]!]!));
    let need = 0;
    for (let s = start; s <= members[0]!.drafts; s++) need += tables.slice(0, drafting(members, s)).reduce((a, row) => a + 1 + row.ids.length + s - start, 0);
    this.mem.vals.atLeast(need);
    return { tables, calls: [], bestBase: members[0]!.drafts * group.length };
  }

  /** Each chain's steps in order with the exact draw and the same uniform: its exact drafts (and
   * q's) appended; at the first disagreement the host's draw wins and the chain redrafts after it. */
  private replay<C extends SampledChain>(round: Round<C>, group: readonly number[], start: number, picks: Int32Array,
    got: Map<number, StepRead>, pen: (PassPenalties & { bests: Int32Array; vals: Float32Array }) | null): Map<number, number> {
    const { chains, steps, us, exact, exactQ } = round;
    const g = group.length;
    const restart = new Map<number, number>();
    group.forEach((j, i) => {
      const ch = chains[j]!;
      for (let s = start; s <= ch.drafts; s++) {
        const t = s - start;
        const pick = picks[t * g + i]!;
        let host = pick;
        let drew = false;
        if (pen && finishesOnHost(ch.req)) {
          // a penalised or biased greedy row's f32 pick is a proposal; a plain argmax row's is exact
          const ex = exact[j]!;
          const [at, best] = [penaltyValsAt(pen.calls[t]!, i), pen.bests[t * g + i]!];
          const mask = ch.req.adjust?.constraint ? (matcherAfterDrafts(ch.req, ex.length, ex)?.mask() ?? null) : null;
          // constrained, after the first step: the untouched best must be the best allowed one
          if (t > 0 && !unmaskedPickExact(mask, best, pen.vals[at]!)) {
            round.stats.disagreements++;
            restart.set(j, s);
            break;
          }
          host = replayPick(ch.req, this.v, pen.tables[i]!, ex.slice(0, start - 1), ex.slice(start - 1), pen.vals, at, best, mask);
        } else if (pen && maskReplayed(ch.req) && t > 0 && !maskedPickExact(ch.req, exact[j]!, pick, pen.vals[penaltyValsAt(pen.calls[t]!, i)]!)) {
          // the unmasked pick may not be the masked one: redraft from this step (masked there)
          round.stats.disagreements++;
          restart.set(j, s);
          break;
        } else if (round.taken[j]) {
          drew = true; // the device's draw, with this step's uniform, is the draft
        } else if (!isGreedy(ch.req.sampling)) {
          const rd = got.get(t * g + i);
          if (!rd) throw new Error(`internal error: draft step ${s} reached by the replay was not read`);
          const u = us[j]![drawn(round.drew[j]!)]!;
          const draw = rd.cert ? certifiedDist(rd.cert, ch.req.sampling, u) : null;
          const out = draw ? { token: draw.token, q: draw.dist, drew: true } : steps.drawRow(ch, rd.row!, u, s - 1, exact[j]!);
          [host, drew] = [out.token, out.drew];
          exactQ[j]!.push(out.q);
        }
        exact[j]!.push(host);
        round.drew[j]!.push(drew);
        // a draft that used no uniform (an all-masked row) shifts the later ones: redraft after it
        if (host !== pick || (!drew && !isGreedy(ch.req.sampling))) {
          round.stats.disagreements++;
          if (s < ch.drafts) restart.set(j, s + 1);
          break;
        }
      }
    });
    return restart;
  }

  /** The draft logits buffer, of at least `rows` rows. */
  private logitsFor(rows: number): Tensor {
    return this.mem.logitsRows(rows);
  }

  /** The logits rows of refused (step t, member i) rows, in order, in one read-back: the draft
   * lm_head over their kept MTP hidden rows (the inputs of their steps' logits), a group's
   * worth at a time into the one logits buffer, each batch staged before the next. */
  private async refusedRows<C extends SampledChain>(round: Round<C>, group: readonly number[], start: number,
    refused: readonly { readonly t: number; readonly i: number }[]): Promise<Float32Array[]> {
    const staged: StagedRead[] = [];
    for (let o = 0; o < refused.length; o += group.length) {
      const part = refused.slice(o, o + group.length);
      const hidden = round.steps.hiddenRows(part.length);
      this.k.gatherRows(hidden, this.saved!, part.map(({ t, i }) => round.savedAt[group[i]!]![start + t - 1]!), this.h);
      const x = this.logitsFor(part.length);
      round.steps.logits(hidden, part.length, x);
      staged.push(this.k.stage(part.map((_, r) => ({ t: x, offset: r * this.v, length: this.v }))));
    }
    await this.k.readBack([]);
    return staged.flatMap((st) => st.data!);
  }

  /** Buffers for a round of n chains, k drafts and c candidates a row: picks and bests [k, n] each, candidates
   * [k, n, c], and kept hidden rows for every step of every pass (a redraft starts a step later). */
  private reserve(n: number, k: number, c: number): void {
    this.ids = this.mem.ids.atLeast(2 * k * n);
    if (c > 0) this.cands = { ids: this.mem.candIds.atLeast(k * n * c), vals: this.mem.candVals.atLeast(k * n * c) };
    this.saved = this.mem.saved.atLeast(((k * (k + 1)) / 2) * n * this.h);
  }
}

/** How many uniforms a chain's exact drafts used. */
function drawn(drew: readonly boolean[]): number {
  return drew.reduce((n, d) => n + (d ? 1 : 0), 0);
}

/** Chain j's exact drafts (and q's, and uniforms used) cut to the first `n`. */
function keepExact(round: Round<SampledChain>, j: number, n: number): void {
  round.exact[j]!.length = n;
  round.exactQ[j]!.length = Math.min(round.exactQ[j]!.length, n);
  round.drew[j]!.length = Math.min(round.drew[j]!.length, n);
}

/** Must the chain's drafts be the host path's whatever the passes cost: a seeded sampled
 * request verified by rejection sampling (its tokens depend on its drafts, and a seed gives the
 * same tokens on every backend). A greedy or matched chain's drafts only decide how many are
 * accepted, and an unseeded one has nothing to reproduce: it may end at a disagreement. */
function mustRedraft(ch: SampledChain): boolean {
  return !isGreedy(ch.req.sampling) && ch.matched !== true && ch.req.seeded;
}

/** The uniforms chain j's drafts before pass step `start` used (its pass steps use the next). */
function usedBefore<C extends SampledChain>(round: Round<C>, j: number, start: number): number {
  return drawn(round.drew[j]!.slice(0, start - 1));
}

/** A copy of a read logits row with the touched ids' raw logits put back (penaltyPicks' `apply`
 * wrote their f32-adjusted values there): the row the host path adjusts and samples. */
function rawRow(read: Float32Array, touched: TouchedLogits | null): Float32Array {
  const row = read.slice();
  touched?.touched.forEach((id, e) => { row[id] = touched.raw[e]!; });
  return row;
}

