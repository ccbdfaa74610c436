// Free text inside a constraint (a JSON string's characters, an XML parameter's value, an
// object key where any key is admitted) admits
// almost every token, which would make the mask walk visit the whole vocabulary. Split the
// vocabulary once per kind of free text: "plain" tokens — complete UTF-8, none of the bytes
// that can end or escape the text — keep the matcher inside the text whatever it holds, so
// they are allowed exactly when their character count fits the room left; only the other
// tokens are walked. Same result as the full walk (a test compares them).
import { type Frame, type Stack, type State, utf8Accumulate, utf8Binary, utf8Next } from './frames.js';
import type { Regex } from './regex.js';
import { stackKey } from './matcher.js';
import type { ObjectNode } from './nodes.js';
import { extrasAllowed } from './objects.js';
import { keyText, refillKeyEnd, regexText } from './regex-text.js';
import { finish, Lazy, sortSteps, STEP_UNITS, type Steps } from './steps.js';
import { type FreeTextClass, plainBits, tokensByTextSteps } from './text-class.js';

export type { FreeTextClass };
import { type TokenList, tokenListSteps, type TokenVocab, walk } from './walk.js';


const classes = new WeakMap<TokenVocab, Map<string, Lazy<FreeTextClass>>>();

/** The free-text class of JSON strings and keys, as a build that may still be in progress
 * (the warm-up advances it). */
export function lazyJsonTextClass(v: TokenVocab): Lazy<FreeTextClass> {
  return lazyClass(v, 'json', JSON_STOPS);
}

function lazyClass(v: TokenVocab, key: string, stops: (b: number) => boolean): Lazy<FreeTextClass> {
  let byKind = classes.get(v);
  if (!byKind) classes.set(v, (byKind = new Map()));
  let c = byKind.get(key);
  if (!c) byKind.set(key, (c = new Lazy(() => buildSteps(v, stops))));
  return c;
}

/** Keys beyond the named properties are free text (no regexes, every clause admits them —
 * no clause at all: any key, any value): a key being written then stays alive whatever
 * plain text comes, while it fits. */
const freeExtras = (o: ObjectNode): boolean => o.keys.res.length === 0 && o.patternRes.length === 0 && o.clauses.every((c) => c.extra !== null);

/** Bytes that end or escape the text: JSON strings `"`, `\` and controls; XML values the
 * first byte of their end marker. */
function stopsFor(f: Frame): { key: string; stops: (b: number) => boolean } | null {
  if ((f.t === 'str' || f.t === 'key') && f.ph === 1 && f.u === 0) return { key: 'json', stops: JSON_STOPS };
  if (f.t === 'until' && f.m === 0 && f.u === 0 && f.res.length === 0) {
    const first = f.end.charCodeAt(0);
    return { key: `until:${first}`, stops: (b) => b === first };
  }
  return null;
}

const JSON_STOPS = (b: number): boolean => b === 0x22 || b === 0x5c || b < 0x20;
const kindIsJson = (stops: (b: number) => boolean): boolean => stops === JSON_STOPS;

