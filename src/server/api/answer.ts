// The generated text of a chat turn as typed parts, shared by every chat-style API (chat
// completions, responses, messages): reasoning (inside <think>…</think>), answer text and
// tool calls (parsed out of the answer when the request has tools). Streaming and at once
// give the same parts (both run the same splitters).
//
// Incremental mode (streaming routes): a call is reported while it is generated — a
// `tool_call_start` (id, name) once its header names a declared tool, `tool_call_delta`
// fragments of its arguments' JSON as they become certain (tools/stream-args.ts), then the
// `tool_call` itself, whose arguments are exactly the fragments joined. A started call that
// turns out malformed, or is cut short, ends with `tool_call_fail` instead (what was sent
// cannot be taken back; the at-once form reports such a call as text). A call that never
// started (unknown tool, unparsable header) is text in both forms.
import { ReasoningSplitter } from '../../tokenizer/reasoning.js';
import { CALL_CLOSE, ToolCallParser, type ToolEvent } from './tools/parser.js';
import { CallPreviewer } from './tools/stream-args.js';
import { type ParsedToolCall, type ToolSetup, toolCallId } from './tools/types.js';

export type AnswerPart =
  | { readonly type: 'reasoning'; readonly text: string }
  | { readonly type: 'content'; readonly text: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly call: ParsedToolCall }
  | { readonly type: 'tool_call_start'; readonly id: string; readonly name: string }
  | { readonly type: 'tool_call_delta'; readonly id: string; readonly text: string }
  | { readonly type: 'tool_call_fail'; readonly id: string };

/** The call being streamed (incremental mode). */
interface OpenCall {
  readonly id: string;
  /** Characters of argument text sent so far. */
  sent: number;
}

export class AnswerStream {
  private readonly reasoning: ReasoningSplitter;
  private readonly tools: ToolCallParser | null;
  /** parallel_tool_calls false: calls after the first are dropped. */
  private readonly parallel: boolean;
  /** Calls begun (incremental) or emitted (at once); with parallel false only the first counts. */
  private begun = 0;
  private reported = 0;
  private open: OpenCall | null = null;
  /** The preview of the parser's open call (incremental mode; null outside a call). */
  private previewer: CallPreviewer | null = null;

  /** `thinking`: the prompt opened a reasoning block; `tools`: parse calls (null = off, or
   * tool_choice none); `incremental`: stream calls while they are generated. */
  constructor(thinking: boolean, tools: ToolSetup | null, private readonly idPrefix = 'call_', private readonly incremental = false) {
    this.reasoning = new ReasoningSplitter(thinking);
    this.tools = tools && tools.choice.kind !== 'none' ? new ToolCallParser(tools.format, tools.tools, incremental) : null;
    this.parallel = tools?.parallel ?? true;
  }

  get hasReasoning(): boolean {
    return this.reasoning.hasReasoning;
  }

  /** Complete calls reported so far. */
  get callCount(): number {
    return this.reported;
  }

  push(text: string): AnswerPart[] {
    return this.parts(this.reasoning.push(text), false);
  }

  flush(): AnswerPart[] {
    return this.parts(this.reasoning.flush(), true);
  }

  private parts(d: { reasoning: string; content: string }, end: boolean): AnswerPart[] {
    const out: AnswerPart[] = [];
    if (d.reasoning) out.push({ type: 'reasoning', text: d.reasoning });
    if (!this.tools) {
      if (d.content) out.push({ type: 'content', text: d.content });
      return out;
    }
    const events = d.content ? this.tools.push(d.content) : [];
    if (end) events.push(...this.tools.flush());
    for (const e of events) this.event(e, out);
    if (this.incremental && !end) this.preview(out);
    return out;
  }

  private event(e: ToolEvent, out: AnswerPart[]): void {
    if (e.type === 'text') return void out.push({ type: 'content', text: e.text });
    if (!this.incremental) {
      if (e.type === 'call' && (this.begun++ === 0 || this.parallel)) {
        this.reported++;
        out.push({ type: 'tool_call', id: toolCallId(this.idPrefix), call: e.call });
      } else if (e.type === 'fail') out.push({ type: 'content', text: e.text });
      return;
    }
    const open = this.open;
    this.open = null;
    this.previewer = null;
    if (e.type === 'fail') {
      out.push(open ? { type: 'tool_call_fail', id: open.id } : { type: 'content', text: e.text });
      return;
    }
    const call = open ?? this.begin(e.call.name, out);
    if (!call) return; // a dropped call (parallel_tool_calls false)
    // the rest of the arguments (all of them for a call that never streamed): the preview
    // was a prefix of them (stream-args.ts)
    this.send(call, e.call.arguments.slice(call.sent), out);
    this.reported++;
    out.push({ type: 'tool_call', id: call.id, call: e.call });
  }

  /** Start the open call once its header is known; send its new certain argument text. */
  private preview(out: AnswerPart[]): void {
    const body = this.tools!.openBody;
    if (body === null) return;
    this.previewer ??= new CallPreviewer(this.tools!.format, this.tools!.tools, CALL_CLOSE);
    const p = this.previewer.update(body);
    if (!p) return;
    this.open ??= this.begin(p.name, out);
    if (this.open) this.send(this.open, p.delta, out);
  }

  private begin(name: string, out: AnswerPart[]): OpenCall | null {
    if (this.begun++ > 0 && !this.parallel) return null;
    const call: OpenCall = { id: toolCallId(this.idPrefix), sent: 0 };
    out.push({ type: 'tool_call_start', id: call.id, name });
    return call;
  }

  private send(call: OpenCall, delta: string, out: AnswerPart[]): void {
    if (delta.length === 0) return;
    out.push({ type: 'tool_call_delta', id: call.id, text: delta });
    call.sent += delta.length;
  }

}

/** A whole answer at once. reasoning is null without a reasoning block. */
export interface Answer {
  readonly reasoning: string | null;
  readonly content: string;
  readonly calls: readonly { readonly id: string; readonly call: ParsedToolCall }[];
}

export function parseAnswer(text: string, thinking: boolean, tools: ToolSetup | null, idPrefix = 'call_'): Answer {
  const s = new AnswerStream(thinking, tools, idPrefix);
  const parts = [...s.push(text), ...s.flush()];
  let reasoning = '';
  let content = '';
  const calls: { id: string; call: ParsedToolCall }[] = [];
  for (const p of parts) {
    if (p.type === 'reasoning') reasoning += p.text;
    else if (p.type === 'content') content += p.text;
    else if (p.type === 'tool_call') calls.push({ id: p.id, call: p.call });
  }
  return { reasoning: s.hasReasoning ? reasoning : null, content, calls };
}

/** The engine's finish reason, as chat APIs report it: a turn that ended by itself after
 * calling tools finished with "tool_calls". */
export function chatFinishReason(engineReason: string, callCount: number): string {
  return engineReason === 'stop' && callCount > 0 ? 'tool_calls' : engineReason;
}
