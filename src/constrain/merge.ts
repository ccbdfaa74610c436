// Intersection of two compiled schemas: the values both accept. allOf, and a combinator with
// its sibling keywords, compile to intersections; anyOf distributes over them. Objects merge
// property by property (a name one side does not declare gets that side's view of it: its
// matching patternProperties, else its additionalProperties), arrays position by position,
// strings and numbers by their bounds and regexes; a literal survives if the other side
// accepts its text. $refs intersect lazily (memoized by the pair), so recursive schemas end.
// Every step spends compile units (compile-budget.ts): an intersection one, a union one per
// alternative it reads, an object merge one per property name, a literal test a few.
import { scopeMemo, spendCompile } from './compile-budget.js';
import { acceptsText } from './matcher.js';
import {
  type ArrayNode, type Clause, deref, isNever, KEY_STRING, mk, NEVER, type NumberNode, type ObjectNode, type Prop, type Schema, type StringNode, untrackedRes,
} from './nodes.js';
import { intersectRanges, isNoRange, NO_RANGE } from './numrange.js';
import type { Regex } from './regex.js';
import { canFill, uniqueSetsOf } from './unique.js';

/** Intersections outside a compilation (lazily, at match time); a compilation has its own
 * (scopeMemo), so its unit count does not depend on what ran before it. */
const lazyMemo = new Map<string, Schema>();

export function intersect(a: Schema, b: Schema): Schema {
  spendCompile();
  if (a === b) return a;
  if (a.k === 'any') return b;
  if (b.k === 'any') return a;
  if (isNever(a) || isNever(b)) return NEVER;
  const key = a.id < b.id ? `${a.id}&${b.id}` : `${b.id}&${a.id}`;
  const memo = scopeMemo('intersect', lazyMemo);
  const hit = memo.get(key);
  if (hit) return hit;
  if (memo.size > 200_000) memo.clear();
  if (a.k === 'ref' || b.k === 'ref') {
    let done: Schema | null = null;
    const r = mk({ k: 'ref' as const, get: () => (done ??= intersect(deref(a), deref(b))) });
    memo.set(key, r);
    return r;
  }
  const s = intersectConcrete(a, b);
  memo.set(key, s);
  return s;
}

/** The values any of `alts` accepts: nested unions flattened, NEVERs dropped, and each node
 * kept once (cross products of enums repeat the same literal nodes: without this, unions of
 * unions grew as the product of their sizes). Iterative, no spread: alts may be many. */
export function union(alts: readonly Schema[]): Schema {
  const flat: Schema[] = [];
  const seen = new Set<number>();
  const add = (x: Schema): Schema | null => {
    spendCompile();
    if (x.k === 'any') return x;
    if (!isNever(x) && !seen.has(x.id)) {
      seen.add(x.id);
      flat.push(x);
    }
    return null;
  };
  for (const x of alts) {
    const inner = x.k === 'anyOf' ? x.alts : [x];
    for (const y of inner) {
      const any = add(y);
      if (any) return any;
    }
  }
  return flat.length === 0 ? NEVER : flat.length === 1 ? flat[0]! : mk({ k: 'anyOf' as const, alts: flat });
}

function intersectConcrete(a: Schema, b: Schema): Schema {
  if (a.k === 'anyOf') return union(a.alts.map((x) => intersect(x, b)));
  if (b.k === 'anyOf') return union(b.alts.map((x) => intersect(a, x)));
  if (a.k === 'lit') return literalIn(a, b);
  if (b.k === 'lit') return literalIn(b, a);
  if (a.k === 'string' && b.k === 'string') return intersectStrings(a, b);
  if (a.k === 'number' && b.k === 'number') return intersectNumbers(a, b);
  if (a.k === 'object' && b.k === 'object') return mergeObjects(a, b);
  if (a.k === 'array' && b.k === 'array') return mergeArrays(a, b);
  return NEVER;
}

/** `lit` if `s` accepts its text, else NEVER. */
function literalIn(lit: Extract<Schema, { k: 'lit' }>, s: Schema): Schema {
  spendCompile(4 + (lit.text.length >> 2)); // a matcher walk over the text
  return acceptsText(s, lit.text) ? lit : NEVER;
}

export function intersectStrings(a: StringNode, b: StringNode): StringNode | Schema {
  const min = Math.max(a.min, b.min);
  const max = Math.min(a.max, b.max);
  if (min > max) return NEVER;
  const res = [...new Set([...a.res, ...b.res])];
  if (!a.labels && !b.labels) return mk({ k: 'string' as const, min, max, res });
  return mk({ k: 'string' as const, min, max, res, labels: { untracked: [...new Set([...untrackedRes(a), ...untrackedRes(b)])] } });
}

function intersectNumbers(a: NumberNode, b: NumberNode): Schema {
  const range = intersectRanges(a.range ?? NO_RANGE, b.range ?? NO_RANGE);
  return mk({
    k: 'number' as const, integer: a.integer || b.integer || range.mult !== 1n, neg: a.neg && b.neg, intDigits: Math.min(a.intDigits, b.intDigits),
    range: isNoRange(range) ? null : range,
  });
}

/** The value schema `o` gives a key it does not name: its matching patterns, or extra. */
function clauseView(c: Clause, name: string): Schema {
  spendCompile(c.patterns.length);
  const matched = c.patterns.filter((p) => p.re.test(name));
  if (matched.length === 0) return c.extra ?? NEVER;
  return matched.reduce<Schema>((s, p) => intersect(s, p.schema), matched[0]!.schema);
}

