// A grammar as a constraint (constraint.ts): a per-sequence matcher holding its byte-level
// matcher state, advanced token by token and forked for MTP draft and verify positions, with
// masks from the grammar's shared mask cache (mask.ts). GrammarConstraint gives the same
// answers by whole history — the reference the matcher is tested against.
import type { Constraint, MaskRun, Matcher } from './constraint.js';
import { advanceMatch, THINK_END } from './frames.js';
import type { MaskCache, TokenVocab } from './mask.js';
import { canEnd, type State, step } from './matcher.js';

/** Does the state sit in unconstrained reasoning (every token but a stop id is fine)? */
function freeReasoning(state: State): boolean {
  const top = state.length === 1 ? state[0] : null;
  return top !== null && top !== undefined && top.f.t === 'think' && top.f.m === 0;
}

/** Per vocabulary, free reasoning's mask run: every id but the stop ids, until an id whose
 * bytes leave it (they end inside a partial `</think>`, or go through a whole one). */
const reasoningRuns = new WeakMap<TokenVocab, MaskRun>();

/** The mask run of a state in free reasoning (freeReasoning): the think frame reads bytes
 * alone (matcher.ts 'think': advanceMatch over THINK_END), so an allowed id keeps the state
 * free exactly when its bytes never complete `</think>` and end with nothing of it matched. */
function freeReasoningRun(v: TokenVocab): MaskRun {
  let run = reasoningRuns.get(v);
  if (run) return run;
  const until: number[] = [];
  v.bytesOf.forEach((bytes, id) => {
    if (((v.allButStop[id >>> 5]! >>> (id & 31)) & 1) === 0 || !bytes) return; // never taken in reasoning
    let m = 0;
    for (let j = 0; j < bytes.length && m < THINK_END.length; j++) m = advanceMatch(THINK_END, m, bytes[j]!);
    if (m !== 0) until.push(id);
  });
  run = { mask: v.allButStop, until };
  reasoningRuns.set(v, run);
  return run;
}

/** What every matcher of one grammar over one vocabulary shares (read only). */
export interface GrammarContext {
  readonly v: TokenVocab;
  readonly cache: MaskCache;
  /** Only the stop ids: the mask at a dead end. */
  readonly stopMask: Uint32Array;
}

export function grammarContext(v: TokenVocab, cache: MaskCache): GrammarContext {
  const stopMask = new Uint32Array(v.words);
  for (const id of v.stopIds) stopMask[id >>> 5]! |= 1 << (id & 31);
  return { v, cache, stopMask };
}

/** The state after `state` reads token `id` (dead = empty). */
export function stateAfterToken(v: TokenVocab, state: State, id: number): State {
  const bytes = v.bytesOf[id];
  if (!bytes) return [];
  let s = state;
  for (let j = 0; j < bytes.length && s.length > 0; j++) s = step(s, bytes[j]!);
  return s;
}

/** The ids that may follow `s`. At a dead end — the output left the grammar, or no token can
 * continue it — only the stop ids: the engine then asks endError, which turns the stop into
 * an error finish (a dead end never ends as a normal stop). */
export function maskOfState(g: GrammarContext, s: State): Uint32Array {
  if (s.length === 0) return g.stopMask;
  if (freeReasoning(s)) return g.v.allButStop;
  const m = g.cache.get(g.v, s);
  return m.some((w) => w !== 0) ? m : g.stopMask;
}

/** Why the output may not end at `s`, after `generated` tokens (null: it may — it is complete). */
export function endErrorOfState(g: GrammarContext, s: State, generated: number): string | null {
  if (s.some((st) => canEnd(st))) return null;
  const at = `after ${generated} generated tokens`;
  if (s.length === 0) return `the structured-output constraint reached a dead end ${at}: the output left its grammar (a constraint error)`;
  const m = g.cache.get(g.v, s);
  if (!m.some((w) => w !== 0)) return `the structured-output constraint reached a dead end ${at}: no token of the vocabulary can continue the output, and it is not complete`;
  return `the structured-output constraint was ended ${at} before its output was complete (a constraint error)`;
}

/** One sequence's position in a grammar. Matcher states are values (frames are never
 * written after they are made), so a fork is a copy of two fields. */
export class GrammarMatcher implements Matcher {
  constructor(private readonly g: GrammarContext, private state: State, private n = 0) {}

  /** A matcher at the start of `initial`. */
  static start(v: TokenVocab, initial: State, cache: MaskCache): GrammarMatcher {
    return new GrammarMatcher(grammarContext(v, cache), initial);
  }

  get length(): number {
    return this.n;
  }
  mask(): Uint32Array {
    return maskOfState(this.g, this.state);
  }
  advance(id: number): void {
    this.state = stateAfterToken(this.g.v, this.state, id);
    this.n++;
  }
  fork(): GrammarMatcher {
    return new GrammarMatcher(this.g, this.state, this.n);
  }
  endError(): string | null {
    return endErrorOfState(this.g, this.state, this.n);
  }
  /** Has the output so far matched completely (the answer may end here)? */
  complete(): boolean {
    return this.state.some((s) => canEnd(s));
  }
  /** In free reasoning (a grammar behind a reasoning block: grammars.ts withThinkPrefix), every
   * id but the stop ids until one that leaves it; elsewhere the mask varies with every id. */
  maskRun(): MaskRun | undefined {
    return freeReasoning(this.state) ? freeReasoningRun(this.g.v) : undefined;
  }
}

/** A grammar as a compiled constraint over one vocabulary. */
export function grammarConstraint(v: TokenVocab, initial: State, cache: MaskCache): Constraint {
  const g = grammarContext(v, cache);
  return { start: () => new GrammarMatcher(g, initial) };
}

/** The same answers by whole history (`allowed(generated)`): the state is rebuilt from the
 * last history it was asked about (the common prefix kept). The reference the incremental
 * matcher is tested against, and the benches' "history" path. */
export class GrammarConstraint {
  private ids: number[] = [];
  private states: State[];
  private readonly g: GrammarContext;

  constructor(v: TokenVocab, initial: State, cache: MaskCache) {
    this.states = [initial];
    this.g = grammarContext(v, cache);
  }

  /** The state after `generated` (dead = empty). */
  stateAfter(generated: readonly number[]): State {
    let k = 0;
    while (k < this.ids.length && k < generated.length && this.ids[k] === generated[k]) k++;
    this.ids.length = k;
    this.states.length = k + 1;
    for (let i = k; i < generated.length; i++) {
      this.ids.push(generated[i]!);
      this.states.push(stateAfterToken(this.g.v, this.states[i]!, generated[i]!));
    }
    return this.states[generated.length]!;
  }

  /** The ids that may follow `generated` (see maskOfState). */
  allowed = (generated: readonly number[]): Uint32Array => maskOfState(this.g, this.stateAfter(generated));

  /** Has the output so far matched completely (the answer may end here)? */
  complete(generated: readonly number[]): boolean {
    return this.stateAfter(generated).some((s) => canEnd(s));
  }

  /** Why the output may not end after `generated` (null: it may — it is complete). */
  endError = (generated: readonly number[]): string | null => endErrorOfState(this.g, this.stateAfter(generated), generated.length);
}
