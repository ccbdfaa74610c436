// A byte-level matcher for constrained output: a nondeterministic pushdown automaton whose
// state is a small set of stacks of frames (immutable linked lists, so a step never mutates
// the state it came from — the token trie walk and speculative drafts branch freely).
//
// Frames: `val` (a value of a schema, expanded on its first byte), `lit` (a fixed text),
// `str` (a JSON string), `num` (a JSON number, ended by the byte after it), `obj` (an
// object's properties, JSON `{"k":v,…}` or Qwen XML `<parameter=k>\nv\n</parameter>\n`),
// `arr`, `until` (any text up to an end marker: XML string parameters), `ws` (up to n
// whitespace bytes) and `think` (anything up to `</think>`: the unconstrained reasoning).
// Output is compact JSON (no whitespace outside strings). Bytes ≥ 0x80 only occur inside
// strings and free text, so multi-byte UTF-8 never breaks the structure.
import { anyAlternatives, literalChoice, MAX_DIGITS, MAX_STRING, type Prop, rawLiteral, type Schema } from './schema.js';

export type Frame =
  | { readonly t: 'val'; readonly s: Schema }
  | { readonly t: 'lit'; readonly text: string; readonly i: number }
  | { readonly t: 'str'; readonly ph: number; readonly n: number; readonly min: number; readonly max: number; readonly u: number }
  | { readonly t: 'num'; readonly ph: number; readonly n: number; readonly d: number; readonly s: Extract<Schema, { k: 'number' }> }
  | { readonly t: 'obj'; readonly props: readonly Prop[]; readonly extra: Schema | null; readonly xml: boolean; readonly ph: 'open' | 'first' | 'sep' | 'key'; readonly i: number; readonly id: number }
  | { readonly t: 'arr'; readonly s: Extract<Schema, { k: 'array' }>; readonly ph: 'open' | 'first' | 'sep'; readonly n: number }
  | { readonly t: 'until'; readonly end: string; readonly m: number; readonly n: number; readonly min: number; readonly max: number; readonly u: number }
  | { readonly t: 'ws'; readonly left: number }
  | { readonly t: 'think'; readonly m: number };

export interface Stack {
  readonly f: Frame;
  readonly next: Stack | null;
}

/** A matcher state: the stacks still alive (empty = dead). A null stack = done. */
export type State = readonly (Stack | null)[];

export const THINK_END = '</think>';

const push = (f: Frame, next: Stack | null): Stack => ({ f, next });
const lit = (text: string, next: Stack | null): Stack => push({ t: 'lit', text, i: 0 }, next);
export const val = (s: Schema, next: Stack | null): Stack => push({ t: 'val', s }, next);

const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;
const isWs = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** Stacks for the value of schema `s` (alternatives of anyOf / any expanded). */
function expand(s: Schema, next: Stack | null): Stack[] {
  switch (s.k) {
    case 'lit':
      return [lit(s.text, next)];
    case 'string':
      return [push({ t: 'str', ph: 0, n: 0, min: s.min, max: s.max, u: 0 }, next)];
    case 'number':
      return [push({ t: 'num', ph: 0, n: 0, d: 0, s }, next)];
    case 'anyOf':
      return s.alts.flatMap((a) => expand(a, next));
    case 'any':
      return anyAlternatives(s.depth).flatMap((a) => expand(a, next));
    case 'object':
      return [push({ t: 'obj', props: s.props, extra: s.extra, xml: false, ph: 'open', i: 0, id: s.id }, next)];
    case 'array':
      return [push({ t: 'arr', s, ph: 'open', n: 0 }, next)];
  }
}

