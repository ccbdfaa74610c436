// POST /v1/messages (Anthropic Messages API): `system`, `messages` with text / tool_use /
// tool_result (and earlier thinking, dropped as the template drops earlier reasoning) blocks,
// `max_tokens`, `stop_sequences`, sampling fields, `tools` / `tool_choice`, `thinking`, and
// `stream: true` with the message / content-block event sequence. Errors come in Anthropic's
// shape ({"type": "error", "error": {"type", "message"}}). Thinking follows Anthropic's
// default: off unless `thinking: {"type": "enabled"}`; `budget_tokens` ends the reasoning
// (forces `</think>`) once that many tokens were generated in it. A codec over the turn pipeline
// (turn.ts); POST /v1/messages/count_tokens renders the same prompt and counts it.
import { TurnImages, withImages } from './images.js';
import { REQUEST_LIMITS, REQUEST_PARAMS } from '../../engine/request-rules.js';
import type { ChatMessage, ChatToolCall } from '../../frontend/chat-template.js';
import type { ServerContext } from '../context.js';
import type { Call } from '../http/call.js';
import { ApiError, invalid } from '../http/errors.js';
import { sendJson } from '../http/respond.js';
import { SseStream } from '../http/sse.js';
import { checkUniqueNames, functionTool, namedChoice } from './tools/openai.js';
import { type FunctionTool, type ToolChoice, toolCallId } from './tools/types.js';
import type { AnswerStream } from './answer.js';
import { type Block, type BlockEvent, blocksOf, BlockTracker, singleAnswer, streamBlocks } from './blocks.js';
import { type Choice, collectAll, type Done, failed } from './choices.js';
import { checkFields, type FieldRules } from './fields.js';
import { chatTurnPrompt, type Codec, runTurn, type Turn, turnParams } from './turn.js';
import { type Body, optObject, requireObject } from './validate.js';

const FIELDS: FieldRules = {
  model: true, messages: true, system: true, max_tokens: true, stop_sequences: true, temperature: true, top_p: true, top_k: true,
  stream: true, tools: true, tool_choice: true, thinking: true, metadata: true, service_tier: (v) => v === 'auto' || v === 'standard_only',
};

const isObj = (v: unknown): v is Body => typeof v === 'object' && v !== null && !Array.isArray(v);

function textOf(c: unknown, param: string): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw invalid(param, `${param} must be a string or an array of text blocks`);
  return c.map((b: unknown, j) => {
    if (!isObj(b) || b['type'] !== 'text' || typeof b['text'] !== 'string') throw invalid(`${param}[${j}]`, `${param}[${j}] must be a text block (only text is served)`);
    return b['text'];
  }).join('');
}

/** `system` + `messages` → template messages: tool_use blocks become the assistant's tool
 * calls, tool_result blocks become tool messages (before the user's own text). */
export function anthropicMessages(system: unknown, messages: unknown, images?: TurnImages): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (system !== undefined && system !== null) out.push({ role: 'system', content: textOf(system, 'system') });
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages', 'messages must be a non-empty array');
  messages.forEach((m: unknown, i) => {
    const param = `messages[${i}]`;
    if (!isObj(m) || (m['role'] !== 'user' && m['role'] !== 'assistant')) throw invalid(`${param}.role`, `${param}.role must be "user" or "assistant"`);
    const role = m['role'];
    const content = m['content'];
    if (typeof content === 'string') {
      out.push({ role, content });
      return;
    }
    if (!Array.isArray(content)) throw invalid(`${param}.content`, `${param}.content must be a string or an array of blocks`);
    let text = '';
    const calls: ChatToolCall[] = [];
    content.forEach((b: unknown, j) => {
      const bp = `${param}.content[${j}]`;
      if (!isObj(b)) throw invalid(bp, `${bp} must be an object`);
      switch (b['type']) {
        case 'text':
          if (typeof b['text'] !== 'string') throw invalid(`${bp}.text`, `${bp}.text must be a string`);
          text += b['text'];
          return;
        case 'thinking':
        case 'redacted_thinking':
          return;
        case 'image':
          if (images) {
            text += imageBlock(b, bp, images);
            return;
          }
          throw invalid(`${bp}.type`, `${bp}: image blocks are not taken here`);
        case 'tool_use':
          if (role !== 'assistant' || typeof b['id'] !== 'string' || typeof b['name'] !== 'string' || !isObj(b['input'])) {
            throw invalid(bp, `${bp}: a tool_use block belongs to an assistant turn and needs "id", "name" and an "input" object`);
          }
          calls.push({ id: b['id'], type: 'function', function: { name: b['name'], arguments: b['input'] } });
          return;
        case 'tool_result':
          if (role !== 'user' || typeof b['tool_use_id'] !== 'string') throw invalid(bp, `${bp}: a tool_result block belongs to a user turn and needs "tool_use_id"`);
          out.push({ role: 'tool', tool_call_id: b['tool_use_id'], content: (b['is_error'] === true ? 'Error: ' : '') + textOf(b['content'] ?? '', `${bp}.content`) });
          return;
        default:
          throw invalid(`${bp}.type`, `${bp}.type "${String(b['type'])}" is not supported (text, image, tool_use, tool_result, thinking)`);
      }
    });
    if (calls.length > 0) out.push({ role, content: text, tool_calls: calls });
    else if (text.length > 0 || role === 'assistant') out.push({ role, content: text });
  });
  return out;
}

