// The type-specific keywords of the JSON Schema compiler (schema.ts): `type`, then per type its
// own keywords — strings (minLength / maxLength / pattern / format), numbers (minimum / maximum,
// exclusive bounds, multipleOf), objects (properties / required / additionalProperties /
// patternProperties / propertyNames / min- and maxProperties / dependentRequired and
// draft-7 name-list `dependencies`) and arrays (items / prefixItems / additionalItems /
// minItems / maxItems). Subschemas are compiled through the caller's TypeCompiler, so the
// recursion (and its depth, $refs and budget) stays in schema.ts and this module imports none of it.
import { unbudgeted } from './compile-budget.js';
import { formatRule } from './formats.js';
import { arrayNode, intersect, objectNode, union, viewOf } from './merge.js';
import {
  anySchema, BOOLEAN, type Clause, freeObject, INTEGER, isNever, KEY_STRING, listArray, MAX_ANY_DEPTH, MAX_STRING, mk, NEVER, NULL, NUMBER,
  type Prop, type Schema, SchemaError, STRING, type StringNode,
} from './nodes.js';
import { decimalStep, NO_RANGE, type NumRange, rangeFeasible } from './numrange.js';
import { compileRegex, type Regex, RegexError } from './regex.js';
import { keyNode } from './schema-parts.js';

/** What the type keywords need of the schema compiler. */
export interface TypeCompiler {
  /** The subschema `s` at `path`. */
  compile(s: unknown, path: string): Schema;
  /** Refuse `key` at `path` as not enforceable (`why`); returns (the keyword dropped) when lenient. */
  refuse(path: string, key: string, why: string): void;
  /** Drop assertions that cannot be enforced instead of refusing the schema. */
  readonly lenient: boolean;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const NESTED_ANY = anySchema(MAX_ANY_DEPTH - 1);

function count(v: unknown, path: string, key: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new SchemaError(`${path}.${key} must be a non-negative integer`);
  return v;
}

const TYPES = ['string', 'number', 'integer', 'boolean', 'null', 'object', 'array'] as const;
const TYPE_KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  object: ['properties', 'required', 'additionalProperties', 'patternProperties', 'propertyNames', 'minProperties', 'maxProperties',
    'dependentRequired', 'dependencies'],
  array: ['items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems'],
};

/** The type-specific keywords: an alternative per allowed type. */
export function typedSchema(s: Obj, path: string, c: TypeCompiler): Schema {
  const t = s['type'];
  const list = t === undefined ? null : Array.isArray(t) ? t : [t];
  if (list) {
    if (list.length === 0) throw new SchemaError(`${path}.type must not be empty`);
    for (const x of list) {
      if (typeof x !== 'string') throw new SchemaError(`${path}.type must be a string or a list of strings`);
      if (!(TYPES as readonly string[]).includes(x)) throw new SchemaError(`${path}.type "${x}" is not a JSON Schema type`);
    }
  }
  const has = (kind: string): boolean => TYPE_KEYWORDS[kind]!.some((k) => s[k] !== undefined);
  if (!list && !['string', 'number', 'object', 'array'].some(has)) return anySchema();
  const allowed = (x: string): boolean => !list || list.includes(x);
  const alts: Schema[] = [];
  if (allowed('string')) alts.push(has('string') ? stringSchema(s, path, c) : STRING);
  if (allowed('number') || allowed('integer')) {
    const integer = !allowed('number');
    alts.push(has('number') ? numberSchema(integer, s, path, c) : integer ? INTEGER : NUMBER);
  }
  if (allowed('boolean')) alts.push(BOOLEAN);
  if (allowed('null')) alts.push(NULL);
  if (allowed('object')) alts.push(has('object') ? objectSchema(s, path, c) : freeObject(NESTED_ANY));
  if (allowed('array')) alts.push(has('array') ? arraySchema(s, path, c) : listArray(NESTED_ANY));
  return union(alts);
}

