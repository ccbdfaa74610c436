// JSON Schema → the schema tree the grammar matcher walks (nodes.ts). The practical language
// of drafts 4 to 2020-12: type (one or a list), properties / required / additionalProperties
// (a schema too) / patternProperties / propertyNames / min- and maxProperties /
// dependentRequired, dependentSchemas and draft-7 `dependencies`, items / prefixItems /
// additionalItems / minItems / maxItems, minLength / maxLength / pattern / format, minimum /
// maximum / exclusiveMinimum / exclusiveMaximum / multipleOf (integer or decimal), enum / const
// of any JSON values, allOf / anyOf / oneOf together with their sibling keywords, not and
// if / then / else where the negation is expressible (negate.ts, conditionals.ts), uniqueItems
// where every item schema is a finite set of at most 64 literals (unique.ts), $ref to local
// JSON pointers and anchors (recursive ones included), boolean schemas.
//
// Keywords apply to their own type only: {"minimum": 0} admits any string. oneOf is exact
// where its branches' negations are small and expressible, else enforced as anyOf.
// Annotations and unknown keywords are ignored, as the spec says. Assertions the grammar
// cannot enforce (UNSUPPORTED, or a negation it cannot express) are a SchemaError naming the
// keyword and its JSON pointer — unless `lenient`, which drops them and enforces the rest.
//
// compileSchema is pure and synchronous: JSON in, tree out (a worker can run it).
import { compilingAt, spendCompile, unbudgeted } from './compile-budget.js';
import { formatRule } from './formats.js';
import { arrayNode, intersect, objectNode, union, viewOf } from './merge.js';
import {
  anySchema, type ArrayNode, BOOLEAN, type Clause, deref, freeObject, INTEGER, isNever, KEY_STRING, listArray, MAX_ANY_DEPTH, MAX_STRING, mk, NEVER,
  NULL, NUMBER, type Prop, type Schema, SchemaError, STRING, type StringNode,
} from './nodes.js';
import { decimalStep, NO_RANGE, type NumRange, rangeFeasible } from './numrange.js';
import { compileRegex, type Regex, RegexError } from './regex.js';
import { chainSchema, conditional, type ConditionalCompiler, oneOf, schemaDependencies, splitChains } from './conditionals.js';
import { negate, NotExpressible } from './negate.js';
import { evaluatedProperties } from './unevaluated.js';
import { MAX_UNIQUE_LITERALS, uniqueSets } from './unique.js';
import { constSchema, DEFAULT_BASE, keyNode, resolveUri, SCHEMA_KEYWORDS, SCHEMA_MAPS, stripFragment } from './schema-parts.js';

export { anySchema, literalChoice, MAX_DIGITS, MAX_INT_DIGITS, MAX_STRING, rawLiteral, SchemaError } from './nodes.js';
export type { Prop, Schema } from './nodes.js';

export interface CompileOptions {
  /** Drop assertions that cannot be enforced instead of refusing the schema. */
  readonly lenient?: boolean;
  /** Draft 4–7 semantics ($ref overrides its siblings); default from `$schema`, else 2020-12. */
  readonly draft?: 7 | 2020;
}

/** Assertions the grammar cannot enforce, with why. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  contains: 'array containment', minContains: 'array containment', maxContains: 'array containment',
  unevaluatedItems: 'evaluation tracking', $dynamicRef: 'dynamic references', $recursiveRef: 'dynamic references',
};

type Obj = Record<string, unknown>;
/** Subschemas nested deeper than this are refused (a 400): compilation recurses per level. */
export const MAX_SCHEMA_DEPTH = 128;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const NESTED_ANY = anySchema(MAX_ANY_DEPTH - 1);

function count(v: unknown, path: string, key: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new SchemaError(`${path}.${key} must be a non-negative integer`);
  return v;
}