/** An image block (`source`: base64 with a media_type, or a url) → its sentinel. */
function imageBlock(b: Record<string, unknown>, bp: string, images: TurnImages): string {
  const src = b['source'];
  if (!isObj(src)) throw invalid(`${bp}.source`, `${bp}.source must be an object ({type: "base64", media_type, data} or {type: "url", url})`);
  if (src['type'] === 'base64') {
    const mt = src['media_type'];
    if (typeof mt !== 'string' || !mt.startsWith('image/')) throw invalid(`${bp}.source.media_type`, `${bp}.source.media_type must be an image type (image/png, image/jpeg, ...)`);
    return images.addBase64(src['data'], bp);
  }
  if (src['type'] === 'url') return images.addUrl(src['url'], bp);
  throw invalid(`${bp}.source.type`, `${bp}.source.type must be "base64" or "url"`);
}

function anthropicTools(v: unknown): FunctionTool[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid('tools', 'tools must be an array');
  const tools = v.map((t: unknown, i) => {
    if (!isObj(t) || (t['type'] !== undefined && t['type'] !== 'custom')) throw invalid(`tools[${i}]`, `tools[${i}] must be a custom tool {name, description, input_schema}`);
    if (!isObj(t['input_schema'])) throw invalid(`tools[${i}].input_schema`, `tools[${i}].input_schema must be a JSON Schema object`);
    return functionTool(t, `tools[${i}]`);
  });
  checkUniqueNames(tools, 'tools');
  return tools;
}

function anthropicToolChoice(v: unknown, tools: readonly FunctionTool[]): { choice: ToolChoice; parallel: boolean } {
  if (v === undefined || v === null) return { choice: { kind: tools.length > 0 ? 'auto' : 'none' }, parallel: true };
  if (!isObj(v)) throw invalid('tool_choice', 'tool_choice must be an object {type: "auto" | "any" | "tool" | "none"}');
  const parallel = v['disable_parallel_tool_use'] !== true;
  switch (v['type']) {
    case 'auto':
    case 'none':
      return { choice: { kind: v['type'] }, parallel };
    case 'any':
      if (tools.length === 0) throw invalid('tool_choice', 'tool_choice "any" needs tools');
      return { choice: { kind: 'required' }, parallel };
    case 'tool':
      if (typeof v['name'] !== 'string') throw invalid('tool_choice.name', 'tool_choice.name must be a string');
      return { choice: namedChoice(v['name'], tools, 'tool_choice.name'), parallel };
    default:
      throw invalid('tool_choice.type', 'tool_choice.type must be "auto", "any", "tool" or "none"');
  }
}

