// POST /v1/responses (OpenAI Responses API): `input` as a string or items (messages,
// function_call, function_call_output, reasoning, item_reference; see responses-input.ts),
// `instructions`, `max_output_tokens`, sampling fields, function `tools` / `tool_choice`,
// `text.format` (json_schema / json_object), `reasoning` (effort; summary: the reasoning sent as
// one summary part), `include: ["reasoning.encrypted_content"]` (the reasoning sealed for a
// stateless client), `stream: true` with the typed event sequence, and state: `store` (default
// true) keeps the finished response and its conversation, `previous_response_id` continues one;
// GET / DELETE /v1/responses/{id} read and remove stored responses. A codec over the turn
// pipeline (turn.ts).
import { TurnImages, withImages } from './images.js';
import type { ServerContext } from '../context.js';
import type { Call } from '../http/call.js';
import { ApiError, invalid } from '../http/errors.js';
import { sendJson } from '../http/respond.js';
import { SseStream } from '../http/sse.js';
import { jsonSchemaFormat, type OutputFormat } from './structured.js';
import { checkUniqueNames, functionTool, namedChoice } from './tools/openai.js';
import { type FunctionTool, type ToolChoice, toolCallId } from './tools/types.js';
import type { AnswerStream } from './answer.js';
import { type Block, type BlockEvent, blocksOf, BlockTracker, cutShort, singleAnswer, streamBlocks } from './blocks.js';
import { checkModel, type Choice, collectAll, type Done, failed } from './choices.js';
import { DEFAULT_VALUED, type FieldRules } from './fields.js';
import { sealReasoning } from './responses-crypto.js';
import { previousConversation, resolveInput, responsesMessages, type Sourced } from './responses-input.js';
import type { Item, ResponsesConfig } from './responses-store.js';
import { type Codec, runTurn, type Turn, turnParams } from './turn.js';
import { type Body, optBool, optObject, optString } from './validate.js';

const INCLUDABLE = ['reasoning.encrypted_content'];

const FIELDS: FieldRules = {
  ...DEFAULT_VALUED,
  model: true, input: true, instructions: true, max_output_tokens: true, temperature: true, top_p: true, top_k: true, min_p: true,
  seed: true, tools: true, tool_choice: true, parallel_tool_calls: true, text: true, reasoning: true, stream: true,
  chat_template_kwargs: true, truncation: (v) => v === 'disabled',
  include: (v) => Array.isArray(v) && v.every((x) => INCLUDABLE.includes(x as string)),
  store: (v) => typeof v === 'boolean', previous_response_id: true,
  // metadata is kept with the response and returned; the prefix cache is automatic
  metadata: (v) => typeof v === 'object' && !Array.isArray(v), prompt_cache_key: (v) => typeof v === 'string',
  // stream_options.include_obfuscation: no padding is added (nothing to obfuscate on loopback)
  stream_options: (v) => typeof v === 'object' && !Array.isArray(v),
};

const isObj = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);

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

/** reasoning.summary: "auto" / "concise" / "detailed" (all send the reasoning itself as the
 * one summary part: there is no separate summarizer), or null for none. */
function summaryOf(b: Body): string | null {
  const s = optObject(b, 'reasoning')?.['summary'];
  if (s === undefined || s === null) return null;
  if (s !== 'auto' && s !== 'concise' && s !== 'detailed') throw invalid('reasoning.summary', 'reasoning.summary must be "auto", "concise" or "detailed"');
  return s;
}

/** How this response's output items are written. */
interface Shape {
  readonly summary: boolean;
  /** Seal the reasoning into encrypted_content with this key (null: not asked). */
  readonly sealKey: Buffer | null;
  readonly model: string;
}

interface ResponsesOwn {
  readonly body: Body;
  /** Keep the finished response (store, default true). */
  readonly store: boolean;
  /** Items of the conversation so far (previous response's, then this input's). */
  readonly items: readonly Sourced[];
  readonly summary: string | null;
  /** Seal the reasoning with the server's key (include: ["reasoning.encrypted_content"]). */
  readonly seal: boolean;
}

export const responsesCodec: Codec<ResponsesOwn> = {
  path: '/v1/responses',
  fields: FIELDS,
  parse(ctx, b) {
    checkModel(ctx, b);
    const rs = responsesState(ctx);
    const store = optBool(b, 'store') ?? true;
    const include = Array.isArray(b['include']) ? b['include'] as string[] : [];
    const items = [...previousConversation(b['previous_response_id'], rs.store), ...resolveInput(b['input'], rs)];
    const images = new TurnImages();
    const messages = responsesMessages(items, optString(b, 'instructions'), rs.key, ctx.limits?.jsonDepth, images);
    const params = turnParams(ctx, b, ['max_output_tokens']);
    const tools = responsesTools(b['tools']);
    const choice = responsesToolChoice(b['tool_choice'], tools);
    const format = textFormat(optObject(b, 'text'));
    const summary = summaryOf(b);
    return {
      prompt: { kind: 'chat', messages, think: thinkingOf(b), kwargs: {}, param: 'input', ...withImages(images) },
      params: { ...params, n: 1 },
      tools: { tools, choice, parallel: optBool(b, 'parallel_tool_calls') ?? true },
      format, thinkingBudget: null, topLogprobs: null,
      own: { body: b, store, items, summary, seal: include.includes('reasoning.encrypted_content') },
    };
  },
  render: renderResponse,
};

