// MTP drafts of PENALISED (or biased) greedy requests chained on the kernels (draft.ts calls it
// when every chain is such a request without a constraint, or a plain argmax chain).
//
// A pass runs draft steps start..k with no read-back between them: step s picks with
// Kernels.penaltyPicks — the request's penalties in f32, the drafts before s counted as outputs
// — and the next MTP step embeds that pick from kernel memory. Each step also gathers the
// untouched best and the raw logits of every touched id (history ∪ earlier drafts); one
// read-back brings the whole pass. The host then replays every step's EXACT pick (f64,
// greedyToken's: device-finish.ts replayPick) from those values: where the kernels' pick
// equals it for every step, the pass's drafts are the round's; at the first step s where they
// differ, the host's pick replaces the kernels', and the chain redrafts from s + 1 in one more
// pass (its MTP hidden row of step s kept from this one). So the drafts are always the host
// path's (greedyToken over the read-back row, draft.ts pickDrafts), and a round costs 2
// read-backs (drafts + verify) plus one per redraft pass.
//
// A biased chain that is not penalised has a table of its bias ids only (its drafts change
// nothing); its f32 sum is adjustInPlace's when the values are f32s (draft-bias.ts), and the
// replay checks it either way. Plain argmax chains ride along with empty tables: their picks
// are argmaxRows' ids, exact as they come, and are not replayed.
import type { MtpDeviceIds } from '../../model/forward.js';
import type { AnyKernels, PenaltyPicksCall, Tensor } from '../../kernels/types.js';
import { penaltyValsAt } from '../../kernels/penalty-picks.js';
import type { RequestView } from '../request.js';
import { finishesOnHost, idsOf } from '../device-picks.js';
import { penaltyRow, replayPick } from '../device-finish.js';
import { type DraftPassMemory, draftPassMemory } from '../draft-memory.js';

/** A chain of the round: its request, how many drafts it proposes, and its exact drafts. */
export interface PenaltyChain {
  readonly req: RequestView;
  readonly drafts: number;
  readonly proposed: number[];
}

/** The drafter's MTP steps, over the first rows of a hidden tensor. */
export interface DraftSteps<C extends PenaltyChain> {
  /** Draft logits [live, V_draft] of hidden rows [0, live). */
  logits(hidden: Tensor, live: number): Tensor;
  /** MTP hidden rows of draft step `step` of `chains` (fed hidden rows [0, chains.length)), their
   * previous draft given on the host (`tokens`) or in kernel memory (`device`). */
  forward(chains: readonly C[], hidden: Tensor, step: number, tokens: readonly number[] | null, device: MtpDeviceIds<Tensor> | null): Tensor;
  /** The arena's draft-hidden rows (where a redraft gathers its kept hidden rows). */
  hiddenRows(n: number): Tensor;
}

/** A round's state across its passes. */
interface Round<C extends PenaltyChain> {
  readonly chains: readonly C[];
  readonly steps: DraftSteps<C>;
  /** exact[j]: chain j's drafts the replay has confirmed (or replaced) so far. */
  readonly exact: number[][];
  /** savedAt[j][s − 1]: chain j's MTP hidden row of draft step s in the kept rows. */
  readonly savedAt: number[][];
  /** Kept hidden rows written so far this round. */
  savedRows: number;
}

/** How many of `chains` (longest first) draft at step `step`. */
function drafting(chains: readonly PenaltyChain[], step: number): number {
  let n = 0;
  while (n < chains.length && chains[n]!.drafts >= step) n++;
  return n;
}

export class PenaltyDrafts {
  /** The backend's draft-pass buffers (draft-memory.ts: sized once at engine start, shared
   * with draft-sampled.ts): picks and bests, gathered values, kept MTP hidden rows. */
  private readonly mem: DraftPassMemory;
  private ids: Tensor | null = null;
  private vals: Tensor | null = null;
  /** MTP hidden rows of every step of a round's passes, for redrafts. */
  private saved: Tensor | null = null;
  /** Since construction: rounds, passes (one read-back each), chains whose replay disagreed. */
  readonly stats = { rounds: 0, passes: 0, disagreements: 0 };

  constructor(private readonly k: AnyKernels, private readonly v: number, private readonly h: number) {
    this.mem = draftPassMemory(k, v);
  }

