// POST /v1/chat/completions: chat template (thinking on unless
// chat_template_kwargs.enable_thinking is false), n choices, `reasoning_content` split out
// of <think>…</think>, logprobs / top_logprobs, SSE streaming with optional usage chunk.
import type { ChatMessage } from '../tokenizer/chat.js';
import { promptOf } from '../engine/request-builder.js';
import { ReasoningSplitter, splitReasoning, THINK_OPEN } from '../tokenizer/reasoning.js';
import { invalid, toApiError } from './errors.js';
import {
  admit, type Call, cancelAll, checkModel, checkPromptLength, type Choice, collect, failed, type Done, responseId,
  type ServerContext, startChoices, usageOf,
} from './generation.js';
import { chatLogprobs, type TokenLogprob } from './logprobs.js';
import { sendJson } from './respond.js';
import { SseStream } from './sse.js';
import { type Body, commonParams, MAX_TOP_LOGPROBS, optBool, optInt, optObject, requireObject } from './validate.js';

/** Accept OpenAI content parts (`[{type: "text", text}]`) and the `developer` role. */
function normalizeMessages(v: unknown): unknown {
  if (v === undefined || v === null) throw invalid('messages', 'messages is required');
  if (!Array.isArray(v)) throw invalid('messages', 'messages must be an array');
  if (v.length === 0) throw invalid('messages', 'messages must not be empty');
  return v.map((m: unknown, i) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw invalid(`messages[${i}]`, `messages[${i}] must be an object`);
    const o = { ...(m as Body) };
    if (typeof o['role'] !== 'string') throw invalid(`messages[${i}].role`, `messages[${i}].role must be a string`);
    if (o['role'] === 'developer') o['role'] = 'system';
    const c = o['content'];
    if (Array.isArray(c)) {
      o['content'] = c.map((part: unknown, j) => {
        const p = part as Body | null;
        if (typeof p !== 'object' || p === null || p['type'] !== 'text' || typeof p['text'] !== 'string') {
          throw invalid(`messages[${i}].content[${j}]`, `messages[${i}].content[${j}] must be a text part {"type": "text", "text": "..."}`);
        }
        return p['text'];
      }).join('');
    } else if (c === null && o['role'] === 'assistant') o['content'] = '';
    if (typeof o['content'] !== 'string') throw invalid(`messages[${i}].content`, `messages[${i}].content must be a string or an array of text parts`);
    return o;
  });
}

/** The generated text starts inside a reasoning block when the prompt ends with `<think>\n`. */
export function promptOpensThinking(decodeTail: string): boolean {
  return decodeTail.trimEnd().endsWith(THINK_OPEN);
}

export async function chatCompletions(ctx: ServerContext, call: Call): Promise<void> {
  const { engine } = ctx;
  const b = requireObject(call.body);
  checkModel(ctx, b);
  const messages = normalizeMessages(b['messages']);
  const p = commonParams(b, engine.maxContext, engine.model.config.vocabSize, ctx.defaults, ['max_completion_tokens', 'max_tokens']);
  const wantLogprobs = optBool(b, 'logprobs') ?? false;
  const top = optInt(b, 'top_logprobs', 0, MAX_TOP_LOGPROBS);
  if (top !== undefined && !wantLogprobs) throw invalid('top_logprobs', 'top_logprobs requires logprobs to be true');
  const kwargs = { ...(optObject(b, 'chat_template_kwargs') ?? {}) };
  const et = kwargs['enable_thinking'];
  if (et !== undefined && et !== null && typeof et !== 'boolean') {
    throw invalid('chat_template_kwargs.enable_thinking', 'chat_template_kwargs.enable_thinking must be a boolean');
  }
  delete kwargs['enable_thinking'];
  let promptIds: number[];
  let boundaries: number[]; // where each message ends: prefix-cache snapshot points
  try {
    ({ ids: promptIds, boundaries } = promptOf(engine, { messages: messages as ChatMessage[], think: et !== false, chatTemplateKwargs: kwargs }));
  } catch (e) {
    throw toApiError(e, 'messages');
  }
  if (promptIds.length === 0) throw invalid('messages', 'the rendered prompt is empty');
  checkPromptLength(ctx, promptIds, 'messages');
  const thinking = promptOpensThinking(engine.tokenizer.decode(promptIds.slice(-4)));
  admit(ctx, p.n);
  let choices: Choice[];
  try {
    choices = startChoices(ctx, call, [promptIds], { ...p, request: { ...p.request, messageBoundaries: boundaries } }, wantLogprobs ? top ?? 0 : null);
  } catch (e) {
    throw toApiError(e, 'messages');
  }
  const head = { id: responseId('chatcmpl'), created: Math.floor(Date.now() / 1000), model: ctx.modelName };
  try {
    if (p.stream) await streamChat(ctx, call, choices, head, thinking, wantLogprobs, p.includeUsage, p.n);
    else await respondChat(ctx, call, choices, head, thinking, wantLogprobs, p.n);
  } finally {
    cancelAll(choices);
  }
}

