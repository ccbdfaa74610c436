// The constraint of a chat-style answer: the request's structured constraint (response format,
// forced tool calls), a reasoning budget in front of it (Anthropic `budget_tokens`), and the
// closed-reasoning mask behind it. Every part is a sampler-side mask, a function of the ids
// generated so far only, applied alike to MTP drafts and the target, so MTP on == off stays
// exact under it.
//
// Closed-reasoning mask: once the reasoning block is closed — by the model's `</think>`, by the
// budget forcing `</think>`, or by the prompt (thinking off: the template wrote an empty closed
// block) — `<think>` and `</think>` are never sampled again, in free text and constrained output
// alike (they would show up as literal tags in the answer or inside JSON strings).
import type { ThinkStart } from '../frontend/chat-prompt.js';
import { THINK_CLOSE, THINK_OPEN } from '../tokenizer/reasoning.js';
import type { ConstraintFactory } from './api/choices.js';
import type { ServerContext } from './context.js';
import { withReasoningBudget } from './structured/budget.js';

/** Where the prompt leaves the reasoning block: `open` (it ends with `<think>\n`), `closed`
 * (it ends with a closed block), or `none` (no block: the model may open one as its first token). */
export type { ThinkStart };

export interface ThinkIds {
  readonly open: number | undefined;
  readonly close: number | undefined;
}

/** True when the reasoning is closed after `generated` (the next id must not be a think tag). */
export function reasoningClosed(generated: readonly number[], start: ThinkStart, ids: ThinkIds): boolean {
  if (start === 'closed') return true;
  if (start === 'none') {
    if (generated.length === 0) return false;
    if (ids.open === undefined || generated[0] !== ids.open) return true;
  }
  return ids.close !== undefined && generated.includes(ids.close);
}

/** `inner` with `<think>` / `</think>` masked once the reasoning is closed (and `</think>`
 * masked before a `none` prompt's first token, which may only open a block). Null when the
 * vocabulary has neither tag and there is no inner constraint. */
export function withClosedThinkMask(inner: ConstraintFactory | null, start: ThinkStart, ids: ThinkIds, vocab: number): ConstraintFactory | null {
  const tags = [ids.open, ids.close].filter((id): id is number => id !== undefined && id < vocab);
  if (tags.length === 0) return inner;
  const words = Math.ceil(vocab / 32);
  const noTags = new Uint32Array(words).fill(0xffffffff);
  for (const id of tags) noTags[id >>> 5]! &= ~(1 << (id & 31));
  const noClose = new Uint32Array(words).fill(0xffffffff);
  if (ids.close !== undefined && ids.close < vocab) noClose[ids.close >>> 5]! &= ~(1 << (ids.close & 31));
  return () => {
    const rest = inner ? inner() : null;
    const allowed = (generated: readonly number[]): Uint32Array | null => {
      const base = rest?.allowed ? rest.allowed(generated) : null;
      let cut: Uint32Array | null = null;
      if (reasoningClosed(generated, start, ids)) cut = noTags;
      else if (start === 'none' && generated.length === 0) cut = noClose;
      if (!cut) return base;
      if (!base) return cut;
      const out = new Uint32Array(words);
      for (let w = 0; w < words; w++) out[w] = (base[w] ?? 0) & cut[w]!;
      return out;
    };
    return { allowed, endError: rest?.endError ?? null };
  };
}

/** The ids of the think tags in the served vocabulary (undefined when not single tokens). */
export function thinkIds(ctx: ServerContext): ThinkIds {
  const t = ctx.engine.tokenizer;
  return { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
}

/** The whole constraint of a chat-style answer: `structured` (or null), a reasoning budget
 * when given (null budget = none; the caller checks the vocabulary has `</think>`), then the
 * closed-reasoning mask. */
export function answerConstraint(ctx: ServerContext, structured: ConstraintFactory | null, start: ThinkStart, budget: number | null): ConstraintFactory | null {
  const ids = thinkIds(ctx);
  const vocab = ctx.engine.sampleVocab;
  let c = structured;
  if (budget !== null && start === 'open') c = withReasoningBudget(c, ids.close, budget, vocab);
  return withClosedThinkMask(c, start, ids, vocab);
}
