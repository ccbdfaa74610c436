// POST /v1/responses (OpenAI Responses API): `input` as a string or items (messages,
// function_call, function_call_output; reasoning items are accepted and dropped, as the
// template drops earlier reasoning), `instructions`, `max_output_tokens`, sampling fields,
// function `tools` / `tool_choice`, `text.format` (json_schema / json_object), `reasoning`,
// and `stream: true` with the typed event sequence. `store` and `previous_response_id` are
// not implemented (400).
import type { ChatMessage } from '../tokenizer/chat.js';
import { AnswerStream } from './answer.js';
import { type Block, type BlockEvent, BlockTracker, streamBlocks } from './blocks.js';
import { chatPrompt, toolSetup } from './chat-prompt.js';
import { invalid } from './errors.js';
import { checkFields, DEFAULT_VALUED, type FieldRules } from './fields.js';
import { DEFAULT_LIMITS } from './limits.js';
import { admit, type Call, cancelAll, checkModel, type Choice, collect, failed, type Done, type ServerContext, startChoices } from './generation.js';
import { sendJson } from './respond.js';
import { SseStream } from './sse.js';
import { jsonSchemaFormat, type OutputFormat, structuredConstraint } from './structured/request.js';
import { callArguments, checkUniqueNames, functionTool, namedChoice } from './tools/openai.js';
import { type FunctionTool, type ToolChoice, toolCallId } from './tools/types.js';
import { type Body, commonParams, optBool, optObject, optString, requireObject } from './validate.js';

const FIELDS: FieldRules = {
  ...DEFAULT_VALUED,
  model: true, input: true, instructions: true, max_output_tokens: true, temperature: true, top_p: true, top_k: true, min_p: true,
  seed: true, tools: true, tool_choice: true, parallel_tool_calls: true, text: true, reasoning: true, stream: true,
  chat_template_kwargs: true, truncation: (v) => v === 'disabled', include: (v) => Array.isArray(v) && v.length === 0,
  previous_response_id: () => false, metadata: () => false,
};

const isObj = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Text of a message's content: a string or input_text / output_text parts. */
function itemText(c: unknown, param: string): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw invalid(param, `${param} must be a string or an array of text parts`);
  return c.map((p: unknown, j) => {
    if (!isObj(p) || !['input_text', 'output_text', 'text'].includes(p['type'] as string) || typeof p['text'] !== 'string') {
      throw invalid(`${param}[${j}]`, `${param}[${j}] must be {"type": "input_text", "text": ...} (only text is served)`);
    }
    return p['text'];
  }).join('');
}

/** `instructions` + `input` → template messages. */
export function responsesMessages(input: unknown, instructions: string | undefined, maxDepth = DEFAULT_LIMITS.jsonDepth): ChatMessage[] {
  const out: ChatMessage[] = instructions ? [{ role: 'system', content: instructions }] : [];
  if (typeof input === 'string') return [...out, { role: 'user', content: input }];
  if (!Array.isArray(input) || input.length === 0) throw invalid('input', 'input must be a string or a non-empty array of items');
  input.forEach((item: unknown, i) => {
    const param = `input[${i}]`;
    if (!isObj(item)) throw invalid(param, `${param} must be an object`);
    const type = item['type'] ?? 'message';
    if (type === 'message') {
      const role = item['role'];
      if (!['user', 'assistant', 'system', 'developer'].includes(role as string)) {
        throw invalid(`${param}.role`, `${param}.role must be "user", "assistant", "system" or "developer"`);
      }
      out.push({ role: role === 'developer' ? 'system' : role as string, content: itemText(item['content'], `${param}.content`) });
    } else if (type === 'function_call') {
      if (typeof item['name'] !== 'string' || typeof item['call_id'] !== 'string') {
        throw invalid(param, `${param}: a function_call needs "call_id" and "name" strings`);
      }
      const tc = { id: item['call_id'], type: 'function' as const, function: { name: item['name'], arguments: callArguments(item['arguments'], `${param}.arguments`, maxDepth) } };
      const prev = out[out.length - 1];
      if (prev?.role === 'assistant' && (prev.tool_calls || prev.content === '')) (prev.tool_calls ??= []).push(tc);
      else out.push({ role: 'assistant', content: '', tool_calls: [tc] });
    } else if (type === 'function_call_output') {
      const output = item['output'];
      if (typeof item['call_id'] !== 'string') throw invalid(`${param}.call_id`, `${param}.call_id must be a string`);
      out.push({ role: 'tool', tool_call_id: item['call_id'], content: typeof output === 'string' ? output : itemText(output, `${param}.output`) });
    } else if (type !== 'reasoning') {
      throw invalid(`${param}.type`, `${param}.type "${String(type)}" is not supported (message, function_call, function_call_output, reasoning)`);
    }
  });
  if (out.length === 0) throw invalid('input', 'input has no messages');
  return out;
}

