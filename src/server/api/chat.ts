// POST /v1/chat/completions: chat template (thinking on unless
// chat_template_kwargs.enable_thinking is false or reasoning_effort is none / minimal), n choices, `reasoning_content` split out
// of <think>…</think>, tool calls parsed out of the answer (`tools`, `tool_choice`,
// `parallel_tool_calls`), structured output (`response_format`), logprobs / top_logprobs,
// logit_bias, SSE streaming with optional usage chunk. Unimplemented fields are a 400.
// A codec over the turn pipeline (turn.ts): parse → TurnRequest, render → JSON or SSE.
import { TurnImages, withImages } from './images.js';
import type { ChatMessage } from '../../frontend/chat-template.js';
import { REQUEST_PARAMS } from '../../engine/request-rules.js';
import type { ServerContext } from '../context.js';
import type { Call } from '../http/call.js';
import { invalid } from '../http/errors.js';
import { DEFAULT_LIMITS } from '../http/limits.js';
import { sendJson } from '../http/respond.js';
import { SseStream } from '../http/sse.js';
import { openAiResponseFormat } from './structured.js';
import { openAiHistoryCalls, openAiToolChoice, openAiTools } from './tools/openai.js';
import { type AnswerPart, AnswerStream, chatFinishReason, parseAnswer } from './answer.js';
import { checkModel, collectAll, type Done, failed, responseId, usageOf } from './choices.js';
import { COMMON_FIELDS, type FieldRules } from './fields.js';
import { chatLogprobs, type TokenLogprob } from './logprobs.js';
import { speculativeOf } from './stats.js';
import { type Codec, runTurn, type Turn, turnParams } from './turn.js';
import { type Body, optBool, optObject, optParam } from './validate.js';

const CHAT_FIELDS: FieldRules = {
  ...COMMON_FIELDS,
  messages: true, max_tokens: true, max_completion_tokens: true, top_logprobs: true, chat_template_kwargs: true,
  tools: true, tool_choice: true, parallel_tool_calls: true, response_format: true, reasoning_effort: true,
  // accepted and ignored: nothing is kept (store) and nothing reads tags (metadata); the
  // prefix cache is automatic (prompt_cache_key)
  store: (v) => typeof v === 'boolean', metadata: (v) => typeof v === 'object' && !Array.isArray(v), prompt_cache_key: (v) => typeof v === 'string',
  // the values that ask for what is served anyway: text out, the one verbosity
  modalities: (v) => Array.isArray(v) && v.every((m) => m === 'text'), verbosity: (v) => v === 'medium',
};

const EFFORTS = ['none', 'minimal', 'low', 'medium', 'high'];

/** Thinking of a chat request: chat_template_kwargs.enable_thinking when given, else
 * reasoning_effort (none / minimal → off; low / medium / high → on), else on. */
function chatThinking(b: Body, kwargs: Body): boolean {
  const et = kwargs['enable_thinking'];
  if (et !== undefined && et !== null && typeof et !== 'boolean') {
    throw invalid('chat_template_kwargs.enable_thinking', 'chat_template_kwargs.enable_thinking must be a boolean');
  }
  const effort = b['reasoning_effort'];
  if (effort !== undefined && effort !== null && !EFFORTS.includes(effort as string)) {
    throw invalid('reasoning_effort', `reasoning_effort must be one of ${EFFORTS.map((e) => `"${e}"`).join(', ')} (got ${JSON.stringify(effort)})`);
  }
  if (typeof et === 'boolean') return et;
  return effort !== 'none' && effort !== 'minimal';
}

/** Text of a content field: a string or OpenAI parts — text (`{type: "text", text}`) and
 * images (`{type: "image_url", image_url: {url}}`, each standing as `images`' sentinel). */
function contentText(c: unknown, param: string, images: TurnImages): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw invalid(param, `${param} must be a string or an array of text parts`);
  return c.map((part: unknown, j) => {
    const p = part as Body | null;
    if (typeof p === 'object' && p !== null && p['type'] === 'image_url') {
      const iu = p['image_url'];
      return images.addUrl(typeof iu === 'string' ? iu : (iu as Body | null)?.['url'], `${param}[${j}]`);
    }
    if (typeof p !== 'object' || p === null || p['type'] !== 'text' || typeof p['text'] !== 'string') {
      throw invalid(`${param}[${j}]`, `${param}[${j}] must be a text part {"type": "text", "text": "..."} or an image_url part`);
    }
    return p['text'];
  }).join('');
}

