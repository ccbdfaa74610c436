// The conditional keywords, compiled to unions and intersections (schema.ts calls these):
//   if / then / else      (if ∧ then) ∨ (¬if ∧ else); without else: (if ∧ then) ∨ ¬if, without
//                         then: if ∨ else. The branch keeps the `if` side, so chains of
//                         conditionals on one property's value (the common discriminator
//                         style) stay one alternative per value: contradicting literals
//                         intersect to nothing and drop out.
//   dependentSchemas and  (key absent) ∨ (key present ∧ the schema)
//   schema `dependencies`
//   not                   the negation of its operand (negate.ts)
//   oneOf                 ∨ᵢ (branchᵢ ∧ ¬branchⱼ for every j ≠ i) when the branches can overlap
//                         and their negations are small (≤ MAX_ONEOF branches, each negation
//                         ≤ MAX_NEGATION characters of JSON); otherwise anyOf, the documented
//                         gap: an instance matching two branches is then accepted
// Where a negation cannot be expressed, the caller refuses the keyword (or, lenient, drops it).
import { intersect, union } from './merge.js';
import { type Schema, SchemaError } from './nodes.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface ConditionalCompiler {
  compile(s: unknown, path: string): Schema;
  /** The compiled negation of `s`, or null when it cannot be expressed (its JSON would be over
   * `maxSize` characters) and is dropped: lenient, or `keyword` null; else refusing throws.
   * `keyword` names the keyword that needs it. */
  negation(s: unknown, path: string, keyword: string | null, maxSize?: number): Schema | null;
}

const MAX_ONEOF = 6;
const MAX_NEGATION = 2000;

/** oneOf over `raw` branches (compiled: `branches`): exactly one holds, where that can be
 * expressed at a small cost; else any one (anyOf). */
export function oneOf(raw: readonly unknown[], branches: readonly Schema[], path: string, c: ConditionalCompiler): Schema {
  if (branches.length === 1 || branches.length > MAX_ONEOF || disjoint(raw, branches)) return union(branches);
  const negations: Schema[] = [];
  for (let i = 0; i < raw.length; i++) {
    const n = c.negation(raw[i], `${path}[${i}]`, null, MAX_NEGATION);
    if (n === null) return union(branches);
    negations.push(n);
  }
  return union(branches.map((b, i) => negations.reduce((acc, n, j) => (j === i ? acc : intersect(acc, n)), b)));
}

/** Can no value match two branches? (Their declared types are pairwise disjoint, or all
 * are literals with distinct texts.) */
function disjoint(raw: readonly unknown[], branches: readonly Schema[]): boolean {
  const types = raw.map((r) => {
    const t = isObj(r) ? r['type'] : undefined;
    const list = typeof t === 'string' ? [t] : Array.isArray(t) ? t : null;
    return list?.map((x) => (x === 'integer' ? 'number' : x)) ?? null;
  });
  if (types.every((t) => t !== null)) {
    const seen = new Set<unknown>();
    let clash = false;
    for (const t of types as unknown[][]) {
      clash ||= t.some((x) => seen.has(x));
      for (const x of t) seen.add(x);
    }
    if (!clash) return true;
  }
  // (a $ref branch may be compiling right now: it is not followed)
  const texts = branches.map((b) => (b.k === 'lit' ? b.text : null));
  return texts.every((t) => t !== null) && new Set(texts).size === texts.length;
}

/** if / then / else of `s` (null: no conditional, or one dropped). */
export function conditional(s: Obj, path: string, c: ConditionalCompiler): Schema | null {
  const cond = s['if'];
  const then = s['then'];
  const otherwise = s['else'];
  if (cond === undefined || (then === undefined && otherwise === undefined)) return null;
  const ifSchema = c.compile(cond, `${path}.if`);
  if (then === undefined) return union([ifSchema, c.compile(otherwise, `${path}.else`)]);
  const whenTrue = intersect(ifSchema, c.compile(then, `${path}.then`));
  const notIf = c.negation(cond, `${path}.if`, 'if');
  if (notIf === null) return null;
  const whenFalse = otherwise === undefined ? notIf : intersect(notIf, c.compile(otherwise, `${path}.else`));
  return union([whenTrue, whenFalse]);
}

/** The schema dependencies of `s` (dependentSchemas, and `dependencies` entries that are
 * schemas), one part each. */
export function schemaDependencies(s: Obj, path: string, c: ConditionalCompiler): Schema[] {
  const parts: Schema[] = [];
  for (const key of ['dependentSchemas', 'dependencies'] as const) {
    const d = s[key];
    if (d === undefined) continue;
    if (!isObj(d)) throw new SchemaError(`${path}.${key} must be an object`);
    for (const [name, dep] of Object.entries(d)) {
      if (Array.isArray(dep)) {
        if (key === 'dependentSchemas') throw new SchemaError(`${path}.dependentSchemas.${name} must be a JSON Schema`);
        continue; // a list of names: dependentRequired (objects)
      }
      const where = `${path}.${key}.${name}`;
      const absent = c.compile({ properties: { [name]: false } }, where);
      const present = intersect(c.compile({ required: [name] }, where), c.compile(dep, where));
      parts.push(union([absent, present]));
    }
  }
  return parts;
}

