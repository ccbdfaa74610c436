// JSON Schema → the compact schema tree the grammar matcher walks. Supported: type (one or a
// list), properties / required / additionalProperties (false, or a schema when there are no
// properties), items / minItems / maxItems, minLength / maxLength, enum, const, anyOf, local
// $ref (#/$defs/…, #/definitions/…; not recursive). Annotations (title, description, …) are
// ignored. Any other keyword is a SchemaError naming it and its path: the output could
// otherwise violate the schema, and nothing is silently ignored.
//
// Generation order: an object's properties come in declaration order; optional ones may be
// left out. Strings without maxLength are capped at MAX_STRING bytes and numbers at MAX_DIGITS
// characters, so every constrained answer ends.

export class SchemaError extends Error {}

export const MAX_STRING = 2048;
export const MAX_DIGITS = 24;
const MAX_ANY_DEPTH = 6;

export interface Prop {
  readonly name: string;
  readonly required: boolean;
  readonly schema: Schema;
}

export type Schema =
  | { readonly k: 'string'; readonly id: number; readonly min: number; readonly max: number }
  | { readonly k: 'number'; readonly id: number; readonly integer: boolean; readonly neg: boolean; readonly intDigits: number }
  | { readonly k: 'lit'; readonly id: number; readonly text: string }
  | { readonly k: 'anyOf'; readonly id: number; readonly alts: readonly Schema[] }
  | { readonly k: 'object'; readonly id: number; readonly props: readonly Prop[]; readonly extra: Schema | null }
  | { readonly k: 'array'; readonly id: number; readonly items: Schema; readonly min: number; readonly max: number }
  | { readonly k: 'any'; readonly id: number; readonly depth: number };

const ANNOTATIONS = new Set(['title', 'description', '$schema', '$id', '$comment', 'examples', 'default', 'deprecated',
  'readOnly', 'writeOnly', '$defs', 'definitions', 'strict']);
const KNOWN = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'minItems', 'maxItems', 'minLength',
  'maxLength', 'enum', 'const', 'anyOf', '$ref', 'minimum', 'maximum']);

/** Integer digits a generated number may have: every integer is then a safe integer. */
export const MAX_INT_DIGITS = 15;
const INT_LIMIT = 10 ** MAX_INT_DIGITS - 1;
/** Numbers have ≤ 15 integer digits and a 2-digit exponent: |x| < 1e115. */
const NUMBER_LIMIT = 1e115;

let nextId = 1;
const mk = <T extends Omit<Schema, 'id'>>(s: T): T & { id: number } => ({ ...s, id: nextId++ });

/** Any JSON value (json_object mode, or a schema without constraints), nesting ≤ depth. */
const anyCache = new Map<number, Schema>();
export function anySchema(depth = MAX_ANY_DEPTH): Schema {
  let s = anyCache.get(depth);
  if (!s) anyCache.set(depth, (s = mk({ k: 'any' as const, depth })));
  return s;
}

/** The alternatives a value of `any` schema can take. */
const anyAltCache = new Map<number, readonly Schema[]>();
export function anyAlternatives(depth: number): readonly Schema[] {
  let alts = anyAltCache.get(depth);
  if (alts) return alts;
  alts = [STRING, NUMBER, TRUE, FALSE, NULL];
  if (depth > 0) {
    const inner = anySchema(depth - 1);
    alts = [...alts, mk({ k: 'object' as const, props: [], extra: inner }), mk({ k: 'array' as const, items: inner, min: 0, max: Infinity })];
  }
  anyAltCache.set(depth, alts);
  return alts;
}
const STRING: Schema = mk({ k: 'string' as const, min: 0, max: MAX_STRING });
const NUMBER: Schema = mk({ k: 'number' as const, integer: false, neg: true, intDigits: MAX_INT_DIGITS });
const TRUE: Schema = mk({ k: 'lit' as const, text: 'true' });
const FALSE: Schema = mk({ k: 'lit' as const, text: 'false' });
const NULL: Schema = mk({ k: 'lit' as const, text: 'null' });

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function count(v: unknown, path: string, key: string): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new SchemaError(`${path}.${key} must be a non-negative integer`);
  return v;
}