type Head = { id: string; created: number; model: string };

async function respondChat(ctx: ServerContext, call: Call, choices: Choice[], head: Head, thinking: boolean,
  wantLogprobs: boolean, n: number): Promise<void> {
  const results = await Promise.all(choices.map(collect));
  const err = results.find((r) => r.done.finishReason === 'error');
  if (err) throw failed(err.done);
  sendJson(call.res, 200, {
    ...head, object: 'chat.completion',
    choices: results.map((r, i) => {
      const { reasoning, content } = splitReasoning(r.text, thinking);
      return {
        index: choices[i]!.index,
        message: { role: 'assistant', content, reasoning_content: reasoning },
        logprobs: wantLogprobs ? { content: chatLogprobs(r.logprobs, ctx.texts), refusal: null } : null,
        finish_reason: r.done.finishReason,
      };
    }),
    usage: usageOf(results.map((r) => r.done), n),
  });
}

async function streamChat(ctx: ServerContext, call: Call, choices: Choice[], head: Head, thinking: boolean,
  wantLogprobs: boolean, includeUsage: boolean, n: number): Promise<void> {
  const sse = new SseStream(call.res);
  const base = { ...head, object: 'chat.completion.chunk' };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (index: number, delta: Record<string, string>, lps: TokenLogprob[] | null, finish: string | null): void => {
    sse.send({
      ...base,
      choices: [{ index, delta, logprobs: lps ? { content: chatLogprobs(lps, ctx.texts), refusal: null } : null, finish_reason: finish }],
      ...usageNull,
    });
  };
  for (const c of choices) chunk(c.index, { role: 'assistant', content: '' }, null, null);
  const dones = await Promise.all(choices.map(async (c): Promise<Done | null> => {
    const splitter = new ReasoningSplitter(thinking);
    const emit = (part: { reasoning: string; content: string }, lps: TokenLogprob[]): void => {
      const delta: Record<string, string> = {};
      if (part.reasoning) delta['reasoning_content'] = part.reasoning;
      if (part.content) delta['content'] = part.content;
      if (part.reasoning || part.content || lps.length > 0) chunk(c.index, delta, wantLogprobs ? lps : null, null);
    };
    for await (const ev of c.events) {
      if (ev.type === 'delta') {
        emit(splitter.push(ev.text), c.logprobs ? c.logprobs.take(ev.ids) : []);
        continue;
      }
      emit(splitter.flush(), []);
      chunk(c.index, {}, null, ev.finishReason);
      if (ev.finishReason === 'error') sse.send(failed(ev).body());
      return ev;
    }
    return null;
  }));
  if (includeUsage && dones.every((d) => d !== null)) sse.send({ ...base, choices: [], usage: usageOf(dones as Done[], n) });
  sse.done();
}
