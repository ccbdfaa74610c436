// A work budget for grammar compilation, counted in deterministic units — schema nodes,
// union alternatives, merge (intersection) steps, regex automaton states — never in time, so
// the same schema gets the same accept / 400 answer on any machine under any load. Past the
// budget, compilation stops with a CompileBudgetError naming --max-grammar-units and the
// schema location being compiled. (Imported by nodes.ts, merge.ts and regex.ts: this module
// imports nothing.)
//
// Determinism invariant: the units a compilation spends depend only on the schema's text
// and the compile options. So every memo a compilation reads is scoped to it (scopeMemo),
// and work shared by the process (format automata, cached regexes, constant nodes) is either
// outside the count (unbudgeted) or counted the same on a cache hit as on a miss.

export class CompileBudgetError extends Error {
  constructor(message: string, readonly units: number) {
    super(message);
  }
}

/** The scope of one budgeted compilation. */
interface Scope {
  readonly limit: number;
  spent: number;
  /** Units are not counted while > 0 (unbudgeted work). */
  paused: number;
  /** The schema locations being compiled, outermost first (error messages name the last). */
  readonly at: string[];
  /** Memo tables local to this compilation (by name). */
  readonly memos: Map<string, Map<string, unknown>>;
}

let scope: Scope | null = null;

/** Run `fn` (a compilation) with at most `limit` units of work; returns its value and the
 * units it spent. Nested calls share the outer scope (the outer limit governs). */
export function withCompileBudget<T>(limit: number, fn: () => T): { readonly value: T; readonly units: number } {
  if (scope) {
    const before = scope.spent;
    return { value: fn(), units: scope.spent - before };
  }
  const s: Scope = { limit, spent: 0, paused: 0, at: [], memos: new Map() };
  scope = s;
  try {
    return { value: fn(), units: s.spent };
  } finally {
    scope = null;
  }
}

/** Called per unit of compile work (`n` units at once): throws past the budget. */
export function spendCompile(n = 1): void {
  const s = scope;
  if (s === null || s.paused > 0) return;
  s.spent += n;
  if (s.spent > s.limit) {
    const where = s.at.length > 0 ? `${s.at[s.at.length - 1]}: ` : '';
    s.paused++; // one error per compilation: unwinding code spends nothing more
    throw new CompileBudgetError(`${where}compiling this schema's grammar takes more than ${s.limit} work units (schema nodes, alternatives, `
      + 'merge steps, automaton states), the limit (--max-grammar-units); simplify the schema (fewer nested allOf/anyOf cross products)', s.spent);
  }
}

/** Run `fn` as the compilation of the schema at `path` (named by a budget error inside it). */
export function compilingAt<T>(path: string, fn: () => T): T {
  const s = scope;
  if (s === null) return fn();
  s.at.push(path);
  try {
    return fn();
  } finally {
    s.at.pop();
  }
}

/** Work outside the budget: shared, built once per process whatever the schema (the
 * automata of `format`, bounded by the number of formats; constant nodes). */
export function unbudgeted<T>(fn: () => T): T {
  const s = scope;
  if (s === null) return fn();
  s.paused++;
  try {
    return fn();
  } finally {
    s.paused--;
  }
}

/** The memo table `name` of the current compilation, or `fallback` outside one (work done
 * lazily at match time, e.g. the value schema of an unnamed key). */
export function scopeMemo<V>(name: string, fallback: Map<string, V>): Map<string, V> {
  const s = scope;
  if (s === null) return fallback;
  let m = s.memos.get(name);
  if (!m) s.memos.set(name, (m = new Map<string, unknown>()));
  return m as Map<string, V>;
}
