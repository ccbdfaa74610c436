// Per-request logits adjustment, applied by the engine to every distribution a request
// samples from — the target's (decode and each verify position) and the MTP drafter's —
// before penalties, temperature and truncation. Because drafts are proposed under the same
// adjustment the target is verified under, speculative decoding stays lossless.
//
// - `bias`: additive logit biases by token id (OpenAI `logit_bias`).
// - `allowed`: a constraint (structured output, forced tool calls): given the ids generated so
//   far (committed ones plus, for drafts, the drafts before this one), the set of ids that may
//   come next as a bitset over the vocabulary (bit i of word i>>5), or null for "any id".
//   Ids outside the set get −∞. The set must not be empty.
// - `endError`: with a constraint, asked when a stop id is about to end the request: why the
//   output may not end after `generated` (a constraint at a dead end allows only the stop ids
//   and says so here), or null when it may. A reason turns the stop into an `error` finish
//   carrying it, so an incomplete constrained output never looks like a normal stop.

export interface LogitsAdjust {
  readonly bias: ReadonlyMap<number, number> | null;
  readonly allowed: ((generated: readonly number[]) => Uint32Array | null) | null;
  readonly endError?: ((generated: readonly number[]) => string | null) | null;
}

/** Apply the adjustment to logits[0..n) in place, for a request that has generated
 * `generated` (read only when the adjustment has a constraint). */
export function adjustInPlace(logits: Float32Array, n: number, adj: LogitsAdjust | null, generated: () => readonly number[]): void {
  if (!adj) return;
  if (adj.bias) for (const [id, b] of adj.bias) if (id < n) logits[id] = logits[id]! + b;
  const mask = adj.allowed ? adj.allowed(generated()) : null;
  if (!mask) return;
  for (let w = 0; w * 32 < n; w++) {
    const bits = mask[w] ?? 0;
    if (bits === -1 >>> 0) continue;
    const end = Math.min(n, w * 32 + 32);
    for (let i = w * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) logits[i] = -Infinity;
  }
}

/** Every position a step samples from (a decode row's last position, each verify position
 * given the drafts before it) adjusted in place, before the batch sampler and the greedy
 * verify read them. The step's logits rows are private to this step. */
export function adjustStepLogits(rows: readonly { readonly req: AdjustedRequest | null; readonly verify?: boolean; readonly sample?: boolean }[],
  logits: readonly Float32Array[][], vocab: number): void {
  rows.forEach((row, i) => {
    const req = row.req;
    if (!req?.adjust) return;
    const positions = logits[i]!;
    if (row.verify) positions.forEach((l, s) => adjustInPlace(l, vocab, req.adjust, () => [...req.outputIds, ...req.drafts.slice(0, s)]));
    else if (row.sample) adjustInPlace(positions[0]!, vocab, req.adjust, () => req.outputIds);
  });
}

/** The parts of a request the adjustment reads. */
export interface AdjustedRequest {
  readonly adjust: LogitsAdjust | null;
  readonly outputIds: readonly number[];
  readonly drafts: readonly number[];
}
