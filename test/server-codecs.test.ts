// The four dialects are codecs over one turn pipeline (src/server/api/turn.ts). One request,
// said in each dialect, must become the same turn: the same parsed turn request, the same
// prompt ids, the same constraint (a forced tool call generated greedily gives the same
// arguments), and the same prompt-stage refusal of an over-long prompt, each in its
// dialect's own error shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { chatCodec } from '../src/server/api/chat.js';
import { completionsCodec } from '../src/server/api/completions.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { messagesCodec } from '../src/server/api/messages.js';
import { ServerMetrics } from '../src/server/api/metrics.js';
import { ResponseStore } from '../src/server/api/responses-store.js';
import { responsesCodec } from '../src/server/api/responses.js';
import type { ServerContext } from '../src/server/context.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS, post } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
const MODEL = 'tiny-think';
const CONTEXT = 2048;

const ASK = 'What is the weather in Paris?';
const WEATHER_PARAMS = {
  type: 'object', additionalProperties: false, required: ['city', 'unit'],
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, unit: { enum: ['C', 'F'] }, days: { type: 'integer', minimum: 0, maximum: 9 } },
};
const DESCRIPTION = 'Current weather in a city';

/** The same request in each chat-style dialect: one user message, thinking off, the weather
 * tool forced, greedy, 320 tokens at most (the tiny tokenizer spells the call out). */
function chatBody(text: string): Record<string, unknown> {
  return {
    model: MODEL, messages: [{ role: 'user', content: text }], temperature: 0, max_tokens: 320, chat_template_kwargs: { enable_thinking: false },
    tools: [{ type: 'function', function: { name: 'get_weather', description: DESCRIPTION, parameters: WEATHER_PARAMS } }],
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  };
}
function messagesBody(text: string): Record<string, unknown> {
  return {
    model: MODEL, messages: [{ role: 'user', content: text }], temperature: 0, max_tokens: 320,
    tools: [{ name: 'get_weather', description: DESCRIPTION, input_schema: WEATHER_PARAMS }], tool_choice: { type: 'tool', name: 'get_weather' },
  };
}
function responsesBody(text: string): Record<string, unknown> {
  return {
    model: MODEL, input: text, temperature: 0, max_output_tokens: 320, reasoning: { effort: 'none' }, store: false,
    tools: [{ type: 'function', name: 'get_weather', description: DESCRIPTION, parameters: WEATHER_PARAMS }],
    tool_choice: { type: 'function', name: 'get_weather' },
  };
}

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, maxContext: CONTEXT, prefixCache: false });
  server = await startServer(engine, { port: 0, servedModelName: MODEL });
});
after(async () => {
  await server.close();
  await engine.close();
});

test('the chat-style codecs parse one request into the same turn request', () => {
  const ctx: ServerContext = {
    engine, modelName: MODEL, created: 0, metrics: new ServerMetrics(), defaults: { temperature: 1, topP: 1, topK: 0 }, maxQueue: 8, maxQueueWait: 60,
    texts: new TokenTexts(engine.tokenizer), responses: { store: new ResponseStore({ maxBytes: 1 << 20, ttlSeconds: 60 }), key: Buffer.alloc(32) },
  };
  const chat = chatCodec.parse(ctx, chatBody(ASK));
  const messages = messagesCodec.parse(ctx, messagesBody(ASK));
  const responses = responsesCodec.parse(ctx, responsesBody(ASK));
  const shared = (t: typeof chat | typeof messages | typeof responses): unknown => ({
    prompt: { ...t.prompt, param: undefined }, tools: t.tools, format: t.format, thinkingBudget: t.thinkingBudget,
    topLogprobs: t.topLogprobs, n: t.params.n, stream: t.params.stream, request: t.params.request,
  });
  assert.equal(chat.prompt.kind, 'chat');
  assert.deepEqual(shared(messages), shared(chat));
  assert.deepEqual(shared(responses), shared(chat));
  // each dialect names its own prompt field
  assert.deepEqual([chat, messages, responses].map((t) => t.prompt.kind === 'chat' ? t.prompt.param : null), ['messages', 'messages', 'input']);
  // the raw dialect: one text prompt, no tools, no constraint inputs
  const raw = completionsCodec.parse(ctx, { model: MODEL, prompt: ASK, temperature: 0, max_tokens: 320 });
  assert.deepEqual(raw.prompt, { kind: 'raw', inputs: [{ text: ASK, param: 'prompt' }] });
  assert.equal(raw.tools, null);
  assert.deepEqual(raw.params.request, chat.params.request);
});

