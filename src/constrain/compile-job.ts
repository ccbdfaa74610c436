// One grammar compilation as a job a prepare worker runs (prepare-jobs.ts): JSON Schema in,
// a plain table of the compiled tree out (table.ts), or the 400's message. The budget is in
// work units (compile-budget.ts), so the answer is the same in a worker, inline, on any
// machine and under any load; the worker only keeps the event loop free while it is found.
import { CompileBudgetError, withCompileBudget } from './compile-budget.js';
import { compileSchema, type Schema, SchemaError } from './schema.js';
import { type SchemaTable, toTable } from './table.js';

export interface GrammarJob {
  readonly op: 'grammar';
  readonly schema: unknown;
  /** The request field holding the schema (named by errors). */
  readonly param: string;
  readonly lenient: boolean;
  /** The budget (--max-grammar-units). */
  readonly units: number;
}

export type GrammarResult =
  | { readonly op: 'grammar'; readonly table: SchemaTable; readonly units: number }
  | { readonly op: 'grammar'; readonly error: string; readonly units: number };

/** `after` of the compiled tree, and the units both took; a SchemaError or
 * CompileBudgetError when the schema is refused. Stack exhaustion (a shape no explicit limit
 * caught) is refused too, as a SchemaError: a client's schema must never cost a 500. */
export function compileWithin<T = Schema>(schema: unknown, param: string, lenient: boolean, units: number,
  after: (s: Schema) => T = (s) => s as T): { readonly value: T; readonly units: number } {
  try {
    return withCompileBudget(units, () => after(compileSchema(schema, param, { lenient })));
  } catch (e) {
    if (e instanceof RangeError && /call stack/i.test(e.message)) throw new SchemaError(`${param}: the schema nests too deeply to compile`);
    throw e;
  }
}

export function runGrammarJob(job: GrammarJob): GrammarResult {
  try {
    // the table inside the budget: a lazy node it reaches is counted too
    const { value, units } = compileWithin(job.schema, job.param, job.lenient, job.units, toTable);
    return { op: 'grammar', table: value, units };
  } catch (e) {
    if (e instanceof CompileBudgetError) return { op: 'grammar', error: e.message, units: e.units };
    if (e instanceof SchemaError) return { op: 'grammar', error: e.message, units: 0 };
    throw e;
  }
}