/** POST /v1/responses. */
export const responses = (ctx: ServerContext, call: Call): Promise<void> => runTurn(ctx, call, responsesCodec);

/** The response object before its output: the request's settings echoed back. */
function responseShell(ctx: ServerContext, turn: Turn<ResponsesOwn>): Record<string, unknown> {
  const { body: b, store, summary } = turn.request.own;
  const p = turn.request.params;
  return {
    id: toolCallId('resp_'), object: 'response', created_at: Math.floor(Date.now() / 1000), model: ctx.modelName,
    instructions: optString(b, 'instructions') ?? null, max_output_tokens: p.request.maxTokens ?? null,
    temperature: p.request.temperature ?? null, top_p: p.request.topP ?? null, tools: b['tools'] ?? [], tool_choice: b['tool_choice'] ?? 'auto',
    parallel_tool_calls: turn.tools?.parallel ?? true, text: { format: b['text'] && isObj(b['text']) ? b['text']['format'] ?? { type: 'text' } : { type: 'text' } },
    reasoning: { effort: (optObject(b, 'reasoning')?.['effort'] as string | undefined) ?? null, summary },
    store, metadata: optObject(b, 'metadata') ?? {}, error: null, incomplete_details: null, truncation: 'disabled',
    previous_response_id: b['previous_response_id'] ?? null, user: b['user'] ?? null,
  };
}

async function renderResponse(ctx: ServerContext, call: Call, turn: Turn<ResponsesOwn>): Promise<void> {
  const rs = responsesState(ctx);
  const { store, items, summary, seal } = turn.request.own;
  const shell = responseShell(ctx, turn);
  const shape: Shape = { summary: summary !== null, sealKey: seal ? rs.key : null, model: ctx.modelName };
  // a finished response is kept with its whole conversation (only when it did not fail)
  const keep = (final: Item): void => {
    if (store) rs.store.put({ id: shell['id'] as string, response: final, conversation: [...items.map((s) => s.item), ...(final['output'] as Item[])], storedAt: Date.now() });
  };
  const { run, answer } = singleAnswer(turn, 'call_');
  if (turn.request.params.stream) return streamResponse(call, run, shell, answer, shape, keep);
  const r = (await collectAll([run]))[0]!;
  const final = finalResponse(shell, blocksOf(r, answer, cutShort(r.done)), r.done, shape);
  keep(final);
  sendJson(call.res, 200, final);
}

/** The server's Responses state (startServer always sets it). */
function responsesState(ctx: ServerContext): ResponsesConfig {
  if (!ctx.responses) throw new ApiError(500, 'the responses store is not configured', null, 'internal_error');
  return ctx.responses;
}

/** GET /v1/responses/{id}: a stored response; 404 when unknown or expired. */
export function getResponse(ctx: ServerContext, call: Call, id: string): void {
  const r = responsesState(ctx).store.get(id);
  if (!r) throw notStored(id);
  sendJson(call.res, 200, r.response);
}

/** DELETE /v1/responses/{id}: forget a stored response (its items can no longer be referenced). */
export function deleteResponse(ctx: ServerContext, call: Call, id: string): void {
  if (!responsesState(ctx).store.delete(id)) throw notStored(id);
  sendJson(call.res, 200, { id, object: 'response', deleted: true });
}

const notStored = (id: string): ApiError =>
  new ApiError(404, `no stored response "${id}" (never stored, expired, deleted, or sent with store: false)`, 'response_id', 'not_found');

/** An output item of a block; `done` marks it completed. */
function outputItem(b: Block, ids: string[], done: boolean, shape: Shape): Record<string, unknown> {
  const id = ids[b.index]!;
  // an item the generation ended inside (max_output_tokens, interrupted) is incomplete
  const status = !done ? 'in_progress' : b.failed ? 'incomplete' : 'completed';
  switch (b.kind) {
    case 'reasoning': {
      const item: Record<string, unknown> = {
        type: 'reasoning', id, summary: done && shape.summary ? [summaryPart(b.text)] : [],
        content: done ? [{ type: 'reasoning_text', text: b.text }] : [], status,
      };
      if (done && shape.sealKey) item['encrypted_content'] = sealReasoning(shape.sealKey, { text: b.text, model: shape.model });
      return item;
    }
    case 'text':
      return { type: 'message', id, status, role: 'assistant', content: done ? [textPart(b.text)] : [] };
    case 'tool_call':
      return { type: 'function_call', id, call_id: b.call!.id, name: b.call!.name, arguments: done ? b.call!.arguments : '', status };
  }
}