/** Stacks after consuming byte `b` from `st` (null = the matcher is done: nothing fits). */
export function feed(st: Stack | null, b: number, out: Stack[]): void {
  if (st === null) return;
  const f = st.f;
  const next = st.next;
  switch (f.t) {
    case 'val':
      for (const e of expand(f.s, next)) feed(e, b, out);
      return;
    case 'lit':
      if (f.text.charCodeAt(f.i) !== b) return;
      if (f.i + 1 === f.text.length) {
        if (next) out.push(next);
        else out.push(DONE);
      } else out.push(push({ ...f, i: f.i + 1 }, next));
      return;
    case 'str':
      return feedString(f, next, b, out);
    case 'num':
      return feedNumber(f, next, b, out);
    case 'obj':
      return f.xml ? feedXmlProps(f, next, b, out) : feedObject(f, next, b, out);
    case 'arr':
      return feedArray(f, next, b, out);
    case 'until': {
      const u = utf8Next(f.u, b);
      if (u < 0) return;
      // past the length cap only the end marker may follow, straight on
      if (f.n >= f.max && f.u === 0 && f.end.charCodeAt(f.m) !== b) return;
      const m = advanceMatch(f.end, f.m, b);
      if (m === f.end.length) {
        // n counts the marker's bytes before this one too
        if (f.n - (f.end.length - 1) >= f.min) out.push(next ?? DONE);
        return;
      }
      if (f.u > 0 || f.n < f.max || m > 0) out.push(push({ ...f, m, n: u > 0 ? f.n : f.n + 1, u }, next));
      return;
    }
    case 'ws':
      if (isWs(b) && f.left > 0) out.push(push({ t: 'ws', left: f.left - 1 }, next));
      feed(next, b, out);
      return;
    case 'think': {
      const m = advanceMatch(THINK_END, f.m, b);
      out.push(m === THINK_END.length ? next ?? DONE : push({ t: 'think', m }, next));
      return;
    }
  }
}

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

/** A sentinel stack meaning "matched completely; nothing more may follow". */
export const DONE: Stack = { f: { t: 'ws', left: 0 }, next: null };

/** Length of the longest suffix of (end[0..m) + b) that is a prefix of `end`. */
function advanceMatch(end: string, m: number, b: number): number {
  if (end.charCodeAt(m) === b) return m + 1;
  // fall back over shorter prefixes (end markers are short: a direct search is enough)
  const seen = end.slice(0, m) + String.fromCharCode(b);
  for (let k = Math.min(m, end.length - 1); k > 0; k--) if (seen.endsWith(end.slice(0, k))) return k;
  return 0;
}

function feedString(f: Extract<Frame, { t: 'str' }>, next: Stack | null, b: number, out: Stack[]): void {
  const at = (ph: number, n: number): Stack => push({ ...f, ph, n }, next);
  switch (f.ph) {
    case 0: // opening quote
      if (b === 0x22) out.push(at(1, 0));
      return;
    case 1: { // inside; a multi-byte character counts once, when its last byte arrives
      const u = utf8Next(f.u, b);
      if (u < 0) return;
      if (f.u > 0) out.push(push({ ...f, u, n: u > 0 ? f.n : f.n + 1 }, next));
      else if (b === 0x22) {
        if (f.n >= f.min) out.push(next ?? DONE);
      } else if (f.n >= f.max || b < 0x20) return;
      else if (b === 0x5c) out.push(at(2, f.n));
      else if (u > 0) out.push(push({ ...f, u }, next));
      else out.push(at(1, f.n + 1));
      return;
    }
    case 2: // after a backslash
      if (b === 0x75) out.push(at(3, f.n)); // \u + 4 hex
      else if ('"\\/bfnrt'.includes(String.fromCharCode(b))) out.push(at(1, f.n + 1));
      return;
    default: { // 3..6: hex digits of \uXXXX
      const hex = isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);
      if (hex) out.push(f.ph === 6 ? at(1, f.n + 1) : at(f.ph + 1, f.n));
    }
  }
}

// number phases: 0 start, 1 after '-', 2 int digits*, 3 leading zero*, 4 after '.', 5 fraction*,
// 6 after e, 7 after e sign, 8 one exponent digit*, 9 two exponent digits* (* = may end here;
// at most two exponent digits, so every number is finite as a double)
const NUM_END = new Set([2, 3, 5, 8, 9]);

