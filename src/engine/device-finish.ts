// The kernels' side of greedy picks the host finishes (penalties, logit bias:
// greedy-finish.ts): per logits row of such a request, its adjustment, its touched ids, and
// where their raw logits land in the step's read-back. The runner's argmax runs under each
// row's untouched mask, gatherPicked reads the picked id's logit, gatherRows the touched ids'
// logits; the step reads back those few values and the ids instead of the rows.
import type { BatchRow } from './batch.js';
import { finishesOnHost } from './device-picks.js';
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
  const plan = new Map<number, FinishRow>();
  const flat: number[] = [];
  rows.forEach((r, i) => {
    const req = r.req!;
    if (!layout.onKernels[i] || !finishesOnHost(req)) return;
    for (let s = 0; s < layout.count[i]!; s++) {
      const matcher = r.verify ? matcherAfterDrafts(req, s) : committedMatcher(req);
      const a: GreedyAdjust = { sampling: req.sampling, history: req.history, bias: req.adjust?.bias ?? null, mask: matcher?.mask() ?? null,
        vocab: sampleVocab, extra: r.verify ? req.drafts.slice(0, s) : [] };
      const touched = touchedIds(a);
      const row = layout.first[i]! + s;
      plan.set(row, { a, touched, at: flat.length });
      for (const id of touched) flat.push(row * stride + id);
    }
  });
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