/** Compile a JSON Schema (the root of `schema` resolves $ref). `path` names it in errors. */
export function compileSchema(schema: unknown, path = 'schema', opts: CompileOptions = {}): Schema {
  try {
    const c = new Compiler(schema, path, opts);
    const s = c.compile(schema, path);
    c.forceRefs(s);
    return s;
  } catch (e) {
    // combinators over recursive $refs can nest lazily built intersections past the stack: a 400, not a 500
    if (e instanceof RangeError && /call stack/i.test(e.message)) throw new SchemaError(`${path}: its combinators and $refs nest too deeply to compile`);
    throw e;
  }
}

const TYPES = ['string', 'number', 'integer', 'boolean', 'null', 'object', 'array'] as const;
const TYPE_KEYWORDS: Readonly<Record<string, readonly string[]>> = {
  string: ['minLength', 'maxLength', 'pattern', 'format'],
  number: ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'],
  object: ['properties', 'required', 'additionalProperties', 'patternProperties', 'propertyNames', 'minProperties', 'maxProperties',
    'dependentRequired', 'dependencies'],
  array: ['items', 'prefixItems', 'additionalItems', 'minItems', 'maxItems'],
};

class Compiler implements ConditionalCompiler {
  private readonly refs = new Map<string, Schema>();
  /** Resources and anchors by absolute URI; each subschema's base URI. */
  private readonly ids = new Map<string, unknown>();
  private readonly bases = new WeakMap<object, string>();
  private readonly draft: 7 | 2020;
  /** Subschemas being compiled (nesting depth). */
  private depth = 0;

  constructor(private readonly root: unknown, private readonly rootPath: string, private readonly opts: CompileOptions) {
    const declared = isObj(root) && typeof root['$schema'] === 'string' ? root['$schema'] : '';
    this.draft = opts.draft ?? (/draft-0[4-7]/.test(declared) ? 7 : 2020);
    // a custom meta-schema may switch vocabularies off: its meaning is unknown here
    if (declared !== '' && !/^https?:\/\/json-schema\.org\//.test(declared) && !opts.lenient) {
      throw new SchemaError(`${rootPath}.$schema "${declared}" is not a JSON Schema meta-schema this server knows (json-schema.org drafts)`);
    }
    this.ids.set(DEFAULT_BASE, root);
    this.collectIds(root, DEFAULT_BASE, 0);
  }

  /** Index the schema's resources: every subschema's base URI, and the URIs of its $id
   * resources and anchors ($anchor, or a draft-7 `$id: "#name"`). */
  private collectIds(s: unknown, base: string, depth: number): void {
    if (depth > 64 || typeof s !== 'object' || s === null) return;
    if (Array.isArray(s)) {
      for (const x of s) this.collectIds(x, base, depth + 1);
      return;
    }
    const o = s as Obj;
    let here = base;
    // drafts ≤ 7: $ref overrides its siblings, $id included
    const ignored = this.draft === 7 && o['$ref'] !== undefined;
    const id = ignored ? null : typeof o['$id'] === 'string' ? o['$id'] : this.draft === 7 && typeof o['id'] === 'string' ? o['id'] : null;
    if (id !== null && id.startsWith('#')) this.ids.set(`${stripFragment(base)}${id}`, o);
    else if (id !== null) {
      here = resolveUri(id, base);
      this.ids.set(stripFragment(here), o);
    }
    if (typeof o['$anchor'] === 'string') this.ids.set(`${stripFragment(here)}#${o['$anchor']}`, o);
    this.bases.set(o, here);
    // only where schemas live: an $id inside an unknown keyword identifies nothing
    for (const [k, v] of Object.entries(o)) {
      if (SCHEMA_MAPS.has(k) && isObj(v)) for (const x of Object.values(v)) this.collectIds(x, here, depth + 1);
      else if (SCHEMA_KEYWORDS.has(k)) this.collectIds(v, here, depth + 1);
    }
  }

