// Objects in the matcher. JSON objects take their keys in any order: a key is decoded as it
// is written and must stay a prefix of a named property not yet present, or be a key the
// object admits beyond them (propertyNames, patternProperties, additionalProperties — their
// regexes run on the key's characters); at its closing quote it picks the value's schema.
// Objects whose keys are all free (no named properties, no patterns) write keys as plain
// strings. Qwen XML parameters (forced tool calls) follow declaration order.
import {
  DONE, type Frame, jsonCharStep, lit, pendingRange, push, regexesAccept, regexesCanContinue, type Stack, stringFrame, utf8Binary, val,
} from './frames.js';
import { deref, isNever, literalChoice, MAX_STRING, type ObjectNode, rawLiteral, type Schema, type StringNode } from './nodes.js';
import { LABEL_START } from './labels.js';
import type { Regex } from './regex.js';

type ObjFrame = Extract<Frame, { t: 'obj' }>;
type KeyFrame = Extract<Frame, { t: 'key' }>;
export type Feed = (st: Stack | null, b: number, out: Stack[]) => void;

const freeKeys = new WeakMap<ObjectNode, boolean>();
/** Keys are unconstrained strings and no property is named: plain string keys (a repeated
 * key is not refused — nothing counts distinct keys here: no minProperties, no dependencies). */
function hasFreeKeys(o: ObjectNode): boolean {
  let v = freeKeys.get(o);
  if (v === undefined) {
    v = o.props.length === 0 && o.deps.length === 0 && o.minProps === 0 && o.keys.res.length === 0 && o.clauses.every((c) => c.patterns.length === 0 && c.extra !== null);
    freeKeys.set(o, v);
  }
  return v;
}

const unseen = (f: { o: ObjectNode; seen: readonly string[] }, name: string): boolean => !f.seen.includes(name);
/** Named properties that may still be written (a NEVER one cannot be present at all). */
const open = (f: { o: ObjectNode; seen: readonly string[] }) => (p: ObjectNode['props'][number]): boolean => unseen(f, p.name) && !isNever(p.schema);

/** May a key beyond the named properties appear at all? */
export const extrasPossible = (o: ObjectNode): boolean => o.keys.max > 0 && o.clauses.every((c) => c.extra !== null || c.patterns.length > 0);

function canClose(f: ObjFrame): boolean {
  const o = f.o;
  if (f.count < o.minProps) return false;
  for (const p of o.props) if (p.required && unseen(f, p.name)) return false;
  for (const [k, needs] of o.deps) if (f.seen.includes(k) && needs.some((n) => unseen(f, n))) return false;
  return true;
}

/** maxProperties leaves room for the required names still missing only: no other key may
 * come (it would leave the object unable to close). */
function tight(f: { o: ObjectNode; seen: readonly string[]; count: number }): boolean {
  if (f.o.maxProps === Infinity) return false;
  let missing = 0;
  for (const p of f.o.props) if (p.required && unseen(f, p.name)) missing++;
  return missing > 0 && f.o.maxProps - f.count <= missing;
}

/** May the key being written be one beyond the named properties? */
export const extrasAllowed = (f: { o: ObjectNode; seen: readonly string[]; count: number }): boolean => extrasPossible(f.o) && !tight(f);

/** May named property `p` be the next key? */
const nameOpen = (f: { o: ObjectNode; seen: readonly string[]; count: number }, p: ObjectNode['props'][number]): boolean =>
  open(f)(p) && (p.required || !tight(f));

function canAddKey(f: ObjFrame): boolean {
  return f.count < f.o.maxProps && (extrasAllowed(f) || f.o.props.some((p) => nameOpen(f, p)));
}

const after = (f: { o: ObjectNode; seen: readonly string[]; count: number }, key: string | null, next: Stack | null): Stack =>
  push({ t: 'obj', o: f.o, xml: false, ph: 'sep', i: 0, seen: key === null ? f.seen : [...f.seen, key], count: f.count + 1 }, next);

function startKey(f: ObjFrame, next: Stack | null, b: number, out: Stack[], feed: Feed): void {
  const o = f.o;
  if (hasFreeKeys(o)) {
    feed(stringFrame(o.keys, lit(':', val(o.extraFor([])!, after(f, null, next)))), b, out);
    return;
  }
  if (b !== 0x22) return;
  const rs = keyRegexes(o).map(() => 0);
  out.push(push({ t: 'key', o, seen: f.seen, count: f.count, ph: 1, u: 0, cp: 0, txt: '', raw: '', n: 0, rs }, next));
}