function responsesTools(v: unknown): FunctionTool[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid('tools', 'tools must be an array');
  const tools = v.map((t: unknown, i) => {
    if (!isObj(t) || t['type'] !== 'function') throw invalid(`tools[${i}].type`, `tools[${i}].type must be "function" (the only tool type served)`);
    return functionTool(t, `tools[${i}]`);
  });
  checkUniqueNames(tools, 'tools');
  return tools;
}

function responsesToolChoice(v: unknown, tools: readonly FunctionTool[]): ToolChoice {
  if (v === undefined || v === null) return { kind: tools.length > 0 ? 'auto' : 'none' };
  if (v === 'auto' || v === 'none' || v === 'required') {
    if (v !== 'none' && tools.length === 0) throw invalid('tool_choice', `tool_choice "${v}" needs tools`);
    return { kind: v };
  }
  if (isObj(v) && v['type'] === 'function' && typeof v['name'] === 'string') return namedChoice(v['name'], tools, 'tool_choice');
  throw invalid('tool_choice', 'tool_choice must be "auto", "none", "required" or {"type": "function", "name": ...}');
}

function textFormat(text: Body | undefined): OutputFormat {
  const f = text?.['format'];
  if (f === undefined || f === null) return { kind: 'text' };
  if (!isObj(f)) throw invalid('text.format', 'text.format must be an object');
  if (f['type'] === 'text') return { kind: 'text' };
  if (f['type'] === 'json_object') return { kind: 'json_object' };
  if (f['type'] === 'json_schema') return jsonSchemaFormat(f, 'text.format');
  throw invalid('text.format.type', 'text.format.type must be "text", "json_object" or "json_schema"');
}

/** reasoning.effort "none" / "minimal" turns thinking off; any other effort keeps it on. */
function thinkingOf(b: Body): boolean {
  const r = optObject(b, 'reasoning');
  const kw = optObject(b, 'chat_template_kwargs');
  if (kw && typeof kw['enable_thinking'] === 'boolean') return kw['enable_thinking'];
  const effort = r?.['effort'];
  if (effort !== undefined && effort !== null && !['none', 'minimal', 'low', 'medium', 'high'].includes(effort as string)) {
    throw invalid('reasoning.effort', 'reasoning.effort must be "none", "minimal", "low", "medium" or "high"');
  }
  return effort !== 'none' && effort !== 'minimal';
}

