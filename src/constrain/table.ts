// A compiled schema tree as a plain table (structured-clone safe: no closures, no class
// instances), so a prepare worker compiles a grammar and the event loop only rebuilds it:
// work linear in the table, where compiling may be a large cross product. Nodes are rows
// that name their children by row index; regexes travel as their sources (rebuilt through
// compileRegex's cache); `ref` rows point at their (already resolved) target, so recursive
// schemas keep their cycles; `any` nodes are the process's shared ones.
//
// Invariant: fromTable(toTable(s)) accepts exactly the texts s accepts (the same nodes, with
// new ids), for any s whose refs are all resolved (compileSchema forces them).
import { anySchema, type Clause, deref, mk, type NumRange, type Schema, type StringNode } from './nodes.js';
import { extraForClauses } from './merge.js';
import { compileRegex, type Regex } from './regex.js';

type Ix = number;
type Row =
  | { readonly k: 'string'; readonly min: number; readonly max: number; readonly res: readonly Ix[]; readonly untracked: readonly Ix[] | null }
  | { readonly k: 'number'; readonly integer: boolean; readonly neg: boolean; readonly intDigits: number; readonly range: NumRange | null }
  | { readonly k: 'lit'; readonly text: string }
  | { readonly k: 'anyOf'; readonly alts: readonly Ix[] }
  | { readonly k: 'object'; readonly props: readonly { readonly name: string; readonly required: boolean; readonly schema: Ix }[];
    readonly clauses: readonly { readonly patterns: readonly { readonly re: Ix; readonly schema: Ix }[]; readonly extra: Ix | null }[];
    readonly keys: Ix; readonly minProps: number; readonly maxProps: number; readonly deps: readonly (readonly [string, readonly string[]])[] }
  | { readonly k: 'array'; readonly prefix: readonly Ix[]; readonly items: Ix | null; readonly min: number; readonly max: number; readonly unique: boolean }
  | { readonly k: 'any'; readonly depth: number }
  | { readonly k: 'ref'; readonly to: Ix };

export interface SchemaTable {
  /** Row 0 is the root. */
  readonly rows: readonly Row[];
  readonly regexes: readonly string[];
}

/** The table of `root` (every node reachable from it; an explicit stack, no recursion). */
export function toTable(root: Schema): SchemaTable {
  const index = new Map<number, Ix>();
  const nodes: Schema[] = [];
  const regexIndex = new Map<Regex, Ix>();
  const regexes: string[] = [];
  const ix = (s: Schema): Ix => {
    let i = index.get(s.id);
    if (i === undefined) {
      index.set(s.id, (i = nodes.length));
      nodes.push(s);
    }
    return i;
  };
  const rx = (r: Regex): Ix => {
    let i = regexIndex.get(r);
    if (i === undefined) {
      regexIndex.set(r, (i = regexes.length));
      regexes.push(r.source);
    }
    return i;
  };
  ix(root);
  const rows: Row[] = [];
  for (let at = 0; at < nodes.length; at++) rows.push(rowOf(nodes[at]!, ix, rx)); // nodes grows as rows name children
  return { rows, regexes };
}

function rowOf(s: Schema, ix: (s: Schema) => Ix, rx: (r: Regex) => Ix): Row {
  switch (s.k) {
    case 'string':
      return { k: 'string', min: s.min, max: s.max, res: s.res.map(rx), untracked: s.labels ? s.labels.untracked.map(rx) : null };
    case 'number':
      return { k: 'number', integer: s.integer, neg: s.neg, intDigits: s.intDigits, range: s.range };
    case 'lit':
      return { k: 'lit', text: s.text };
    case 'anyOf':
      return { k: 'anyOf', alts: s.alts.map(ix) };
    case 'object':
      return {
        k: 'object', props: s.props.map((p) => ({ name: p.name, required: p.required, schema: ix(p.schema) })),
        clauses: s.clauses.map((c) => ({ patterns: c.patterns.map((p) => ({ re: rx(p.re), schema: ix(p.schema) })), extra: c.extra ? ix(c.extra) : null })),
        keys: ix(s.keys), minProps: s.minProps, maxProps: s.maxProps, deps: s.deps,
      };
    case 'array':
      return { k: 'array', prefix: s.prefix.map(ix), items: s.items ? ix(s.items) : null, min: s.min, max: s.max, unique: s.unique === true };
    case 'any':
      return { k: 'any', depth: s.depth };
    case 'ref':
      return { k: 'ref', to: ix(deref(s)) };
  }
}

