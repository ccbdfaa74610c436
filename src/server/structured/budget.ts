// A reasoning budget (Anthropic `thinking.budget_tokens`): once a request has generated
// `budget` tokens without closing its reasoning, the only token allowed is `</think>`; after
// the reasoning closes, any other constraint of the request applies. A mask like any other,
// so speculative decoding stays lossless.
import type { ConstraintFactory } from '../api/choices.js';

/** `inner` with the budget in front; null when the vocabulary has no single `</think>` token
 * (the budget cannot be forced then: the caller reports it). */
export function withReasoningBudget(inner: ConstraintFactory | null, closeId: number | undefined, budget: number, vocab: number): ConstraintFactory | null {
  if (closeId === undefined) return null;
  const only = new Uint32Array(Math.ceil(vocab / 32));
  only[closeId >>> 5] = 1 << (closeId & 31);
  return () => {
    const rest = inner ? inner() : null;
    const allowed = (generated: readonly number[]): Uint32Array | null => {
      if (!generated.includes(closeId) && generated.length >= budget) return only;
      return rest?.allowed ? rest.allowed(generated) : null;
    };
    return { allowed, endError: rest?.endError ?? null };
  };
}