function* buildSteps(v: TokenVocab, stops: (b: number) => boolean): Steps<FreeTextClass> {
  const chars = new Int16Array(v.words * 32).fill(-1);
  let maxChars = 0;
  const partial: { id: number; chars: number }[] = [];
  const suffixes = new Map<number, { bytes: Uint8Array; id: number }[]>();
  const whole: { bytes: Uint8Array; id: number }[] = [];
  const keySuffixes = new Map<number, { bytes: Uint8Array; id: number }[]>();
  const keyByPrefix = new Map<string, number[]>();
  const plainTokens: { bytes: Uint8Array; id: number }[] = [];
  const partialTokens: { bytes: Uint8Array; id: number }[] = [];
  const stopWhole: { bytes: Uint8Array; id: number }[] = [];
  for (let i = 0; i < v.sorted.length; i++) {
    if (i % STEP_UNITS === 0) yield;
    const bytes = v.sorted[i]!;
    let u = 0;
    let n = 0;
    let at = -1;
    for (let j = 0; j < bytes.length; j++) {
      const b = bytes[j]!;
      if (u === 0 && stops(b)) {
        at = j;
        break;
      }
      u = utf8Next(u, b);
      if (u < 0) break;
      if (u === 0) n++;
    }
    const id = v.ids[i]!;
    if (at >= 0) {
      let group = suffixes.get(n);
      if (!group) suffixes.set(n, (group = []));
      group.push({ bytes: bytes.subarray(at), id });
      if (!(bytes[at]! < 0x20 && kindIsJson(stops))) stopWhole.push({ bytes, id });
      if (kindIsJson(stops) && bytes[at] === 0x22 && !bytes.subarray(at + 1).includes(0x22)) {
        let g = keySuffixes.get(n);
        if (!g) keySuffixes.set(n, (g = []));
        g.push({ bytes: bytes.subarray(at), id });
        const pre = Buffer.from(bytes.subarray(0, at)).toString('latin1');
        let ids = keyByPrefix.get(pre);
        if (!ids) keyByPrefix.set(pre, (ids = []));
        ids.push(id);
      } else if (!(bytes[at]! < 0x20 && kindIsJson(stops))) whole.push({ bytes, id }); // a control character ends any walk
    } else if (u === 0) {
      chars[id] = n;
      maxChars = Math.max(maxChars, n);
      plainTokens.push({ bytes, id });
    } else if (u > 0) {
      partial.push({ id, chars: n });
      partialTokens.push({ bytes, id });
    }
    // u < 0: not UTF-8 — never inside free text
  }
  const bySuffix = new Map<number, TokenList>();
  for (const [k, group] of suffixes) bySuffix.set(k, yield* sortedListSteps(group));
  const keySuffix = new Map<number, TokenList>();
  for (const [k, group] of keySuffixes) keySuffix.set(k, yield* sortedListSteps(group));
  const plainList = yield* sortedListSteps(plainTokens);
  return {
    chars, maxChars, partial, bySuffix, keySuffix, keyByPrefix, keyWhole: yield* sortedListSteps(whole), keyGrouped: new Map(), byRoom: new Map(),
    plainList, plainSig: yield* asciiSignatureSteps(plainList), partialList: yield* sortedListSteps(partialTokens), stopWhole: yield* sortedListSteps(stopWhole),
    byRegexState: new Map(), plainByText: kindIsJson(stops) ? yield* tokensByTextSteps(plainList) : null,
  };
}

/** Each token's ASCII characters as a 128-bit set (4 words per token); a character ≥ 0x80
 * sets bit 0 (a character no plain token has). */
function* asciiSignatureSteps(list: TokenList): Steps<Uint32Array> {
  const sig = new Uint32Array(4 * list.sorted.length);
  for (let i = 0; i < list.sorted.length; i++) {
    if (i % STEP_UNITS === 0) yield;
    for (let at = list.off[i]!; at < list.off[i + 1]!; at++) {
      const b = list.buf[at]!;
      const bit = b < 0x80 ? b : 0;
      sig[4 * i + (bit >>> 5)]! |= 1 << (bit & 31);
    }
  }
  return sig;
}


