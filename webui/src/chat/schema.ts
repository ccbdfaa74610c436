// Checking a structured answer against the JSON schema it was asked to follow, so the page
// can show "valid" or name what is wrong. Covers the keywords a chat answer's schema
// usually has: type, properties, required, additionalProperties, items, enum, const,
// anyOf / oneOf, minimum / maximum, minLength / maxLength, minItems / maxItems, pattern.
export type Schema = Record<string, unknown> | boolean;

const typeOf = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' && Number.isInteger(v) ? 'integer' : typeof v;

function typeMatches(v: unknown, t: string): boolean {
  const actual = typeOf(v);
  return actual === t || (t === 'number' && actual === 'integer');
}

/** Problems of `v` against `s` ("$.a[0]: expected a string"); empty = valid. */
export function validate(v: unknown, s: Schema, path = '$'): string[] {
  if (s === true) return [];
  if (s === false) return [`${path}: no value is allowed here`];
  const errs: string[] = [];
  const types = s['type'] === undefined ? null : Array.isArray(s['type']) ? (s['type'] as string[]) : [s['type'] as string];
  if (types && !types.some((t) => typeMatches(v, t))) return [`${path}: expected ${types.join(' or ')}, got ${typeOf(v)}`];
  if (Array.isArray(s['enum']) && !s['enum'].some((e) => JSON.stringify(e) === JSON.stringify(v))) {
    errs.push(`${path}: must be one of ${JSON.stringify(s['enum'])}`);
  }
  if ('const' in s && JSON.stringify(s['const']) !== JSON.stringify(v)) errs.push(`${path}: must be ${JSON.stringify(s['const'])}`);
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alts = s[key];
    if (Array.isArray(alts)) {
      const ok = alts.filter((a) => validate(v, a as Schema, path).length === 0).length;
      if (key === 'anyOf' ? ok === 0 : ok !== 1) errs.push(`${path}: matches ${ok} of the ${key} alternatives`);
    }
  }
  if (typeof v === 'number') errs.push(...numberProblems(v, s, path));
  if (typeof v === 'string') errs.push(...stringProblems(v, s, path));
  if (Array.isArray(v)) errs.push(...arrayProblems(v, s, path));
  else if (typeOf(v) === 'object') errs.push(...objectProblems(v as Record<string, unknown>, s, path));
  return errs;
}

function numberProblems(v: number, s: Record<string, unknown>, path: string): string[] {
  const errs: string[] = [];
  if (typeof s['minimum'] === 'number' && v < s['minimum']) errs.push(`${path}: must be ≥ ${s['minimum']}`);
  if (typeof s['maximum'] === 'number' && v > s['maximum']) errs.push(`${path}: must be ≤ ${s['maximum']}`);
  return errs;
}

function stringProblems(v: string, s: Record<string, unknown>, path: string): string[] {
  const errs: string[] = [];
  const n = [...v].length;
  if (typeof s['minLength'] === 'number' && n < s['minLength']) errs.push(`${path}: shorter than ${s['minLength']}`);
  if (typeof s['maxLength'] === 'number' && n > s['maxLength']) errs.push(`${path}: longer than ${s['maxLength']}`);
  if (typeof s['pattern'] === 'string') {
    try {
      if (!new RegExp(s['pattern'], 'u').test(v)) errs.push(`${path}: does not match /${s['pattern']}/`);
    } catch {
      // a pattern this browser cannot compile is not checked
    }
  }
  return errs;
}

function arrayProblems(v: unknown[], s: Record<string, unknown>, path: string): string[] {
  const errs: string[] = [];
  if (typeof s['minItems'] === 'number' && v.length < s['minItems']) errs.push(`${path}: fewer than ${s['minItems']} items`);
  if (typeof s['maxItems'] === 'number' && v.length > s['maxItems']) errs.push(`${path}: more than ${s['maxItems']} items`);
  const items = s['items'];
  if (items !== undefined && (typeof items === 'boolean' || typeof items === 'object')) {
    v.forEach((x, i) => errs.push(...validate(x, items as Schema, `${path}[${i}]`)));
  }
  return errs;
}

function objectProblems(v: Record<string, unknown>, s: Record<string, unknown>, path: string): string[] {
  const errs: string[] = [];
  const props = (typeof s['properties'] === 'object' && s['properties'] !== null ? s['properties'] : {}) as Record<string, Schema>;
  for (const r of Array.isArray(s['required']) ? (s['required'] as string[]) : []) {
    if (!(r in v)) errs.push(`${path}: missing required property "${r}"`);
  }
  for (const [k, x] of Object.entries(v)) {
    const sub = props[k];
    if (sub !== undefined) errs.push(...validate(x, sub, `${path}.${k}`));
    else if (s['additionalProperties'] === false) errs.push(`${path}: property "${k}" is not allowed`);
    else if (typeof s['additionalProperties'] === 'object') errs.push(...validate(x, s['additionalProperties'] as Schema, `${path}.${k}`));
  }
  return errs;
}