export function feedObject(f: ObjFrame, next: Stack | null, b: number, out: Stack[], feed: Feed): void {
  const close = (): void => {
    if (b === 0x7d && canClose(f)) out.push(next ?? DONE);
  };
  switch (f.ph) {
    case 'open':
      if (b === 0x7b) out.push(push({ ...f, ph: 'first' }, next));
      return;
    case 'first':
      close();
      if (canAddKey(f)) startKey(f, next, b, out, feed);
      return;
    case 'sep':
      close();
      if (b === 0x2c && canAddKey(f)) out.push(push({ ...f, ph: 'key' }, next));
      return;
    case 'key':
      startKey(f, next, b, out, feed);
  }
}

/** Can a key beyond the named ones still be spelled from these regex states (those of
 * keyRegexes(o), from index `from` of `rs`) after n characters? */
export function extraFeasible(o: ObjectNode, rs: ArrayLike<number>, n: number, from = 0): boolean {
  if (n > o.keys.max) return false;
  const k = o.keys.res.length;
  for (let i = 0; i < k; i++) if (rs[from + i]! < 0) return false;
  let at = from + k;
  for (const c of o.clauses) {
    let alive = false;
    for (let j = 0; j < c.patterns.length && !alive; j++) alive = rs[at + j]! >= 0;
    if (c.extra === null && !alive) return false;
    at += c.patterns.length;
  }
  return true;
}

/** The value schema of a finished key (null: the key is not allowed here). */
function valueFor(f: KeyFrame): Schema | null {
  const o = f.o;
  if (f.seen.includes(f.txt)) return null;
  const named = o.props.find((p) => p.name === f.txt);
  if (named) return nameOpen(f, named) ? named.schema : null;
  if (tight(f)) return null;
  const k = o.keys.res.length;
  if (f.n < o.keys.min || f.n > o.keys.max || !regexesAccept(o.keys.res, f.rs.slice(0, k))) return null;
  return o.extraFor(o.patternRes.map((r: Regex, i) => r.accepts(f.rs[k + i]!)));
}

const allKeyRes = new WeakMap<ObjectNode, readonly Regex[]>();
/** propertyNames regexes, then the pattern regexes: the DFA states a key frame keeps. */
export function keyRegexes(o: ObjectNode): readonly Regex[] {
  let r = allKeyRes.get(o);
  if (!r) allKeyRes.set(o, (r = [...o.keys.res, ...o.patternRes]));
  return r;
}

/** Named keys as written canonically (JSON.stringify, UTF-8 bytes as a binary string, with
 * the closing quote), by object. */
const encodedNames = new WeakMap<ObjectNode, readonly string[]>();
function encoded(o: ObjectNode): readonly string[] {
  let e = encodedNames.get(o);
  if (!e) encodedNames.set(o, (e = o.props.map((p) => utf8Binary(JSON.stringify(p.name).slice(1)))));
  return e;
}

/** Is `raw` the start of a named key still open, written canonically? */
function namedPrefix(f: KeyFrame, raw: string): boolean {
  const names = encoded(f.o);
  const props = f.o.props;
  for (let i = 0; i < props.length; i++) if (names[i]!.startsWith(raw) && nameOpen(f, props[i]!)) return true;
  return false;
}

/** What each named key still open (not written yet, admitted) needs after `f.raw`, written
 * canonically as binary UTF-8 (closing quote excluded). */
export function namedRemainders(f: KeyFrame): string[] {
  const names = encoded(f.o);
  const out: string[] = [];
  f.o.props.forEach((p, i) => {
    const name = names[i]!;
    if (name.startsWith(f.raw) && nameOpen(f, p)) out.push(name.slice(f.raw.length, -1));
  });
  return out;
}

/** Can a key beyond the named ones go on with a character in progress? */
function extraCanContinue(o: ObjectNode, rs: readonly number[], range: [number, number] | null): boolean {
  const k = o.keys.res.length;
  if (!regexesCanContinue(o.keys.res, rs.slice(0, k), range)) return false;
  let at = k;
  for (const c of o.clauses) {
    if (c.extra === null && !regexesCanContinueAny(c.patterns.map((p) => p.re), rs.slice(at, at + c.patterns.length), range)) return false;
    at += c.patterns.length;
  }
  return true;
}

function regexesCanContinueAny(res: readonly Regex[], rs: readonly number[], range: [number, number] | null): boolean {
  return res.some((r, i) => regexesCanContinue([r], [rs[i]!], range));
}

/** A key's bytes: a prefix of a named key (byte for byte), or a key the object admits
 * beyond them (decoded, its regexes stepped per character, characters in progress checked
 * against the regexes' room). */