/** `thinking`: {type: "enabled", budget_tokens} | {type: "disabled"}; null budget = none. */
function thinkingOf(b: Body): { on: boolean; budget: number | null } {
  const t = optObject(b, 'thinking');
  if (!t || t['type'] === 'disabled') return { on: false, budget: null };
  if (t['type'] !== 'enabled') throw invalid('thinking.type', 'thinking.type must be "enabled" or "disabled"');
  const budget = t['budget_tokens'];
  if (budget === undefined || budget === null) return { on: true, budget: null };
  if (typeof budget !== 'number' || !Number.isInteger(budget)) throw invalid('thinking.budget_tokens', 'thinking.budget_tokens must be an integer');
  const min = REQUEST_LIMITS.minThinkingBudget;
  if (budget < min) throw invalid('thinking.budget_tokens', `thinking.budget_tokens must be at least ${min} (got ${budget})`);
  return { on: true, budget };
}

/** `stop_sequences`: an array of strings (Anthropic's API refuses a plain string), or null. */
function stopSequences(v: unknown): string[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw invalid('stop_sequences', `stop_sequences must be an array of strings (got ${typeof v === 'string' ? 'a string' : typeof v})`);
  v.forEach((s: unknown, i) => {
    if (typeof s !== 'string') throw invalid(`stop_sequences[${i}]`, `stop_sequences[${i}] must be a string`);
  });
  return v as string[];
}

interface MessagesOwn {
  /** stop_sequences (reported back as the stop_sequence that matched). */
  readonly stops: readonly string[];
}

export const messagesCodec: Codec<MessagesOwn> = {
  path: '/v1/messages',
  fields: FIELDS,
  parse(ctx, b) {
    const m = b['model'];
    if (m !== undefined && m !== null && m !== ctx.modelName) throw new ApiError(404, `model: "${String(m)}" is not served here; this server serves "${ctx.modelName}"`, 'model');
    if (b['max_tokens'] === undefined || b['max_tokens'] === null) throw invalid('max_tokens', 'max_tokens: Field required');
    const images = new TurnImages();
    const messages = anthropicMessages(b['system'], b['messages'], images);
    const stop = stopSequences(b['stop_sequences']);
    const params = turnParams(ctx, { ...b, stop: stop ?? null, stop_sequences: undefined }, ['max_tokens'], REQUEST_PARAMS.anthropicTemperature);
    const tools = anthropicTools(b['tools']);
    const { choice, parallel } = anthropicToolChoice(b['tool_choice'], tools);
    const thinking = thinkingOf(b);
    return {
      prompt: { kind: 'chat', messages, think: thinking.on, kwargs: {}, param: 'messages', ...withImages(images) },
      params: { ...params, n: 1 },
      tools: { tools, choice, parallel },
      format: { kind: 'text' },
      thinkingBudget: thinking.budget !== null ? { tokens: thinking.budget, param: 'thinking.budget_tokens' } : null,
      topLogprobs: null,
      own: { stops: stop ?? [] },
    };
  },
  render: renderMessage,
};

/** POST /v1/messages. */
export const messages = (ctx: ServerContext, call: Call): Promise<void> => runTurn(ctx, call, messagesCodec);

async function renderMessage(ctx: ServerContext, call: Call, turn: Turn<MessagesOwn>): Promise<void> {
  const head = { id: toolCallId('msg_'), type: 'message', role: 'assistant', model: ctx.modelName };
  const { stops } = turn.request.own;
  const { run, answer } = singleAnswer(turn, 'toolu_');
  if (turn.request.params.stream) return streamMessage(ctx, call, run, head, answer, stops);
  const r = (await collectAll([run]))[0]!;
  if (r.done.finishReason === 'abort') throw interrupted();
  const blocks = blocksOf(r, answer, false);
  const { reason, sequence } = stopReason(ctx, r.done, blocks, stops);
  sendJson(call.res, 200, { ...head, content: blocks.map(contentBlock), stop_reason: reason, stop_sequence: sequence, usage: usage(r.done) });
}

/** POST /v1/messages/count_tokens: {system?, messages, tools?, thinking?} → {input_tokens}. */
export async function countTokens(ctx: ServerContext, call: Call): Promise<void> {
  const b = requireObject(call.body);
  checkFields(b, { model: true, messages: true, system: true, tools: true, tool_choice: true, thinking: true }, ctx.lenient ?? false, '/v1/messages/count_tokens');
  const tools = anthropicTools(b['tools']);
  const { choice, parallel } = anthropicToolChoice(b['tool_choice'], tools);
  const images = new TurnImages();
  const messages = anthropicMessages(b['system'], b['messages'], images);
  const prompt = await chatTurnPrompt(ctx, { kind: 'chat', messages, think: thinkingOf(b).on, kwargs: {}, param: 'messages', ...withImages(images) }, { tools, choice, parallel }, call.signal);
  sendJson(call.res, 200, { input_tokens: prompt.ids.length });
}

