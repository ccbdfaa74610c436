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

export interface LogitsAdjust {
  readonly bias: ReadonlyMap<number, number> | null;
  readonly allowed: ((generated: readonly number[]) => Uint32Array | null) | null;
}

/** Reused output buffer: the caller samples from the result before the next call. */
let scratch = new Float32Array(0);

/** logits[0..n) adjusted for a request that has generated `generated`; the input itself when
 * nothing applies. The result is only valid until the next call. */
export function adjustLogits(logits: Float32Array, n: number, adj: LogitsAdjust | null, generated: () => readonly number[]): Float32Array {
  if (!adj) return logits;
  const mask = adj.allowed ? adj.allowed(generated()) : null;
  if (!mask && (!adj.bias || adj.bias.size === 0)) return logits;
  if (scratch.length < n) scratch = new Float32Array(n);
  const out = scratch.subarray(0, n);
  out.set(logits.subarray(0, n));
  if (adj.bias) for (const [id, b] of adj.bias) if (id < n) out[id] = out[id]! + b;
  if (mask) {
    for (let w = 0; w * 32 < n; w++) {
      const bits = mask[w] ?? 0;
      if (bits === -1 >>> 0) continue;
      const end = Math.min(n, w * 32 + 32);
      for (let i = w * 32; i < end; i++) if (((bits >>> (i & 31)) & 1) === 0) out[i] = -Infinity;
    }
  }
  return out;
}
