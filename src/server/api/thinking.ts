// The constraint of a chat-style answer: the request's structured constraint (response format,
// forced tool calls), a reasoning budget in front of it (Anthropic `budget_tokens`), and the
// closed-reasoning mask behind it — the wrappers are constrain/think.ts; this file finds the
// served model's think tags.
import type { Constraint } from '../../constrain/constraint.js';
import { type ThinkIds, type ThinkStart, withClosedThinkMask, withReasoningBudget } from '../../constrain/think.js';
import { THINK_CLOSE, THINK_OPEN } from '../../tokenizer/reasoning.js';
import type { ServerContext } from '../context.js';

export type { ThinkIds, ThinkStart };

/** The ids of the think tags in the served vocabulary (undefined when not single tokens). */
export function thinkIds(ctx: ServerContext): ThinkIds {
  const t = ctx.engine.tokenizer;
  return { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
}

/** The whole constraint of a chat-style answer: `structured` (or null), a reasoning budget
 * when given (null budget = none; the caller checks the vocabulary has `</think>`), then the
 * closed-reasoning mask. */
export function answerConstraint(ctx: ServerContext, structured: Constraint | null, start: ThinkStart, budget: number | null): Constraint | null {
  const ids = thinkIds(ctx);
  const vocab = ctx.engine.sampleVocab;
  let c = structured;
  if (budget !== null && start === 'open') c = withReasoningBudget(c, ids.close, budget, vocab);
  return withClosedThinkMask(c, start, ids, vocab);
}
