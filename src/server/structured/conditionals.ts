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
import { deref, type Schema, SchemaError } from './nodes.js';

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
  const texts = branches.map(deref).map((b) => (b.k === 'lit' ? b.text : null));
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
