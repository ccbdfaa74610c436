// The kernels' side of greedy picks the host finishes (penalties, logit bias:
// greedy-finish.ts): per logits row of such a request, its adjustment, its touched ids, and
// where their raw logits land in the step's read-back. The argmax runs under each row's
// untouched mask, gatherPicked reads the picked id's logit, gatherRows the touched ids'
// logits; the step (the runner's target step, or an MTP draft step: speculative/draft.ts)
// reads back those few values and the ids instead of the rows.
import type { AnyKernels, PenaltyPickRow, Tensor } from '../kernels/types.js';
import type { BatchRow } from './batch.js';
import { finishesOnHost, penalised } from './device-picks.js';
import type { RequestView } from './request.js';
import { finishGreedy, touchedIds, untouchedMask, type GreedyAdjust } from './greedy-finish.js';
import { committedMatcher, matcherAfterDrafts } from './logits-adjust.js';

interface FinishRow {
  readonly a: GreedyAdjust;
  readonly touched: readonly number[];
  /** The touched ids' first value in the gathered values. */
  readonly at: number;
}

export interface FinishPlan {
  /** By logits row of the step's `all`. */
  readonly rows: ReadonlyMap<number, FinishRow>;
  /** Flat indices (row·stride + id) of every touched logit, rows in order. */
  readonly flat: readonly number[];
}

/** The plan of the step's logits rows (null: no row the host finishes). `first`/`count`:
 * each batch row's logits rows in `all`; onKernels: whether the kernels pick them. */
export function planFinish(rows: readonly BatchRow[], layout: { first: number[]; count: number[]; onKernels: boolean[] }, sampleVocab: number,
  stride: number): FinishPlan | null {
  const adjusts = new Map<number, GreedyAdjust>();
  rows.forEach((r, i) => {
    const req = r.req!;
    if (!layout.onKernels[i] || !finishesOnHost(req)) return;
    for (let s = 0; s < layout.count[i]!; s++) {
      const matcher = r.verify ? matcherAfterDrafts(req, s) : committedMatcher(req);
      adjusts.set(layout.first[i]! + s, greedyAdjust(req, matcher?.mask() ?? null, sampleVocab, r.verify ? req.drafts.slice(0, s) : []));
    }
  });
  return planOf(adjusts, stride);
}

/** The plan of MTP draft logits rows: row j (stride `stride`) is chain j's, finished on the
 * host under adjusts[j] (null: a row the plan leaves alone). */
export function planDraftFinish(adjusts: readonly (GreedyAdjust | null)[], stride: number): FinishPlan | null {
  const byRow = new Map<number, GreedyAdjust>();
  adjusts.forEach((a, j) => { if (a) byRow.set(j, a); });
  return planOf(byRow, stride);
}

/** What a penalised or biased greedy pick of `req` reads: its constraint `mask` (null: none)
 * at that position, the ids the pick covers ([0, vocab)), and `extra`, the drafts before it. */
export function greedyAdjust(req: RequestView, mask: Uint32Array | null, vocab: number, extra: readonly number[]): GreedyAdjust {
  return { sampling: req.sampling, history: req.history, bias: req.adjust?.bias ?? null, mask, vocab, extra };
}

function planOf(adjusts: ReadonlyMap<number, GreedyAdjust>, stride: number): FinishPlan | null {
  const plan = new Map<number, FinishRow>();
  const flat: number[] = [];
  for (const [row, a] of [...adjusts].sort((x, y) => x[0] - y[0])) {
    const touched = touchedIds(a);
    plan.set(row, { a, touched, at: flat.length });
    for (const id of touched) flat.push(row * stride + id);
  }
  return plan.size > 0 ? { rows: plan, flat } : null;
}

/** The argmax mask of logits row `row` under the plan (undefined: not a finished row). */
export function finishMask(plan: FinishPlan | null, row: number): Uint32Array | undefined {
  const f = plan?.rows.get(row);
  return f ? untouchedMask(f.a, f.touched) : undefined;
}

/** The finished ids: picks[row] replaced by the host's pick for each planned row. `values`:
 * gatherPicked's per-row logits of the picks; `touchedVals`: the gathered touched logits. */
export function finishPicks(plan: FinishPlan, picks: Int32Array, values: Float32Array, touchedVals: Float32Array): Int32Array {
  const out = picks.slice();
  for (const [row, f] of plan.rows) {
    const raw = touchedVals.subarray(f.at, f.at + f.touched.length);
    out[row] = finishGreedy(f.a, f.touched, raw, { id: picks[row]!, logit: values[row]! });
  }
  return out;
}

