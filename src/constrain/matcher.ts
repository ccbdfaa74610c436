// A byte-level matcher for constrained output: a nondeterministic pushdown automaton over the
// frames of frames.ts. Output is compact JSON (no whitespace outside strings). Bytes ≥ 0x80
// only occur inside strings and free text, so multi-byte UTF-8 never breaks the structure.
import {
  advanceMatch, DONE, type Frame, jsonCharStep, lit, pendingRange, push, regexesAccept, regexesCanContinue, regexRoomNeeded, type Stack, type State, stepRegexes, stringFrame, THINK_END,
  utf8Accumulate, utf8Next, val,
} from './frames.js';
import { labelAccepts, labelFits, type LabelState, stepLabel } from './labels.js';
import { anyAlternatives, deref, isNever, MAX_DIGITS, type NumberNode, type ObjectNode, type Schema } from './nodes.js';
import type { Regex } from './regex.js';
import { rangeFeasible, rangeHolds } from './numrange.js';
import { extrasPossible, feedKey, feedObject, feedXmlProps, objectCanEnd } from './objects.js';
import { KEY_CAP, stackKey, stateKey } from './state-key.js';
import { bit, nextLiterals, uniqueSetsOf } from './unique.js';

export { DONE, KEY_CAP, stackKey, stateKey, THINK_END, utf8Next, val };
export type { Frame, Stack, State };

const isDigit = (b: number): boolean => b >= 0x30 && b <= 0x39;
const isWs = (b: number): boolean => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** Stacks for the value of schema `s` (alternatives of anyOf / any expanded). */
export function expand(s: Schema, next: Stack | null): Stack[] {
  switch (s.k) {
    case 'lit':
      return [lit(s.text, next)];
    case 'string':
      return [stringFrame(s, next)];
    case 'number':
      return [push({ t: 'num', ph: 0, n: 0, d: 0, s, txt: '' }, next)];
    case 'anyOf':
      return s.alts.flatMap((a) => expand(a, next));
    case 'any':
      return anyAlternatives(s.depth).flatMap((a) => expand(a, next));
    case 'object':
      return objectSatisfiable(s) ? [push({ t: 'obj', o: s, xml: false, ph: 'open', i: 0, seen: [], count: 0 }, next)] : [];
    case 'array':
      return [push({ t: 'arr', s, ph: 'open', n: 0, used: 0n }, next)];
    case 'ref':
      return expand(deref(s), next);
  }
}

/** Can the object's counts hold at all? One with more required names, or a larger
 * minProperties, than maxProperties (or than the keys it admits) would open and never close. */
