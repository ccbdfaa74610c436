// The mask walk over a sorted token list: tokens sharing a prefix share the matcher steps
// over it (a trie walk without building the trie), and a dead prefix skips every token
// below it. Shared by mask.ts (the whole vocabulary) and free-text.ts (token suffixes).
import { type State, step } from './matcher.js';
import { finish, STEP_UNITS, type Steps } from './steps.js';

/** Tokens in lexicographic byte order, their ids, and each one's common-prefix length with
 * the previous token in that order. */
export interface TokenList {
  readonly sorted: readonly Uint8Array[];
  readonly ids: Int32Array;
  readonly lcp: Int32Array;
  /** The longest token's length in bytes. */
  readonly maxLen: number;
  /** The same tokens back to back in one buffer (token i = buf[off[i], off[i+1])): the walks
   * read this, streaming through memory instead of visiting one small array per token. */
  readonly buf: Uint8Array;
  readonly off: Int32Array;
}

/** A TokenList from tokens already in lexicographic byte order. */
export function tokenList(sorted: readonly Uint8Array[], ids: Int32Array): TokenList {
  return finish(tokenListSteps(sorted, ids));
}

export function* tokenListSteps(sorted: readonly Uint8Array[], ids: Int32Array): Steps<TokenList> {
  const n = sorted.length;
  const lcp = new Int32Array(n);
  const off = new Int32Array(n + 1);
  let maxLen = 0;
  for (let i = 0; i < n; i++) {
    const b = sorted[i]!;
    off[i + 1] = off[i]! + b.length;
    maxLen = Math.max(maxLen, b.length);
    if (i % STEP_UNITS === 0) yield;
    if (i === 0) continue;
    const a = sorted[i - 1]!;
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    lcp[i] = k;
  }
  const buf = new Uint8Array(off[n]!);
  for (let i = 0; i < n; i++) {
    buf.set(sorted[i]!, off[i]!);
    if (i % STEP_UNITS === 0) yield;
  }
  return { sorted, ids, lcp, maxLen, buf, off };
}

/** The vocabulary as the mask walk needs it (built once per tokenizer and vocabulary size). */
export interface TokenVocab extends TokenList {
  /** Bitset words over [0, vocab). */
  readonly words: number;
  /** Ids that end generation: allowed exactly when the matcher can end. */
  readonly stopIds: readonly number[];
  /** Every token but the stop ids (unconstrained reasoning). */
  readonly allButStop: Uint32Array;
  /** Bytes of each id (null for ids outside the walk: special, stop, empty, overlong). */
  readonly bytesOf: readonly (Uint8Array | null)[];
}

/** Set the bit of every token of `list` the matcher accepts from `state`. */
export function walk(list: TokenList, state: State, mask: Uint32Array): void {
  const states: State[] = [state];
  let valid = 0; // states[0..valid] hold the states after the current token's prefix bytes
  const n = list.sorted.length;
  const { buf, off, lcp } = list;
  for (let i = 0; i < n; i++) {
    const at = off[i]!;
    const len = off[i + 1]! - at;
    let d = Math.min(lcp[i]!, valid);
    let dead = false;
    while (d < len) {
      const next = step(states[d]!, buf[at + d]!);
      if (next.length === 0) {
        dead = true;
        break;
      }
      states[++d] = next;
    }
    if (dead) {
      valid = d;
      // every following token sharing the dead prefix bytes[0..d] is dead too
      while (i + 1 < n && lcp[i + 1]! > d) i++;
      continue;
    }
    valid = len;
    const id = list.ids[i]!;
    mask[id >>> 5]! |= 1 << (id & 31);
  }
}

