// A tool call's arguments while the call is being generated, for streaming them as they come.
//
// previewCall(body) reads the text after `<tool_call>` so far and returns the call's name (once
// the header names a declared tool) and the arguments' JSON text as far as it is certain.
// Invariants (the tests check them at every split of recorded calls):
// - monotone: while a call stays well-formed, the preview of a longer body extends the preview
//   of a shorter one, so the difference can be sent as the next fragment;
// - at the close, the preview is exactly the `arguments` the call parses to (argumentsText).
//
// XML style (`<function=NAME><parameter=K>\nV\n</parameter>…</function>`): the JSON is built
// as `{"K":V,…}`; a string value streams character by character (a possible end tag, the
// newline the template puts before `</parameter>` and a lone high surrogate wait); a value of
// any other declared type is sent whole at its `</parameter>` (its conversion needs all of it).
// JSON style (`{"name": NAME, "arguments": {…}}`): the arguments object's text streams as
// written, less trailing whitespace and a `}` that may close the outer object; arguments given
// as a string, or keys in another order, are sent whole at the close.
import { type FunctionTool, type JsonSchema, type ToolFormat } from './types.js';

export const PARAM_CLOSE = '</parameter>';
const FUNCTION_HEAD = /^\s*<function=([^>\n]+)>/;
const PARAM_HEAD = /^\s*<parameter=([^>\n]+)>/;
const FUNCTION_END = /^\s*<\/function>/;
const JSON_HEAD = /^\s*\{\s*"name"\s*:\s*("(?:[^"\\\n]|\\.)*")\s*,\s*"(?:arguments|parameters)"\s*:\s*/;

/** Length of the longest suffix of `s` that is a proper prefix of `tag`. */
export function partialTag(s: string, tag: string): number {
  for (let n = Math.min(s.length, tag.length - 1); n > 0; n--) if (s.endsWith(tag.slice(0, n))) return n;
  return 0;
}

export interface CallPreview {
  readonly name: string;
  /** The arguments' JSON text as far as it is certain ('' before anything is). */
  readonly args: string;
}

/** The preview of a call whose body so far is `body` (a partial `</tool_call>` at its end is
 * ignored); null until the body names a declared tool. */
export function previewCall(body: string, format: ToolFormat, tools: ReadonlyMap<string, FunctionTool>, closeTag: string): CallPreview | null {
  const text = body.slice(0, body.length - partialTag(body, closeTag));
  return format === 'xml' ? previewXml(text, tools) : previewJson(text, tools);
}

function previewJson(body: string, tools: ReadonlyMap<string, FunctionTool>): CallPreview | null {
  const m = JSON_HEAD.exec(body);
  if (!m) return null;
  let name: unknown;
  try {
    name = JSON.parse(m[1]!);
  } catch {
    return null;
  }
  if (typeof name !== 'string' || !tools.has(name)) return null;
  const rest = body.slice(m[0].length);
  if (!rest.startsWith('{')) return { name, args: '' };
  return { name, args: rest.slice(0, heldTail(rest)) };
}

const isWs = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Where the certain part of a streaming arguments object ends: before its trailing
 * whitespace and a `}` that may close the outer object (scans only the tail). */
function heldTail(s: string): number {
  let end = s.length;
  while (end > 0 && isWs(s.charCodeAt(end - 1))) end--;
  if (end > 0 && s.charCodeAt(end - 1) === 0x7d) end--;
  while (end > 0 && isWs(s.charCodeAt(end - 1))) end--;
  return end;
}

/** The arguments text of a complete JSON-style body when its header streams (name first, then
 * an arguments object): the object's text as written; null otherwise. */
export function jsonArgumentsText(body: string): string | null {
  const m = JSON_HEAD.exec(body);
  if (!m) return null;
  const rest = body.slice(m[0].length);
  if (!rest.startsWith('{') || !/\}\s*$/.test(rest)) return null;
  return rest.replace(/\s*\}\s*$/, '');
}

