// Greedy picks under penalties or logit bias without the vocabulary-sized logits row: the
// kernels pick the argmax over the ids no penalty or bias touches (under the request's
// constraint mask), the step reads back that id, its logit and the touched ids' raw logits,
// and the host finishes here — the touched logits adjusted exactly as adjustInPlace and
// greedyToken adjust them, and the pick made by greedyToken itself over a compact proxy row.
//
// Invariant (why the proxy row gives the full row's pick): every untouched allowed id other
// than the untouched best u holds a logit ≤ u's, and an equal one only at a higher id; masked
// untouched ids hold −∞. So the full row's lowest id of the maximum is among the proxy's ids
// (u, the touched ids, and id 0 at −∞ standing for the all-−∞ row, whose pick is id 0), and
// the proxy keeps the ids' order, so ties go to the lower id on both. The one case it cannot
// see is a row whose untouched logits are NaN and every other logit −∞ (a broken model).
import { greedyToken, type HistoryView, type SamplingParams } from './sampler.js';

/** What a penalised or biased greedy pick reads of its request. `extra`: ids generated
 * after the history (a verify position's drafts before it). */
export interface GreedyAdjust {
  readonly sampling: SamplingParams;
  readonly history: HistoryView | null;
  readonly bias: ReadonlyMap<number, number> | null;
  /** The constraint mask (adjustInPlace's: a clear bit, or a word past the end, is −∞); null: none. */
  readonly mask: Uint32Array | null;
  readonly vocab: number;
  readonly extra?: readonly number[];
}

function penalised(p: SamplingParams, h: HistoryView | null): h is HistoryView {
  return h !== null && (p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0);
}

/** The ids (< vocab, ascending, distinct) whose logits a penalty or the bias may change. */
export function touchedIds(a: GreedyAdjust): number[] {
  const ids = new Set<number>();
  if (a.bias) for (const id of a.bias.keys()) ids.add(id);
  const h = a.history;
  if (penalised(a.sampling, h)) {
    for (const id of h.outputCounts.keys()) ids.add(id);
    for (const id of a.extra ?? []) ids.add(id);
    if (a.sampling.repetitionPenalty !== 1) for (const id of h.promptIds) ids.add(id);
  }
  return [...ids].filter((id) => Number.isInteger(id) && id >= 0 && id < a.vocab).sort((x, y) => x - y);
}

/** The mask the kernels' argmax applies: the constraint's allowed ids less the touched ones. */
export function untouchedMask(a: GreedyAdjust, touched: readonly number[]): Uint32Array {
  const words = Math.ceil(a.vocab / 32);
  const out = new Uint32Array(words);
  if (a.mask) out.set(a.mask.subarray(0, words));
  else out.fill(-1 >>> 0);
  for (const id of touched) out[id >>> 5] = out[id >>> 5]! & ~(1 << (id & 31));
  return out;
}

function allowed(mask: Uint32Array | null, id: number): boolean {
  return mask === null || (((mask[id >>> 5] ?? 0) >>> (id & 31)) & 1) === 1;
}

/** The host's greedy pick of the full row, from the touched ids' raw logits (`raw[i]` is
 * touched[i]'s) and the kernels' masked argmax `best` over the untouched allowed ids with its
 * raw logit. Bias then mask as adjustInPlace (the sum rounded to f32), penalties and the tie
 * rule as greedyToken (it runs over the proxy row). */
export function finishGreedy(a: GreedyAdjust, touched: readonly number[], raw: ArrayLike<number>, best: { id: number; logit: number }): number {
  const entries = new Map<number, number>();
  touched.forEach((id, i) => {
    const b = a.bias?.get(id);
    const v = b === undefined ? raw[i]! : Math.fround(raw[i]! + b);
    entries.set(id, allowed(a.mask, id) ? v : -Infinity);
  });
  // best is a real candidate only when it is untouched and allowed (else every such id is −∞)
  if (!entries.has(best.id) && allowed(a.mask, best.id) && best.id < a.vocab) entries.set(best.id, best.logit);
  if (!entries.has(0)) entries.set(0, -Infinity);
  const ids = [...entries.keys()].sort((x, y) => x - y);
  const at = new Map(ids.map((id, i) => [id, i]));
  const row = Float32Array.from(ids, (id) => entries.get(id)!);
  const pick = greedyToken(row, a.sampling, proxyHistory(a.history, at), ids.length, undefined, (a.extra ?? []).flatMap((id) => at.get(id) ?? []));
  return ids[pick]!;
}

/** The history over the proxy row's indices (ids outside it: ≥ vocab, untouched by every
 * penalty the request has, dropped). */
function proxyHistory(h: HistoryView | null, at: ReadonlyMap<number, number>): HistoryView | null {
  if (h === null) return null;
  const outputCounts = new Map<number, number>();
  for (const [id, n] of h.outputCounts) { const i = at.get(id); if (i !== undefined) outputCounts.set(i, n); }
  const promptIds = new Set<number>();
  for (const id of h.promptIds) { const i = at.get(id); if (i !== undefined) promptIds.add(i); }
  return { outputCounts, promptIds };
}