/** Compile a JSON Schema (the root of `root` resolves $ref). `path` names it in errors. */
export function compileSchema(schema: unknown, path = 'schema'): Schema {
  return new Compiler(schema, path).compile(schema, path, []);
}

class Compiler {
  constructor(private readonly root: unknown, private readonly rootPath: string) {}

  compile(s: unknown, path: string, refs: readonly string[]): Schema {
    if (s === true) return anySchema();
    if (!isObj(s)) throw new SchemaError(`${path} must be a JSON Schema object`);
    for (const key of Object.keys(s)) {
      if (!KNOWN.has(key) && !ANNOTATIONS.has(key)) throw new SchemaError(`${path}: the keyword "${key}" is not supported`);
    }
    if (s['$ref'] !== undefined) return this.ref(s['$ref'], path, refs);
    if (s['const'] !== undefined) return mk({ k: 'lit' as const, text: JSON.stringify(s['const']) });
    if (s['enum'] !== undefined) {
      const e = s['enum'];
      if (!Array.isArray(e) || e.length === 0) throw new SchemaError(`${path}.enum must be a non-empty array`);
      const alts = e.map((v: unknown) => mk({ k: 'lit' as const, text: JSON.stringify(v) }));
      return alts.length === 1 ? alts[0]! : mk({ k: 'anyOf' as const, alts });
    }
    if (s['anyOf'] !== undefined) {
      const a = s['anyOf'];
      if (!Array.isArray(a) || a.length === 0) throw new SchemaError(`${path}.anyOf must be a non-empty array`);
      return mk({ k: 'anyOf' as const, alts: a.map((x: unknown, i) => this.compile(x, `${path}.anyOf[${i}]`, refs)) });
    }
    const t = s['type'];
    if (t === undefined) {
      if (s['properties'] !== undefined) return this.typed('object', s, path, refs);
      return anySchema();
    }
    const types = Array.isArray(t) ? t : [t];
    if (types.length === 0) throw new SchemaError(`${path}.type must not be empty`);
    const alts = types.map((x: unknown) => {
      if (typeof x !== 'string') throw new SchemaError(`${path}.type must be a string or a list of strings`);
      return this.typed(x, s, path, refs);
    });
    return alts.length === 1 ? alts[0]! : mk({ k: 'anyOf' as const, alts });
  }

  private ref(r: unknown, path: string, refs: readonly string[]): Schema {
    if (typeof r !== 'string') throw new SchemaError(`${path}.$ref must be a string`);
    const m = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(r);
    if (!m) throw new SchemaError(`${path}.$ref "${r}" is not supported (only #/$defs/NAME and #/definitions/NAME)`);
    if (refs.includes(r)) throw new SchemaError(`${path}.$ref "${r}" is recursive, which is not supported`);
    const defs = isObj(this.root) ? this.root[m[1]!] : undefined;
    const target = isObj(defs) ? defs[m[2]!] : undefined;
    if (target === undefined) throw new SchemaError(`${path}.$ref "${r}" does not resolve in ${this.rootPath}`);
    return this.compile(target, `${this.rootPath}.${m[1]}.${m[2]}`, [...refs, r]);
  }