/** Kernel buffers for the gathered logits of finished rows (grown on demand), and the
 * gathers themselves: per row [0, n) of `x`, the logit at its pick (gatherPicked, after
 * the argmax wrote `picks`) into `values`, the plan's touched logits into `touched`. */
export class FinishGather {
  private bufs: { values: Tensor; rows: number; touched: Tensor; touchedCap: number } | null = null;

  constructor(private readonly k: AnyKernels) {}

  gather(x: Tensor, picks: Tensor, n: number, stride: number, plan: FinishPlan): { values: Tensor; touched: Tensor } {
    if (!this.bufs || this.bufs.rows < n || this.bufs.touchedCap < plan.flat.length) {
      const rows = Math.max(n, this.bufs?.rows ?? 4);
      const touchedCap = Math.max(plan.flat.length, 2 * (this.bufs?.touchedCap ?? 256));
      this.bufs = { values: this.k.alloc(rows), rows, touched: this.k.alloc(touchedCap), touchedCap };
    }
    const { values, touched } = this.bufs;
    this.k.gatherPicked(values, 0, x, picks, n, stride);
    if (plan.flat.length > 0) this.k.gatherRows(touched, x, plan.flat, 1);
    return { values, touched };
  }
}

/** Kernels.penaltyPicks' row of a greedy request whose drafts `prefix` are already known (on
 * the host) and whose next drafts the kernels pick. Penalised: the
 * table holds every id touchedIds sees with the prefix counted as outputs; else (a plain or
 * biased chain) only the bias ids, and the drafts change nothing. */
export function penaltyRow(req: RequestView, vocab: number, prefix: readonly number[]): PenaltyPickRow {
  const a = greedyAdjust(req, null, vocab, prefix);
  const p = req.sampling;
  const countsDrafts = penalised(p);
  const ids = touchedIds(a);
  const counts = ids.map((id) => countsDrafts ? (req.history.outputCounts.get(id) ?? 0) + prefix.reduce((c, d) => c + (d === id ? 1 : 0), 0) : 0);
  return {
    repetition: countsDrafts ? p.repetitionPenalty : 1, presence: countsDrafts ? p.presencePenalty : 0, frequency: countsDrafts ? p.frequencyPenalty : 0,
    countsDrafts, ids: Int32Array.from(ids), bias: Float32Array.from(ids, (id) => a.bias?.get(id) ?? 0),
    prompt: Uint8Array.from(ids, (id) => (countsDrafts && req.history.promptIds.has(id) ? 1 : 0)), counts: Int32Array.from(counts),
    untouched: untouchedMask(a, ids),
  };
}

/** The exact pick (greedyToken's, f64) of a penaltyPicks row from what the call gathered
 * (under `mask`, a constraint's, when given: exact where `best` is the best allowed untouched id):
 * `vals` from `at`, the row's penaltyValsAt (the best's raw logit, the table ids', the drafts'), `best` its
 * untouched best, `drafts` the call's drafts before it (counted as outputs after `prefix`,
 * the drafts the row's table already counts). */
export function replayPick(req: RequestView, vocab: number, row: PenaltyPickRow, prefix: readonly number[], drafts: readonly number[],
  vals: Float32Array, at: number, best: number, mask: Uint32Array | null = null): number {
  const { a, touched, raw } = replayTouched(req, vocab, row, prefix, drafts, vals, at);
  return finishGreedy(mask ? { ...a, mask } : a, touched, raw, { id: best, logit: vals[at]! });
}

/** A penaltyPicks row's adjustment at the call (its drafts `drafts` counted after `prefix`),
 * its touched ids and their raw logits from the call's gathered `vals` (from `at`, the row's
 * penaltyValsAt): what replayPick finishes a greedy pick from, and what a sampled draft's
 * certificate adjusts its candidates with (sampled-candidates.ts TouchedLogits). */
export function replayTouched(req: RequestView, vocab: number, row: PenaltyPickRow, prefix: readonly number[], drafts: readonly number[],
  vals: Float32Array, at: number): { a: GreedyAdjust; touched: number[]; raw: number[] } {
  const a = greedyAdjust(req, null, vocab, [...prefix, ...drafts]);
  const byId = new Map<number, number>();
  row.ids.forEach((id, e) => byId.set(id, vals[at + 1 + e]!));
  drafts.forEach((id, t) => { if (!byId.has(id)) byId.set(id, vals[at + 1 + row.ids.length + t]!); });
  const touched = touchedIds(a);
  return { a, touched, raw: touched.map((id) => byId.get(id)!) };
}
