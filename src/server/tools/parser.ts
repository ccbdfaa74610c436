// Tool-call parsing of the answer text (after the reasoning block), streaming and at once.
//
// Rules (streaming == at once for every split of the text; the tests check every split):
// - A call is the text from `<tool_call>` to the next `</tool_call>`. Its body is parsed when
//   the closing tag arrives: XML style `<function=NAME><parameter=ARG>\nVALUE\n</parameter>…
//   </function>` (values converted to the JSON type the tool's schema declares) or JSON style
//   `{"name": NAME, "arguments": {…}}`. A body that does not parse, or names no declared tool,
//   is returned as text, tags included. A call never closed (output cut short) is text too.
// - Whitespace is held until something other than whitespace follows: whitespace right before
//   a call, between calls and after the last call is dropped; otherwise it is text.
// - Text is never delayed longer than needed: only a possible partial `<tool_call>` tag and
//   held whitespace wait for the next push.
import { type FunctionTool, type JsonSchema, type ParsedToolCall, type ToolFormat } from './types.js';

export const CALL_OPEN = '<tool_call>';
export const CALL_CLOSE = '</tool_call>';

export type ToolEvent = { readonly type: 'text'; readonly text: string } | { readonly type: 'call'; readonly call: ParsedToolCall };

/** Length of the longest suffix of `s` that is a proper prefix of `tag`. */
function partialTag(s: string, tag: string): number {
  for (let n = Math.min(s.length, tag.length - 1); n > 0; n--) if (s.endsWith(tag.slice(0, n))) return n;
  return 0;
}

export class ToolCallParser {
  private buf = '';
  private inCall = false;
  /** Whitespace not yet classified (dropped if a call or the end follows a call). */
  private heldWs = '';
  /** Whitespace held before the open call: dropped if it parses, text if not. */
  private callWs = '';
  private calls = 0;
  private readonly byName: ReadonlyMap<string, FunctionTool>;

  constructor(private readonly format: ToolFormat, tools: readonly FunctionTool[]) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  /** Calls parsed so far. */
  get callCount(): number {
    return this.calls;
  }

  push(text: string): ToolEvent[] {
    const out: ToolEvent[] = [];
    this.buf += text;
    this.step(out);
    return out;
  }

  /** End of the output: an unclosed call or a partial tag is text. */
  flush(): ToolEvent[] {
    const out: ToolEvent[] = [];
    this.step(out);
    const rest = this.inCall ? CALL_OPEN + this.buf : this.buf;
    if (this.inCall) this.heldWs = this.callWs;
    this.buf = '';
    this.inCall = false;
    if (rest.length > 0) this.text(out, rest);
    else if (this.calls === 0 && this.heldWs) this.emit(out, this.heldWs);
    this.heldWs = '';
    return out;
  }

  private step(out: ToolEvent[]): void {
    for (;;) {
      if (this.inCall) {
        const end = this.buf.indexOf(CALL_CLOSE);
        if (end < 0) return;
        const body = this.buf.slice(0, end);
        this.buf = this.buf.slice(end + CALL_CLOSE.length);
        this.inCall = false;
        const call = parseCallBody(body, this.format, this.byName);
        if (call) {
          this.calls++;
          out.push({ type: 'call', call });
        } else {
          this.heldWs = this.callWs;
          this.text(out, CALL_OPEN + body + CALL_CLOSE);
        }
        this.callWs = '';
        continue;
      }
      const start = this.buf.indexOf(CALL_OPEN);
      if (start >= 0) {
        this.text(out, this.buf.slice(0, start), true);
        this.callWs = this.heldWs;
        this.heldWs = '';
        this.buf = this.buf.slice(start + CALL_OPEN.length);
        this.inCall = true;
        continue;
      }
      const keep = partialTag(this.buf, CALL_OPEN);
      this.text(out, this.buf.slice(0, this.buf.length - keep), true);
      this.buf = this.buf.slice(this.buf.length - keep);
      return;
    }
  }

  /** Emit `s` as text; its trailing whitespace is held when `holdTail`. */
  private text(out: ToolEvent[], s: string, holdTail = false): void {
    if (s.length === 0) return;
    const trimmed = holdTail ? s.replace(/\s+$/, '') : s;
    if (trimmed.length === 0) {
      this.heldWs += s;
      return;
    }
    this.emit(out, this.heldWs + trimmed);
    this.heldWs = s.slice(trimmed.length);
  }

  private emit(out: ToolEvent[], s: string): void {
    const last = out[out.length - 1];
    if (last?.type === 'text') out[out.length - 1] = { type: 'text', text: last.text + s };
    else out.push({ type: 'text', text: s });
  }
}

/** At-once form: the answer's text (null when it is empty and there are calls) and calls. */
export function parseToolCalls(text: string, format: ToolFormat, tools: readonly FunctionTool[]): { content: string; calls: ParsedToolCall[] } {
  const p = new ToolCallParser(format, tools);
  const events = [...p.push(text), ...p.flush()];
  let content = '';
  const calls: ParsedToolCall[] = [];
  for (const e of events) {
    if (e.type === 'text') content += e.text;
    else calls.push(e.call);
  }
  return { content, calls };
}

/** Parse the text between `<tool_call>` and `</tool_call>`; null when malformed. */
export function parseCallBody(body: string, format: ToolFormat, tools: ReadonlyMap<string, FunctionTool>): ParsedToolCall | null {
  return format === 'xml' ? parseXmlCall(body, tools) : parseJsonCall(body, tools);
}

function parseJsonCall(body: string, tools: ReadonlyMap<string, FunctionTool>): ParsedToolCall | null {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const o = v as Record<string, unknown>;
  const name = o['name'];
  if (typeof name !== 'string' || !tools.has(name)) return null;
  let args = o['arguments'] ?? o['parameters'] ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      return null;
    }
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return null;
  return { name, arguments: JSON.stringify(args) };
}

const FUNCTION_RE = /^\s*<function=([^>\n]+)>([\s\S]*)<\/function>\s*$/;
const PARAM_RE = /^\s*<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/;

function parseXmlCall(body: string, tools: ReadonlyMap<string, FunctionTool>): ParsedToolCall | null {
  const m = FUNCTION_RE.exec(body);
  if (!m) return null;
  const name = m[1]!.trim();
  const tool = tools.get(name);
  if (!tool) return null;
  const props = (tool.parameters['properties'] ?? {}) as Record<string, JsonSchema>;
  const args: Record<string, unknown> = {};
  let rest = m[2]!;
  for (;;) {
    const p = PARAM_RE.exec(rest);
    if (!p) break;
    const key = p[1]!.trim();
    if (Object.prototype.hasOwnProperty.call(args, key)) return null;
    args[key] = xmlValue(stripOneNewline(p[2]!), props[key]);
    rest = rest.slice(p[0].length);
  }
  if (rest.trim().length > 0) return null;
  return { name, arguments: JSON.stringify(args) };
}

/** The template writes `<parameter=ARG>\nVALUE\n</parameter>`: drop exactly those newlines. */
function stripOneNewline(s: string): string {
  let v = s.startsWith('\n') ? s.slice(1) : s;
  if (v.endsWith('\n')) v = v.slice(0, -1);
  return v;
}

function schemaTypes(schema: JsonSchema | undefined): string[] {
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

function jsonTypeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
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
