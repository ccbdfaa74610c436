// The compiled schema tree the grammar matcher walks (schema.ts builds it from JSON Schema,
// merge.ts intersects two of them). Every node has a unique id: state keys name nodes by id.
//
// Generation limits: strings without maxLength are capped at MAX_STRING characters and
// numbers at MAX_DIGITS characters (≤ MAX_INT_DIGITS integer digits, so every integer is a
// safe integer), so every constrained answer ends.
import { spendCompile, unbudgeted } from './compile-budget.js';
import type { Regex } from './regex.js';

export class SchemaError extends Error {}

/** Numeric bounds (null: none) and multipleOf: an integer one in `mult` (1n: none), or a
 * decimal one (m · 10^−scale: scale > 0, or 1 for "an integer" where two decimal ones meet) in
 * `step` — never both (numrange.ts merges them). */
export interface NumRange {
  readonly lo: number | null;
  readonly loEx: boolean;
  readonly hi: number | null;
  readonly hiEx: boolean;
  readonly mult: bigint;
  readonly step?: { readonly m: bigint; readonly scale: number };
}

export const MAX_STRING = 2048;
export const MAX_DIGITS = 24;
/** Integer digits a generated number may have: every integer is then a safe integer. */
export const MAX_INT_DIGITS = 15;
/** Object keys are capped at this many characters. */
export const MAX_KEY = 256;
export const MAX_ANY_DEPTH = 6;

export interface Prop {
  readonly name: string;
  readonly required: boolean;
  readonly schema: Schema;
}

/** Keys not named in `props`: the value must satisfy every clause; within a clause, the
 * schemas of the patterns the key matches, or `extra` when it matches none (null: such a key
 * is not allowed). */
export interface Clause {
  readonly patterns: readonly { readonly re: Regex; readonly schema: Schema }[];
  readonly extra: Schema | null;
}

export interface StringNode {
  readonly k: 'string'; readonly id: number; readonly min: number; readonly max: number; readonly res: readonly Regex[];
  /** format: hostname — the IDNA label check (host-labels.ts) runs beside `res`; where it
   * does not (property names), `untracked` replaces `res`. */
  readonly labels?: { readonly untracked: readonly Regex[] };
}
export interface NumberNode {
  readonly k: 'number'; readonly id: number; readonly integer: boolean; readonly neg: boolean; readonly intDigits: number;
  /** Bounds and integer multipleOf; null = any number (the fast path, exponents allowed). */
  readonly range: NumRange | null;
}
export interface ObjectNode {
  readonly k: 'object'; readonly id: number;
  /** Named properties in declaration order (every required name is one). */
  readonly props: readonly Prop[];
  readonly clauses: readonly Clause[];
  /** Keys outside `props` must be strings of this node (propertyNames). */
  readonly keys: StringNode;
  readonly minProps: number;
  readonly maxProps: number;
  /** dependentRequired: when the first name is present, so must be the others. */
  readonly deps: readonly (readonly [string, readonly string[]])[];
  /** The clauses' pattern regexes, clause after clause. */
  readonly patternRes: readonly Regex[];
  /** The value schema of a key outside `props`, by which of `patternRes` it matches (null:
   * the key is not allowed). */
  readonly extraFor: (matched: readonly boolean[]) => Schema | null;
}
export interface ArrayNode {
  readonly k: 'array'; readonly id: number;
  readonly prefix: readonly Schema[];
  /** Items after the prefix (null: none allowed). */
  readonly items: Schema | null;
  readonly min: number;
  readonly max: number;
  /** uniqueItems: every item (prefix ones too) is one of a finite set of literals, each
   * written at most once (unique.ts; the matcher's frame tracks which were). */
  readonly unique?: true;
}

export type Schema =
  | StringNode
  | NumberNode
  | { readonly k: 'lit'; readonly id: number; readonly text: string }
  | { readonly k: 'anyOf'; readonly id: number; readonly alts: readonly Schema[] }
  | ObjectNode
  | ArrayNode
  | { readonly k: 'any'; readonly id: number; readonly depth: number }
  /** A lazily resolved node ($ref, recursive ones included). */
  | { readonly k: 'ref'; readonly id: number; readonly get: () => Schema };