export function feedKey(f: KeyFrame, next: Stack | null, b: number, out: Stack[]): void {
  // the common case, a plain ASCII character
  const r = f.ph === 1 && f.u === 0 && b >= 0x20 && b < 0x80 && b !== 0x22 && b !== 0x5c ? { ph: 1, u: 0, cp: 0, ch: b } : jsonCharStep(f.ph, f.u, f.cp, b);
  if (r === null) return;
  if (r === 'close') {
    const v = valueFor(f);
    if (v !== null) out.push(lit(':', val(v, after(f, f.txt, next))));
    return;
  }
  const raw = f.raw + String.fromCharCode(b);
  const o = f.o;
  const extras = extrasAllowed(f);
  if (r.ch < 0) {
    if (namedPrefix(f, raw) || (extras && f.n < o.keys.max && extraCanContinue(o, f.rs, pendingRange(r.ph, r.u, r.cp)))) {
      out.push(push({ ...f, ph: r.ph, u: r.u, cp: r.cp, raw }, next));
    }
    return;
  }
  const txt = f.txt + String.fromCodePoint(r.ch);
  const res = keyRegexes(o);
  const rs = res.length === 0 ? f.rs : res.map((re, i) => re.step(f.rs[i]!, r.ch));
  const key: KeyFrame = { ...f, ph: 1, u: 0, cp: 0, txt, raw, n: f.n + 1, rs };
  // a key at its maximum length must close now: one already written, or one its regexes
  // do not accept, would be a dead end
  if (namedPrefix(f, raw) || (extras && extraFeasible(o, rs, f.n + 1) && (f.n + 1 < o.keys.max || valueFor(key) !== null))) out.push(push(key, next));
}

// --- Qwen XML parameters -------------------------------------------------------------------

/** Indices of the properties that may come next: from i up to the first required one. */
function candidates(f: ObjFrame): number[] {
  const out: number[] = [];
  for (let j = f.i; j < f.o.props.length; j++) {
    out.push(j);
    if (f.o.props[j]!.required) break;
  }
  return out;
}

function requiredLeftXml(f: ObjFrame): boolean {
  for (let j = f.i; j < f.o.props.length; j++) if (f.o.props[j]!.required) return true;
  return false;
}

/** May the frame end here (JSON objects end at their "}", inside feedObject)? */
export function objectCanEnd(f: ObjFrame): boolean {
  return f.xml && !requiredLeftXml(f);
}

/** Qwen XML parameters of a forced call: each `<parameter=NAME>\nVALUE\n</parameter>\n`;
 * string values are free text, others compact JSON. The frame ends where the next frame
 * (`</function>…`) begins, once no required parameter is left. */
export function feedXmlProps(f: ObjFrame, next: Stack | null, b: number, out: Stack[], feed: Feed): void {
  for (const j of candidates(f)) {
    const p = f.o.props[j]!;
    feed(lit(`<parameter=${p.name}>\n`, xmlValue(p.schema, push({ ...f, i: j + 1 }, next))), b, out);
  }
  if (!requiredLeftXml(f)) feed(next, b, out);
}

/** The value of an XML parameter and its closing tag: string enums as raw text, schemas
 * admitting a string as free text up to `</parameter>` (the first string branch's bounds and
 * regexes and hostname label check), others as compact JSON. */
function xmlValue(s: Schema, afterValue: Stack): Stack {
  const close = '\n</parameter>\n';
  const lits = literalAlternatives(s);
  if (lits && lits.length > 0 && lits.every((t) => t.startsWith('"'))) {
    return push({ t: 'val', s: rawTextChoice(lits) }, lit(close, afterValue));
  }
  const str = stringBranches(s);
  if (str.length > 0) {
    const plain = str.every((x) => x.res.length === 0);
    const min = plain ? Math.min(...str.map((x) => x.min)) : str[0]!.min;
    const max = plain ? Math.max(...str.map((x) => x.max)) : str[0]!.max;
    const res = plain ? [] : str[0]!.res;
    const f: Frame = { t: 'until', end: '\n</parameter>', m: 0, n: 0, min, max, u: 0, cp: 0, res, rs: res.map(() => 0) };
    return push(!plain && str[0]!.labels ? { ...f, lab: LABEL_START } : f, lit('\n', afterValue));
  }
  return val(s, lit(close, afterValue));
}

function literalAlternatives(s0: Schema): string[] | null {
  const s = deref(s0);
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

/** The string branches of a schema (`any` counts as a free string). */
function stringBranches(s0: Schema): StringNode[] {
  const s = deref(s0);
  if (s.k === 'string') return [s];
  if (s.k === 'any') return [{ k: 'string', id: 0, min: 0, max: MAX_STRING, res: [] }];
  if (s.k === 'anyOf') return s.alts.flatMap(stringBranches);
  return [];
}

/** The raw texts of JSON string literals as a choice of literals (cached per list). */
const rawChoices = new Map<string, Schema>();
function rawTextChoice(jsonTexts: readonly string[]): Schema {
  const key = jsonTexts.join('\u0000');
  let s = rawChoices.get(key);
  if (!s) {
    s = literalChoice(jsonTexts.map((t) => rawLiteral(JSON.parse(t) as string)));
    rawChoices.set(key, s);
  }
  return s;
}