export async function responses(ctx: ServerContext, call: Call): Promise<void> {
  const { engine } = ctx;
  const b = requireObject(call.body);
  if (b['store'] === true) throw invalid('store', 'store is not supported yet (responses are not kept); send store: false', 'unsupported_parameter');
  if (b['previous_response_id'] !== undefined && b['previous_response_id'] !== null) {
    throw invalid('previous_response_id', 'previous_response_id is not supported yet (responses are not stored); send the whole conversation in input', 'unsupported_parameter');
  }
  checkFields(b, FIELDS, ctx.lenient ?? false, '/v1/responses');
  checkModel(ctx, b);
  const messages = responsesMessages(b['input'], optString(b, 'instructions'), ctx.limits?.jsonDepth);
  const p = commonParams(b, engine.maxContext, engine.model.config.vocabSize, ctx.defaults, ['max_output_tokens']);
  const tools = responsesTools(b['tools']);
  const choice = responsesToolChoice(b['tool_choice'], tools);
  const setup = toolSetup(ctx, tools, choice, optBool(b, 'parallel_tool_calls') ?? true);
  const format = textFormat(optObject(b, 'text'));
  const prompt = await chatPrompt(ctx, messages, thinkingOf(b), {}, setup, 'input', call.signal);
  const constraint = structuredConstraint(ctx, format, setup, prompt.thinking);
  admit(ctx, [prompt.ids], 1, p.request.maxTokens);
  const [choiceRun] = startChoices(ctx, call, [prompt.ids], { ...p, n: 1, request: { ...p.request, messageBoundaries: prompt.boundaries } }, null, constraint);
  const shell = {
    id: toolCallId('resp_'), object: 'response', created_at: Math.floor(Date.now() / 1000), model: ctx.modelName,
    instructions: optString(b, 'instructions') ?? null, max_output_tokens: p.request.maxTokens ?? null,
    temperature: p.request.temperature ?? null, top_p: p.request.topP ?? null, tools: b['tools'] ?? [], tool_choice: b['tool_choice'] ?? 'auto',
    parallel_tool_calls: setup?.parallel ?? true, text: { format: b['text'] && isObj(b['text']) ? b['text']['format'] ?? { type: 'text' } : { type: 'text' } },
    reasoning: { effort: (optObject(b, 'reasoning')?.['effort'] as string | undefined) ?? null, summary: null },
    store: false, metadata: {}, error: null, incomplete_details: null, truncation: 'disabled', previous_response_id: null, user: b['user'] ?? null,
  };
  try {
    const answer = new AnswerStream(prompt.thinking, setup);
    if (p.stream) await streamResponse(call, choiceRun!, shell, answer);
    else {
      const r = await collect(choiceRun!);
      if (r.done.finishReason === 'error') throw failed(r.done);
      const t = new BlockTracker();
      t.push([...answer.push(r.text), ...answer.flush()]);
      t.finish();
      sendJson(call.res, 200, finalResponse(shell, t.blocks, r.done));
    }
  } finally {
    cancelAll([choiceRun!]);
  }
}

/** An output item of a block; `done` marks it completed. */
function outputItem(b: Block, ids: string[], done: boolean): Record<string, unknown> {
  const id = ids[b.index]!;
  const status = done ? 'completed' : 'in_progress';
  switch (b.kind) {
    case 'reasoning':
      return { type: 'reasoning', id, summary: [], content: done ? [{ type: 'reasoning_text', text: b.text }] : [], status };
    case 'text':
      return { type: 'message', id, status, role: 'assistant', content: done ? [textPart(b.text)] : [] };
    case 'tool_call':
      return { type: 'function_call', id, call_id: b.call!.id, name: b.call!.name, arguments: done ? b.call!.arguments : '', status };
  }
}

const textPart = (text: string): Record<string, unknown> => ({ type: 'output_text', text, annotations: [], logprobs: [] });

function itemIds(blocks: readonly Block[], ids: string[]): string[] {
  for (const b of blocks) ids[b.index] ??= toolCallId(b.kind === 'reasoning' ? 'rs_' : b.kind === 'text' ? 'msg_' : 'fc_');
  return ids;
}

function usage(d: Done, blocks: readonly Block[]): Record<string, unknown> {
  const reasoningChars = blocks.filter((b) => b.kind === 'reasoning').reduce((n, b) => n + b.text.length, 0);
  const allChars = blocks.reduce((n, b) => n + b.text.length, 0) || 1;
  return {
    input_tokens: d.usage.promptTokens, input_tokens_details: { cached_tokens: d.usage.cachedTokens },
    output_tokens: d.usage.completionTokens,
    // reasoning tokens are estimated by the reasoning's share of the generated text
    output_tokens_details: { reasoning_tokens: Math.round(d.usage.completionTokens * reasoningChars / allChars) },
    total_tokens: d.usage.promptTokens + d.usage.completionTokens,
  };
}

