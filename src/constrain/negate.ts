// The negation of a JSON Schema, as another JSON Schema without `not` at its top (schema.ts
// compiles it like any other): what `not`, the `else` side of `if` and conditional schemas
// need. A schema is the conjunction of its assertions, so its negation is the union of the
// negations of its keywords, each applying to its own type ({"minimum": 3} fails only on
// numbers below 3: its negation is {"type": "number", "exclusiveMaximum": 3}):
//   type                    the other types
//   const / enum            the other types, strings outside the set (a regex built from the
//                           set's trie), numbers in the open intervals between the values,
//                           the other booleans and null (objects and arrays: not expressible)
//   required                an object missing one of the names
//   properties              an object with one of them present and failing its schema
//   dependentRequired /     an object with the key present and one of the names missing, or
//   dependencies /          failing the dependent schema
//   dependentSchemas
//   min/max Length, Items, Properties; minimum / maximum / exclusive…: the opposite bound
//   allOf / anyOf           anyOf / allOf of the negations (De Morgan); oneOf of one branch
//   not                     the schema itself; if/then/else: (if ∧ ¬then) ∨ (¬if ∧ ¬else)
//   $ref                    the negation of its target (drafts ≤ 7: instead of its siblings)
// Keywords whose negation a grammar cannot express here (pattern, format, multipleOf, items,
// additionalProperties, …) throw NotExpressible naming them; annotations and unknown keywords
// assert nothing and are skipped, as compiling them does.

/** A negation the grammar cannot express: `keyword` names the keyword at fault. */
export class NotExpressible extends Error {
  constructor(readonly keyword: string, why: string) {
    super(why);
  }
}

import { MAX_STRING } from './nodes.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface NegateContext {
  /** The target of `$ref` value `ref` found in schema object `holder`. */
  readonly deref: (ref: unknown, holder: Obj) => unknown;
  readonly draft: 7 | 2020;
}

const TYPES = ['string', 'number', 'boolean', 'null', 'object', 'array'] as const;
/** Nested negations (through $ref and subschemas) deeper than this are refused: a recursive
 * schema has no finite negation here. */
const MAX_DEPTH = 32;

/** A raw union / intersection, simplified around boolean schemas. */
export function anyOfRaw(alts: readonly unknown[]): unknown {
  const a = alts.filter((x) => x !== false);
  if (a.includes(true)) return true;
  return a.length === 0 ? false : a.length === 1 ? a[0] : { anyOf: a };
}
export function allOfRaw(parts: readonly unknown[]): unknown {
  const p = parts.filter((x) => x !== true);
  if (p.includes(false)) return false;
  return p.length === 0 ? true : p.length === 1 ? p[0] : { allOf: p };
}

/** A JSON Schema accepting exactly the JSON values `s` rejects. */
export function negate(s: unknown, ctx: NegateContext, depth = 0): unknown {
  if (s === true) return false;
  if (s === false) return true;
  if (!isObj(s)) throw new NotExpressible('not', 'its operand is not a JSON Schema');
  if (depth > MAX_DEPTH) throw new NotExpressible('$ref', 'a recursive schema under negation');
  const neg = (x: unknown): unknown => negate(x, ctx, depth + 1);
  if (s['$ref'] !== undefined && ctx.draft === 7) return neg(ctx.deref(s['$ref'], s)); // $ref overrides its siblings
  const alts: unknown[] = [];
  for (const [key, v] of Object.entries(s)) {
    const n = negateKeyword(s, key, v, neg, ctx);
    if (n !== undefined) alts.push(n);
  }
  return anyOfRaw(alts);
}