function feedNumber(f: Extract<Frame, { t: 'num' }>, next: Stack | null, b: number, out: Stack[]): void {
  const to = (ph: number, intDigit = false): void => {
    const d = intDigit ? f.d + 1 : f.d;
    if (f.n < MAX_DIGITS && d <= f.s.intDigits) out.push(push({ ...f, ph, n: f.n + 1, d }, next));
  };
  const digit = isDigit(b);
  const int = f.s.integer;
  const exp = b === 0x65 || b === 0x45;
  switch (f.ph) {
    case 0:
      if (b === 0x2d && f.s.neg) to(1);
      else if (b === 0x30) to(3, true);
      else if (digit) to(2, true);
      break;
    case 1:
      if (b === 0x30) to(3, true);
      else if (digit) to(2, true);
      break;
    case 2:
      if (digit) to(2, true);
      else if (!int && b === 0x2e) to(4);
      else if (!int && exp) to(6);
      break;
    case 3:
      if (!int && b === 0x2e) to(4);
      else if (!int && exp) to(6);
      break;
    case 4:
    case 5:
      if (digit) to(5);
      else if (f.ph === 5 && exp) to(6);
      break;
    case 6:
      if (b === 0x2b || b === 0x2d) to(7);
      else if (digit) to(8);
      break;
    case 7:
      if (digit) to(8);
      break;
    case 8:
      if (digit) to(9);
      break;
    default:
      break;
  }
  // the number may end here: the byte belongs to what follows
  if (NUM_END.has(f.ph)) feed(next, b, out);
}

type ObjFrame = Extract<Frame, { t: 'obj' }>;

/** Indices of the properties that may come next: from i up to the first required one. */
function candidates(f: ObjFrame): number[] {
  const out: number[] = [];
  for (let j = f.i; j < f.props.length; j++) {
    out.push(j);
    if (f.props[j]!.required) break;
  }
  return out;
}

function requiredLeft(f: ObjFrame): boolean {
  for (let j = f.i; j < f.props.length; j++) if (f.props[j]!.required) return true;
  return false;
}

/** Stacks for "a key (and its value) comes next". */
function keyStacks(f: ObjFrame, next: Stack | null): Stack[] {
  if (f.extra) {
    const after = push({ ...f, ph: 'sep' }, next);
    return [push({ t: 'str', ph: 0, n: 0, min: 0, max: 256, u: 0 }, lit(':', val(f.extra, after)))];
  }
  return candidates(f).map((j) => lit(`${JSON.stringify(f.props[j]!.name)}:`, val(f.props[j]!.schema, push({ ...f, ph: 'sep', i: j + 1 }, next))));
}

function feedObject(f: ObjFrame, next: Stack | null, b: number, out: Stack[]): void {
  const close = (): void => {
    if (b === 0x7d && !requiredLeft(f)) out.push(next ?? DONE);
  };
  switch (f.ph) {
    case 'open':
      if (b === 0x7b) out.push(push({ ...f, ph: 'first' }, next));
      return;
    case 'first':
      close();
      for (const s of keyStacks(f, next)) feed(s, b, out);
      return;
    case 'sep':
      close();
      if (b === 0x2c && (f.extra || candidates(f).length > 0)) out.push(push({ ...f, ph: 'key' }, next));
      return;
    case 'key':
      for (const s of keyStacks(f, next)) feed(s, b, out);
  }
}

/** Qwen XML parameters of a forced call: each `<parameter=NAME>\nVALUE\n</parameter>\n`;
 * string values are free text, others compact JSON. The frame ends where the next frame
 * (`</function>…`) begins, once no required parameter is left. */
function feedXmlProps(f: ObjFrame, next: Stack | null, b: number, out: Stack[]): void {
  for (const j of candidates(f)) {
    const p = f.props[j]!;
    feed(lit(`<parameter=${p.name}>\n`, xmlValue(p.schema, push({ ...f, i: j + 1 }, next))), b, out);
  }
  if (!requiredLeft(f)) feed(next, b, out);
}

/** The value of an XML parameter and its closing tag: string enums as raw text, schemas
 * admitting any string as free text up to `</parameter>`, others as compact JSON. */
function xmlValue(s: Schema, after: Stack): Stack {
  const close = '\n</parameter>\n';
  const lits = literalAlternatives(s);
  if (lits && lits.every((t) => t.startsWith('"'))) {
    return push({ t: 'val', s: rawTextChoice(lits) }, lit(close, after));
  }
  if (admitsString(s)) {
    const [min, max] = stringBounds(s);
    return push({ t: 'until', end: '\n</parameter>', m: 0, n: 0, min, max, u: 0 }, lit('\n', after));
  }
  return val(s, lit(close, after));
}

function literalAlternatives(s: Schema): string[] | null {
  if (s.k === 'lit') return [s.text];
  if (s.k !== 'anyOf') return null;
  const out: string[] = [];
  for (const a of s.alts) {
    const l = literalAlternatives(a);
    if (!l) return null;
    out.push(...l);
  }
  return out;
}