const satisfiable = new WeakMap<ObjectNode, boolean>();
function objectSatisfiable(o: ObjectNode): boolean {
  let ok = satisfiable.get(o);
  if (ok === undefined) {
    let required = 0;
    let named = 0;
    for (const p of o.props) {
      if (p.required) required++;
      if (!isNever(p.schema)) named++;
    }
    ok = required <= o.maxProps && o.minProps <= o.maxProps && (extrasPossible(o) || o.minProps <= named);
    satisfiable.set(o, ok);
  }
  return ok;
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
      if (f.i + 1 === f.text.length) out.push(next ?? DONE);
      else out.push(push({ ...f, i: f.i + 1 }, next));
      return;
    case 'str':
      return feedString(f, next, b, out);
    case 'num':
      return feedNumber(f, next, b, out);
    case 'obj':
      return f.xml ? feedXmlProps(f, next, b, out, feed) : feedObject(f, next, b, out, feed);
    case 'key':
      return feedKey(f, next, b, out);
    case 'arr':
      return feedArray(f, next, b, out);
    case 'until':
      return feedUntil(f, next, b, out);
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

function feedString(f: Extract<Frame, { t: 'str' }>, next: Stack | null, b: number, out: Stack[]): void {
  if (f.ph === 0) {
    if (b === 0x22 && (f.res.length === 0 || regexRoomNeeded(f.res, f.rs) <= f.max)) out.push(push({ ...f, ph: 1 }, next));
    return;
  }
  // a character starts: there must be room for it (a multi-byte one counts when it completes)
  if (f.ph === 1 && f.u === 0 && b !== 0x22 && f.n >= f.max) return;
  const r = jsonCharStep(f.ph, f.u, f.cp, b);
  if (r === null) return;
  if (r === 'close') {
    if (f.n >= f.min && regexesAccept(f.res, f.rs) && (f.lab === undefined || labelAccepts(f.lab))) out.push(next ?? DONE);
    return;
  }
  if (r.ch < 0) {
    // a character in progress: the regexes must still have room for it
    const range = pendingRange(r.ph, r.u, r.cp);
    const ok = f.lab === undefined ? f.res.length === 0 || regexesCanContinue(f.res, f.rs, range) : hostCharPossible(f, range);
    if (ok) out.push(push({ ...f, ph: r.ph, u: r.u, cp: r.cp }, next));
    return;
  }
  if (f.res.length === 0 && f.lab === undefined) {
    out.push(push({ ...f, ph: 1, u: 0, cp: 0, n: f.n + 1 }, next));
    return;
  }
  const re = stepRegexes(f.res, f.rs, r.ch);
  // the regexes must still fit in the room left (no dead end at maxLength)
  if (!re || f.n + 1 + regexRoomNeeded(re.res, re.rs) > f.max) return;
  if (f.lab === undefined) {
    out.push(push({ ...f, ph: 1, u: 0, cp: 0, n: f.n + 1, res: re.res, rs: re.rs }, next));
    return;
  }
  // hostnames: the label check too, and the room its A-label still needs (in a label that
  // cannot be an A-label only a dot changes its state)
  const lab = f.lab === null && r.ch !== 0x2e ? null : stepLabel(f.lab, r.ch);
  if (lab !== false && (lab === null || labelFits(lab, f.max - f.n - 1))) out.push(push({ ...f, ph: 1, u: 0, cp: 0, n: f.n + 1, res: re.res, rs: re.rs, lab }, next));
}

/** The characters a hostname may hold (LDH and the dot), by code point. */
const HOST_CHAR: readonly boolean[] = Array.from({ length: 0x80 }, (_, c) => /[A-Za-z0-9.-]/.test(String.fromCharCode(c)));

/** Hostnames: can a character in `range` (null: any escape) complete, passing the regexes, the
 * room and the label check? Only hostname characters (ASCII) are tried. */
function hostCharPossible(f: Extract<Frame, { t: 'str' }>, range: [number, number] | null): boolean {
  if (!regexesCanContinue(f.res, f.rs, range)) return false;
  // in a label that cannot be an A-label, the label check holds for any character
  if (f.lab === null) return true;
  const [lo, hi] = range ?? [0, 0x7f];
  for (let cp = Math.max(lo, 0x2d); cp <= Math.min(hi, 0x7a); cp++) {
    if (!HOST_CHAR[cp]) continue;
    const re = stepRegexes(f.res, f.rs, cp);
    if (!re || f.n + 1 + regexRoomNeeded(re.res, re.rs) > f.max) continue;
    const lab = stepLabel(f.lab!, cp);
    if (lab !== false && labelFits(lab, f.max - f.n - 1)) return true;
  }
  return false;
}

/** Free text up to an end marker. Bytes that may begin the marker are held (`m`) and given
 * to the regexes only once the marker match breaks. */
function feedUntil(f: Extract<Frame, { t: 'until' }>, next: Stack | null, b: number, out: Stack[]): void {
  const u = utf8Next(f.u, b);
  if (u < 0) return;
  // past the length cap only the end marker may follow, straight on
  if (f.n >= f.max && f.u === 0 && f.end.charCodeAt(f.m) !== b) return;
  const m = f.u > 0 ? 0 : advanceMatch(f.end, f.m, b);
  if (m === f.end.length) {
    // n counts the marker's bytes before this one too
    if (f.n - (f.end.length - 1) >= f.min && regexesAccept(f.res, f.rs) && (f.lab === undefined || labelAccepts(f.lab))) out.push(next ?? DONE);
    return;
  }
  if (!(f.u > 0 || f.n < f.max || m > 0)) return;
  let res = f.res;
  let rs = f.rs;
  let cp = f.cp;
  let lab = f.lab;
  if (res.length > 0) {
    // characters that left the marker match: the held ones, and this byte unless it is held
    const held = f.u > 0 ? '' : f.end.slice(0, f.m) + (b < 0x80 ? String.fromCharCode(b) : '');
    const flush = b < 0x80 ? held.slice(0, held.length - m) : f.end.slice(0, f.m);
    for (let i = 0; i < flush.length; i++) {
      const r = stepRegexes(res, rs, flush.charCodeAt(i));
      if (!r) return;
      ({ res, rs } = r);
      if (lab !== undefined) {
        const l = stepLabel(lab, flush.charCodeAt(i));
        if (l === false) return;
        lab = l;
      }
    }
    // hostnames: the A-label's shortest ending must fit (held bytes may be the marker's)
    if (lab !== undefined && lab !== null && !labelFits(lab, f.max - (f.n + 1 - m))) return;
    // held bytes end the value if the marker completes, or join it if the marker breaks: one
    // of the two must be possible, or the state would have no way on
    if (m > 0 && !heldMayEnd(f, res, rs, lab, f.n + 1 - m) && !heldMayContinue(res, rs, lab, f.end.slice(0, m))) return;
    if (b >= 0x80) {
      cp = utf8Accumulate(f.u, f.cp, b);
      if (u > 0 && !regexesCanContinue(res, rs, pendingRange(1, u, cp))) return;
      if (u === 0) {
        const r = stepRegexes(res, rs, cp);
        if (!r) return;
        ({ res, rs } = r);
        if (lab !== undefined) {
          const l = stepLabel(lab, cp);
          if (l === false) return;
          lab = l;
        }
        cp = 0;
      }
    }
  }
  const n = u > 0 ? f.n : f.n + 1;
  out.push(push(lab === undefined ? { ...f, m, n, u, cp, res, rs } : { ...f, m, n, u, cp, res, rs, lab }, next));
}

/** May the value end before the held marker bytes (its `count` characters so far)? */
function heldMayEnd(f: Extract<Frame, { t: 'until' }>, res: readonly Regex[], rs: readonly number[], lab: LabelState | undefined, count: number): boolean {
  return count >= f.min && regexesAccept(res, rs) && (lab === undefined || labelAccepts(lab));
}

/** Can the held bytes be the value's own characters (the regexes and label check go on)? */
function heldMayContinue(res0: readonly Regex[], rs0: readonly number[], lab0: LabelState | undefined, held: string): boolean {
  let res = res0;
  let rs = rs0;
  let lab = lab0;
  for (let i = 0; i < held.length; i++) {
    const r = stepRegexes(res, rs, held.charCodeAt(i));
    if (!r) return false;
    ({ res, rs } = r);
    if (lab !== undefined) {
      const l = stepLabel(lab, held.charCodeAt(i));
      if (l === false) return false;
      lab = l;
    }
  }
  return true;
}

// number phases: 0 start, 1 after '-', 2 int digits*, 3 leading zero*, 4 after '.', 5 fraction*,
// 6 after e, 7 after e sign, 8 one exponent digit*, 9 two exponent digits* (* = may end here;
// at most two exponent digits, so every number is finite as a double)
const NUM_END = new Set([2, 3, 5, 8, 9]);

const numberMayEnd = (f: Extract<Frame, { t: 'num' }>): boolean => NUM_END.has(f.ph) && (f.s.range === null || rangeHolds(f.txt, f.s.range));

function feedNumber(f: Extract<Frame, { t: 'num' }>, next: Stack | null, b: number, out: Stack[]): void {
  const s: NumberNode = f.s;
  const to = (ph: number, intDigit = false): void => {
    const d = intDigit ? f.d + 1 : f.d;
    // a phase that cannot end ('-', '.', 'e', the exponent sign) needs room for a digit after it
    if (f.n + (NUM_END.has(ph) ? 0 : 1) >= MAX_DIGITS || d > s.intDigits) return;
    if (s.range === null) {
      out.push(push({ ...f, ph, n: f.n + 1, d }, next));
      return;
    }
    const txt = f.txt + String.fromCharCode(b);
    if (rangeFeasible(txt, s.range, s.integer, s.intDigits)) out.push(push({ ...f, ph, n: f.n + 1, d, txt }, next));
  };
  const digit = isDigit(b);
  const int = s.integer;
  const exp = (b === 0x65 || b === 0x45) && s.range === null;
  switch (f.ph) {
    case 0:
      if (b === 0x2d && s.neg) to(1);
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
  if (numberMayEnd(f)) feed(next, b, out);
}

function feedArray(f: Extract<Frame, { t: 'arr' }>, next: Stack | null, b: number, out: Stack[]): void {
  const a = f.s;
  const itemAt = (n: number): Schema | null => (n < a.prefix.length ? a.prefix[n]! : a.items);
  // unique arrays: the literals item n may still be (each keeps minItems reachable)
  const literals = (): number[] => (a.unique ? nextLiterals(uniqueSetsOf(a), a.min, f.n, f.used) : []);
  const item = (): void => {
    if (f.n >= a.max) return;
    if (a.unique) {
      const u = uniqueSetsOf(a);
      for (const l of literals()) feed(lit(u.texts[l]!, push({ ...f, ph: 'sep', n: f.n + 1, used: f.used | bit(l) }, next)), b, out);
      return;
    }
    const s = itemAt(f.n);
    if (s !== null) feed(val(s, push({ ...f, ph: 'sep', n: f.n + 1 }, next)), b, out);
  };
  switch (f.ph) {
    case 'open':
      if (b === 0x5b) out.push(push({ ...f, ph: 'first' }, next));
      return;
    case 'first':
      if (b === 0x5d && f.n === 0 && a.min === 0) out.push(next ?? DONE);
      item();
      return;
    case 'sep':
      if (b === 0x5d && f.n >= a.min) out.push(next ?? DONE);
      if (b === 0x2c && f.n < a.max && (a.unique ? literals().length > 0 : itemAt(f.n) !== null)) out.push(push({ ...f, ph: 'first' }, next));
  }
}

/** Can the stack end here (no more bytes needed)? */
export function canEnd(st: Stack | null): boolean {
  for (let s = st; s !== null; s = s.next) {
    if (s === DONE) return true;
    const f = s.f;
    if (f.t === 'ws') continue;
    if (f.t === 'num' && numberMayEnd(f)) continue;
    if (f.t === 'obj' && f.xml && objectCanEnd(f)) continue;
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
    const k = stackKey(s, Infinity);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Does schema `s` accept `text` as a complete value? */
export function acceptsText(s: Schema, text: string): boolean {
  let st: State = [val(s, null)];
  for (const b of Buffer.from(text, 'utf8')) {
    st = step(st, b);
    if (st.length === 0) return false;
  }
  return st.some(canEnd);
}
