// /v1/chat/completions with tools and structured output, through the official `openai`
// client against the real server (tiny-think). tiny-think cannot call tools by itself: the
// calls are forced by tool_choice (a grammar forcing a well-formed call), then parsed back.
// Also: chat.completions.parse with a zod schema, unimplemented fields (400 / --lenient),
// logit_bias, invalid schemas.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS, post, postStream } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
let lenient: RunningServer;
let client: OpenAI;
const MODEL = 'tiny-think';

const WEATHER: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather in a city',
    parameters: {
      type: 'object', additionalProperties: false, required: ['city', 'unit'],
      properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, unit: { enum: ['C', 'F'] }, days: { type: 'integer', minimum: 0, maximum: 9 } },
    },
  },
};
const TIME: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 8 } }, required: ['zone'] } },
};
const ASK: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
const NO_THINK = { chat_template_kwargs: { enable_thinking: false } };

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8 });
  server = await startServer(engine, { port: 0 });
  lenient = await startServer(engine, { port: 0, lenient: true });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.close();
  await lenient.close();
  await engine.close();
});

function checkWeatherCall(call: OpenAI.Chat.ChatCompletionMessageToolCall | undefined): Record<string, unknown> {
  assert.ok(call && call.type === 'function');
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
  assert.ok(['Paris', 'Oslo'].includes(args['city'] as string));
  assert.ok(['C', 'F'].includes(args['unit'] as string));
  if ('days' in args) assert.ok(Number.isInteger(args['days']) && (args['days'] as number) <= 9);
  return args;
}

