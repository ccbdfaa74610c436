// Tokens that begin with a quote, walked from the state after the quote: a JSON string or
// object key starts with one, and the state inside is free text whose masks have fast paths
// (free-text.ts, regex-text.ts). So the vocabulary is split once: the tokens that open with a
// quote, as their suffixes after it (a vocabulary of their own, same ids), and the rest; a
// mask steps the quote once and walks the suffixes from there, and walks the rest as before.
// Same result as the whole walk (the matcher reads bytes; tests compare them).
import { freeTextMask } from './free-text.js';
import { type State, step } from './matcher.js';
import { Lazy, STEP_UNITS, type Steps } from './steps.js';
import { type TokenList, tokenListSteps, type TokenVocab, walk } from './walk.js';

const QUOTE = 0x22;

export interface QuoteSplit {
  /** Ids of tokens that are a quote alone. */
  readonly bare: readonly number[];
  /** Tokens that open with a quote, as their suffixes after it (lexicographic order kept). */
  readonly suffixes: TokenVocab;
  /** Every other token. */
  readonly rest: TokenList;
}

const splits = new WeakMap<TokenVocab, Lazy<QuoteSplit>>();

export function lazyQuoteSplit(v: TokenVocab): Lazy<QuoteSplit> {
  let s = splits.get(v);
  if (!s) splits.set(v, (s = new Lazy(() => splitSteps(v))));
  return s;
}

function* splitSteps(v: TokenVocab): Steps<QuoteSplit> {
  const bare: number[] = [];
  const sufSorted: Uint8Array[] = [];
  const sufIds: number[] = [];
  const restSorted: Uint8Array[] = [];
  const restIds: number[] = [];
  const bytesOf: (Uint8Array | null)[] = Array.from({ length: v.bytesOf.length }, () => null);
  for (let i = 0; i < v.sorted.length; i++) {
    if (i % STEP_UNITS === 0) yield;
    const b = v.sorted[i]!;
    const id = v.ids[i]!;
    if (b[0] !== QUOTE) {
      restSorted.push(b);
      restIds.push(id);
    } else if (b.length === 1) bare.push(id);
    else {
      const suffix = b.subarray(1);
      sufSorted.push(suffix);
      sufIds.push(id);
      bytesOf[id] = suffix;
    }
  }
  // tokens sharing the first byte keep their order as suffixes
  const list = yield* tokenListSteps(sufSorted, Int32Array.from(sufIds));
  const suffixes: TokenVocab = { ...list, words: v.words, stopIds: [], allButStop: v.allButStop, bytesOf };
  return { bare, suffixes, rest: yield* tokenListSteps(restSorted, Int32Array.from(restIds)) };
}

/** Set the bits of every token `state` accepts (stop ids aside), quote-opening ones from the
 * state after the quote. */
export function splitWalk(v: TokenVocab, state: State, mask: Uint32Array): void {
  const q = lazyQuoteSplit(v).get();
  walk(q.rest, state, mask);
  const after = step(state, QUOTE);
  if (after.length === 0) return;
  for (const id of q.bare) mask[id >>> 5]! |= 1 << (id & 31);
  if (!freeTextMask(q.suffixes, after, mask)) walk(q.suffixes, after, mask);
}