/** `source` as a regex (pattern, patternProperties); null where it is invalid and `lenient`. */
export function compilePattern(source: unknown, path: string, lenient: boolean): Regex | null {
  if (typeof source !== 'string') throw new SchemaError(`${path} must be a string`);
  try {
    return compileRegex(source);
  } catch (e) {
    if (!(e instanceof RegexError)) throw e;
    if (lenient) return null;
    throw new SchemaError(`${path}: ${e.message}`);
  }
}

function stringSchema(s: Obj, path: string, c: TypeCompiler): Schema {
  const min = count(s['minLength'], path, 'minLength') ?? 0;
  let max = Math.min(count(s['maxLength'], path, 'maxLength') ?? MAX_STRING, MAX_STRING);
  if (min > max) throw new SchemaError(`${path}: minLength ${min} is above maxLength ${Math.min(max, MAX_STRING)}${max === MAX_STRING ? ' (the cap on generated strings)' : ''}`);
  const res: Regex[] = [];
  if (s['pattern'] !== undefined) {
    const r = compilePattern(s['pattern'], `${path}.pattern`, c.lenient);
    if (r) res.push(r);
  }
  const format = typeof s['format'] === 'string' ? formatRule(s['format']) : undefined;
  let untracked: Regex[] | null = null;
  if (format) {
    const own = unbudgeted(() => format.patterns.map(compileRegex));
    if (format.labels) untracked = [...res, ...unbudgeted(() => format.labels!.untracked.map(compileRegex))];
    res.push(...own);
    max = Math.min(max, format.maxLength ?? max);
  }
  if (min > max) return NEVER;
  return mk({ k: 'string' as const, min, max, res, ...(untracked ? { labels: { untracked } } : {}) });
}

function numberSchema(integer0: boolean, s: Obj, path: string, c: TypeCompiler): Schema {
  const num = (key: string): number | null => {
    const v = s[key];
    if (v === undefined || typeof v === 'boolean') return null;
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new SchemaError(`${path}.${key} must be a number`);
    return v;
  };
  let lo = num('minimum');
  let hi = num('maximum');
  let loEx = s['exclusiveMinimum'] === true;
  let hiEx = s['exclusiveMaximum'] === true;
  const exLo = num('exclusiveMinimum');
  const exHi = num('exclusiveMaximum');
  if (exLo !== null && (lo === null || exLo >= lo)) [lo, loEx] = [exLo, true];
  if (exHi !== null && (hi === null || exHi <= hi)) [hi, hiEx] = [exHi, true];
  let integer = integer0;
  let mult = 1n;
  let step: NumRange['step'];
  const m = s['multipleOf'];
  if (m !== undefined) {
    if (typeof m !== 'number' || !(m > 0) || !Number.isFinite(m)) throw new SchemaError(`${path}.multipleOf must be a positive number`);
    const dec = Number.isSafeInteger(m) || !(integer && Number.isInteger(1 / m)) ? decimalStep(m) : null; // integers: 1/k is no constraint
    if (dec?.scale === 0) {
      mult = dec.m;
      integer = true; // a multiple of an integer is an integer
    } else if (dec) step = dec;
    else if (!(integer && Number.isInteger(1 / m))) c.refuse(path, 'multipleOf', `${m} has more than 12 decimals`);
  }
  const range: NumRange = { ...NO_RANGE, lo, loEx, hi, hiEx, mult, ...(step ? { step } : {}) };
  const bounded = lo !== null || hi !== null || mult !== 1n || step !== undefined;
  if (bounded && !rangeFeasible('', range, integer, 15)) return NEVER;
  return mk({ k: 'number' as const, integer, neg: !(lo !== null && lo >= 0), intDigits: 15, range: bounded ? range : null });
}