function admitsString(s: Schema): boolean {
  return s.k === 'string' || s.k === 'any' || (s.k === 'anyOf' && s.alts.some(admitsString));
}

/** Length bounds of free text standing for a string of schema `s` (the loosest branch). */
function stringBounds(s: Schema): [number, number] {
  if (s.k === 'string') return [s.min, s.max];
  if (s.k === 'anyOf') {
    const b = s.alts.filter(admitsString).map(stringBounds);
    return [Math.min(...b.map((x) => x[0])), Math.max(...b.map((x) => x[1]))];
  }
  return [0, MAX_STRING];
}

/** The raw texts of JSON string literals as a choice of literals (cached per list). */
const rawChoices = new Map<string, Schema>();
function rawTextChoice(jsonTexts: readonly string[]): Schema {
  const key = jsonTexts.join('\u0000');
  let s = rawChoices.get(key);
  if (!s) {
    const alts = jsonTexts.map((t) => rawLiteral(JSON.parse(t) as string));
    s = alts.length === 1 ? alts[0]! : literalChoice(alts);
    rawChoices.set(key, s);
  }
  return s;
}

function feedArray(f: Extract<Frame, { t: 'arr' }>, next: Stack | null, b: number, out: Stack[]): void {
  const item = (): void => feed(val(f.s.items, push({ ...f, ph: 'sep', n: f.n + 1 }, next)), b, out);
  switch (f.ph) {
    case 'open':
      if (b === 0x5b) out.push(push({ ...f, ph: 'first' }, next));
      return;
    case 'first':
      if (b === 0x5d && f.s.min === 0) out.push(next ?? DONE);
      if (f.s.max > 0) item();
      return;
    case 'sep':
      if (b === 0x5d && f.n >= f.s.min) out.push(next ?? DONE);
      if (b === 0x2c && f.n < f.s.max) out.push(push({ ...f, ph: 'first', n: f.n }, next));
  }
}

/** Can the stack end here (no more bytes needed)? */
export function canEnd(st: Stack | null): boolean {
  for (let s = st; s !== null; s = s.next) {
    if (s === DONE) return true;
    const f = s.f;
    if (f.t === 'ws') continue;
    if (f.t === 'num' && NUM_END.has(f.ph)) continue;
    if (f.t === 'obj' && f.xml && !requiredLeft(f)) continue;
    return false;
  }
  return true;
}

/** Advance every stack of a state by one byte. */
export function step(state: State, b: number): State {
  const out: Stack[] = [];
  for (const st of state) feed(st, b, out);
  return out.length > 1 ? dedupe(out) : out;
}

function dedupe(stacks: Stack[]): Stack[] {
  const seen = new Set<string>();
  return stacks.filter((s) => {
    const k = stackKey(s);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Remaining-length counts above this are equal for the mask: no token is longer (the
 * token trie leaves out longer tokens). */
export const KEY_CAP = 1024;

const textIds = new Map<string, number>();
function textKey(t: string): number {
  let id = textIds.get(t);
  if (id === undefined) {
    if (textIds.size > 100_000) textIds.clear();
    textIds.set(t, (id = textIds.size + 1));
  }
  return id;
}

/** A key identifying what a stack accepts from here on (for dedupe and the mask cache). */
export function stackKey(st: Stack | null): string {
  let k = '';
  for (let s = st; s !== null; s = s.next) {
    if (s === DONE) return `${k}$`;
    const f = s.f;
    switch (f.t) {
      case 'val': k += `v${f.s.id}`; break;
      case 'lit': k += `l${textKey(f.text)},${f.i}`; break;
      case 'str': k += `s${f.ph},${f.u},${Math.max(0, f.min - f.n)},${Math.min(f.max - f.n, KEY_CAP)}`; break;
      case 'num': k += `n${f.s.id},${f.ph},${f.n},${f.d}`; break;
      case 'obj': k += `o${f.id},${f.xml ? 1 : 0},${f.ph},${f.i}`; break;
      case 'arr': k += `a${f.s.id},${f.ph},${Math.min(f.n, f.s.min)},${f.s.max - f.n}`; break;
      case 'until': k += `u${textKey(f.end)},${f.m},${f.u},${Math.max(0, f.min - f.n)},${Math.min(f.max - f.n, KEY_CAP)}`; break;
      case 'ws': k += `w${f.left}`; break;
      case 'think': k += `t${f.m}`; break;
    }
    k += '|';
  }
  return k;
}