/** JSON Schema types a parameter may take (from type, anyOf / oneOf, enum). */
export function schemaTypes(schema: JsonSchema | undefined): string[] {
  if (!schema) return [];
  const t = schema['type'];
  if (typeof t === 'string') return [t];
  if (Array.isArray(t)) return t.filter((x): x is string => typeof x === 'string');
  for (const key of ['anyOf', 'oneOf']) {
    const alts = schema[key];
    if (Array.isArray(alts)) return alts.flatMap((a) => schemaTypes(a as JsonSchema));
  }
  if (Array.isArray(schema['enum'])) return [...new Set((schema['enum'] as unknown[]).map(jsonTypeOf))];
  return [];
}

export function jsonTypeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** A value streams as a string when it can only be one (a `null` type could turn it into null). */
function streamsAsString(schema: JsonSchema | undefined): boolean {
  const types = schemaTypes(schema);
  return types.length === 0 || (types.includes('string') && !types.includes('null'));
}

/** One `"K":` member head; `first` opens the object. */
export const memberHead = (key: string, first: boolean): string => `${first ? '{' : ','}${JSON.stringify(key)}:`;

/** The certain part of a string value being generated (`raw`: the text after `<parameter=K>`). */
function openStringValue(raw: string): string {
  let v = raw.slice(0, raw.length - partialTag(raw, PARAM_CLOSE));
  if (v.startsWith('\n')) v = v.slice(1);
  if (v.endsWith('\n')) v = v.slice(0, -1); // maybe the template's newline before the end tag
  const last = v.charCodeAt(v.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) v = v.slice(0, -1);
  return JSON.stringify(v).slice(0, -1);
}

function previewXml(body: string, tools: ReadonlyMap<string, FunctionTool>): CallPreview | null {
  const m = FUNCTION_HEAD.exec(body);
  if (!m) return null;
  const name = m[1]!.trim();
  const tool = tools.get(name);
  if (!tool) return null;
  const props = (tool.parameters['properties'] ?? {}) as Record<string, JsonSchema>;
  const convert = xmlConverter(props);
  let rest = body.slice(m[0].length);
  let args = '';
  const seen = new Set<string>();
  for (;;) {
    const p = PARAM_HEAD.exec(rest);
    if (!p) break;
    const key = p[1]!.trim();
    if (seen.has(key)) return { name, args }; // malformed: nothing more is certain
    const value = rest.slice(p[0].length);
    const head = memberHead(key, seen.size === 0);
    const end = value.indexOf(PARAM_CLOSE);
    if (end < 0) return { name, args: args + head + (streamsAsString(props[key]) ? openStringValue(value) : '') };
    args += head + JSON.stringify(convert(key, value.slice(0, end)));
    seen.add(key);
    rest = value.slice(end + PARAM_CLOSE.length);
  }
  if (FUNCTION_END.test(rest)) args += seen.size === 0 ? '{}' : '}';
  return { name, args };
}

function xmlConverter(props: Record<string, JsonSchema>): (key: string, raw: string) => unknown {
  return (key, raw) => xmlValue(stripOneNewline(raw), props[key]);
}

/** An XML parameter value as the JSON type its schema declares; text when it does not
 * convert (or the schema says string / declares nothing). */
export function xmlValue(raw: string, schema: JsonSchema | undefined): unknown {
  const types = schemaTypes(schema);
  if (types.length === 0 || types.includes('string')) {
    if (types.includes('null') && raw.trim() === 'null') return null;
    return raw;
  }
  const s = raw.trim();
  if (types.includes('null') && s === 'null') return null;
  if (types.includes('boolean') && (s === 'true' || s === 'false')) return s === 'true';
  if ((types.includes('integer') || types.includes('number')) && /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(s)) {
    const n = Number(s);
    if (types.includes('number') || Number.isInteger(n)) return n;
  }
  if (types.includes('object') || types.includes('array')) {
    try {
      const v: unknown = JSON.parse(s);
      if (types.includes(jsonTypeOf(v))) return v;
    } catch {
      // not JSON: keep the text
    }
  }
  return raw;
}

/** The template writes `<parameter=ARG>\nVALUE\n</parameter>`: drop exactly those newlines. */
export function stripOneNewline(s: string): string {
  let v = s.startsWith('\n') ? s.slice(1) : s;
  if (v.endsWith('\n')) v = v.slice(0, -1);
  return v;
}
