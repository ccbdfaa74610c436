// The generated text of a chat turn as typed parts, shared by every chat-style API (chat
// completions, responses, messages): reasoning (inside <think>…</think>), answer text and
// tool calls (parsed out of the answer when the request has tools). Streaming and at once
// give the same parts (both run the same splitters).
import { ReasoningSplitter } from '../tokenizer/reasoning.js';
import { ToolCallParser } from './tools/parser.js';
import { type ParsedToolCall, type ToolSetup, toolCallId } from './tools/types.js';

export type AnswerPart =
  | { readonly type: 'reasoning'; readonly text: string }
  | { readonly type: 'content'; readonly text: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly call: ParsedToolCall };

export class AnswerStream {
  private readonly reasoning: ReasoningSplitter;
  private readonly tools: ToolCallParser | null;
  /** parallel_tool_calls false: calls after the first are dropped. */
  private readonly parallel: boolean;
  private emitted = 0;

  /** `thinking`: the prompt opened a reasoning block; `tools`: parse calls (null = off, or
   * tool_choice none). */
  constructor(thinking: boolean, tools: ToolSetup | null, private readonly idPrefix = 'call_') {
    this.reasoning = new ReasoningSplitter(thinking);
    this.tools = tools && tools.choice.kind !== 'none' ? new ToolCallParser(tools.format, tools.tools) : null;
    this.parallel = tools?.parallel ?? true;
  }

  get hasReasoning(): boolean {
    return this.reasoning.hasReasoning;
  }

  get callCount(): number {
    return this.parallel ? this.tools?.callCount ?? 0 : Math.min(1, this.emitted);
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
    for (const e of events) {
      if (e.type === 'text') out.push({ type: 'content', text: e.text });
      else if (this.emitted++ === 0 || this.parallel) out.push({ type: 'tool_call', id: toolCallId(this.idPrefix), call: e.call });
    }
    return out;
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
    else calls.push({ id: p.id, call: p.call });
  }
  return { reasoning: s.hasReasoning ? reasoning : null, content, calls };
}

/** The engine's finish reason, as chat APIs report it: a turn that ended by itself after
 * calling tools finished with "tool_calls". */
export function chatFinishReason(engineReason: string, callCount: number): string {
  return engineReason === 'stop' && callCount > 0 ? 'tool_calls' : engineReason;
}
