// Reasoning wrappers around a chat answer's constraint, as matchers over the generated ids:
//
// - a reasoning budget (Anthropic `thinking.budget_tokens`): once `budget` tokens are
//   generated without closing the reasoning, the only id allowed is `</think>`; after the
//   reasoning closes, the inner constraint applies.
// - the closed-reasoning mask: once the reasoning block is closed — by the model's `</think>`,
//   by the budget forcing `</think>`, or by the prompt (thinking off: the template wrote an
//   empty closed block) — `<think>` and `</think>` are never sampled again, in free text and
//   constrained output alike (they would show up as literal tags in the answer or inside JSON
//   strings).
//
// Both are functions of the ids generated so far only, applied alike to MTP drafts and the
// target, so MTP on == off stays exact under them. Each keeps O(1) state per sequence.
import { ANY_ID_RUN, bothRuns, type Constraint, intersect, type MaskRun, type Matcher, maskWords } from './constraint.js';

/** Where the prompt leaves the reasoning block: `open` (it ends with `<think>\n`), `closed`
 * (it ends with a closed block), or `none` (no block: the model may open one as its first token). */
export type ThinkStart = 'open' | 'closed' | 'none';

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

/** `inner` with the budget in front; null when the vocabulary has no single `</think>` token
 * (the budget cannot be forced then: the caller reports it). */
export function withReasoningBudget(inner: Constraint | null, closeId: number | undefined, budget: number, vocab: number): Constraint | null {
  if (closeId === undefined) return null;
  const only = new Uint32Array(maskWords(vocab));
  only[closeId >>> 5] = 1 << (closeId & 31);
  const onlyClose: MaskRun = { mask: only, until: [closeId] };
  return { start: () => new BudgetMatcher(inner?.start() ?? null, closeId, budget, only, onlyClose, 0, false) };
}

class BudgetMatcher implements Matcher {
  constructor(private readonly inner: Matcher | null, private readonly closeId: number, private readonly budget: number,
    private readonly only: Uint32Array, private readonly onlyClose: MaskRun, private n: number, private closed: boolean) {}

  get length(): number {
    return this.n;
  }
  mask(): Uint32Array | null {
    if (!this.closed && this.n >= this.budget) return this.only;
    return this.inner ? this.inner.mask() : null;
  }
  advance(id: number): void {
    this.inner?.advance(id);
    this.n++;
    if (id === this.closeId) this.closed = true;
  }
  fork(): BudgetMatcher {
    return new BudgetMatcher(this.inner?.fork() ?? null, this.closeId, this.budget, this.only, this.onlyClose, this.n, this.closed);
  }
  endError(): string | null {
    return this.inner ? this.inner.endError() : null;
  }
  /** Closed: the inner constraint's run. Open: the inner's mask for the budget's positions left
   * (or until `</think>`), then only `</think>` until it is taken. */
  maskRun(): MaskRun | undefined {
    const inner = this.inner ? this.inner.maskRun?.() : ANY_ID_RUN;
    if (this.closed || !inner) return inner;
    if (this.n >= this.budget) return this.onlyClose;
    const positions = Math.min(inner.positions ?? Infinity, this.budget - this.n);
    return { mask: inner.mask, until: inner.until.includes(this.closeId) ? inner.until : [...inner.until, this.closeId], positions };
  }
}

/** `inner` with `<think>` / `</think>` masked once the reasoning is closed (and `</think>`
 * masked before a `none` prompt's first token, which may only open a block). Null when the
 * vocabulary has neither tag and there is no inner constraint. */
export function withClosedThinkMask(inner: Constraint | null, start: ThinkStart, ids: ThinkIds, vocab: number): Constraint | null {
  const tags = [ids.open, ids.close].filter((id): id is number => id !== undefined && id < vocab);
  if (tags.length === 0) return inner;
  const words = maskWords(vocab);
  const noTags = new Uint32Array(words).fill(0xffffffff);
  for (const id of tags) noTags[id >>> 5]! &= ~(1 << (id & 31));
  const noClose = new Uint32Array(words).fill(0xffffffff);
  if (ids.close !== undefined && ids.close < vocab) noClose[ids.close >>> 5]! &= ~(1 << (ids.close & 31));
  const closeTag = ids.close !== undefined && ids.close < vocab ? [ids.close] : [];
  const masks: ThinkMasks = { start, ids, words, noTags, noClose, closedRun: { mask: noTags, until: [] }, openRun: { mask: null, until: closeTag } };
  return { start: () => new ClosedThinkMatcher(inner?.start() ?? null, masks, 0, start === 'closed') };
}

interface ThinkMasks {
  readonly start: ThinkStart;
  readonly ids: ThinkIds;
  readonly words: number;
  /** All ids but the think tags. */
  readonly noTags: Uint32Array;
  /** All ids but `</think>`. */
  readonly noClose: Uint32Array;
  /** The mask run once closed: no tags, for good. */
  readonly closedRun: MaskRun;
  /** The mask run while open: any id, until `</think>` closes it. */
  readonly openRun: MaskRun;
}

/** `closed` is reasoningClosed(history) kept up to date one id at a time. */
class ClosedThinkMatcher implements Matcher {
  constructor(private readonly inner: Matcher | null, private readonly t: ThinkMasks, private n: number, private closed: boolean) {}

  get length(): number {
    return this.n;
  }
  mask(): Uint32Array | null {
    const base = this.inner ? this.inner.mask() : null;
    const cut = this.closed ? this.t.noTags : this.t.start === 'none' && this.n === 0 ? this.t.noClose : null;
    return cut ? intersect(base, cut, this.t.words) : base;
  }
  advance(id: number): void {
    this.inner?.advance(id);
    const { start, ids } = this.t;
    // a `none` prompt's first id closes the (absent) block unless it opens one
    if (start === 'none' && this.n === 0 && (ids.open === undefined || id !== ids.open)) this.closed = true;
    if (ids.close !== undefined && id === ids.close) this.closed = true;
    this.n++;
  }
  fork(): ClosedThinkMatcher {
    return new ClosedThinkMatcher(this.inner?.fork() ?? null, this.t, this.n, this.closed);
  }
  endError(): string | null {
    return this.inner ? this.inner.endError() : null;
  }
  /** Once closed, the tags are masked at every later position, so nothing reopens it; while
   * open (past a `none` prompt's first id), any id until `</think>`; with the inner
   * constraint's run, when it has one. */
  maskRun(): MaskRun | undefined {
    if (!this.closed && this.t.start === 'none' && this.n === 0) return undefined;
    const own = this.closed ? this.t.closedRun : this.t.openRun;
    return this.inner ? bothRuns(this.inner.maskRun?.(), own, this.t.words) : own;
  }
}