/** Roles of OpenAI chat messages (`developer` is rendered as `system`). */
const CHAT_ROLES: ReadonlySet<string> = new Set(['system', 'developer', 'user', 'assistant', 'tool']);

/** OpenAI messages → template messages: content parts joined, `developer` → `system`,
 * assistant `tool_calls` (arguments parsed), `tool` results with their call id. */
function normalizeMessages(v: unknown, maxDepth: number, images: TurnImages): ChatMessage[] {
  if (v === undefined || v === null) throw invalid('messages', 'messages is required');
  if (!Array.isArray(v)) throw invalid('messages', 'messages must be an array');
  if (v.length === 0) throw invalid('messages', 'messages must not be empty');
  return v.map((m: unknown, i): ChatMessage => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw invalid(`messages[${i}]`, `messages[${i}] must be an object`);
    const o = m as Body;
    const role = o['role'];
    if (typeof role !== 'string') throw invalid(`messages[${i}].role`, `messages[${i}].role must be a string`);
    if (!CHAT_ROLES.has(role)) {
      throw invalid(`messages[${i}].role`, `messages[${i}].role must be one of ${[...CHAT_ROLES].join(', ')} (got ${JSON.stringify(role.slice(0, 64))})`);
    }
    const calls = role === 'assistant' && o['tool_calls'] !== undefined && o['tool_calls'] !== null ? openAiHistoryCalls(o['tool_calls'], i, maxDepth) : [];
    const c = o['content'];
    const content = (c === null || c === undefined) && role === 'assistant' ? '' : contentText(c, `messages[${i}].content`, images);
    const out: ChatMessage = { role: role === 'developer' ? 'system' : role, content };
    if (typeof o['reasoning_content'] === 'string') out.reasoning_content = o['reasoning_content'];
    if (calls.length > 0) out.tool_calls = calls;
    if (role === 'tool') {
      if (typeof o['tool_call_id'] === 'string') out.tool_call_id = o['tool_call_id'];
      if (typeof o['name'] === 'string') out.name = o['name'];
    }
    return out;
  });
}

export const chatCodec: Codec<undefined> = {
  path: '/v1/chat/completions',
  fields: CHAT_FIELDS,
  parse(ctx, b) {
    checkModel(ctx, b);
    const images = new TurnImages();
    const messages = normalizeMessages(b['messages'], ctx.limits?.jsonDepth ?? DEFAULT_LIMITS.jsonDepth, images);
    const params = turnParams(ctx, b, ['max_completion_tokens', 'max_tokens']);
    const wantLogprobs = optBool(b, 'logprobs') ?? false;
    const top = optParam(b, 'top_logprobs', REQUEST_PARAMS.topLogprobs);
    if (top !== undefined && !wantLogprobs) throw invalid('top_logprobs', 'top_logprobs requires logprobs to be true');
    const kwargs = { ...(optObject(b, 'chat_template_kwargs') ?? {}) };
    const think = chatThinking(b, kwargs);
    delete kwargs['enable_thinking'];
    const tools = openAiTools(b['tools']);
    const choice = openAiToolChoice(b['tool_choice'], tools);
    return {
      prompt: { kind: 'chat', messages, think, kwargs, param: 'messages', ...withImages(images) },
      params,
      tools: { tools, choice, parallel: optBool(b, 'parallel_tool_calls') ?? true },
      format: openAiResponseFormat(b['response_format'], 'response_format'),
      thinkingBudget: null,
      topLogprobs: wantLogprobs ? top ?? 0 : null,
      own: undefined,
    };
  },
  render(ctx, call, turn) {
    const head = { id: responseId('chatcmpl'), created: Math.floor(Date.now() / 1000), model: ctx.modelName };
    const { params } = turn.request;
    return params.stream ? streamChat(ctx, call, turn, head, params.includeUsage) : respondChat(ctx, call, turn, head);
  },
};

/** POST /v1/chat/completions. */
export const chatCompletions = (ctx: ServerContext, call: Call): Promise<void> => runTurn(ctx, call, chatCodec);

/** `speculative` (MTP rounds / accept length, see stats.ts) when any verify round ran. */
function withSpeculative(dones: readonly Done[]): Record<string, unknown> {
  const spec = speculativeOf(dones);
  return spec ? { speculative: spec } : {};
}

type Head = { id: string; created: number; model: string };

