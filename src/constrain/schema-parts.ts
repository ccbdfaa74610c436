// Pieces of the JSON Schema compiler (schema.ts) that need none of its state: const values as
// schema nodes, propertyNames as a key node, base URIs, and where subschemas live.
import { arrayNode, intersectStrings, objectNode } from './merge.js';
import { deref, KEY_STRING, MAX_KEY, mk, type Schema, type StringNode, withoutLabels } from './nodes.js';
import { compileRegex } from './regex.js';

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keywords whose value is a schema or a list of schemas; keywords whose value maps names to schemas. */
export const SCHEMA_KEYWORDS = new Set(['additionalProperties', 'items', 'prefixItems', 'additionalItems', 'contains', 'propertyNames', 'not', 'if', 'then',
  'else', 'allOf', 'anyOf', 'oneOf', 'unevaluatedProperties', 'unevaluatedItems']);
export const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas', 'dependencies']);

/** Exactly the JSON value `v`: objects in any key order, numbers as JSON.stringify writes them. */
export function constSchema(v: unknown): Schema {
  if (Array.isArray(v)) return arrayNode(v.map(constSchema), null, v.length, v.length);
  if (isObj(v)) {
    const props = Object.entries(v).map(([name, x]) => ({ name, required: true, schema: constSchema(x) }));
    return objectNode(props, [{ patterns: [], extra: null }], KEY_STRING, 0, Infinity, []);
  }
  return mk({ k: 'lit' as const, text: JSON.stringify(v) });
}

/** The base URI of a schema without an $id of its own. */
export const DEFAULT_BASE = 'https://schema.deltaserve.invalid/root.json';
export const stripFragment = (u: string): string => u.replace(/#.*$/, '');
export function resolveUri(ref: string, base: string): string {
  try {
    const u = new URL(ref, base).href;
    return u.endsWith('#') ? u.slice(0, -1) : u;
  } catch {
    return ref;
  }
}

const NEVER_KEY: StringNode = mk({ k: 'string' as const, min: 0, max: MAX_KEY, res: [compileRegex('[]')] });

/** propertyNames (compiled) as the string node keys must match: strings, string literals or
 * anything; null for a union of several string schemas (not expressible as one). */
export function keyNode(compiled: Schema): StringNode | null {
  const s = deref(compiled);
  const alts = s.k === 'anyOf' ? s.alts.map(deref) : [s];
  if (alts.some((a) => a.k === 'any')) return KEY_STRING;
  const strings = alts.filter((a): a is StringNode => a.k === 'string');
  const lits = alts.filter((a) => a.k === 'lit' && a.text.startsWith('"')).map((a) => (a.k === 'lit' ? (JSON.parse(a.text) as string) : ''));
  const capped = (x: StringNode): StringNode => {
    const r = intersectStrings(withoutLabels(x), KEY_STRING); // keys run no label check
    return r.k === 'string' ? r : NEVER_KEY;
  };
  if (strings.length === 1 && lits.length === 0) return capped(strings[0]!);
  if (strings.length === 0) {
    if (lits.length === 0) return NEVER_KEY;
    const escape = (t: string): string => [...t].map((c) => `\\u{${c.codePointAt(0)!.toString(16)}}`).join('');
    return mk({ k: 'string' as const, min: 0, max: MAX_KEY, res: [compileRegex(`^(?:${lits.map(escape).join('|')})$`)] });
  }
  return null;
}