export function viewOf(o: ObjectNode, name: string): Schema {
  const named = o.props.find((p) => p.name === name);
  if (named) return named.schema;
  return o.clauses.reduce<Schema>((s, c) => intersect(s, clauseView(c, name)), o.clauses.length > 0 ? clauseView(o.clauses[0]!, name) : KEY_ANY);
}
const KEY_ANY: Schema = mk({ k: 'any' as const, depth: 5 });

/** extraFor of an object with these clauses (memoized by the match bits). */
export function extraForClauses(clauses: readonly Clause[]): (matched: readonly boolean[]) => Schema | null {
  const cache = new Map<string, Schema | null>();
  return (matched) => {
    const key = matched.map((m) => (m ? 1 : 0)).join('');
    if (cache.has(key)) return cache.get(key)!;
    let at = 0;
    let out: Schema | null = null;
    for (const c of clauses) {
      const hits = c.patterns.filter((_, j) => matched[at + j]);
      at += c.patterns.length;
      const v = hits.length > 0 ? hits.reduce<Schema>((s, p) => intersect(s, p.schema), hits[0]!.schema) : c.extra;
      if (v === null) {
        out = null;
        break;
      }
      out = out === null ? v : intersect(out, v);
    }
    if (clauses.length === 0) out = KEY_ANY;
    const r = out === null || isNever(out) ? null : out;
    cache.set(key, r);
    return r;
  };
}

/** Does the key schema accept `name`? (Plain keys — no pattern, ASCII names within the
 * length bounds — skip the matcher walk: objects are built by the thousand in merges.) */
function keyAllowed(keys: StringNode, name: string): boolean {
  if (keys.res.length === 0 && !keys.labels && /^[\x20-\x7e]*$/.test(name)) return name.length >= keys.min && name.length <= keys.max;
  spendCompile(4 + (name.length >> 2));
  return acceptsText(keys, JSON.stringify(name));
}

/** An object node (named properties checked against propertyNames; NEVER if a required one
 * cannot be satisfied). */
export function objectNode(props: readonly Prop[], clauses: readonly Clause[], keys: StringNode, minProps: number, maxProps: number,
  deps: ObjectNode['deps']): Schema {
  spendCompile(props.length);
  const checked = props.map((p) => (keyAllowed(keys, p.name) ? p : { ...p, schema: NEVER }));
  if (checked.some((p) => p.required && isNever(p.schema))) return NEVER;
  if (minProps > maxProps) return NEVER;
  const patternRes: Regex[] = clauses.flatMap((c) => c.patterns.map((p) => p.re));
  return mk({ k: 'object' as const, props: checked, clauses, keys, minProps, maxProps, deps, patternRes, extraFor: extraForClauses(clauses) });
}

function mergeObjects(a: ObjectNode, b: ObjectNode): Schema {
  const names = [...new Set([...a.props.map((p) => p.name), ...b.props.map((p) => p.name)])];
  spendCompile(names.length * (1 + ((a.props.length + b.props.length) >> 3))); // views look names up in both
  const req = (o: ObjectNode, n: string): boolean => o.props.some((p) => p.name === n && p.required);
  const props = names.map((name) => ({ name, required: req(a, name) || req(b, name), schema: intersect(viewOf(a, name), viewOf(b, name)) }));
  const keys = intersectStrings(a.keys, b.keys);
  if (keys.k !== 'string') return props.some((p) => p.required) ? NEVER : objectNode([], [{ patterns: [], extra: null }], KEY_STRING, 0, 0, []);
  return objectNode(props, [...a.clauses, ...b.clauses], keys, Math.max(a.minProps, b.minProps), Math.min(a.maxProps, b.maxProps),
    [...a.deps, ...b.deps]);
}

const itemAt = (a: ArrayNode, i: number): Schema | null => (i < a.prefix.length ? a.prefix[i]! : a.items);

/** An array node with NEVER items turned into limits (unique: uniqueItems over finite
 * literal sets; NEVER when minItems cannot be met with distinct literals). */
export function arrayNode(prefix0: readonly Schema[], items0: Schema | null, min: number, max0: number, unique = false): Schema {
  let max = max0;
  const prefix: Schema[] = [];
  for (const p of prefix0) {
    if (isNever(p)) {
      max = Math.min(max, prefix.length);
      break;
    }
    prefix.push(p);
  }
  const items = items0 === null || isNever(items0) ? null : items0;
  if (items === null) max = Math.min(max, prefix.length);
  if (min > max) return NEVER;
  if (!unique) return mk({ k: 'array' as const, prefix, items, min, max });
  const a = mk({ k: 'array' as const, prefix, items, min, max, unique: true as const });
  return canFill(uniqueSetsOf(a), min, 0, 0n) ? a : NEVER;
}

function mergeArrays(a: ArrayNode, b: ArrayNode): Schema {
  const n = Math.max(a.prefix.length, b.prefix.length);
  spendCompile(n);
  const prefix: Schema[] = [];
  for (let i = 0; i < n; i++) {
    const x = itemAt(a, i);
    const y = itemAt(b, i);
    if (x === null || y === null) {
      prefix.push(NEVER);
      break;
    }
    prefix.push(intersect(x, y));
  }
  const items = a.items && b.items ? intersect(a.items, b.items) : null;
  return arrayNode(prefix, items, Math.max(a.min, b.min), Math.min(a.max, b.max), a.unique === true || b.unique === true);
}
