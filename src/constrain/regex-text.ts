// Masks inside text that regexes constrain: a JSON string with `pattern`/`format`, and an
// object key being written where the object names properties or has patternProperties /
// propertyNames. Plain tokens (complete UTF-8 without a quote, backslash or control byte) only
// add characters, so they are walked through the regex DFAs alone — no matcher frames — and
// the resulting bitsets are cached by DFA states and room; the other tokens (a character cut
// at the end, a quote or backslash inside) are stepped whole through the matcher from the
// real state. Same result as the full walk (tests compare them).
import { type Frame, type State, utf8Accumulate, utf8Next } from './frames.js';
import { step } from './matcher.js';
import { labelFits, labelKey, type LabelState, stepLabel } from './labels.js';
import { type FreeTextClass, plainBits, tokensByTextSteps } from './text-class.js';
import { roomCap } from './state-key.js';
import { finish } from './steps.js';
import { extraFeasible, extrasAllowed, keyRegexes, namedRemainders } from './objects.js';
import type { ObjectNode } from './nodes.js';
import type { Regex } from './regex.js';
import { type TokenList, type TokenVocab, walk } from './walk.js';

/** A string with regexes: plain tokens through the DFAs alone (cached by DFA states and
 * room), every other token stepped whole. */
export function regexText(v: TokenVocab, c: FreeTextClass, f: Extract<Frame, { t: 'str' }>, room: number, state: State, mask: Uint32Array): void {
  // room matters beyond the longest token too: the regexes' shortest completion must fit
  const r = Math.min(room, roomCap(f.res, f.lab !== undefined));
  const key = `${f.res.map((x) => x.id).join(',')}#${f.rs.join(',')}#${r}${labelKey(f.lab)}`;
  let bits = c.byRegexState.get(key);
  if (!bits) {
    bits = new Uint32Array(v.words);
    walkRegex(c.plainList, c.plainSig, f.res, f.rs, r, null, bits, f.lab);
    if (c.byRegexState.size >= 4096) c.byRegexState.clear();
    c.byRegexState.set(key, bits);
  }
  for (let i = 0; i < mask.length; i++) mask[i] = mask[i]! | bits[i]!;
  walk(c.partialList, state, mask);
  walk(c.stopWhole, state, mask);
}

/** Is the regex state vector (k = res.length states at `at` of `st`) alive after `count`
 * characters? Strings (`key` null): every regex alive and their shortest completion within
 * the room. Keys: a key beyond the named ones still feasible (extraFeasible). A plain
 * function, not a closure per walk: the walk's optimized code stays valid across walks. */
function regexAlive(res: readonly Regex[], st: Int32Array, at: number, count: number, room: number, key: ObjectNode | null): boolean {
  if (count > room) return false;
  if (key !== null) return extraFeasible(key, st, 0, at);
  let need = 0;
  for (let j = 0; j < res.length; j++) {
    const s = st[at + j]!;
    if (s < 0) return false;
    need = Math.max(need, res[j]!.minRemaining(s));
  }
  return count + need <= room;
}

/** The sorted walk of plain tokens (complete UTF-8, no stop byte) through regex DFAs: a
 * token is allowed when `alive` holds after each of its characters. Token prefixes shared
 * with the previous token are not stepped again; a dead prefix skips every token below it.
 * No allocation per step: DFA states by depth live in one flat array (k per depth). Hostnames
 * (`lab0` defined) also step the label check, by depth in `labs`. */
function walkRegex(list: TokenList, sig: Uint32Array, res: readonly Regex[], rs0: readonly number[], room: number, key: ObjectNode | null, out: Uint32Array,
  lab0?: LabelState): void {
  const k = res.length;
  const labs: LabelState[] | null = lab0 === undefined ? null : [lab0];
  // a character that keeps every DFA in place still moves the label check: no shortcut then
  const loop = labs ? new Uint32Array(4) : selfLoops(res, rs0);
  const maxLen = list.maxLen;
  const states = new Int32Array((maxLen + 1) * k);
  for (let j = 0; j < k; j++) states[j] = rs0[j]!;
  const us = new Int8Array(maxLen + 1);
  const cps = new Int32Array(maxLen + 1);
  const counts = new Int32Array(maxLen + 1);
  let valid = 0;
  const n = list.sorted.length;
  const { buf, off, lcp } = list;
  for (let i = 0; i < n; i++) {
    const at = off[i]!;
    const len = off[i + 1]! - at;
    const g = 4 * i;
    if ((sig[g]! & ~loop[0]!) === 0 && (sig[g + 1]! & ~loop[1]!) === 0 && (sig[g + 2]! & ~loop[2]!) === 0 && (sig[g + 3]! & ~loop[3]!) === 0) {
      // every character keeps every DFA in its state: only the count moves
      if (regexAlive(res, states, 0, len, room, key)) {
        const id = list.ids[i]!;
        out[id >>> 5]! |= 1 << (id & 31);
      }
      valid = Math.min(valid, lcp[i]!); // the states past the shared prefix were not built
      continue;
    }
    let d = Math.min(lcp[i]!, valid);
    let dead = false;
    while (d < len) {
      const b = buf[at + d]!;
      const u = us[d]!;
      const u2 = utf8Next(u, b);
      const cp = utf8Accumulate(u, cps[d]!, b);
      const from = d * k;
      const to = from + k;
      let count = counts[d]!;
      if (u2 === 0) {
        count++;
        for (let j = 0; j < k; j++) states[to + j] = res[j]!.step(states[from + j]!, cp);
        if (!regexAlive(res, states, to, count, room, key)) {
          dead = true;
          break;
        }
        if (labs) {
          const prev = labs[d] as LabelState;
          // inside a label that cannot be an A-label only a dot changes the state
          const lab = prev === null && cp !== 0x2e ? null : stepLabel(prev, cp);
          if (lab === false || (lab !== null && !labelFits(lab, room - count))) {
            dead = true;
            break;
          }
          labs[d + 1] = lab;
        }
      } else {
        for (let j = 0; j < k; j++) states[to + j] = states[from + j]!;
        if (labs) labs[d + 1] = labs[d] as LabelState;
      }
      d++;
      us[d] = u2;
      cps[d] = u2 === 0 ? 0 : cp;
      counts[d] = count;
    }
    if (dead) {
      valid = d;
      while (i + 1 < n && lcp[i + 1]! > d) i++;
      continue;
    }
    valid = len;
    const id = list.ids[i]!;
    out[id >>> 5]! |= 1 << (id & 31);
  }
}