let nextId = 1;
export const mk = <T extends Omit<Schema, 'id'>>(s: T): T & { id: number } => {
  spendCompile();
  return { ...s, id: nextId++ };
};

/** The regexes of `s` for a context without the label check. */
export const untrackedRes = (s: StringNode): readonly Regex[] => s.labels?.untracked ?? s.res;

/** `s` for a context without the label check (A-labels refused by its regexes). */
export function withoutLabels(s: StringNode): StringNode {
  return s.labels ? mk({ k: 'string' as const, min: s.min, max: s.max, res: s.labels.untracked }) : s;
}

/** Nothing matches (an anyOf without alternatives). */
export const NEVER: Schema = mk({ k: 'anyOf' as const, alts: [] });
export const isNever = (s: Schema): boolean => s.k === 'anyOf' && s.alts.length === 0;

export const STRING: StringNode = mk({ k: 'string' as const, min: 0, max: MAX_STRING, res: [] });
export const KEY_STRING: StringNode = mk({ k: 'string' as const, min: 0, max: MAX_KEY, res: [] });
export const NUMBER: NumberNode = mk({ k: 'number' as const, integer: false, neg: true, intDigits: MAX_INT_DIGITS, range: null });
export const INTEGER: NumberNode = mk({ k: 'number' as const, integer: true, neg: true, intDigits: MAX_INT_DIGITS, range: null });
export const TRUE: Schema = mk({ k: 'lit' as const, text: 'true' });
export const FALSE: Schema = mk({ k: 'lit' as const, text: 'false' });
export const NULL: Schema = mk({ k: 'lit' as const, text: 'null' });
export const BOOLEAN: Schema = mk({ k: 'anyOf' as const, alts: [TRUE, FALSE] });

/** Any JSON value (json_object mode, or a schema without constraints), nesting ≤ depth. */
const anyCache = new Map<number, Schema>();
export function anySchema(depth = MAX_ANY_DEPTH): Schema {
  let s = anyCache.get(depth);
  if (!s) anyCache.set(depth, (s = unbudgeted(() => mk({ k: 'any' as const, depth })))); // shared: outside the count
  return s;
}

/** An object with any keys whose values are `values`. */
export function freeObject(values: Schema): ObjectNode {
  return mk({
    k: 'object' as const, props: [], clauses: [{ patterns: [], extra: values }], keys: KEY_STRING, minProps: 0, maxProps: Infinity, deps: [],
    patternRes: [], extraFor: () => values,
  });
}

export function listArray(items: Schema | null): ArrayNode {
  return mk({ k: 'array' as const, prefix: [], items, min: 0, max: Infinity });
}

/** The alternatives a value of `any` schema can take, by JSON type. */
const anyAltCache = new Map<number, readonly Schema[]>();
export function anyAlternatives(depth: number): readonly Schema[] {
  let alts = anyAltCache.get(depth);
  if (alts) return alts;
  alts = [STRING, NUMBER, TRUE, FALSE, NULL];
  // shared by every grammar: outside the count
  if (depth > 0) alts = [...alts, ...unbudgeted(() => [freeObject(anySchema(depth - 1)), listArray(anySchema(depth - 1))])];
  anyAltCache.set(depth, alts);
  return alts;
}

/** A schema matching exactly `text` (raw text, not JSON-encoded). */
export function rawLiteral(text: string): Schema {
  return mk({ k: 'lit' as const, text });
}

export function literalChoice(alts: readonly Schema[]): Schema {
  return alts.length === 1 ? alts[0]! : mk({ k: 'anyOf' as const, alts });
}

/** Follow ref nodes to a concrete node. */
export function deref(s: Schema): Schema {
  let x = s;
  for (let i = 0; x.k === 'ref'; i++) {
    if (i > 1000) throw new SchemaError('a $ref is recursive without a value in between');
    x = x.get();
  }
  return x;
}