function objectSchema(s: Obj, path: string, c: TypeCompiler): Schema {
  const props = s['properties'] ?? {};
  if (!isObj(props)) throw new SchemaError(`${path}.properties must be an object`);
  const req = s['required'] ?? [];
  if (!Array.isArray(req) || !req.every((r) => typeof r === 'string')) throw new SchemaError(`${path}.required must be a list of names`);
  const pp = s['patternProperties'] ?? {};
  if (!isObj(pp)) throw new SchemaError(`${path}.patternProperties must be an object`);
  const patterns: Clause['patterns'][number][] = [];
  for (const [src, ps] of Object.entries(pp)) {
    const re = compilePattern(src, `${path}.patternProperties`, c.lenient);
    if (re) patterns.push({ re, schema: c.compile(ps, `${path}.patternProperties[${JSON.stringify(src)}]`) });
  }
  const ap = s['additionalProperties'];
  const extra = ap === false ? null : ap === undefined || ap === true ? NESTED_ANY : c.compile(ap, `${path}.additionalProperties`);
  const clause: Clause = { patterns, extra: extra && isNever(extra) ? null : extra };
  const probe = objectNode([], [clause], KEY_STRING, 0, Infinity, []);
  const names = [...new Set([...Object.keys(props), ...(req as string[])])];
  const list: Prop[] = names.map((name) => {
    const own = Object.hasOwn(props, name) ? c.compile(props[name], `${path}.properties.${name}`) : null;
    const view = probe.k === 'object' ? viewOf({ ...probe, props: [] }, name) : NEVER;
    // patternProperties apply to named properties too; additionalProperties does not
    const matched = patterns.filter((p) => p.re.test(name)).reduce<Schema>((x, p) => intersect(x, p.schema), anySchema());
    return { name, required: (req as string[]).includes(name), schema: own ? intersect(own, matched) : view };
  });
  const deps: [string, string[]][] = [];
  for (const key of ['dependentRequired', 'dependencies']) {
    const d = s[key];
    if (d === undefined) continue;
    if (!isObj(d)) throw new SchemaError(`${path}.${key} must be an object`);
    for (const [k, v] of Object.entries(d)) {
      if (Array.isArray(v) && v.every((x) => typeof x === 'string')) deps.push([k, v as string[]]);
      else if (key === 'dependentRequired' || Array.isArray(v)) throw new SchemaError(`${path}.${key}.${k} must be a list of names`);
      // a schema dependency: compiled beside the object (conditionals.ts)
    }
  }
  const minProps = count(s['minProperties'], path, 'minProperties') ?? 0;
  const maxProps = count(s['maxProperties'], path, 'maxProperties') ?? Infinity;
  return objectNode(list, [clause], keysSchema(s['propertyNames'], `${path}.propertyNames`, c), minProps, maxProps, deps);
}

/** propertyNames as a string node (strings, string literals, or anything). */
function keysSchema(v: unknown, path: string, c: TypeCompiler): StringNode {
  if (v === undefined || v === true) return KEY_STRING;
  const k = keyNode(c.compile(v, path));
  if (k === null) c.refuse(path, 'propertyNames', 'a union of string schemas');
  return k ?? KEY_STRING;
}

function arraySchema(s: Obj, path: string, c: TypeCompiler): Schema {
  const items = s['items'];
  let prefix: Schema[] = [];
  let rest: Schema | null;
  const restOf = (v: unknown, p: string): Schema | null => (v === undefined || v === true ? NESTED_ANY : v === false ? null : c.compile(v, p));
  if (Array.isArray(items)) {
    prefix = items.map((x: unknown, i) => c.compile(x, `${path}.items[${i}]`));
    rest = restOf(s['additionalItems'], `${path}.additionalItems`);
  } else {
    const pi = s['prefixItems'];
    if (pi !== undefined && !Array.isArray(pi)) throw new SchemaError(`${path}.prefixItems must be an array`);
    prefix = (pi ?? []).map((x: unknown, i: number) => c.compile(x, `${path}.prefixItems[${i}]`));
    rest = restOf(items, `${path}.items`);
  }
  const min = count(s['minItems'], path, 'minItems') ?? 0;
  const max = count(s['maxItems'], path, 'maxItems') ?? Infinity;
  if (min > max) throw new SchemaError(`${path}: minItems ${min} is above maxItems ${max}`);
  return arrayNode(prefix, rest, min, max);
}