const textPart = (text: string): Record<string, unknown> => ({ type: 'output_text', text, annotations: [], logprobs: [] });
const summaryPart = (text: string): Record<string, unknown> => ({ type: 'summary_text', text });

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

function finalResponse(shell: Record<string, unknown>, blocks: readonly Block[], d: Done, shape: Shape, ids: string[] = []): Record<string, unknown> {
  itemIds(blocks, ids);
  const incomplete = d.finishReason === 'length';
  return {
    ...shell, status: incomplete ? 'incomplete' : d.finishReason === 'stop' ? 'completed' : 'incomplete',
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : d.finishReason === 'abort' ? { reason: 'interrupted' } : null,
    output: blocks.map((b) => outputItem(b, ids, true, shape)),
    output_text: blocks.filter((b) => b.kind === 'text').map((b) => b.text).join(''),
    usage: usage(d, blocks),
  };
}

/** The typed event sequence: response.created, in_progress, per block output_item.added /
 * content_part.added (and reasoning_summary_part.added) / *.delta / *.done / output_item.done,
 * then response.completed (or response.incomplete). Every event carries its `type` and a
 * `sequence_number`. `keep` stores the final response (not a failed one). */
async function streamResponse(call: Call, run: Choice, shell: Record<string, unknown>, answer: AnswerStream, shape: Shape,
  keep: (final: Item) => void): Promise<void> {
  const sse = new SseStream(call.res);
  let seq = 0;
  const send = (type: string, body: Record<string, unknown>): void => sse.event(type, { type, sequence_number: seq++, ...body });
  send('response.created', { response: { ...shell, status: 'in_progress', output: [], usage: null } });
  send('response.in_progress', { response: { ...shell, status: 'in_progress', output: [], usage: null } });
  const tracker = new BlockTracker();
  const ids: string[] = [];
  const emit = (events: BlockEvent[]): void => {
    for (const e of events) {
      itemIds(tracker.blocks, ids);
      const b = e.block;
      const at = { output_index: b.index };
      const item = { item_id: ids[b.index]!, ...at };
      const summary = { ...item, summary_index: 0 };
      if (e.type === 'open') {
        send('response.output_item.added', { ...at, item: outputItem(b, ids, false, shape) });
        if (b.kind === 'text') send('response.content_part.added', { ...item, content_index: 0, part: textPart('') });
        if (b.kind === 'reasoning') {
          send('response.content_part.added', { ...item, content_index: 0, part: { type: 'reasoning_text', text: '' } });
          if (shape.summary) send('response.reasoning_summary_part.added', { ...summary, part: summaryPart('') });
        }
      } else if (e.type === 'delta') {
        if (b.kind === 'text') send('response.output_text.delta', { ...item, content_index: 0, delta: e.text, logprobs: [] });
        else if (b.kind === 'reasoning') {
          send('response.reasoning_text.delta', { ...item, content_index: 0, delta: e.text });
          if (shape.summary) send('response.reasoning_summary_text.delta', { ...summary, delta: e.text });
        } else send('response.function_call_arguments.delta', { ...item, delta: e.text });
      } else {
        if (b.kind === 'text') {
          send('response.output_text.done', { ...item, content_index: 0, text: b.text, logprobs: [] });
          send('response.content_part.done', { ...item, content_index: 0, part: textPart(b.text) });
        } else if (b.kind === 'reasoning') {
          send('response.reasoning_text.done', { ...item, content_index: 0, text: b.text });
          send('response.content_part.done', { ...item, content_index: 0, part: { type: 'reasoning_text', text: b.text } });
          if (shape.summary) {
            send('response.reasoning_summary_text.done', { ...summary, text: b.text });
            send('response.reasoning_summary_part.done', { ...summary, part: summaryPart(b.text) });
          }
        } else send('response.function_call_arguments.done', { ...item, name: b.call!.name, arguments: b.call!.arguments });
        send('response.output_item.done', { ...at, item: outputItem(b, ids, true, shape) });
      }
    }
  };
  const ev = await streamBlocks(run.events, answer, tracker, emit);
  if (ev) {
    if (ev.finishReason === 'error') {
      const err = failed(ev);
      send('error', { code: err.code, message: err.message, param: null });
      send('response.failed', { response: { ...finalResponse(shell, tracker.blocks, ev, shape, ids), status: 'failed', error: { code: 'server_error', message: err.message } } });
    } else {
      const final = finalResponse(shell, tracker.blocks, ev, shape, ids);
      keep(final);
      send(final['status'] === 'completed' ? 'response.completed' : 'response.incomplete', { response: final });
    }
  }
  sse.end();
}
