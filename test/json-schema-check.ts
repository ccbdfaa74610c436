// A small JSON Schema validator for the tests (independent of the grammar code): type,
// properties, required, additionalProperties, items, minItems/maxItems, minLength/maxLength,
// minimum/maximum (and exclusive), enum, const, anyOf. Returns the first violation as a path, or null.
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

export function violation(schema: S, v: unknown, path = '$'): string | null {
  if (schema['const'] !== undefined && JSON.stringify(schema['const']) !== JSON.stringify(v)) return `${path}: not the const`;
  if (Array.isArray(schema['enum']) && !schema['enum'].some((e) => JSON.stringify(e) === JSON.stringify(v))) return `${path}: not in enum`;
  if (Array.isArray(schema['anyOf']) && !schema['anyOf'].some((a) => violation(a as S, v, path) === null)) return `${path}: no anyOf branch`;
  const t = schema['type'];
  if (t !== undefined && !(Array.isArray(t) ? t : [t]).some((x) => typeOk(x as string, v))) return `${path}: not of type ${JSON.stringify(t)}`;
  if (typeof v === 'number') {
    const n = (k: string): number | null => (typeof schema[k] === 'number' ? schema[k] : null);
    if (n('minimum') !== null && v < n('minimum')!) return `${path}: below the minimum`;
    if (n('maximum') !== null && v > n('maximum')!) return `${path}: above the maximum`;
    if (n('exclusiveMinimum') !== null && v <= n('exclusiveMinimum')!) return `${path}: not above the exclusiveMinimum`;
    if (n('exclusiveMaximum') !== null && v >= n('exclusiveMaximum')!) return `${path}: not below the exclusiveMaximum`;
  }
  if (typeof v === 'string') {
    const n = [...v].length;
    if (typeof schema['minLength'] === 'number' && n < schema['minLength']) return `${path}: too short`;
    if (typeof schema['maxLength'] === 'number' && n > schema['maxLength']) return `${path}: too long`;
  }
  if (Array.isArray(v)) {
    if (typeof schema['minItems'] === 'number' && v.length < schema['minItems']) return `${path}: too few items`;
    if (typeof schema['maxItems'] === 'number' && v.length > schema['maxItems']) return `${path}: too many items`;
    if (schema['items']) for (let i = 0; i < v.length; i++) {
      const e = violation(schema['items'] as S, v[i], `${path}[${i}]`);
      if (e) return e;
    }
  }
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    const o = v as S;
    const props = (schema['properties'] ?? {}) as Record<string, S>;
    for (const r of (schema['required'] ?? []) as string[]) if (!(r in o)) return `${path}: missing ${r}`;
    for (const [k, x] of Object.entries(o)) {
      if (props[k]) {
        const e = violation(props[k], x, `${path}.${k}`);
        if (e) return e;
      } else if (schema['additionalProperties'] === false) return `${path}: extra property ${k}`;
    }
  }
  return null;
}
