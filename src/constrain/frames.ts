// The matcher's state: a small set of stacks of frames (immutable linked lists, so a step
// never mutates the state it came from — the token trie walk and speculative drafts branch
// freely). Frame kinds:
//   val    a value of a schema, expanded on its first byte
//   lit    a fixed text
//   str    a JSON string (length bounds, regexes: DFA states `rs` of `res`; hostnames also
//          the current label's IDNA check state `lab`, see host-labels.ts)
//   num    a JSON number, ended by the byte after it (`txt` kept for ranged numbers)
//   obj    an object's members, JSON `{"k":v,…}` in any key order, or Qwen XML
//          `<parameter=k>\nv\n</parameter>\n` in declaration order
//   key    an object key being written (decoded text so far, pattern DFA states)
//   arr    an array's items (unique ones: `used`, the literals written)
//   until  any text up to an end marker (XML string parameters; regexes and `lab` as `str`)
//   ws     up to `left` whitespace bytes
//   think  anything up to `</think>` (the unconstrained reasoning)
import type { ArrayNode, NumberNode, ObjectNode, Schema, StringNode } from './nodes.js';
import { LABEL_START, type LabelState } from './labels.js';
import type { Regex } from './regex.js';

export type Frame =
  | { readonly t: 'val'; readonly s: Schema }
  | { readonly t: 'lit'; readonly text: string; readonly i: number }
  | { readonly t: 'str'; readonly ph: number; readonly n: number; readonly min: number; readonly max: number; readonly u: number; readonly cp: number;
      readonly res: readonly Regex[]; readonly rs: readonly number[]; readonly lab?: LabelState }
  | { readonly t: 'num'; readonly ph: number; readonly n: number; readonly d: number; readonly s: NumberNode; readonly txt: string }
  | { readonly t: 'obj'; readonly o: ObjectNode; readonly xml: boolean; readonly ph: 'open' | 'first' | 'sep' | 'key'; readonly i: number;
      readonly seen: readonly string[]; readonly count: number }
  | { readonly t: 'key'; readonly o: ObjectNode; readonly seen: readonly string[]; readonly count: number; readonly ph: number; readonly u: number;
      readonly cp: number; readonly txt: string; readonly raw: string; readonly n: number; readonly rs: readonly number[] }
  | { readonly t: 'arr'; readonly s: ArrayNode; readonly ph: 'open' | 'first' | 'sep'; readonly n: number;
      /** Unique arrays: bit i set = the literal uniqueSetsOf(s).texts[i] is written already. */
      readonly used: bigint }
  | { readonly t: 'until'; readonly end: string; readonly m: number; readonly n: number; readonly min: number; readonly max: number; readonly u: number;
      readonly cp: number; readonly res: readonly Regex[]; readonly rs: readonly number[]; readonly lab?: LabelState }
  | { readonly t: 'ws'; readonly left: number }
  | { readonly t: 'think'; readonly m: number };

export interface Stack {
  readonly f: Frame;
  readonly next: Stack | null;
}

/** A matcher state: the stacks still alive (empty = dead). A null stack = done. */
export type State = readonly (Stack | null)[];

export const THINK_END = '</think>';

export const push = (f: Frame, next: Stack | null): Stack => ({ f, next });
/** Literal frames hold their UTF-8 bytes as a binary string (one char code per byte). */
const byteTexts = new Map<string, string>();
export function utf8Binary(text: string): string {
  if (/^[\x00-\x7f]*$/.test(text)) return text;
  let b = byteTexts.get(text);
  if (b === undefined) {
    b = Buffer.from(text, 'utf8').toString('latin1');
    if (byteTexts.size > 10_000) byteTexts.clear();
    byteTexts.set(text, b);
  }
  return b;
}
export const lit = (text: string, next: Stack | null): Stack => push({ t: 'lit', text: utf8Binary(text), i: 0 }, next);
export const val = (s: Schema, next: Stack | null): Stack => push({ t: 'val', s }, next);

export function stringFrame(s: StringNode, next: Stack | null): Stack {
  const f: Frame = { t: 'str', ph: 0, n: 0, min: s.min, max: s.max, u: 0, cp: 0, res: s.res, rs: s.res.map(() => 0) };
  return push(s.labels ? { ...f, lab: LABEL_START } : f, next);
}

/** A sentinel stack meaning "matched completely; nothing more may follow". */
export const DONE: Stack = { f: { t: 'ws', left: 0 }, next: null };

/** UTF-8 well-formedness, byte by byte: `u` is 0 between characters, 1..3 = continuation
 * bytes still due (80..BF), 4..7 = the second byte of E0 / ED / F0 / F4 sequences (A0..BF,
 * 80..9F, 90..BF, 80..8F). Returns the next u, or −1 for a byte that cannot come here. */
export function utf8Next(u: number, b: number): number {
  const cont = (b & 0xc0) === 0x80;
  switch (u) {
    case 0:
      if (b < 0x80) return 0;
      if (b >= 0xc2 && b <= 0xdf) return 1;
      if (b === 0xe0) return 4;
      if (b === 0xed) return 5;
      if (b >= 0xe1 && b <= 0xef) return 2;
      if (b === 0xf0) return 6;
      if (b >= 0xf1 && b <= 0xf3) return 3;
      if (b === 0xf4) return 7;
      return -1;
    case 1:
    case 2:
    case 3:
      return cont ? u - 1 : -1;
    case 4:
      return b >= 0xa0 && b <= 0xbf ? 1 : -1;
    case 5:
      return b >= 0x80 && b <= 0x9f ? 1 : -1;
    case 6:
      return b >= 0x90 && b <= 0xbf ? 2 : -1;
    default:
      return b >= 0x80 && b <= 0x8f ? 2 : -1;
  }
}