/** The tree of a table (rows are built children first, refs lazily: cycles go through refs). */
export function fromTable(t: SchemaTable): Schema {
  const regexes = t.regexes.map(compileRegex);
  const built: (Schema | undefined)[] = new Array(t.rows.length);
  const re = (i: Ix): Regex => regexes[i]!;
  const order = buildOrder(t.rows);
  const get = (i: Ix): Schema => {
    const s = built[i];
    if (!s) throw new Error(`grammar table: row ${i} used before it was built`);
    return s;
  };
  for (const i of order) built[i] = nodeOf(t.rows[i]!, get, re, (to) => () => get(to));
  return get(0);
}

/** Rows, children before parents: a post-order over the child edges that are not through a
 * ref (acyclic: every cycle goes through a ref), from every row (a ref's target may be
 * reachable only through refs). An explicit stack: tables may be deep. */
function buildOrder(rows: readonly Row[]): Ix[] {
  const order: Ix[] = [];
  const state = new Uint8Array(rows.length); // 0 new, 1 children pushed, 2 ordered
  const stack: Ix[] = [];
  for (let root = 0; root < rows.length; root++) {
    if (state[root] !== 0) continue;
    stack.push(root);
    while (stack.length > 0) {
      const i = stack[stack.length - 1]!;
      if (state[i] === 0) {
        state[i] = 1;
        for (const c of childrenOf(rows[i]!)) if (state[c] === 0) stack.push(c);
        continue;
      }
      stack.pop();
      if (state[i] === 1) {
        state[i] = 2;
        order.push(i);
      }
    }
  }
  return order;
}

/** Children a row needs built before itself (a ref's target is read lazily, not here). */
function childrenOf(r: Row): Ix[] {
  switch (r.k) {
    case 'string': case 'number': case 'lit': case 'any': case 'ref': return [];
    case 'anyOf': return [...r.alts];
    case 'object': {
      const out = [r.keys];
      for (const p of r.props) out.push(p.schema);
      for (const c of r.clauses) {
        for (const p of c.patterns) out.push(p.schema);
        if (c.extra !== null) out.push(c.extra);
      }
      return out;
    }
    case 'array': return r.items === null ? [...r.prefix] : [...r.prefix, r.items];
  }
}

function nodeOf(r: Row, get: (i: Ix) => Schema, re: (i: Ix) => Regex, lazy: (to: Ix) => () => Schema): Schema {
  switch (r.k) {
    case 'string': {
      const res = r.res.map(re);
      if (r.untracked === null) return mk({ k: 'string' as const, min: r.min, max: r.max, res });
      return mk({ k: 'string' as const, min: r.min, max: r.max, res, labels: { untracked: r.untracked.map(re) } });
    }
    case 'number': return mk({ k: 'number' as const, integer: r.integer, neg: r.neg, intDigits: r.intDigits, range: r.range });
    case 'lit': return mk({ k: 'lit' as const, text: r.text });
    case 'anyOf': return mk({ k: 'anyOf' as const, alts: r.alts.map(get) });
    case 'any': return anySchema(r.depth);
    case 'ref': return mk({ k: 'ref' as const, get: lazy(r.to) });
    case 'array': {
      const node = { k: 'array' as const, prefix: r.prefix.map(get), items: r.items === null ? null : get(r.items), min: r.min, max: r.max };
      return mk(r.unique ? { ...node, unique: true as const } : node);
    }
    case 'object': {
      const clauses: Clause[] = r.clauses.map((c) => ({ patterns: c.patterns.map((p) => ({ re: re(p.re), schema: get(p.schema) })), extra: c.extra === null ? null : get(c.extra) }));
      return mk({
        k: 'object' as const, props: r.props.map((p) => ({ name: p.name, required: p.required, schema: get(p.schema) })), clauses,
        keys: get(r.keys) as StringNode, minProps: r.minProps, maxProps: r.maxProps, deps: r.deps,
        patternRes: clauses.flatMap((c) => c.patterns.map((p) => p.re)), extraFor: extraForClauses(clauses),
      });
    }
  }
}