test('tool round trip (non-streaming): a forced call, its result, then the final answer', async () => {
  const first = await client.chat.completions.create({
    model: MODEL, messages: ASK, tools: [WEATHER, TIME], tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 200, temperature: 0,
  });
  const c = first.choices[0]!;
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls?.length, 1);
  const call = c.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
  checkWeatherCall(call);
  assert.ok(((c.message as { reasoning_content?: string | null }).reasoning_content ?? '').length > 0, 'thinking on: reasoning precedes the call');
  const second = await client.chat.completions.create({
    model: MODEL, max_tokens: 48, temperature: 0, tools: [WEATHER, TIME],
    messages: [...ASK, c.message, { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(second.choices[0]!.finish_reason));
  assert.equal(typeof second.choices[0]!.message.content === 'string' || second.choices[0]!.message.tool_calls !== undefined, true);
  assert.ok(second.usage!.prompt_tokens > first.usage!.prompt_tokens, 'the call and its result are in the prompt');
  await drained(engine);
});

test('tool round trip (streaming): the SDK stream helper accumulates the same call; wire order is id+name, then arguments', async () => {
  const body = { model: MODEL, messages: ASK, tools: [WEATHER], tool_choice: 'required' as const, max_tokens: 200, temperature: 0, ...NO_THINK };
  const plain = await client.chat.completions.create(body);
  const stream = client.chat.completions.stream(body);
  const final = await stream.finalChatCompletion();
  const got = final.choices[0]!;
  assert.equal(got.finish_reason, 'tool_calls');
  const a = checkWeatherCall(got.message.tool_calls?.[0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall);
  assert.deepEqual(a, JSON.parse((plain.choices[0]!.message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall).function.arguments));
  const raw = await postStream(`${server.url}/v1/chat/completions`, { ...body, stream: true });
  type D = { tool_calls?: { index: number; id?: string; type?: string; function: { name?: string; arguments: string } }[] };
  const deltas = raw.events.map((e) => ((e['choices'] as { delta: D }[])[0]?.delta.tool_calls ?? [])).filter((t) => t.length > 0).map((t) => t[0]!);
  assert.equal(deltas[0]!.index, 0);
  assert.match(deltas[0]!.id!, /^call_/);
  assert.equal(deltas[0]!.type, 'function');
  assert.equal(deltas[0]!.function.name, 'get_weather');
  assert.equal(deltas[0]!.function.arguments, '');
  assert.ok(deltas.slice(1).every((d) => d.id === undefined && d.function.name === undefined));
  assert.deepEqual(JSON.parse(deltas.map((d) => d.function.arguments).join('')), a);
  const finish = raw.events.map((e) => (e['choices'] as { finish_reason: string | null }[])[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finish, ['tool_calls']);
  assert.ok(raw.sawDone);
});

test('tool_choice required picks one of the tools; a call cut by max_tokens is text with finish_reason length', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: [WEATHER, TIME], tool_choice: 'required', max_tokens: 300, temperature: 0, ...NO_THINK });
  const call = r.choices[0]!.message.tool_calls?.[0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
  assert.ok(['get_weather', 'get_time'].includes(call.function.name));
  const cut = await client.chat.completions.create({ model: MODEL, messages: ASK, tools: [WEATHER], tool_choice: 'required', max_tokens: 30, temperature: 0, ...NO_THINK });
  assert.equal(cut.choices[0]!.finish_reason, 'length');
  assert.equal(cut.choices[0]!.message.tool_calls, undefined);
  assert.match(cut.choices[0]!.message.content ?? '', /^<tool_call>/);
});

test('chat.completions.parse with a zod schema returns a parsed object (thinking on and off)', async () => {
  const Answer = z.object({ answer: z.number().int(), unit: z.enum(['cm', 'kg']).nullable(), ok: z.boolean() });
  for (const think of [true, false]) {
    const r = await client.chat.completions.parse({
      model: MODEL, messages: [{ role: 'user', content: 'What is 12 + 30?' }], response_format: zodResponseFormat(Answer, 'answer'),
      max_tokens: 200, temperature: 0, ...(think ? {} : NO_THINK),
    });
    const m = r.choices[0]!.message;
    assert.equal(r.choices[0]!.finish_reason, 'stop');
    assert.ok(m.parsed, m.content ?? '');
    assert.deepEqual(Answer.parse(m.parsed), m.parsed);
  }
  const obj = await client.chat.completions.create({ model: MODEL, messages: ASK, response_format: { type: 'json_object' }, max_tokens: 120, temperature: 0, ...NO_THINK });
  if (obj.choices[0]!.finish_reason === 'stop') assert.equal(typeof JSON.parse(obj.choices[0]!.message.content!), 'object');
});

test('errors: invalid schema, unknown tool name, unimplemented fields (400 naming them; --lenient ignores them)', async () => {
  const url = `${server.url}/v1/chat/completions`;
  const base = { model: MODEL, messages: ASK, max_tokens: 4 };
  const unenforceable = { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'array', uniqueItems: true } } } };
  const bad = await post(url, { ...base, ...unenforceable });
  assert.equal(bad.status, 400);
  assert.deepEqual([(bad.json['error'] as { param: string }).param, (bad.json['error'] as { code: string }).code], ['response_format.json_schema.schema', 'invalid_schema']);
  assert.match((bad.json['error'] as { message: string }).message, /"uniqueItems" \(item uniqueness, enforced only where the items are enums, consts, booleans or null \(at most 64 values\)\) cannot be enforced/);
  // --lenient enforces the rest; a malformed schema stays a 400
  assert.equal((await post(`${lenient.url}/v1/chat/completions`, { ...base, ...unenforceable })).status, 200);
  const malformed = await post(`${lenient.url}/v1/chat/completions`, { ...base, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'strin' } } } });
  assert.equal(malformed.status, 400);
  assert.match((malformed.json['error'] as { message: string }).message, /type "strin" is not a JSON Schema type/);
  const tool = await post(url, { ...base, tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } });
  assert.equal(tool.status, 400);
  assert.match((tool.json['error'] as { message: string }).message, /"nope", which is not among the tools/);
  for (const [field, value] of [['audio', { voice: 'x' }], ['prediction', { type: 'content', content: 'x' }], ['web_search_options', {}], ['bogus_field', 1]] as const) {
    const r = await post(url, { ...base, [field]: value });
    assert.equal(r.status, 400, field);
    assert.equal((r.json['error'] as { param: string }).param, field);
    const l = await post(`${lenient.url}/v1/chat/completions`, { ...base, [field]: value });
    assert.equal(l.status, 200, `lenient ${field}`);
  }
  assert.equal((await post(url, { ...base, store: false, user: 'u1', service_tier: 'auto' })).status, 200);
  // store / metadata are accepted and ignored (nothing is kept for chat completions)
  assert.equal((await post(url, { ...base, store: true, metadata: { tag: 'x' }, service_tier: 'default', max_completion_tokens: 2 })).status, 200);
  assert.equal((await post(`${server.url}/v1/completions`, { model: MODEL, prompt: 'Hi', max_tokens: 2, suffix: 'x' })).status, 400);
  assert.equal((await post(url, { ...base, logit_bias: { '5000000': 1 } })).status, 400);
});

test('logit_bias: a +100 bias makes greedy pick that token; -100 bans it (MTP on)', async () => {
  const ids = engine.tokenizer.encode(' seven');
  const id = ids[ids.length - 1]!;
  const r = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: 'Count:', max_tokens: 5, temperature: 0, logit_bias: { [id]: 100 } });
  assert.equal(r.status, 200);
  const text = (r.json['choices'] as { text: string }[])[0]!.text;
  assert.equal(text, engine.tokenizer.decode([id, id, id, id, id]));
  const plain = await engine.complete({ prompt: 'Count:', maxTokens: 8, temperature: 0 });
  const first = plain.outputIds[0]!;
  const banned = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: 'Count:', max_tokens: 8, temperature: 0, logit_bias: { [first]: -100 } });
  const out = engine.tokenizer.encode((banned.json['choices'] as { text: string }[])[0]!.text);
  assert.notEqual(out[0], first);
});
