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
import { jsonArgumentsText, memberHead, partialTag, stripOneNewline, xmlValue } from './stream-args.js';
import { type FunctionTool, type JsonSchema, type ParsedToolCall, type ToolFormat } from './types.js';
import { CALL_CLOSE, CALL_OPEN } from '../../../frontend/tool-types.js';

export { xmlValue } from './stream-args.js';

export { CALL_CLOSE, CALL_OPEN };

export type ToolEvent =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'call'; readonly call: ParsedToolCall }
  /** (marks mode only) the open call turned out malformed or was cut short; `text` is what
   * the at-once form reports as text for it (whitespace before it included). */
  | { readonly type: 'fail'; readonly text: string };

export class ToolCallParser {
  private buf = '';
  private inCall = false;
  /** Whitespace not yet classified (dropped if a call or the end follows a call). */
  private heldWs = '';
  /** Whitespace held before the open call: dropped if it parses, text if not. */
  private callWs = '';
  private calls = 0;
  private readonly byName: ReadonlyMap<string, FunctionTool>;

  /** `marks`: report a failed call as a `fail` event instead of text (for callers that
   * streamed the call while it was open). */
  constructor(readonly format: ToolFormat, tools: readonly FunctionTool[], private readonly marks = false) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  /** The declared tools by name. */
  get tools(): ReadonlyMap<string, FunctionTool> {
    return this.byName;
  }

  /** The text after the open call's `<tool_call>` so far, or null outside a call. */
  get openBody(): string | null {
    return this.inCall ? this.buf : null;
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
    if (this.inCall && this.marks) {
      out.push({ type: 'fail', text: this.callWs + CALL_OPEN + this.buf });
      this.buf = '';
      this.callWs = '';
      this.inCall = false;
    }
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
        } else if (this.marks) out.push({ type: 'fail', text: this.callWs + CALL_OPEN + body + CALL_CLOSE });
        else {
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
    else if (e.type === 'call') calls.push(e.call);
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
  // the object's text as written when it streamed so (stream-args.ts), else re-serialized
  return { name, arguments: jsonArgumentsText(body) ?? JSON.stringify(args) };
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
  // the JSON text is built member by member, as it streams (stream-args.ts)
  let args = '';
  const seen = new Set<string>();
  let rest = m[2]!;
  for (;;) {
    const p = PARAM_RE.exec(rest);
    if (!p) break;
    const key = p[1]!.trim();
    if (seen.has(key)) return null;
    args += memberHead(key, seen.size === 0) + JSON.stringify(xmlValue(stripOneNewline(p[2]!), props[key]));
    seen.add(key);
    rest = rest.slice(p[0].length);
  }
  if (rest.trim().length > 0) return null;
  return { name, arguments: seen.size === 0 ? '{}' : `${args}}` };
}