function openAiToolCall(id: string, name: string, args: string): Record<string, unknown> {
  return { id, type: 'function', function: { name, arguments: args } };
}

async function respondChat(ctx: ServerContext, call: Call, turn: Turn<undefined>, head: Head): Promise<void> {
  const { choices, tools } = turn;
  const thinking = turn.prompts[0]!.thinking;
  const wantLogprobs = turn.request.topLogprobs !== null;
  const results = await collectAll(choices);
  sendJson(call.res, 200, {
    ...head, object: 'chat.completion',
    choices: results.map((r, i) => {
      const a = parseAnswer(r.text, thinking, tools);
      const message: Record<string, unknown> = {
        role: 'assistant', content: a.calls.length > 0 && a.content === '' ? null : a.content, reasoning_content: a.reasoning,
      };
      if (a.calls.length > 0) message['tool_calls'] = a.calls.map((c) => openAiToolCall(c.id, c.call.name, c.call.arguments));
      return {
        index: choices[i]!.index,
        message,
        logprobs: wantLogprobs ? { content: chatLogprobs(r.logprobs, ctx.texts), refusal: null } : null,
        finish_reason: chatFinishReason(r.done.finishReason, a.calls.length),
      };
    }),
    usage: usageOf(results.map((r) => r.done), turn.request.params.n),
    ...withSpeculative(results.map((r) => r.done)),
  });
}

async function streamChat(ctx: ServerContext, call: Call, turn: Turn<undefined>, head: Head, includeUsage: boolean): Promise<void> {
  const { choices, tools } = turn;
  const thinking = turn.prompts[0]!.thinking;
  const wantLogprobs = turn.request.topLogprobs !== null;
  const sse = new SseStream(call.res);
  const base = { ...head, object: 'chat.completion.chunk' };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (index: number, delta: Record<string, unknown>, lps: TokenLogprob[] | null, finish: string | null): void => {
    sse.send({
      ...base,
      choices: [{ index, delta, logprobs: lps ? { content: chatLogprobs(lps, ctx.texts), refusal: null } : null, finish_reason: finish }],
      ...usageNull,
    });
  };
  for (const c of choices) chunk(c.index, { role: 'assistant', content: '' }, null, null);
  const dones = await Promise.all(choices.map(async (c): Promise<Done | null> => {
    const answer = new AnswerStream(thinking, tools, 'call_', true);
    // tool call index by call id, in the order the calls started
    const callIndex = new Map<string, number>();
    // parts in order; a chunk of text deltas before each call; OpenAI's call order: index, id
    // and name first (empty arguments), then the argument fragments as they are generated
    const emit = (parts: AnswerPart[], lps: TokenLogprob[]): void => {
      let delta: Record<string, string> = {};
      let pendingLps = lps;
      const flushText = (): void => {
        if (Object.keys(delta).length === 0 && pendingLps.length === 0) return;
        chunk(c.index, delta, wantLogprobs ? pendingLps : null, null);
        delta = {};
        pendingLps = [];
      };
      for (const part of parts) {
        if (part.type === 'reasoning') delta['reasoning_content'] = (delta['reasoning_content'] ?? '') + part.text;
        else if (part.type === 'content') delta['content'] = (delta['content'] ?? '') + part.text;
        else if (part.type === 'tool_call_start') {
          flushText();
          callIndex.set(part.id, callIndex.size);
          chunk(c.index, { tool_calls: [{ index: callIndex.get(part.id), ...openAiToolCall(part.id, part.name, '') }] }, null, null);
        } else if (part.type === 'tool_call_delta') {
          flushText();
          chunk(c.index, { tool_calls: [{ index: callIndex.get(part.id), function: { arguments: part.text } }] }, null, null);
        }
        // tool_call: its arguments were all sent; tool_call_fail: what was sent stays
      }
      flushText();
    };
    for await (const ev of c.events) {
      if (ev.type === 'delta') {
        emit(answer.push(ev.text), c.logprobs ? c.logprobs.take(ev.ids) : []);
        continue;
      }
      emit(answer.flush(), []);
      chunk(c.index, {}, null, chatFinishReason(ev.finishReason, answer.callCount));
      if (ev.finishReason === 'error') sse.send(failed(ev).body());
      return ev;
    }
    return null;
  }));
  if (includeUsage && dones.every((d) => d !== null)) {
    sse.send({ ...base, choices: [], usage: usageOf(dones as Done[], turn.request.params.n), ...withSpeculative(dones as Done[]) });
  }
  sse.done();
}