  /** Every draft of `chains` (longest first; hidden rows [0, n) of `first` predict d_1). */
  async run<C extends PenaltyChain>(chains: readonly C[], first: Tensor, steps: DraftSteps<C>): Promise<void> {
    const n = chains.length;
    const k = chains[0]!.drafts;
    this.reserve(n, k);
    this.stats.rounds++;
    const round: Round<C> = { chains, steps, exact: chains.map(() => []), savedAt: chains.map(() => []), savedRows: 0 };
    const { exact, savedAt } = round;
    let group = chains.map((_, j) => j);
    let start = 1;
    let hidden = first;
    for (;;) {
      const restart = await this.pass(round, group, start, hidden);
      const again = group.filter((j) => restart.has(j));
      if (again.length === 0) break;
      start = Math.min(...again.map((j) => restart.get(j)!));
      for (const j of again) exact[j]!.length = start - 1;
      const dst = steps.hiddenRows(again.length);
      this.k.gatherRows(dst, this.saved!, again.map((j) => savedAt[j]![start - 2]!), this.h);
      group = again;
      hidden = steps.forward(again.map((j) => chains[j]!), dst, start, again.map((j) => exact[j]![start - 2]!), null);
    }
    chains.forEach((c, j) => c.proposed.push(...exact[j]!));
  }

  /** Draft steps start.. of the chains `group` (indices into chains, longest first) on the
   * kernels, fed `hidden` (rows in group order) and their exact drafts before `start`; then the
   * replay. Appends each chain's exact drafts to exact[j]; returns, for each chain whose
   * kernels' pick differed before its last draft, the step to redraft from. */
  private async pass<C extends PenaltyChain>(round: Round<C>, group: readonly number[], start: number, first: Tensor): Promise<Map<number, number>> {
    const { chains, exact, savedAt, steps } = round;
    const g = group.length;
    const members = group.map((j) => chains[j]!);
    const k = members[0]!.drafts;
    const ids = this.ids!;
    const bestBase = k * g;
    const tables = members.map((c, i) => penaltyRow(c.req, this.v, exact[group[i]!]!));
    /** calls[t]: the penaltyPicks call of pass step t (where each row's values land). */
    const calls: PenaltyPicksCall[] = [];
    let vo = 0;
    let need = 0;
    for (let s = start; s <= k; s++) need += tables.slice(0, drafting(members, s)).reduce((a, r) => a + 1 + r.ids.length + s - start, 0);
    this.ensureVals(need);
    let hidden = first;
    for (let s = start; s <= k; s++) {
      const t = s - start;
      const live = drafting(members, s);
      this.k.copyRows(this.saved!, round.savedRows * this.h, this.h, hidden, 0, this.h, live, this.h);
      for (let i = 0; i < live; i++) savedAt[group[i]!]![s - 1] = round.savedRows + i;
      round.savedRows += live;
      // the same row objects every step (a prefix of them): the device may keep their table
      const call: PenaltyPicksCall = { m: live, n: this.v, stride: this.v, steps: t, idsStride: g, bestOffset: bestBase + t * g, valsOffset: vo, rows: tables.slice(0, live) };
      vo = penaltyValsAt(call, live);
      calls.push(call);
      this.k.penaltyPicks(ids, steps.logits(hidden, live), this.vals!, call);
      const next = drafting(members, s + 1);
      if (next > 0) hidden = steps.forward(members.slice(0, next), hidden, s + 1, null, { ids, offset: t * g });
    }
    const passSteps = calls.length;
    const [pickRead, bestRead, vals] = await this.k.readBack([
      { t: ids, offset: 0, length: passSteps * g }, { t: ids, offset: bestBase, length: passSteps * g }, { t: this.vals!, offset: 0, length: vo },
    ]);
    this.stats.passes++;
    const picks = idsOf(pickRead!);
    const bests = idsOf(bestRead!);
    const restart = new Map<number, number>();
    group.forEach((j, i) => {
      const c = chains[j]!;
      const prefix = exact[j]!.slice();
      const drafts: number[] = [];
      for (let s = start; s <= c.drafts; s++) {
        const t = s - start;
        const pick = picks[t * g + i]!;
        // a penalised or biased row's f32 pick is a proposal; a plain argmax row's is exact
        const host = finishesOnHost(c.req) ? replayPick(c.req, this.v, tables[i]!, prefix, drafts, vals!, penaltyValsAt(calls[t]!, i), bests[t * g + i]!) : pick;
        drafts.push(host);
        exact[j]!.push(host);
        if (host !== pick) {
          this.stats.disagreements++;
          if (s < c.drafts) restart.set(j, s + 1);
          break;
        }
      }
    });
    return restart;
  }

  /** Buffers for a round of n chains and k drafts: ids [k, n] picks + [k, n] bests, and kept
   * hidden rows for every step of every pass (a redraft pass starts a step later). */
  private reserve(n: number, k: number): void {
    this.ids = this.mem.ids.atLeast(2 * k * n);
    this.saved = this.mem.saved.atLeast(((k * (k + 1)) / 2) * n * this.h);
  }

  private ensureVals(n: number): void {
    // grown before a pass writes it (its values must survive until its read-back)
    this.vals = this.mem.vals.atLeast(n);
  }
}
