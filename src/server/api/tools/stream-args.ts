// A tool call's arguments while the call is being generated, for streaming them as they come.
//
// CallPreviewer.update(body) reads the text after `<tool_call>` so far and returns the call's
// name (once the header names a declared tool) and the arguments' JSON text as far as it is
// certain.
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

/** The preview of a call whose body so far is `body` (stateless form of CallPreviewer). */
export function previewCall(body: string, format: ToolFormat, tools: ReadonlyMap<string, FunctionTool>, closeTag: string): CallPreview | null {
  const p = new CallPreviewer(format, tools, closeTag).update(body);
  return p && { name: p.name, args: p.delta };
}

/** An XML parameter whose value is being generated. */
interface OpenValue {
  readonly key: string;
  /** `"K":` (with `{` or `,` before it). */
  readonly head: string;
  readonly start: number;
  readonly asString: boolean;
  /** Where to look for the end tag next (it cannot end before). */
  searchFrom: number;
  /** String values: raw text consumed (escaped and sent) up to here. */
  rawDone: number;
  /** Characters of this member sent so far. */
  sent: number;
}

/**
 * The preview of one call, updated as its body grows: each update returns the arguments text
 * that became certain since the last one, reading only what is new since the last stable
 * point (completed members, the sent part of an open string), so a long call costs time
 * linear in its length. `update(body)` must get the same body extended each time.
 */
export class CallPreviewer {
  private name: string | null = null;
  /** Body index where the arguments start (JSON) or the next member starts (XML). */
  private pos = 0;
  /** JSON: characters of the arguments object sent. */
  private sent = 0;
  private readonly seen = new Set<string>();
  private open: OpenValue | null = null;
  /** XML: `</function>` seen (the arguments are complete) or the call broke. */
  private ended = false;
  private props: Record<string, JsonSchema> = {};

  constructor(private readonly format: ToolFormat, private readonly tools: ReadonlyMap<string, FunctionTool>, private readonly closeTag: string) {}

  /** The call's name and the new certain arguments text; null until the header names a tool. */
  update(fullBody: string): { readonly name: string; readonly delta: string } | null {
    // a partial `</tool_call>` at the end may still become the close
    const body = fullBody.slice(0, fullBody.length - partialTag(fullBody.slice(-this.closeTag.length), this.closeTag));
    if (this.name === null && !this.header(body)) return null;
    return { name: this.name!, delta: this.format === 'json' ? this.jsonDelta(body) : this.xmlDelta(body) };
  }

  private header(body: string): boolean {
    if (this.format === 'json') {
      const m = JSON_HEAD.exec(body);
      if (!m) return false;
      let name: unknown;
      try {
        name = JSON.parse(m[1]!);
      } catch {
        return false;
      }
      if (typeof name !== 'string' || !this.tools.has(name)) return false;
      this.name = name;
      this.pos = m[0].length;
      return true;
    }
    const m = FUNCTION_HEAD.exec(body);
    const tool = m ? this.tools.get(m[1]!.trim()) : undefined;
    if (!m || !tool) return false;
    this.name = tool.name;
    this.props = (tool.parameters['properties'] ?? {}) as Record<string, JsonSchema>;
    this.pos = m[0].length;
    return true;
  }

  /** The arguments object as written, less its held tail; a string is sent whole at the close. */
  private jsonDelta(body: string): string {
    if (this.sent === 0) while (isWs(body.charCodeAt(this.pos))) this.pos++;
    if (body.charCodeAt(this.pos) !== 0x7b) return '';
    const end = heldTail(body);
    if (end <= this.pos + this.sent) return '';
    const delta = body.slice(this.pos + this.sent, end);
    this.sent = end - this.pos;
    return delta;
  }

  private xmlDelta(body: string): string {
    let out = '';
    while (!this.ended) {
      if (!this.open) {
        const rest = body.slice(this.pos);
        const p = PARAM_HEAD.exec(rest);
        if (p) {
          const key = p[1]!.trim();
          if (this.seen.has(key)) this.ended = true; // malformed: nothing more is certain
          else {
            const start = this.pos + p[0].length;
            const asString = streamsAsString(this.props[key]);
            this.open = { key, head: memberHead(key, this.seen.size === 0), start, asString, searchFrom: start, rawDone: start, sent: 0 };
          }
          continue;
        }
        if (FUNCTION_END.test(rest)) {
          out += this.seen.size === 0 ? '{}' : '}';
          this.ended = true;
        }
        break;
      }
      const o = this.open;
      const end = body.indexOf(PARAM_CLOSE, o.searchFrom);
      if (end < 0) {
        o.searchFrom = Math.max(o.start, body.length - PARAM_CLOSE.length + 1);
        return out + this.openDelta(o, body);
      }
      const member = o.head + JSON.stringify(xmlValue(stripOneNewline(body.slice(o.start, end)), this.props[o.key]));
      out += member.slice(o.sent);
      this.seen.add(o.key);
      this.pos = end + PARAM_CLOSE.length;
      this.open = null;
    }
    return out;
  }

  /** What became certain of an open member: its head, then for a string its opening quote and
   * escaped text, less one leading newline, a possible end tag, the newline the template
   * writes before it, and a lone high surrogate. */
  private openDelta(o: OpenValue, body: string): string {
    let out = '';
    if (o.sent === 0) out = o.head + (o.asString ? '"' : '');
    if (o.asString) {
      if (o.rawDone === o.start && body.length > o.start && body.charCodeAt(o.start) === 0x0a) o.rawDone++;
      let end = body.length - partialTag(body.slice(-PARAM_CLOSE.length), PARAM_CLOSE);
      if (end > o.rawDone && body.charCodeAt(end - 1) === 0x0a) end--;
      const last = body.charCodeAt(end - 1);
      if (end > o.rawDone && last >= 0xd800 && last <= 0xdbff) end--;
      if (end > o.rawDone && (o.rawDone > o.start || body.length > o.start)) {
        out += JSON.stringify(body.slice(o.rawDone, end)).slice(1, -1);
        o.rawDone = end;
      }
    }
    o.sent += out.length;
    return out;
  }
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