// --- chains of conditionals on one property's value --------------------------------------
// allOf: [{if: {properties: {K: {const: v₁}}}, then: T₁}, {if: … v₂ …}, …] compiles, one
// conditional at a time, to O(n²) intersections. Taken together it is one union: K = vᵢ with
// the thens of vᵢ and the elses of the others; K outside the values with every else; K absent
// (an `if` without `required` then holds); not an object (an `if` without `type` holds).

interface Link {
  readonly index: number; readonly key: string; readonly value: unknown;
  /** The `if` requires the key / an object (else it holds without one). */
  readonly needsKey: boolean; readonly needsObject: boolean;
  readonly then: unknown; readonly otherwise: unknown;
}

const ANNOTATIONS = new Set(['title', 'description', '$comment', 'default', 'examples', 'deprecated', 'readOnly', 'writeOnly', '$id']);
const isPrimitive = (v: unknown): boolean => v === null || ['string', 'number', 'boolean'].includes(typeof v);

/** The value a property schema pins ({const: v}, {enum: [v]}), or undefined. */
function pinned(sub: unknown): { value: unknown } | undefined {
  if (!isObj(sub)) return undefined;
  let found: { value: unknown } | undefined;
  for (const [k, v] of Object.entries(sub)) {
    if (ANNOTATIONS.has(k) || k === 'type') continue;
    if (k === 'const' && isPrimitive(v)) found = { value: v };
    else if (k === 'enum' && Array.isArray(v) && v.length === 1 && isPrimitive(v[0])) found = { value: v[0] };
    else return undefined;
  }
  if (found && sub['type'] !== undefined && !typeMatches(sub['type'], found.value)) return undefined;
  return found;
}

function typeMatches(t: unknown, v: unknown): boolean {
  const list = Array.isArray(t) ? t : [t];
  const kind = v === null ? 'null' : typeof v === 'number' ? (Number.isInteger(v) ? ['integer', 'number'] : ['number']) : typeof v;
  return list.some((x) => (Array.isArray(kind) ? kind.includes(x as string) : x === kind));
}

/** allOf branch `b` as a link of a chain, or null. */
function linkOf(b: unknown, index: number): Link | null {
  if (!isObj(b) || !Object.keys(b).every((k) => k === 'if' || k === 'then' || k === 'else' || ANNOTATIONS.has(k))) return null;
  const cond = b['if'];
  if (!isObj(cond) || (b['then'] === undefined && b['else'] === undefined)) return null;
  let key: string | null = null;
  let value: unknown;
  let required: unknown;
  let needsObject = false;
  for (const [k, v] of Object.entries(cond)) {
    if (ANNOTATIONS.has(k)) continue;
    if (k === 'type' && v === 'object') needsObject = true;
    else if (k === 'required' && Array.isArray(v) && v.length === 1) required = v[0];
    else if (k === 'properties' && isObj(v) && Object.keys(v).length === 1) {
      const [name, sub] = Object.entries(v)[0]!;
      const p = pinned(sub);
      if (!p) return null;
      [key, value] = [name, p.value];
    } else return null;
  }
  if (key === null || (required !== undefined && required !== key)) return null;
  return { index, key, value, needsKey: required === key, needsObject, then: b['then'] ?? true, otherwise: b['else'] ?? true };
}

/** Split allOf branches into the chains (≥ 2 links on one key) and the rest (by index). */
export function splitChains(branches: readonly unknown[]): { chains: Link[][]; rest: number[] } {
  const byKey = new Map<string, Link[]>();
  const rest: number[] = [];
  branches.forEach((b, i) => {
    const l = linkOf(b, i);
    if (!l) return rest.push(i);
    const list = byKey.get(l.key);
    if (list) list.push(l);
    else byKey.set(l.key, [l]);
  });
  const chains: Link[][] = [];
  for (const links of byKey.values()) {
    if (links.length >= 2) chains.push(links);
    else rest.push(links[0]!.index);
  }
  return { chains, rest: rest.sort((x, y) => x - y) };
}

/** One chain as a union (see above). `path` is the allOf's; `host` the schema holding it
 * (its own `required` and `type` rule out the key-absent and non-object alternatives, which
 * would intersect every then). */
export function chainSchema(links: readonly Link[], path: string, c: ConditionalCompiler, host: Obj): Schema {
  const key = links[0]!.key;
  const side = (l: Link, holds: boolean): Schema => (holds ? c.compile(l.then, `${path}[${l.index}].then`) : c.compile(l.otherwise, `${path}[${l.index}].else`));
  const all = (start: Schema, holds: (l: Link) => boolean): Schema => links.reduce((acc, l) => intersect(acc, side(l, holds(l))), start);
  const values = [...new Map(links.map((l) => [JSON.stringify(l.value), l.value])).values()];
  const alts = values.map((v) => all(c.compile({ type: 'object', required: [key], properties: { [key]: { const: v } } }, path),
    (l) => JSON.stringify(l.value) === JSON.stringify(v)));
  alts.push(all(c.compile({ type: 'object', required: [key], properties: { [key]: { not: { enum: values } } } }, path), () => false));
  const required = host['required'];
  if (!(Array.isArray(required) && required.includes(key))) alts.push(all(c.compile({ type: 'object', properties: { [key]: false } }, path), (l) => !l.needsKey));
  if (host['type'] !== 'object') alts.push(all(c.compile({ type: ['string', 'number', 'boolean', 'null', 'array'] }, path), (l) => !l.needsObject));
  return union(alts);
}