/** A message cut short before the model ended it (server shutdown, request cancelled):
 * Anthropic's overloaded_error, which clients retry. */
function interrupted(): ApiError {
  return new ApiError(503, 'generation was interrupted before the message ended (the server is shutting down or the request was cancelled); retry',
    null, 'interrupted', 'server_error', { 'retry-after': '1' });
}

function contentBlock(b: Block): Record<string, unknown> {
  switch (b.kind) {
    case 'reasoning':
      return { type: 'thinking', thinking: b.text, signature: '' };
    case 'text':
      return { type: 'text', text: b.text };
    case 'tool_call':
      return { type: 'tool_use', id: b.call!.id, name: b.call!.name, input: JSON.parse(b.call!.arguments) as unknown };
  }
}

function usage(d: Done): Record<string, number> {
  return { input_tokens: d.usage.promptTokens - d.usage.cachedTokens, cache_read_input_tokens: d.usage.cachedTokens, cache_creation_input_tokens: 0, output_tokens: d.usage.completionTokens };
}

/** end_turn, max_tokens, tool_use, or stop_sequence with the sequence that matched. */
function stopReason(ctx: ServerContext, d: Done, blocks: readonly Block[], stops: readonly string[]): { reason: string; sequence: string | null } {
  if (d.finishReason === 'length') return { reason: 'max_tokens', sequence: null };
  if (blocks.some((b) => b.kind === 'tool_call' && !b.failed)) return { reason: 'tool_use', sequence: null };
  if (stops.length > 0) {
    const rest = ctx.engine.tokenizer.decode(d.outputIds).slice(d.text.length);
    const hit = stops.find((s) => s.length > 0 && rest.startsWith(s));
    if (hit !== undefined) return { reason: 'stop_sequence', sequence: hit };
  }
  return { reason: 'end_turn', sequence: null };
}

async function streamMessage(ctx: ServerContext, call: Call, run: Choice, head: Record<string, unknown>, answer: AnswerStream,
  stops: readonly string[]): Promise<void> {
  const sse = new SseStream(call.res);
  const send = (type: string, body: Record<string, unknown> = {}): void => sse.event(type, { type, ...body });
  send('message_start', { message: { ...head, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: run.promptIds.length, output_tokens: 0 } } });
  send('ping');
  const tracker = new BlockTracker();
  const emit = (events: BlockEvent[]): void => {
    for (const e of events) {
      const b = e.block;
      if (e.type === 'open') {
        const start = b.kind === 'reasoning' ? { type: 'thinking', thinking: '', signature: '' }
          : b.kind === 'text' ? { type: 'text', text: '' } : { type: 'tool_use', id: b.call!.id, name: b.call!.name, input: {} };
        send('content_block_start', { index: b.index, content_block: start });
      } else if (e.type === 'delta') {
        const delta = b.kind === 'reasoning' ? { type: 'thinking_delta', thinking: e.text }
          : b.kind === 'text' ? { type: 'text_delta', text: e.text } : { type: 'input_json_delta', partial_json: e.text };
        send('content_block_delta', { index: b.index, delta });
      } else send('content_block_stop', { index: b.index });
    }
  };
  const ev = await streamBlocks(run.events, answer, tracker, emit);
  if (ev) {
    if (ev.finishReason === 'error') {
      send('error', { error: { type: 'api_error', message: failed(ev).message } });
    } else if (ev.finishReason === 'abort') {
      // cut short (shutdown, cancelled): an end_turn would pass a truncated message as whole
      send('error', { error: { type: 'overloaded_error', message: interrupted().message } });
    } else {
      const { reason, sequence } = stopReason(ctx, ev, tracker.blocks, stops);
      send('message_delta', { delta: { stop_reason: reason, stop_sequence: sequence }, usage: { output_tokens: ev.usage.completionTokens } });
      send('message_stop');
    }
  }
  sse.end();
}
