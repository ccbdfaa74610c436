// A time budget for grammar compilation, which runs on the event loop (a compiled grammar
// holds closures and lazily built automata, so it cannot be built in a worker and sent
// over). Schema nodes and regex automaton states count their creation here; past the
// budget, compilation stops with a CompileBudgetError (a 400 naming --max-grammar-ms), so no
// schema — however large its cross products or counted repetitions — holds the event loop
// longer. (Imported by nodes.ts and regex.ts: this module imports nothing.)

export class CompileBudgetError extends Error {}

let deadline = Infinity;
let budgetMs = 0;
let ticks = 0;

/** Run `fn` (a compilation) with at most `ms` milliseconds of work. */
export function withCompileBudget<T>(ms: number, fn: () => T): T {
  const saved = { deadline, budgetMs };
  deadline = Math.min(deadline, performance.now() + ms);
  budgetMs = ms;
  try {
    return fn();
  } finally {
    ({ deadline, budgetMs } = saved);
  }
}

/** Called per unit of compile work (a node, an automaton state): throws past the budget. */
export function spendCompile(): void {
  if (deadline === Infinity || (++ticks & 127) !== 0) return;
  if (performance.now() > deadline) {
    deadline = Infinity; // one error per compilation (the caller's finally restores the rest)
    throw new CompileBudgetError(`compiling its grammar takes over ${budgetMs} ms, the limit (--max-grammar-ms); simplify the schema`);
  }
}

/** Work outside the budget: shared, built once per process whatever the schema (the
 * automata of `format`, bounded by the number of formats). */
export function unbudgeted<T>(fn: () => T): T {
  const saved = deadline;
  const t0 = performance.now();
  deadline = Infinity;
  try {
    return fn();
  } finally {
    deadline = saved + (performance.now() - t0);
  }
}