/** The printable ASCII characters after which every regex stays in its state (rs0). */
function selfLoops(res: readonly Regex[], rs0: readonly number[]): Uint32Array {
  const loop = new Uint32Array(4);
  for (let cp = 0x20; cp < 0x7f; cp++) {
    let stays = true;
    for (let j = 0; j < res.length && stays; j++) stays = res[j]!.step(rs0[j]!, cp) === rs0[j];
    if (stays) loop[cp >>> 5]! |= 1 << (cp & 31);
  }
  return loop;
}

/** An object key being written (not free: named properties, patterns or propertyNames): a
 * plain token is allowed when the key stays the prefix of a named key still open (found by
 * the token's text) or stays a key the object admits beyond them (the DFA walk, cached); the
 * other tokens are stepped whole. */
export function keyText(v: TokenVocab, c: FreeTextClass, f: Extract<Frame, { t: 'key' }>, room: number, state: State, mask: Uint32Array): void {
  const o = f.o;
  const res = keyRegexes(o);
  const extras = extrasAllowed(f);
  if (extras && res.length > 0) {
    const r = Math.min(room, c.maxChars);
    const key = `k${o.id}#${f.rs.join(',')}#${r}`;
    let bits = c.byRegexState.get(key);
    if (!bits) {
      bits = new Uint32Array(v.words);
      walkRegex(c.plainList, c.plainSig, res, f.rs, r, o, bits);
      if (c.byRegexState.size >= 4096) c.byRegexState.clear();
      c.byRegexState.set(key, bits);
    }
    for (let i = 0; i < mask.length; i++) mask[i] = mask[i]! | bits[i]!;
  } else if (extras) {
    // no regex: the only bound on an extra key is its length
    const bits = plainBits(v, c, room);
    for (let i = 0; i < mask.length; i++) mask[i] = mask[i]! | bits[i]!;
  }
  if (extras) refillKeyEnd(v, c, room, state, mask);
  const byText = (c.plainByText ??= finish(tokensByTextSteps(c.plainList)));
  for (const rest of namedRemainders(f)) {
    for (let len = 1; len <= Math.min(rest.length, c.plainList.maxLen); len++) {
      for (const id of byText.get(rest.slice(0, len)) ?? []) mask[id >>> 5]! |= 1 << (id & 31);
    }
  }
  walk(c.partialList, state, mask);
  walk(c.stopWhole, state, mask);
}

/** Plain token ids by character count, per class (built on demand). */
const plainByChars = new WeakMap<FreeTextClass, Map<number, readonly number[]>>();
function plainWithChars(c: FreeTextClass, n: number): readonly number[] {
  let m = plainByChars.get(c);
  if (!m) plainByChars.set(c, (m = new Map()));
  let ids = m.get(n);
  if (!ids) {
    ids = Array.from(c.plainList.ids).filter((id) => c.chars[id] === n);
    m.set(n, ids);
  }
  return ids;
}

/** A key beyond the named ones that a plain token fills to its maximum length must close
 * there (feedKey refuses one already written or not accepted): those tokens are stepped
 * through the matcher instead of taken from the bitsets. */
export function refillKeyEnd(v: TokenVocab, c: FreeTextClass, room: number, state: State, mask: Uint32Array): void {
  if (room > c.maxChars) return;
  for (const id of plainWithChars(c, room)) {
    mask[id >>> 5]! &= ~(1 << (id & 31));
    let st = state;
    for (const b of v.bytesOf[id]!) {
      st = step(st, b);
      if (st.length === 0) break;
    }
    if (st.length > 0) mask[id >>> 5]! |= 1 << (id & 31);
  }
}