  private refuse(path: string, key: string, why: string): void {
    if (this.opts.lenient) return;
    const pointer = `#${path.slice(this.rootPath.length).replace(/\[(\d+)\]/g, '.$1').replace(/\./g, '/')}/${key}`;
    throw new SchemaError(`${path}: the keyword "${key}" (${why}) cannot be enforced by the grammar (at ${pointer})`);
  }

  /** The compiled negation of `s` (null: not expressible and dropped, lenient). */
  negation(s: unknown, path: string, keyword: string | null, maxSize = Infinity): Schema | null {
    const deref = (ref: unknown, holder: Record<string, unknown>): unknown =>
      this.resolve(resolveUri(String(ref), this.bases.get(holder) ?? DEFAULT_BASE), String(ref), path);
    let raw: unknown;
    try {
      raw = negate(s, { deref, draft: this.draft });
    } catch (e) {
      if (!(e instanceof NotExpressible)) throw e;
      if (keyword !== null) this.refuse(path.replace(/\.(?:not|if)$/, ''), keyword, `${e.message}: not expressible as a grammar`);
      return null;
    }
    if (maxSize !== Infinity && JSON.stringify(raw).length > maxSize) return null;
    return this.compile(raw, `${path}(negated)`);
  }

  /** The subschema `s` at `path` (a budget error inside names `path`). */
  compile(s: unknown, path: string): Schema {
    if (this.depth >= MAX_SCHEMA_DEPTH) throw new SchemaError(`${path}: subschemas nest deeper than ${MAX_SCHEMA_DEPTH} levels`);
    spendCompile();
    this.depth++;
    try {
      return compilingAt(path, () => this.compileHere(s, path));
    } finally {
      this.depth--;
    }
  }

  private compileHere(s: unknown, path: string): Schema {
    if (s === true) return anySchema();
    if (s === false) return NEVER;
    if (!isObj(s)) throw new SchemaError(`${path} must be a JSON Schema object`);
    for (const [key, why] of Object.entries(UNSUPPORTED)) {
      if (s[key] === undefined) continue;
      this.refuse(path, key, why);
    }
    const parts: Schema[] = [];
    if (s['$ref'] !== undefined) {
      const target = this.ref(s['$ref'], path, this.bases.get(s) ?? DEFAULT_BASE);
      if (this.draft === 7) return target; // drafts ≤ 7: $ref overrides its siblings
      parts.push(target);
    }
    parts.push(this.typed(s, path));
    if (s['const'] !== undefined) parts.push(constSchema(s['const']));
    if (s['enum'] !== undefined) {
      const e = s['enum'];
      if (!Array.isArray(e) || e.length === 0) throw new SchemaError(`${path}.enum must be a non-empty array`);
      parts.push(union(e.map(constSchema)));
    }
    for (const comb of ['allOf', 'anyOf', 'oneOf'] as const) {
      const a = s[comb];
      if (a === undefined) continue;
      if (!Array.isArray(a) || a.length === 0) throw new SchemaError(`${path}.${comb} must be a non-empty array`);
      if (comb === 'allOf') {
        const { chains, rest } = splitChains(a); // conditionals on one property's value: one union each
        parts.push(...chains.map((links) => chainSchema(links, `${path}.allOf`, this, s)), ...rest.map((i) => this.compile(a[i], `${path}.allOf[${i}]`)));
        continue;
      }
      const branches = a.map((x: unknown, i) => this.compile(x, `${path}.${comb}[${i}]`));
      parts.push(comb === 'oneOf' ? oneOf(a, branches, `${path}.oneOf`, this) : union(branches));
    }
    const cond = conditional(s, path, this);
    if (cond) parts.push(cond);
    parts.push(...schemaDependencies(s, path, this));
    if (s['not'] !== undefined) {
      const not = this.negation(s['not'], `${path}.not`, 'not');
      if (not) parts.push(not);
    }
    if (s['unevaluatedProperties'] !== undefined && s['unevaluatedProperties'] !== true) {
      const u = this.unevaluated(s, path);
      if (u) parts.push(u);
    }
    const all = parts.reduce((x, y) => intersect(x, y));
    if (s['uniqueItems'] === undefined || s['uniqueItems'] === false) return all;
    if (s['uniqueItems'] !== true) throw new SchemaError(`${path}.uniqueItems must be a boolean`);
    return this.unique(all, path);
  }

