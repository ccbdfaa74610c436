// The conditional keywords, compiled to unions and intersections (schema.ts calls these):
//   if / then / else      (if ∧ then) ∨ (¬if ∧ else); without else: (if ∧ then) ∨ ¬if, without
//                         then: if ∨ else. The branch keeps the `if` side, so chains of
//                         conditionals on one property's value (the common discriminator
//                         style) stay one alternative per value: contradicting literals
//                         intersect to nothing and drop out.
//   dependentSchemas and  (key absent) ∨ (key present ∧ the schema)
//   schema `dependencies`
//   not                   the negation of its operand (negate.ts)
// Where a negation cannot be expressed, the caller refuses the keyword (or, lenient, drops it).
import { intersect, union } from './merge.js';
import type { Schema } from './nodes.js';
import { SchemaError } from './nodes.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface ConditionalCompiler {
  compile(s: unknown, path: string): Schema;
  /** The compiled negation of `s`, or null when it cannot be expressed and is dropped
   * (lenient); refusing throws. `keyword` names the keyword that needs it. */
  negation(s: unknown, path: string, keyword: string): Schema | null;
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