/** The code point bits a UTF-8 byte contributes (lead bytes: their payload; continuation
 * bytes: shifted into `cp`). */
export function utf8Accumulate(u: number, cp: number, b: number): number {
  if (u === 0) return b < 0x80 ? b : b >= 0xf0 ? b & 0x07 : b >= 0xe0 ? b & 0x0f : b & 0x1f;
  return (cp << 6) | (b & 0x3f);
}

/** Length of the longest suffix of (end[0..m) + b) that is a prefix of `end`. */
export function advanceMatch(end: string, m: number, b: number): number {
  if (end.charCodeAt(m) === b) return m + 1;
  // fall back over shorter prefixes (end markers are short: a direct search is enough)
  const seen = end.slice(0, m) + String.fromCharCode(b);
  for (let k = Math.min(m, end.length - 1); k > 0; k--) if (seen.endsWith(end.slice(0, k))) return k;
  return 0;
}

/** Step regex DFA states by one character; null when one of them can no longer match. The
 * regexes already satisfied for good (universal states) are dropped. */
export function stepRegexes(res: readonly Regex[], rs: readonly number[], cp: number): { res: readonly Regex[]; rs: readonly number[] } | null {
  let outRes: Regex[] | null = null;
  const outRs: number[] = [];
  for (let i = 0; i < res.length; i++) {
    const s = res[i]!.step(rs[i]!, cp);
    if (s < 0) return null;
    if (res[i]!.isUniversal(s)) {
      outRes ??= res.slice(0, i);
      continue;
    }
    if (outRes) outRes.push(res[i]!);
    outRs.push(s);
  }
  return { res: outRes ?? res, rs: outRs };
}

/** The code points a character in progress can still become ([lo, hi]; after a backslash,
 * null: any escape). `u`/`cp` as jsonCharStep keeps them, `ph` 3..6 = \u digits read. */
export function pendingRange(ph: number, u: number, cp: number): [number, number] | null {
  if (ph === 2) return null;
  if (ph >= 3) {
    const rem = 4 * (7 - ph);
    return [cp * 2 ** rem, (cp + 1) * 2 ** rem - 1];
  }
  const r = u <= 3 ? u : u <= 5 ? 2 : 3;
  const lo = cp * 2 ** (6 * r);
  const hi = (cp + 1) * 2 ** (6 * r) - 1;
  // after E0 / F0 the sequence is not overlong; after ED no surrogate, after F4 ≤ U+10FFFF
  if (u === 4) return [Math.max(lo, 0x800), hi];
  if (u === 6) return [Math.max(lo, 0x10000), hi];
  if (u === 5) return [lo, Math.min(hi, 0xd7ff)];
  if (u === 7) return [lo, Math.min(hi, 0x10ffff)];
  return [lo, hi];
}

/** Can every regex still step over the character in progress? */
export function regexesCanContinue(res: readonly Regex[], rs: readonly number[], range: [number, number] | null): boolean {
  const [lo, hi] = range ?? [0, 0xffff];
  return res.every((r, i) => r.canStep(rs[i]!, lo, hi) || (range === null && Object.values(SIMPLE_ESCAPES).some((c) => r.canStep(rs[i]!, c, c))));
}

/** The fewest characters the regexes still need (the longest of their shortest matches). */
export function regexRoomNeeded(res: readonly Regex[], rs: readonly number[]): number {
  let need = 0;
  for (let i = 0; i < res.length; i++) need = Math.max(need, res[i]!.minRemaining(rs[i]!));
  return need;
}

export const regexesAccept = (res: readonly Regex[], rs: readonly number[]): boolean => res.every((r, i) => r.accepts(rs[i]!));

/** JSON escapes after a backslash (the character each stands for). */
export const SIMPLE_ESCAPES: Readonly<Record<number, number>> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 8, 0x66: 12, 0x6e: 10, 0x72: 13, 0x74: 9 };

export const hexValue = (b: number): number =>
  b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x61 && b <= 0x66 ? b - 0x57 : b >= 0x41 && b <= 0x46 ? b - 0x37 : -1;

/** A JSON string's bytes after the opening quote, one at a time: `ph` 1 = between
 * characters, 2 = after a backslash, 3..6 = \u hex digits; `u`/`cp` the UTF-8 or hex
 * character in progress. Returns the next position and, when a character completes, its code
 * point; `close` for the closing quote; null for a byte that cannot come here. \u escapes of
 * surrogates are refused (raw UTF-8 spells every character). */
export function jsonCharStep(ph: number, u: number, cp: number, b: number): { ph: number; u: number; cp: number; ch: number } | 'close' | null {
  if (ph === 1) {
    if (u === 0) {
      if (b === 0x22) return 'close';
      if (b < 0x20) return null;
      if (b === 0x5c) return { ph: 2, u: 0, cp: 0, ch: -1 };
    }
    const u2 = utf8Next(u, b);
    if (u2 < 0) return null;
    const cp2 = utf8Accumulate(u, cp, b);
    return { ph: 1, u: u2, cp: u2 === 0 ? 0 : cp2, ch: u2 === 0 ? cp2 : -1 };
  }
  if (ph === 2) {
    if (b === 0x75) return { ph: 3, u: 0, cp: 0, ch: -1 };
    const e = SIMPLE_ESCAPES[b];
    return e === undefined ? null : { ph: 1, u: 0, cp: 0, ch: e };
  }
  const h = hexValue(b);
  if (h < 0) return null;
  const v = cp * 16 + h;
  if (ph === 4 && v >= 0xd8 && v <= 0xdf) return null; // a surrogate
  return ph === 6 ? { ph: 1, u: 0, cp: 0, ch: v } : { ph: ph + 1, u: 0, cp: v, ch: -1 };
}
