// uniqueItems over finite literal sets: an array whose every item schema is a finite set of
// literals (enum / const of primitives, booleans, null, or unions of those) is matched item by
// item as one of the literals not yet used. Each literal has exactly one text (the matcher
// writes enum values as JSON.stringify does: 1.0 is written 1), so distinct texts are distinct
// values, and the frame's `used` bitmask (bit i: texts[i] already written) says which remain.
import { type ArrayNode, deref, type Schema, SchemaError } from './nodes.js';

/** Literal sets of at most this many distinct values (one bit each in `used`). */
export const MAX_UNIQUE_LITERALS = 64;

export interface UniqueSets {
  /** The distinct literal texts over every position. */
  readonly texts: readonly string[];
  /** The indices (into texts) each prefix position allows, then the rest's (null: no items). */
  readonly prefix: readonly (readonly number[])[];
  readonly items: readonly number[] | null;
  /** `items` as a bitmask. */
  readonly itemsMask: bigint;
  /** Feasibility from inside the prefix, by (n, used), memoized. */
  readonly feasible: Map<string, boolean>;
}

/** The literal texts `s` is the union of, or null when it is not a finite literal set. */
export function literalTexts(s0: Schema, limit = MAX_UNIQUE_LITERALS): string[] | null {
  const out = new Set<string>();
  const todo: Schema[] = [s0];
  while (todo.length > 0) {
    const s = deref(todo.pop()!);
    if (s.k === 'lit') {
      // object and array consts compile to object/array nodes: a lit is a primitive
      out.add(s.text);
      if (out.size > limit) return null;
    } else if (s.k === 'anyOf') for (const a of s.alts) todo.push(a);
    else return null;
  }
  return [...out];
}

/** The unique-item sets of an array with these item schemas, or null when one of them is not a
 * finite literal set (or the union has more than MAX_UNIQUE_LITERALS values). */
export function uniqueSets(prefix: readonly Schema[], items: Schema | null): UniqueSets | null {
  const texts: string[] = [];
  const index = new Map<string, number>();
  const indices = (s: Schema): number[] | null => {
    const lits = literalTexts(s);
    if (lits === null) return null;
    return lits.sort().map((t) => {
      let i = index.get(t);
      if (i === undefined) index.set(t, (i = texts.push(t) - 1));
      return i;
    });
  };
  const pre: number[][] = [];
  for (const p of prefix) {
    const ix = indices(p);
    if (ix === null) return null;
    pre.push(ix);
  }
  const rest = items === null ? null : indices(items);
  if (items !== null && rest === null) return null;
  if (texts.length > MAX_UNIQUE_LITERALS) return null;
  const itemsMask = (rest ?? []).reduce((m, l) => m | bit(l), 0n);
  return { texts, prefix: pre, items: rest, itemsMask, feasible: new Map() };
}

/** The sets of a unique array node (memoized; computed on first use, so a table rebuilt in
 * another thread resolves its refs first). A SchemaError where they do not exist: the schema
 * compiler checks before it marks an array unique, and intersections keep the sets finite. */
const setsByNode = new WeakMap<ArrayNode, UniqueSets>();
export function uniqueSetsOf(a: ArrayNode): UniqueSets {
  let u = setsByNode.get(a);
  if (!u) {
    const made = uniqueSets(a.prefix, a.items);
    if (!made) throw new SchemaError(`uniqueItems applies to items that are not a finite set of at most ${MAX_UNIQUE_LITERALS} literals`);
    setsByNode.set(a, (u = made));
  }
  return u;
}

export const bit = (i: number): bigint => 1n << BigInt(i);
function popcount(m0: bigint): number {
  let c = 0;
  for (let m = m0; m !== 0n; m &= m - 1n) c++;
  return c;
}
const allowedAt = (u: UniqueSets, n: number): readonly number[] => (n < u.prefix.length ? u.prefix[n]! : u.items ?? []);

/** Can positions n .. min−1 still take distinct literals not in `used`, each from its
 * position's set (a bipartite matching, positions against literals)? */
export function canFill(u: UniqueSets, min: number, n: number, used: bigint): boolean {
  const need = min - n;
  if (need <= 0) return true;
  if (need > u.texts.length) return false;
  // past the prefix every position takes the same set: enough unused literals in it suffice
  if (n >= u.prefix.length) return popcount(u.itemsMask & ~used) >= need;
  const key = `${n},${used.toString(36)}`;
  let ok = u.feasible.get(key);
  if (ok === undefined) {
    ok = matchAll(u, n, min, used);
    if (u.feasible.size > 50_000) u.feasible.clear();
    u.feasible.set(key, ok);
  }
  return ok;
}

/** Kuhn's augmenting paths: every position in [n, min) gets its own unused literal. */
function matchAll(u: UniqueSets, n: number, min: number, used: bigint): boolean {
  const owner = new Map<number, number>(); // literal → position
  const tryPlace = (pos: number, seen: Set<number>): boolean => {
    for (const l of allowedAt(u, pos)) {
      if ((used & bit(l)) !== 0n || seen.has(l)) continue;
      seen.add(l);
      const o = owner.get(l);
      if (o === undefined || tryPlace(o, seen)) {
        owner.set(l, pos);
        return true;
      }
    }
    return false;
  };
  for (let pos = n; pos < min; pos++) if (!tryPlace(pos, new Set())) return false;
  return true;
}

/** The literals item n may be: allowed there, unused, and leaving minItems reachable. */
export function nextLiterals(u: UniqueSets, min: number, n: number, used: bigint): number[] {
  return allowedAt(u, n).filter((l) => (used & bit(l)) === 0n && canFill(u, min, n + 1, used | bit(l)));
}
