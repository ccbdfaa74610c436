// A small JSON Schema validator for the tests (independent of the grammar code: JavaScript
// values and RegExp, no matcher): type, properties, required, additionalProperties (false or a
// schema), patternProperties, propertyNames, minProperties/maxProperties, items, prefixItems,
// minItems/maxItems, minLength/maxLength, pattern, minimum/maximum (and exclusive), integer
// multipleOf, enum, const, anyOf, allOf. Returns the first violation as a path, or null.
type S = Record<string, unknown>;

function typeOk(t: string, v: unknown): boolean {
  switch (t) {
    case 'object': return typeof v === 'object' && v !== null && !Array.isArray(v);
    case 'array': return Array.isArray(v);
    case 'string': return typeof v === 'string';
    case 'integer': return typeof v === 'number' && Number.isInteger(v);
    case 'number': return typeof v === 'number' && Number.isFinite(v);
    case 'boolean': return typeof v === 'boolean';
    case 'null': return v === null;
    default: return false;
  }
}

const re = (p: string): RegExp => new RegExp(p, 'u');
const num = (schema: S, k: string): number | null => (typeof schema[k] === 'number' ? schema[k] : null);

/** A subschema (true / false as JSON Schema booleans). */
function sub(x: unknown, v: unknown, path: string): string | null {
  if (x === true || x === undefined) return null;
  if (x === false) return `${path}: not allowed`;
  return violation(x as S, v, path);
}

function numberViolation(schema: S, v: number, path: string): string | null {
  if (num(schema, 'minimum') !== null && v < num(schema, 'minimum')!) return `${path}: below the minimum`;
  if (num(schema, 'maximum') !== null && v > num(schema, 'maximum')!) return `${path}: above the maximum`;
  if (num(schema, 'exclusiveMinimum') !== null && v <= num(schema, 'exclusiveMinimum')!) return `${path}: not above the exclusiveMinimum`;
  if (num(schema, 'exclusiveMaximum') !== null && v >= num(schema, 'exclusiveMaximum')!) return `${path}: not below the exclusiveMaximum`;
  const m = num(schema, 'multipleOf');
  if (m !== null && Number.isInteger(m) && !(Number.isInteger(v) && v % m === 0)) return `${path}: not a multiple of ${m}`;
  return null;
}

function stringViolation(schema: S, v: string, path: string): string | null {
  const n = [...v].length;
  if (typeof schema['minLength'] === 'number' && n < schema['minLength']) return `${path}: too short`;
  if (typeof schema['maxLength'] === 'number' && n > schema['maxLength']) return `${path}: too long`;
  if (typeof schema['pattern'] === 'string' && !re(schema['pattern']).test(v)) return `${path}: does not match ${schema['pattern']}`;
  return null;
}

function arrayViolation(schema: S, v: unknown[], path: string): string | null {
  if (typeof schema['minItems'] === 'number' && v.length < schema['minItems']) return `${path}: too few items`;
  if (typeof schema['maxItems'] === 'number' && v.length > schema['maxItems']) return `${path}: too many items`;
  // uniqueItems by JSON text: equal for the primitives (and key-ordered objects) these tests use
  if (schema['uniqueItems'] === true && new Set(v.map((x) => JSON.stringify(x))).size < v.length) return `${path}: items not unique`;
  const prefix = Array.isArray(schema['prefixItems']) ? schema['prefixItems'] : [];
  for (let i = 0; i < v.length; i++) {
    const e = sub(i < prefix.length ? prefix[i] : schema['items'], v[i], `${path}[${i}]`);
    if (e) return e;
  }
  return null;
}

function objectViolation(schema: S, o: S, path: string): string | null {
  const props = (schema['properties'] ?? {}) as Record<string, unknown>;
  const patterns = Object.entries((schema['patternProperties'] ?? {}) as Record<string, unknown>);
  const keys = Object.keys(o);
  for (const r of (schema['required'] ?? []) as string[]) if (!(r in o)) return `${path}: missing ${r}`;
  if (typeof schema['minProperties'] === 'number' && keys.length < schema['minProperties']) return `${path}: too few properties`;
  if (typeof schema['maxProperties'] === 'number' && keys.length > schema['maxProperties']) return `${path}: too many properties`;
  for (const [k, x] of Object.entries(o)) {
    const at = `${path}.${k}`;
    if (schema['propertyNames'] !== undefined) {
      const e = sub(schema['propertyNames'], k, `${at} (name)`);
      if (e) return e;
    }
    const matched = patterns.filter(([p]) => re(p).test(k));
    for (const [, ps] of matched) {
      const e = sub(ps, x, at);
      if (e) return e;
    }
    if (Object.hasOwn(props, k)) {
      const e = sub(props[k], x, at);
      if (e) return e;
    } else if (matched.length === 0) {
      const e = sub(schema['additionalProperties'], x, at);
      if (e) return `${e} (additional property)`;
    }
  }
  return null;
}

export function violation(schema: S, v: unknown, path = '$'): string | null {
  if (schema['const'] !== undefined && JSON.stringify(schema['const']) !== JSON.stringify(v)) return `${path}: not the const`;
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(v))) return `${path}: not in enum`;
  if (Array.isArray(schema['anyOf']) && !schema['anyOf'].some((a) => sub(a, v, path) === null)) return `${path}: no anyOf branch`;
  if (Array.isArray(schema['allOf'])) {
    for (const a of schema['allOf']) {
      const e = sub(a, v, path);
      if (e) return e;
    }
  }
  const t = schema['type'];
  if (t !== undefined && !(Array.isArray(t) ? t : [t]).some((x) => typeOk(x as string, v))) return `${path}: not of type ${JSON.stringify(t)}`;
  if (typeof v === 'number') return numberViolation(schema, v, path);
  if (typeof v === 'string') return stringViolation(schema, v, path);
  if (Array.isArray(v)) return arrayViolation(schema, v, path);
  if (typeof v === 'object' && v !== null) return objectViolation(schema, v as S, path);
  return null;
}
