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
// compileSchema is pure and synchronous: JSON in, tree out (a worker can run it). This file holds
// the recursion ($ref, combinators, not, if/then/else, uniqueItems, unevaluatedProperties); the
// type-specific keywords are in schema-types.ts, state-free pieces in schema-parts.ts.
import { compilingAt, spendCompile } from './compile-budget.js';
import { arrayNode, intersect, objectNode, union } from './merge.js';
import { anySchema, type ArrayNode, deref, isNever, KEY_STRING, mk, NEVER, type Schema, SchemaError } from './nodes.js';
import { chainSchema, conditional, type ConditionalCompiler, oneOf, schemaDependencies, splitChains } from './conditionals.js';
import { negate, NotExpressible } from './negate.js';
import { evaluatedProperties } from './unevaluated.js';
import { MAX_UNIQUE_LITERALS, uniqueSets } from './unique.js';
import { constSchema, DEFAULT_BASE, resolveUri, SCHEMA_KEYWORDS, SCHEMA_MAPS, stripFragment } from './schema-parts.js';
import { compilePattern, type TypeCompiler, typedSchema } from './schema-types.js';

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

class Compiler implements ConditionalCompiler, TypeCompiler {
  private readonly refs = new Map<string, Schema>();
  /** Resources and anchors by absolute URI; each subschema's base URI. */
  private readonly ids = new Map<string, unknown>();
  private readonly bases = new WeakMap<object, string>();
  private readonly draft: 7 | 2020;
  readonly lenient: boolean;
  /** Subschemas being compiled (nesting depth). */
  private depth = 0;

  constructor(private readonly root: unknown, private readonly rootPath: string, opts: CompileOptions) {
    const declared = isObj(root) && typeof root['$schema'] === 'string' ? root['$schema'] : '';
    this.draft = opts.draft ?? (/draft-0[4-7]/.test(declared) ? 7 : 2020);
    this.lenient = opts.lenient ?? false;
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

  refuse(path: string, key: string, why: string): void {
    if (this.lenient) return;
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
    parts.push(typedSchema(s, path, this));
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
      const re = compilePattern(src, `${path}.patternProperties`, this.lenient);
      return re ? [{ re, schema: anySchema() }] : [];
    });
    const props = ev.names.map((name) => ({ name, required: false, schema: anySchema() }));
    const objects = objectNode(props, [{ patterns, extra: isNever(extra) ? null : extra }], KEY_STRING, 0, Infinity, []);
    return union([objects, this.compile({ type: ['string', 'number', 'boolean', 'null', 'array'] }, path)]); // it constrains objects only
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