function finalResponse(shell: Record<string, unknown>, blocks: readonly Block[], d: Done, ids: string[] = []): Record<string, unknown> {
  itemIds(blocks, ids);
  const incomplete = d.finishReason === 'length';
  return {
    ...shell, status: incomplete ? 'incomplete' : d.finishReason === 'stop' ? 'completed' : 'incomplete',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : d.finishReason === 'abort' ? { reason: 'interrupted' } : null,
    output: blocks.map((b) => outputItem(b, ids, true)),
    output_text: blocks.filter((b) => b.kind === 'text').map((b) => b.text).join(''),
    usage: usage(d, blocks),
  };
}

/** The typed event sequence: response.created, in_progress, per block output_item.added /
 * content_part.added / *.delta / *.done / output_item.done, then response.completed (or
 * response.incomplete). Every event carries its `type` and a `sequence_number`. */
async function streamResponse(call: Call, run: Choice,
  shell: Record<string, unknown>, answer: AnswerStream): Promise<void> {
  const sse = new SseStream(call.res);
  let seq = 0;
  const send = (type: string, body: Record<string, unknown>): void => sse.event(type, { type, sequence_number: seq++, ...body });
  send('response.created', { response: { ...shell, status: 'in_progress', output: [], usage: null } });
  send('response.in_progress', { response: { ...shell, status: 'in_progress', output: [], usage: null } });
  const tracker = new BlockTracker();
  const ids: string[] = [];
  const emit = (events: BlockEvent[]): void => {
    for (const e of events) {
      const b = e.block;
      itemIds(tracker.blocks, ids);
      const at = { output_index: b.index };
      const item = { item_id: ids[b.index]!, ...at };
      if (e.type === 'open') {
        send('response.output_item.added', { ...at, item: outputItem(b, ids, false) });
        if (b.kind === 'text') send('response.content_part.added', { ...item, content_index: 0, part: textPart('') });
        if (b.kind === 'reasoning') send('response.content_part.added', { ...item, content_index: 0, part: { type: 'reasoning_text', text: '' } });
      } else if (e.type === 'delta') {
        if (b.kind === 'text') send('response.output_text.delta', { ...item, content_index: 0, delta: e.text, logprobs: [] });
        else if (b.kind === 'reasoning') send('response.reasoning_text.delta', { ...item, content_index: 0, delta: e.text });
        else send('response.function_call_arguments.delta', { ...item, delta: e.text });
      } else {
        if (b.kind === 'text') {
          send('response.output_text.done', { ...item, content_index: 0, text: b.text, logprobs: [] });
          send('response.content_part.done', { ...item, content_index: 0, part: textPart(b.text) });
        } else if (b.kind === 'reasoning') {
          send('response.reasoning_text.done', { ...item, content_index: 0, text: b.text });
          send('response.content_part.done', { ...item, content_index: 0, part: { type: 'reasoning_text', text: b.text } });
        } else send('response.function_call_arguments.done', { ...item, name: b.call!.name, arguments: b.call!.arguments });
        send('response.output_item.done', { ...at, item: outputItem(b, ids, true) });
      }
    }
  };
  const ev = await streamBlocks(run.events, answer, tracker, emit);
  if (ev) {
    if (ev.finishReason === 'error') {
      const err = failed(ev);
      send('error', { code: err.code, message: err.message, param: null });
      send('response.failed', { response: { ...finalResponse(shell, tracker.blocks, ev, ids), status: 'failed', error: { code: 'server_error', message: err.message } } });
    } else {
      const final = finalResponse(shell, tracker.blocks, ev, ids);
      send(final['status'] === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    }
  }
  sse.end();
}