  /** uniqueItems: the array alternatives of `s` with their items unique, where every item
   * schema is a finite set of at most MAX_UNIQUE_LITERALS literals (unique.ts); any other
   * array alternative is refused. Alternatives of other types are kept as they are. */
  private unique(s: Schema, path: string): Schema {
    const why = `item uniqueness, enforced only where the items are enums, consts, booleans or null (at most ${MAX_UNIQUE_LITERALS} values)`;
    // an item $ref still being compiled (recursion through this schema) is not a literal set
    const finite = (a: ArrayNode): boolean => {
      try {
        return uniqueSets(a.prefix, a.items) !== null;
      } catch (e) {
        if (e instanceof SchemaError) return false;
        throw e;
      }
    };
    let alts: Schema[];
    try {
      const top = deref(s);
      alts = (top.k === 'anyOf' ? top.alts : [top]).map(deref);
    } catch (e) {
      if (!(e instanceof SchemaError)) throw e;
      this.refuse(path, 'uniqueItems', why);
      return s;
    }
    if (alts.some((x) => x.k === 'any' || (x.k === 'array' && !finite(x)))) {
      this.refuse(path, 'uniqueItems', why);
      return s; // lenient: uniqueItems dropped
    }
    return union(alts.map((x) => (x.k === 'array' ? arrayNode(x.prefix, x.items, x.min, x.max, true) : x)));
  }

  /** The type-specific keywords: an alternative per allowed type. */
  private typed(s: Obj, path: string): Schema {
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
    if (allowed('string')) alts.push(has('string') ? this.string(s, path) : STRING);
    if (allowed('number') || allowed('integer')) {
      const integer = !allowed('number');
      alts.push(has('number') ? this.number(integer, s, path) : integer ? INTEGER : NUMBER);
    }
    if (allowed('boolean')) alts.push(BOOLEAN);
    if (allowed('null')) alts.push(NULL);
    if (allowed('object')) alts.push(has('object') ? this.object(s, path) : freeObject(NESTED_ANY));
    if (allowed('array')) alts.push(has('array') ? this.array(s, path) : listArray(NESTED_ANY));
    return union(alts);
  }

  /** unevaluatedProperties over the statically known evaluated properties (unevaluated.ts). */
  private unevaluated(s: Obj, path: string): Schema | null {
    const deref = (ref: unknown, holder: Obj): unknown => this.resolve(resolveUri(String(ref), this.bases.get(holder) ?? DEFAULT_BASE), String(ref), path);
    const ev = evaluatedProperties(s, deref);
    if (ev.kind === 'all') return null;
    if (ev.kind === 'dynamic') {
      this.refuse(path, 'unevaluatedProperties', `evaluation tracking through ${ev.keyword}`);
      return null;
    }
    const extra = this.compile(s['unevaluatedProperties'], `${path}.unevaluatedProperties`);
    const patterns = ev.patterns.flatMap((src) => {
      const re = this.regex(src, `${path}.patternProperties`);
      return re ? [{ re, schema: anySchema() }] : [];
    });
    const props = ev.names.map((name) => ({ name, required: false, schema: anySchema() }));
    const objects = objectNode(props, [{ patterns, extra: isNever(extra) ? null : extra }], KEY_STRING, 0, Infinity, []);
    return union([objects, this.compile({ type: ['string', 'number', 'boolean', 'null', 'array'] }, path)]); // it constrains objects only
  }