/** The negation of one keyword's assertion (undefined: the keyword asserts nothing). */
function negateKeyword(s: Obj, key: string, v: unknown, neg: (x: unknown) => unknown, ctx: NegateContext): unknown {
  const count = (): number => {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new NotExpressible(key, `${key} must be a non-negative integer`);
    return v;
  };
  const bound = (): number => {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new NotExpressible(key, `${key} must be a number`);
    return v;
  };
  switch (key) {
    case 'type': return negateType(v);
    case 'const': return negateValues([v]);
    case 'enum':
      if (!Array.isArray(v)) throw new NotExpressible('enum', 'enum must be an array');
      return negateValues(v);
    case 'required':
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new NotExpressible('required', 'required must be a list of names');
      return anyOfRaw(v.map((name) => ({ type: 'object', properties: { [name]: false } })));
    case 'properties':
      if (!isObj(v)) throw new NotExpressible('properties', 'properties must be an object');
      return anyOfRaw(Object.entries(v).map(([name, sub]) => {
        const ns = neg(sub);
        return ns === false ? false : { type: 'object', required: [name], properties: { [name]: ns } };
      }));
    case 'dependentRequired':
    case 'dependencies':
    case 'dependentSchemas':
      return negateDependencies(key, v, neg);
    case 'minLength': return count() === 0 ? false : { type: 'string', maxLength: count() - 1 };
    case 'maxLength': return count() + 1 > MAX_STRING ? false : { type: 'string', minLength: count() + 1 }; // longer strings are never generated
    case 'minItems': return count() === 0 ? false : { type: 'array', maxItems: count() - 1 };
    case 'maxItems': return { type: 'array', minItems: count() + 1 };
    case 'minProperties': return count() === 0 ? false : { type: 'object', maxProperties: count() - 1 };
    case 'maxProperties': return { type: 'object', minProperties: count() + 1 };
    case 'minimum': return { type: 'number', [s['exclusiveMinimum'] === true ? 'maximum' : 'exclusiveMaximum']: bound() };
    case 'maximum': return { type: 'number', [s['exclusiveMaximum'] === true ? 'minimum' : 'exclusiveMinimum']: bound() };
    case 'exclusiveMinimum': return typeof v === 'boolean' ? undefined : { type: 'number', maximum: bound() };
    case 'exclusiveMaximum': return typeof v === 'boolean' ? undefined : { type: 'number', minimum: bound() };
    case 'allOf':
    case 'anyOf':
    case 'oneOf': {
      if (!Array.isArray(v) || v.length === 0) throw new NotExpressible(key, `${key} must be a non-empty array`);
      if (key === 'oneOf' && v.length > 1) throw new NotExpressible('oneOf', 'the negation of a oneOf of several branches');
      return key === 'anyOf' ? allOfRaw(v.map(neg)) : anyOfRaw(v.map(neg));
    }
    case 'not': return v;
    case 'if': {
      if (s['then'] === undefined && s['else'] === undefined) return undefined;
      const [then, otherwise] = [s['then'] ?? true, s['else'] ?? true];
      return anyOfRaw([allOfRaw([v, neg(then)]), allOfRaw([neg(v), neg(otherwise)])]);
    }
    case '$ref': return neg(ctx.deref(v, s));
    case 'uniqueItems': return v === true ? notExpressible(key) : undefined;
    case 'additionalProperties':
    case 'patternProperties':
    case 'propertyNames':
    case 'items':
    case 'prefixItems':
    case 'additionalItems':
    case 'unevaluatedProperties':
    case 'unevaluatedItems':
      return isTrivial(v) ? undefined : notExpressible(key);
    case 'pattern':
    case 'format':
    case 'multipleOf':
    case 'contains':
    case 'minContains':
    case 'maxContains':
    case '$dynamicRef':
    case '$recursiveRef':
      return notExpressible(key);
    default:
      return undefined; // annotations, then / else (read with if), unknown keywords
  }
}

const notExpressible = (key: string): never => {
  throw new NotExpressible(key, `the negation of "${key}"`);
};

/** Subschemas that assert nothing (true, {}, or maps / lists of them). */
function isTrivial(v: unknown): boolean {
  if (v === true) return true;
  if (Array.isArray(v)) return v.every(isTrivial);
  return isObj(v) && Object.values(v).every((x) => x === true || (isObj(x) && Object.keys(x).length === 0));
}

