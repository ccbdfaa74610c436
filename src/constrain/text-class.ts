// The token classes of one kind of free text (free-text.ts builds them, regex-text.ts and
// free-text.ts read them): shared by both so neither imports the other.
import { STEP_UNITS, type Steps } from './steps.js';
import type { TokenList, TokenVocab } from './walk.js';

export interface FreeTextClass {
  /** chars[id]: character count of a plain token, −1 for the others. */
  readonly chars: Int16Array;
  readonly maxChars: number;
  /** Tokens valid UTF-8 up to a character cut at their end, by the complete characters
   * before the cut (the lead byte then needs room for one more character). */
  readonly partial: readonly { readonly id: number; readonly chars: number }[];
  /** Tokens with a stop byte at a character boundary, grouped by the characters before it:
   * their suffixes from the stop byte, sorted (shared prefixes are stepped once). */
  readonly bySuffix: ReadonlyMap<number, TokenList>;
  /** Object keys: tokens that close the key with their first stop byte (a quote) and hold
   * no other quote — what follows depends on the key's text only through which schema its
   * value takes — as suffixes from the quote by characters before it, and by their prefix
   * (binary UTF-8) to find those closing on a named or seen key. */
  readonly keySuffix: ReadonlyMap<number, TokenList>;
  readonly keyByPrefix: ReadonlyMap<string, readonly number[]>;
  /** The other tokens with a stop byte, whole (stepped from the key's own state). */
  readonly keyWhole: TokenList;
  /** Stand-in walks by object progress and continuation (see keyStops). */
  readonly keyGrouped: Map<string, Uint32Array>;
  /** Strings with regexes: the plain tokens (stepped through the regex DFAs alone), the
   * partial ones and those with a quote or backslash (stepped whole through the matcher). */
  readonly plainList: TokenList;
  /** The plain tokens' ASCII character sets (see asciiSignatureSteps). */
  readonly plainSig: Uint32Array;
  readonly partialList: TokenList;
  readonly stopWhole: TokenList;
  /** Plain-token bitsets of regex strings, by regexes, DFA states and room. */
  readonly byRegexState: Map<string, Uint32Array>;
  /** Plain tokens by their bytes (binary string), built on demand. */
  plainByText: Map<string, number[]> | null;
  /** Bitsets of the plain tokens with ≤ r characters, built on demand. */
  readonly byRoom: Map<number, Uint32Array>;
}

/** A list's ids by token bytes (binary string). */
export function* tokensByTextSteps(list: TokenList): Steps<Map<string, number[]>> {
  const m = new Map<string, number[]>();
  for (let i = 0; i < list.sorted.length; i++) {
    if (i % STEP_UNITS === 0) yield;
    const k = Buffer.from(list.sorted[i]!).toString('latin1');
    let ids = m.get(k);
    if (!ids) m.set(k, (ids = []));
    ids.push(list.ids[i]!);
  }
  return m;
}

/** The plain tokens of at most `room` characters, as a bitset (cached by room). */
export function plainBits(v: TokenVocab, c: FreeTextClass, room: number): Uint32Array {
  const r = Math.min(room, c.maxChars);
  let bits = c.byRoom.get(r);
  if (!bits) {
    bits = new Uint32Array(v.words);
    for (let id = 0; id < c.chars.length; id++) {
      const n = c.chars[id]!;
      if (n >= 0 && n <= r) bits[id >>> 5]! |= 1 << (id & 31);
    }
    c.byRoom.set(r, bits);
  }
  return bits;
}