function compare(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

export function sortedList(entries: { bytes: Uint8Array; id: number }[]): TokenList {
  return finish(sortedListSteps(entries));
}

function* sortedListSteps(entries: { bytes: Uint8Array; id: number }[]): Steps<TokenList> {
  yield* sortSteps(entries, (a, b) => compare(a.bytes, b.bytes) || a.id - b.id);
  return yield* tokenListSteps(entries.map((e) => e.bytes), Int32Array.from(entries.map((e) => e.id)));
}

/** A key text no key can have (a lone surrogate): stands for the characters a token adds. */
const PLACEHOLDER = '\udfff';

/** Tokens with a stop byte inside a free key: the quote-closing ones walked as suffixes from
 * a stand-in key of their length (its text is neither named nor seen, so its value takes the
 * extra schema), except those whose text closes the key on a named or seen name — found by
 * prefix and stepped from the real state, like every other token with a stop byte. */
function keyStops(v: TokenVocab, c: FreeTextClass, f: Extract<Frame, { t: 'key' }>, next: Stack | null, room: number, mask: Uint32Array): void {
  const state: State = [{ f, next }];
  // the stand-in walks depend on the object's progress and what follows it, not on the key
  // text: shared by every position of the keys written at that point. The key's length
  // counts through the room and minLength of propertyNames still to reach.
  const minLeft = Math.min(Math.max(0, f.o.keys.min - f.n), c.maxChars + 1);
  const cacheKey = `${f.o.id}|${f.count}|${f.seen.join('\u0000')}|${Math.min(room, c.maxChars)}|${minLeft}|${stackKey(next)}`;
  let cached = c.keyGrouped.get(cacheKey);
  if (!cached) {
    cached = new Uint32Array(v.words);
    for (const [k, list] of c.keySuffix) {
      if (k === 0 || k > room) continue;
      const stand: Frame = { ...f, txt: f.txt + PLACEHOLDER.repeat(k), raw: `${f.raw}${'\u0000'.repeat(k)}`, n: f.n + k };
      walk(list, [{ f: stand, next }], cached);
    }
    if (c.keyGrouped.size >= 1024) c.keyGrouped.clear();
    c.keyGrouped.set(cacheKey, cached);
  }
  const grouped = cached.slice();
  const first = c.keySuffix.get(0);
  if (first) walk(first, state, mask); // nothing before the quote: the real state, exactly
  const special: { bytes: Uint8Array; id: number }[] = [];
  for (const name of [...f.o.props.map((p) => p.name), ...f.seen]) {
    if (!name.startsWith(f.txt) || name.length === f.txt.length) continue;
    for (const id of c.keyByPrefix.get(utf8Binary(name.slice(f.txt.length))) ?? []) {
      grouped[id >>> 5]! &= ~(1 << (id & 31));
      special.push({ bytes: v.bytesOf[id]!, id });
    }
  }
  for (let i = 0; i < mask.length; i++) mask[i] = mask[i]! | grouped[i]!;
  if (special.length > 0) walk(sortedList(special), state, mask);
  walk(c.keyWhole, state, mask);
}


/** For a state sitting in free text: set the allowed ids in `mask` and return true, or
 * return false for any other state. Plain tokens that fit come from a bitset; a token with a
 * stop byte jumps over its characters before it (they only move the character count) and the
 * matcher steps its suffix — suffixes walked as one sorted list per character count. */
export function freeTextMask(v: TokenVocab, state: State, mask: Uint32Array): boolean {
  if (state.length !== 1 || !state[0]) return false;
  const top = state[0];
  const f = top.f;
  const kind = stopsFor(f);
  if (!kind || (f.t !== 'str' && f.t !== 'until' && f.t !== 'key')) return false;
  const c = lazyClass(v, kind.key, kind.stops).get();
  const room = Math.max(0, (f.t === 'key' ? f.o.keys.max : f.max) - f.n);
  if (f.t === 'str' && (f.res.length > 0 || f.lab !== undefined)) {
    regexText(v, c, f, room, state, mask);
    return true;
  }
  if (f.t === 'key' && !(freeExtras(f.o) && extrasAllowed(f))) {
    keyText(v, c, f, room, state, mask);
    return true;
  }
  const plain = plainBits(v, c, room);
  for (let i = 0; i < mask.length; i++) mask[i] = mask[i]! | plain[i]!;
  // a character cut at the end: its lead byte needs room for one more character
  for (const p of c.partial) if (p.chars + 1 <= room) mask[p.id >>> 5]! |= 1 << (p.id & 31);
  if (f.t === 'key') {
    refillKeyEnd(v, c, room, state, mask);
    keyStops(v, c, f, top.next, room, mask);
    return true;
  }
  for (const [k, list] of c.bySuffix) {
    if (k > room) continue;
    walk(list, k === 0 ? state : [{ f: { ...f, n: f.n + k }, next: top.next }], mask);
  }
  return true;
}