function negateType(v: unknown): unknown {
  const list = Array.isArray(v) ? v : [v];
  if (!list.every((t) => typeof t === 'string')) throw new NotExpressible('type', 'type must be a string or a list of strings');
  if (list.includes('integer') && !list.includes('number')) throw new NotExpressible('type', 'the negation of "integer" (numbers with a fraction)');
  const others = TYPES.filter((t) => !list.includes(t));
  return others.length === 0 ? false : { type: others };
}

/** Every JSON value but `vals` (primitive values only). */
function negateValues(vals: readonly unknown[]): unknown {
  if (vals.some((x) => typeof x === 'object' && x !== null)) throw new NotExpressible('enum', 'the negation of an object or array value');
  const strings = [...new Set(vals.filter((x): x is string => typeof x === 'string'))];
  const numbers = [...new Set(vals.filter((x): x is number => typeof x === 'number'))].sort((a, b) => a - b);
  const alts: unknown[] = [strings.length === 0 ? { type: 'string' } : { type: 'string', pattern: stringsExcept(strings) }];
  alts.push(...numbersExcept(numbers));
  for (const b of [true, false]) if (!vals.includes(b)) alts.push({ const: b });
  if (!vals.includes(null)) alts.push({ type: 'null' });
  alts.push({ type: 'object' }, { type: 'array' });
  return anyOfRaw(alts);
}

/** Numbers other than the sorted `xs`: the open intervals around them. */
function numbersExcept(xs: readonly number[]): unknown[] {
  if (xs.length === 0) return [{ type: 'number' }];
  const out: unknown[] = [{ type: 'number', exclusiveMaximum: xs[0] }];
  for (let i = 0; i + 1 < xs.length; i++) out.push({ type: 'number', exclusiveMinimum: xs[i], exclusiveMaximum: xs[i + 1] });
  out.push({ type: 'number', exclusiveMinimum: xs[xs.length - 1] });
  return out;
}

interface Trie { end: boolean; readonly next: Map<string, Trie> }

/** A regex (anchored) matching every string but `words`: at each node of their trie, the
 * string may end there (if no word does), leave the trie by a character no word continues
 * with, or go on inside it. */
export function stringsExcept(words: readonly string[]): string {
  const root: Trie = { end: false, next: new Map() };
  for (const w of words) {
    let t = root;
    for (const ch of w) {
      let n = t.next.get(ch);
      if (!n) t.next.set(ch, (n = { end: false, next: new Map() }));
      t = n;
    }
    t.end = true;
  }
  const esc = (ch: string): string => `\\u{${ch.codePointAt(0)!.toString(16)}}`;
  const body = (t: Trie): string => {
    const alts: string[] = t.end ? [] : [''];
    const chars = [...t.next.keys()];
    alts.push(chars.length === 0 ? '[\\s\\S]+' : `[^${chars.map(esc).join('')}][\\s\\S]*`);
    for (const [ch, n] of t.next) alts.push(`${esc(ch)}(?:${body(n)})`);
    return alts.join('|');
  };
  return `^(?:${body(root)})$`;
}

/** The negation of dependentRequired / dependencies / dependentSchemas: an object with one
 * key present and a name it needs missing, or failing the schema it brings. */
function negateDependencies(key: string, v: unknown, neg: (x: unknown) => unknown): unknown {
  if (!isObj(v)) throw new NotExpressible(key, `${key} must be an object`);
  const alts: unknown[] = [];
  for (const [name, dep] of Object.entries(v)) {
    if (Array.isArray(dep)) {
      for (const m of dep) if (typeof m === 'string') alts.push({ type: 'object', required: [name], properties: { [m]: false } });
    } else {
      if (key === 'dependentRequired') throw new NotExpressible(key, `${key}.${name} must be a list of names`);
      const n = neg(dep);
      if (n !== false) alts.push(allOfRaw([{ type: 'object', required: [name] }, n]));
    }
  }
  return anyOfRaw(alts);
}
