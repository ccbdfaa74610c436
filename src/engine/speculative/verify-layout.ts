// The layout of a verify row (docs/ARCHITECTURE.md "Speculative decoding (MTP)"): the row
// feeds [bonus, d_1..d_k] at positions start..start+k (the bonus is the last committed-to
// token, tokens[start]; the drafts are not in req.tokens until accepted); its per-step
// recurrent states go to the scratch of its BATCH ROW (never its slot: padding rows and
// other requests cannot alias it); logits are needed at every one of its k + 1 positions.
import type { Tensor } from '../../kernels/types.js';
import type { ScratchView, StatePool } from '../../cache/state-pool.js';
import type { BatchRow } from '../batch.js';

/** Input ids of a row: a verify row's [bonus, drafts], else its scheduled tokens. */
export function rowTokens(row: BatchRow): number[] {
  const req = row.req!;
  if (row.verify && req.pendingDrafts) throw new Error(`request ${req.id}: its drafts are still on the kernels (pending-drafts.ts)`);
  return row.verify ? [req.tokens[row.start]!, ...req.drafts] : req.tokens.slice(row.start, row.start + row.n);
}

/** The per-step state scratch of batch row `index` (verify rows only; null otherwise). */
export function rowScratch(state: StatePool<Tensor>, row: BatchRow, index: number): readonly ScratchView<Tensor>[] | null {
  return row.verify ? state.scratch(index, row.n) : null;
}

/** Positions of a row's processed tokens (offset = its first) whose logits are needed:
 * all of a verify row's, the last of a sampling row's, none otherwise. */
export function logitPositions(row: BatchRow, offset: number): number[] {
  if (row.n === 0 || !(row.verify || row.sample)) return [];
  const first = offset + (row.verify ? 0 : row.n - 1);
  return Array.from({ length: offset + row.n - first }, (_, i) => first + i);
}