test('one forced tool call through chat, messages and responses (and count_tokens): same prompt ids, same constrained arguments', async () => {
  const chat = await post(`${server.url}/v1/chat/completions`, chatBody(ASK));
  const messages = await post(`${server.url}/v1/messages`, messagesBody(ASK));
  const responses = await post(`${server.url}/v1/responses`, responsesBody(ASK));
  assert.equal(chat.status, 200, JSON.stringify(chat.json));
  assert.equal(messages.status, 200, JSON.stringify(messages.json));
  assert.equal(responses.status, 200, JSON.stringify(responses.json));

  const chatUsage = chat.json['usage'] as Record<string, number>;
  const msgUsage = messages.json['usage'] as Record<string, number>;
  const respUsage = responses.json['usage'] as Record<string, number>;
  assert.ok(chatUsage['prompt_tokens']! > 0);
  assert.equal(msgUsage['input_tokens']! + msgUsage['cache_read_input_tokens']!, chatUsage['prompt_tokens']);
  assert.equal(respUsage['input_tokens'], chatUsage['prompt_tokens']);
  // count_tokens runs the same prompt stage without generating
  const { temperature: _t, max_tokens: _m, ...countBody } = messagesBody(ASK);
  const counted = await post(`${server.url}/v1/messages/count_tokens`, countBody);
  assert.equal(counted.status, 200, JSON.stringify(counted.json));
  assert.equal(counted.json['input_tokens'], chatUsage['prompt_tokens']);
  assert.equal(msgUsage['output_tokens'], chatUsage['completion_tokens']);
  assert.equal(respUsage['output_tokens'], chatUsage['completion_tokens']);

  const chatChoice = (chat.json['choices'] as Record<string, unknown>[])[0]!;
  assert.equal(chatChoice['finish_reason'], 'tool_calls', JSON.stringify(chatChoice));
  const chatMessage = chatChoice['message'] as Record<string, unknown>;
  const chatCall = (chatMessage['tool_calls'] as Record<string, Record<string, string>>[])[0]!;
  const chatArgs = JSON.parse(chatCall['function']!['arguments']!) as unknown;
  const toolUse = (messages.json['content'] as Record<string, unknown>[]).find((b) => b['type'] === 'tool_use')!;
  const fnCall = (responses.json['output'] as Record<string, unknown>[]).find((o) => o['type'] === 'function_call')!;
  assert.equal(chatCall['function']!['name'], 'get_weather');
  assert.equal(toolUse['name'], 'get_weather');
  assert.equal(fnCall['name'], 'get_weather');
  assert.deepEqual(toolUse['input'], chatArgs);
  assert.deepEqual(JSON.parse(fnCall['arguments'] as string), chatArgs);
  assert.equal(messages.json['stop_reason'], 'tool_use');
  await drained(engine);
});

test('an over-long prompt: the same prompt-stage refusal in every codec, each in its own error shape', async () => {
  const long = 'weather '.repeat(CONTEXT + 64);
  const chat = await post(`${server.url}/v1/chat/completions`, chatBody(long));
  const messages = await post(`${server.url}/v1/messages`, messagesBody(long));
  const responses = await post(`${server.url}/v1/responses`, responsesBody(long));
  const completions = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: long, max_tokens: 8 });
  for (const r of [chat, messages, responses, completions]) assert.equal(r.status, 400, JSON.stringify(r.json));

  const openAi = (r: typeof chat): Record<string, unknown> => r.json['error'] as Record<string, unknown>;
  assert.equal(openAi(chat)['code'], 'context_length_exceeded');
  assert.equal(openAi(chat)['param'], 'messages');
  assert.equal(openAi(responses)['code'], 'context_length_exceeded');
  assert.equal(openAi(responses)['param'], 'input');
  assert.equal(openAi(completions)['code'], 'context_length_exceeded');
  assert.equal(openAi(completions)['param'], 'prompt');
  // Anthropic's shape: {type: "error", error: {type, message}}, no OpenAI code or param
  assert.equal(messages.json['type'], 'error');
  const anthropic = messages.json['error'] as Record<string, unknown>;
  assert.deepEqual(Object.keys(anthropic).sort(), ['message', 'type']);
  assert.equal(anthropic['type'], 'invalid_request_error');

  // the same rendered prompt, measured once: the chat-style messages differ only in the field named
  const tokens = (m: unknown): number => Number(/the prompt is (\d+) tokens/.exec(String(m))?.[1]);
  const n = tokens(openAi(chat)['message']);
  assert.ok(n > CONTEXT, `prompt of ${n} tokens`);
  assert.equal(anthropic['message'], openAi(chat)['message']);
  assert.equal(openAi(responses)['message'], String(openAi(chat)['message']).replace(/^messages:/, 'input:'));
  assert.ok(tokens(openAi(completions)['message']) > CONTEXT);
  assert.ok(tokens(openAi(completions)['message']) < n, 'the raw prompt has no template around it');
  await drained(engine);
});
