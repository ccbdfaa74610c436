// Chat prompts: render a model's Jinja chat template (@huggingface/jinja) over validated messages.
//
// Invariants:
// - Messages are validated before rendering; a bad one is a 'bad_request' naming its index and field.
// - The template sees only role, content and (when given) reasoning_content, tool_calls, tool_call_id
//   and name of each message, plus
//   add_generation_prompt, enable_thinking (only when given: templates test `is defined`) and `extra`.
// - A template that does not parse is the model's fault ('bad_tokenizer'); one that fails while
//   rendering (e.g. raise_exception on a bad role order) is the request's ('bad_request').
import { Template } from '@huggingface/jinja';
import { DeltaserveError } from '../util/errors.js';

export interface ChatMessage {
  role: string;
  content: string;
  reasoning_content?: string;
  /** Assistant: earlier tool calls, arguments as an object (what Qwen templates iterate). */
  tool_calls?: ChatToolCall[];
  /** Tool results: the call answered, and the tool's name. */
  tool_call_id?: string;
  name?: string;
}

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: Record<string, unknown> };
}

export interface RenderOptions {
  addGenerationPrompt: boolean;
  /** Qwen3.5 templates think unless this is false. */
  enableThinking?: boolean;
  /** Further template variables (tools, ...). The named options above take precedence. */
  extra?: Record<string, unknown>;
}

/** Compiled templates by source text; a process sees few distinct templates, so the cap is generous. */
const compiled = new Map<string, Template>();
const MAX_COMPILED = 32;

function compile(source: string): Template {
  let t = compiled.get(source);
  if (t !== undefined) return t;
  try {
    t = new Template(source);
  } catch (e) {
    throw new DeltaserveError('bad_tokenizer', `chat template does not parse: ${(e as Error).message}`);
  }
  if (compiled.size >= MAX_COMPILED) compiled.clear();
  compiled.set(source, t);
  return t;
}

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** The roles a template is given: anything else (a role carrying `<|im_start|>`, an empty
 * one) could be rendered verbatim into the prompt's turn headers. */
export const TEMPLATE_ROLES: ReadonlySet<string> = new Set(['system', 'user', 'assistant', 'tool']);

/** Check that `messages` is a non-empty array of {role: string, content: string, reasoning_content?: string}. */
export function validateMessages(messages: unknown): ChatMessage[] {
  if (!Array.isArray(messages)) bad('messages must be an array');
  if (messages.length === 0) bad('messages must not be empty');
  return messages.map((m: unknown, i): ChatMessage => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) bad(`messages[${i}] must be an object`);
    const o = m as Record<string, unknown>;
    if (typeof o['role'] !== 'string') bad(`messages[${i}].role must be a string`);
    if (!TEMPLATE_ROLES.has(o['role'])) bad(`messages[${i}].role must be one of ${[...TEMPLATE_ROLES].join(', ')} (got ${JSON.stringify(o['role'].slice(0, 64))})`);
    if (typeof o['content'] !== 'string') bad(`messages[${i}].content must be a string`);
    const out: ChatMessage = { role: o['role'], content: o['content'] };
    const rc = o['reasoning_content'];
    if (rc !== undefined && rc !== null) {
      if (typeof rc !== 'string') bad(`messages[${i}].reasoning_content must be a string`);
      out.reasoning_content = rc;
    }
    for (const key of ['tool_call_id', 'name'] as const) {
      const v = o[key];
      if (v === undefined || v === null) continue;
      if (typeof v !== 'string') bad(`messages[${i}].${key} must be a string`);
      out[key] = v;
    }
    if (o['tool_calls'] !== undefined && o['tool_calls'] !== null) out.tool_calls = validateToolCalls(o['tool_calls'], i);
    return out;
  });
}

function validateToolCalls(v: unknown, i: number): ChatToolCall[] {
  if (!Array.isArray(v)) bad(`messages[${i}].tool_calls must be an array`);
  return v.map((c: unknown, j): ChatToolCall => {
    const f = (c as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
    const id = (c as { id?: unknown } | null)?.id;
    if (typeof f !== 'object' || f === null || typeof f.name !== 'string') bad(`messages[${i}].tool_calls[${j}].function.name must be a string`);
    const args = f.arguments;
    if (typeof args !== 'object' || args === null || Array.isArray(args)) bad(`messages[${i}].tool_calls[${j}].function.arguments must be an object`);
    return { id: typeof id === 'string' ? id : '', type: 'function', function: { name: f.name, arguments: args as Record<string, unknown> } };
  });
}

/** The prompt text for `messages` under the chat template `template`. */
export function renderChat(template: string, messages: readonly ChatMessage[], opts: RenderOptions): string {
  if (typeof template !== 'string' || template.length === 0) {
    throw new DeltaserveError('bad_tokenizer', 'the model has no chat template');
  }
  const checked = validateMessages(messages);
  const vars: Record<string, unknown> = {
    ...(opts.extra ?? {}),
    messages: checked,
    add_generation_prompt: opts.addGenerationPrompt,
  };
  if (opts.enableThinking !== undefined) vars['enable_thinking'] = opts.enableThinking;
  const t = compile(template);
  try {
    return t.render(vars);
  } catch (e) {
    bad(`chat template failed: ${(e as Error).message}`);
  }
}