  private typed(t: string, s: Obj, path: string, refs: readonly string[]): Schema {
    switch (t) {
      case 'string': {
        const min = count(s['minLength'], path, 'minLength') ?? 0;
        const max = Math.min(count(s['maxLength'], path, 'maxLength') ?? MAX_STRING, MAX_STRING);
        if (min > max) throw new SchemaError(`${path}: minLength ${min} is above maxLength ${max}`);
        return min === 0 && max === MAX_STRING ? STRING : mk({ k: 'string' as const, min, max });
      }
      case 'number':
      case 'integer':
        return this.number(t === 'integer', s, path);
      case 'boolean':
        return mk({ k: 'anyOf' as const, alts: [TRUE, FALSE] });
      case 'null':
        return NULL;
      case 'array': {
        const items = s['items'] === undefined ? anySchema(MAX_ANY_DEPTH - 1) : this.compile(s['items'], `${path}.items`, refs);
        const min = count(s['minItems'], path, 'minItems') ?? 0;
        const max = count(s['maxItems'], path, 'maxItems') ?? Infinity;
        if (min > max) throw new SchemaError(`${path}: minItems ${min} is above maxItems ${max}`);
        return mk({ k: 'array' as const, items, min, max });
      }
      case 'object':
        return this.object(s, path, refs);
      default:
        throw new SchemaError(`${path}.type "${t}" is not a JSON Schema type`);
    }
  }

  /** minimum / maximum are supported where the grammar can enforce them by its shape: a
   * minimum of 0 (no minus sign) or below every generated value; a maximum of 10^d − 1 for
   * integers (at most d digits) or above every generated value. */
  private number(integer: boolean, s: Obj, path: string): Schema {
    const min = s['minimum'];
    const max = s['maximum'];
    const limit = integer ? INT_LIMIT : NUMBER_LIMIT;
    if (min !== undefined && (typeof min !== 'number' || !(min === 0 || min <= -limit))) {
      throw new SchemaError(`${path}.minimum ${JSON.stringify(min)} is not supported (only 0, or at most ${-limit})`);
    }
    let intDigits = MAX_INT_DIGITS;
    if (max !== undefined) {
      if (typeof max !== 'number') throw new SchemaError(`${path}.maximum must be a number`);
      const d = integer && max > 0 ? Math.log10(max + 1) : NaN;
      if (Number.isInteger(d) && d <= MAX_INT_DIGITS) intDigits = d;
      else if (!(max >= limit)) {
        throw new SchemaError(`${path}.maximum ${max} is not supported (only ${integer ? '10^d - 1 (d ≤ 15), or ' : ''}at least ${limit})`);
      }
    }
    if (min === undefined && max === undefined && !integer) return NUMBER;
    return mk({ k: 'number' as const, integer, neg: min !== 0, intDigits });
  }

  private object(s: Obj, path: string, refs: readonly string[]): Schema {
    const props = s['properties'] ?? {};
    if (!isObj(props)) throw new SchemaError(`${path}.properties must be an object`);
    const req = s['required'] ?? [];
    if (!Array.isArray(req) || !req.every((r) => typeof r === 'string')) throw new SchemaError(`${path}.required must be a list of names`);
    for (const r of req as string[]) {
      if (!(r in props)) throw new SchemaError(`${path}.required names "${r}", which is not among the properties`);
    }
    const list: Prop[] = Object.entries(props).map(([name, ps]) => ({
      name, required: (req as string[]).includes(name), schema: this.compile(ps, `${path}.properties.${name}`, refs),
    }));
    const ap = s['additionalProperties'];
    let extra: Schema | null = null;
    if (list.length === 0 && ap !== false) extra = ap === undefined || ap === true ? anySchema(MAX_ANY_DEPTH - 1) : this.compile(ap, `${path}.additionalProperties`, refs);
    else if (ap !== undefined && ap !== false && ap !== true && list.length > 0) {
      throw new SchemaError(`${path}.additionalProperties as a schema is supported only for objects without properties`);
    }
    return mk({ k: 'object' as const, props: list, extra });
  }
}

/** A schema matching exactly `text` (raw text, not JSON-encoded). */
export function rawLiteral(text: string): Schema {
  return mk({ k: 'lit' as const, text });
}

export function literalChoice(alts: readonly Schema[]): Schema {
  return mk({ k: 'anyOf' as const, alts });
}