  private regex(source: unknown, path: string): Regex | null {
    if (typeof source !== 'string') throw new SchemaError(`${path} must be a string`);
    try {
      return compileRegex(source);
    } catch (e) {
      if (!(e instanceof RegexError)) throw e;
      if (this.opts.lenient) return null;
      throw new SchemaError(`${path}: ${e.message}`);
    }
  }

  private string(s: Obj, path: string): Schema {
    const min = count(s['minLength'], path, 'minLength') ?? 0;
    let max = Math.min(count(s['maxLength'], path, 'maxLength') ?? MAX_STRING, MAX_STRING);
    if (min > max) throw new SchemaError(`${path}: minLength ${min} is above maxLength ${Math.min(max, MAX_STRING)}${max === MAX_STRING ? ' (the cap on generated strings)' : ''}`);
    const res: Regex[] = [];
    if (s['pattern'] !== undefined) {
      const r = this.regex(s['pattern'], `${path}.pattern`);
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

  private number(integer0: boolean, s: Obj, path: string): Schema {
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
      else if (!(integer && Number.isInteger(1 / m))) this.refuse(path, 'multipleOf', `${m} has more than 12 decimals`);
    }
    const range: NumRange = { ...NO_RANGE, lo, loEx, hi, hiEx, mult, ...(step ? { step } : {}) };
    const bounded = lo !== null || hi !== null || mult !== 1n || step !== undefined;
    if (bounded && !rangeFeasible('', range, integer, 15)) return NEVER;
    return mk({ k: 'number' as const, integer, neg: !(lo !== null && lo >= 0), intDigits: 15, range: bounded ? range : null });
  }

  private object(s: Obj, path: string): Schema {
    const props = s['properties'] ?? {};
    if (!isObj(props)) throw new SchemaError(`${path}.properties must be an object`);
    const req = s['required'] ?? [];
    if (!Array.isArray(req) || !req.every((r) => typeof r === 'string')) throw new SchemaError(`${path}.required must be a list of names`);
    const pp = s['patternProperties'] ?? {};
    if (!isObj(pp)) throw new SchemaError(`${path}.patternProperties must be an object`);
    const patterns: Clause['patterns'][number][] = [];
    for (const [src, ps] of Object.entries(pp)) {
      const re = this.regex(src, `${path}.patternProperties`);
      if (re) patterns.push({ re, schema: this.compile(ps, `${path}.patternProperties[${JSON.stringify(src)}]`) });
    }
    const ap = s['additionalProperties'];
    const extra = ap === false ? null : ap === undefined || ap === true ? NESTED_ANY : this.compile(ap, `${path}.additionalProperties`);
    const clause: Clause = { patterns, extra: extra && isNever(extra) ? null : extra };
    const probe = objectNode([], [clause], KEY_STRING, 0, Infinity, []);
    const names = [...new Set([...Object.keys(props), ...(req as string[])])];
    const list: Prop[] = names.map((name) => {
      const own = Object.hasOwn(props, name) ? this.compile(props[name], `${path}.properties.${name}`) : null;
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
    return objectNode(list, [clause], this.keys(s['propertyNames'], `${path}.propertyNames`), minProps, maxProps, deps);
  }

  /** propertyNames as a string node (strings, string literals, or anything). */
  private keys(v: unknown, path: string): StringNode {
    if (v === undefined || v === true) return KEY_STRING;
    const k = keyNode(this.compile(v, path));
    if (k === null) this.refuse(path, 'propertyNames', 'a union of string schemas');
    return k ?? KEY_STRING;
  }

  private array(s: Obj, path: string): Schema {
    const items = s['items'];
    let prefix: Schema[] = [];
    let rest: Schema | null;
    const restOf = (v: unknown, p: string): Schema | null => (v === undefined || v === true ? NESTED_ANY : v === false ? null : this.compile(v, p));
    if (Array.isArray(items)) {
      prefix = items.map((x: unknown, i) => this.compile(x, `${path}.items[${i}]`));
      rest = restOf(s['additionalItems'], `${path}.additionalItems`);
    } else {
      const pi = s['prefixItems'];
      if (pi !== undefined && !Array.isArray(pi)) throw new SchemaError(`${path}.prefixItems must be an array`);
      prefix = (pi ?? []).map((x: unknown, i: number) => this.compile(x, `${path}.prefixItems[${i}]`));
      rest = restOf(items, `${path}.items`);
    }
    const min = count(s['minItems'], path, 'minItems') ?? 0;
    const max = count(s['maxItems'], path, 'maxItems') ?? Infinity;
    if (min > max) throw new SchemaError(`${path}: minItems ${min} is above maxItems ${max}`);
    return arrayNode(prefix, rest, min, max);
  }

  /** A lazily compiled $ref (memoized by its absolute URI, so recursion ends). */
  private ref(r: unknown, path: string, base: string): Schema {
    if (typeof r !== 'string') throw new SchemaError(`${path}.$ref must be a string`);
    const uri = resolveUri(r, base);
    const hit = this.refs.get(uri);
    if (hit) return hit;
    const target = this.resolve(uri, r, path);
    let done: Schema | null = null;
    let busy = false;
    const where = r.startsWith('#/') ? `${this.rootPath}${r.slice(1).replace(/\//g, '.')}` : `${path}.$ref`;
    const node = mk({
      k: 'ref' as const,
      get: (): Schema => {
        if (done) return done;
        if (busy) throw new SchemaError(`${path}.$ref "${r}" refers to itself without a value in between`);
        busy = true;
        done = this.compile(target, where);
        busy = false;
        return done;
      },
    });
    this.refs.set(uri, node);
    return node;
  }

  private resolve(uri: string, r: string, path: string): unknown {
    const direct = this.ids.get(uri);
    if (direct !== undefined) return direct;
    const hash = uri.indexOf('#');
    const doc = this.ids.get(hash < 0 ? uri : uri.slice(0, hash));
    if (doc === undefined) throw new SchemaError(`${path}.$ref "${r}" is not supported (only references inside the schema: #, #/json/pointer, #anchor, $id)`);
    const frag = hash < 0 ? '' : decodeURIComponent(uri.slice(hash + 1));
    if (frag !== '' && !frag.startsWith('/')) throw new SchemaError(`${path}.$ref "${r}" does not resolve in ${this.rootPath}`);
    let at: unknown = doc;
    for (const raw of frag === '' ? [] : frag.slice(1).split('/')) {
      const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      at = Array.isArray(at) ? at[Number(key)] : isObj(at) && Object.hasOwn(at, key) ? at[key] : undefined;
      if (at === undefined) throw new SchemaError(`${path}.$ref "${r}" does not resolve in ${this.rootPath}`);
    }
    return at;
  }

  /** Resolve every $ref now, so errors in referenced schemas surface at compile time (an
   * explicit stack, one unit per node: trees may be wide and deep). */
  forceRefs(s: Schema): void {
    const seen = new Set<number>();
    const todo: Schema[] = [s];
    const pushAll = (xs: readonly Schema[]): void => {
      for (const x of xs) todo.push(x);
    };
    while (todo.length > 0) {
      const x = todo.pop()!;
      if (seen.has(x.id)) continue;
      seen.add(x.id);
      spendCompile();
      switch (x.k) {
        case 'ref': todo.push(deref(x)); break;
        case 'anyOf': pushAll(x.alts); break;
        case 'object':
          for (const p of x.props) todo.push(p.schema);
          for (const c of x.clauses) {
            for (const p of c.patterns) todo.push(p.schema);
            if (c.extra) todo.push(c.extra);
          }
          break;
        case 'array':
          pushAll(x.prefix);
          if (x.items) todo.push(x.items);
          break;
        default: break;
      }
    }
  }
}
