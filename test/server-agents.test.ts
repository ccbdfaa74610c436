// /v1/responses through the official `openai` client and /v1/messages through the official
// `@anthropic-ai/sdk` client (x-api-key auth), against the real server on tiny-think:
// plain and streaming answers equal the chat route's, tool round trips (calls forced by
// tool_choice), structured output, and errors in each API's shape.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { violation } from './json-schema-check.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS, post } from './server-helpers.js';

const KEY = 'sk-agents-test';
let engine: Engine;
let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;
const MODEL = 'tiny-think';
const Q = 'What is 12 + 30?';
const WEATHER_SCHEMA = {
  type: 'object', additionalProperties: false, required: ['city'],
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', minimum: 0, maximum: 9 } },
};

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8 });
  server = await startServer(engine, { port: 0, apiKey: KEY });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEY, maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: KEY, maxRetries: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

test('responses.create: reasoning item then message, equal to the chat route; usage', async () => {
  const r = await openai.responses.create({ model: MODEL, input: Q, max_output_tokens: 96, temperature: 0 });
  const chat = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: Q }], max_tokens: 96, temperature: 0 });
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed');
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
  const reasoning = r.output[0] as OpenAI.Responses.ResponseReasoningItem;
  const msg = chat.choices[0]!.message as typeof chat.choices[0]['message'] & { reasoning_content: string };
  assert.equal(reasoning.content?.[0]?.text, msg.reasoning_content);
  assert.equal(r.output_text, msg.content);
  assert.equal(r.usage?.output_tokens, chat.usage?.completion_tokens);
  assert.equal(r.usage?.input_tokens, chat.usage?.prompt_tokens);
  const short = await openai.responses.create({ model: MODEL, input: [{ role: 'user', content: Q }], instructions: 'Be brief.', max_output_tokens: 3 });
  assert.equal(short.status, 'incomplete');
  assert.equal(short.incomplete_details?.reason, 'max_output_tokens');
});

test('responses.stream: the typed event sequence accumulates to the plain response', async () => {
  const body = { model: MODEL, input: Q, max_output_tokens: 96, temperature: 0 };
  const plain = await openai.responses.create(body);
  const stream = openai.responses.stream(body);
  const types: string[] = [];
  const seqs: number[] = [];
  stream.on('event', (e) => {
    types.push(e.type);
    seqs.push(e.sequence_number);
  });
  const final = await stream.finalResponse();
  assert.equal(final.output_text, plain.output_text);
  assert.deepEqual(final.output.map((o) => o.type), plain.output.map((o) => o.type));
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types[types.length - 1], 'response.completed');
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done']) assert.ok(types.includes(t), t);
  assert.deepEqual(seqs, seqs.map((_, i) => i));
});

test('responses: function tool round trip (forced call → function_call_output → answer); text.format json_schema', async () => {
  const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', parameters: WEATHER_SCHEMA, strict: true }];
  const r = await openai.responses.create({
    model: MODEL, input: 'Weather in Paris?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 200, temperature: 0,
    reasoning: { effort: 'minimal' },
  });
  const call = r.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
  assert.ok(call, JSON.stringify(r.output));
  assert.match(call.call_id, /^call_/);
  assert.equal(violation(WEATHER_SCHEMA, JSON.parse(call.arguments)), null);
  const streamed = await openai.responses.stream({
    model: MODEL, input: 'Weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 200, temperature: 0, reasoning: { effort: 'minimal' },
  }).finalResponse();
  const sc = streamed.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
  assert.deepEqual(JSON.parse(sc.arguments), JSON.parse(call.arguments));
  const next = await openai.responses.create({
    model: MODEL, tools, max_output_tokens: 64, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' }],
  });
  assert.ok(next.usage!.input_tokens > r.usage!.input_tokens);
  const schema = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'], additionalProperties: false };
  const j = await openai.responses.create({
    model: MODEL, input: Q, max_output_tokens: 200, temperature: 0, text: { format: { type: 'json_schema', name: 'a', schema, strict: true } },
  });
  assert.equal(j.status, 'completed');
  assert.equal(violation(schema, JSON.parse(j.output_text)), null);
  await drained(engine);
});

test('responses: an unknown previous_response_id, unserved include values and unknown fields are 400s naming them', async () => {
  const h = { authorization: `Bearer ${KEY}` };
  for (const [k, v] of [['store', 'yes'], ['previous_response_id', 'resp_1'], ['include', ['file_search_call.results']], ['junk', 1]] as const) {
    const r = await post(`${server.url}/v1/responses`, { model: MODEL, input: 'hi', [k]: v }, h);
    assert.equal(r.status, 400, k);
    assert.equal((r.json['error'] as { param: string }).param, k);
  }
});

test('messages.create: text answer; thinking blocks when enabled; stop_sequences', async () => {
  const plain = await anthropic.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: Q }], temperature: 0 });
  assert.match(plain.id, /^msg_/);
  assert.equal(plain.type, 'message');
  assert.deepEqual(plain.content.map((c) => c.type), ['text']);
  assert.equal(plain.stop_reason, 'end_turn');
  const chat = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: Q }], max_tokens: 64, temperature: 0, chat_template_kwargs: { enable_thinking: false } } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
  assert.equal((plain.content[0] as Anthropic.TextBlock).text, chat.choices[0]!.message.content);
  const think = await anthropic.messages.create({
    model: MODEL, max_tokens: 96, system: 'You are helpful.', messages: [{ role: 'user', content: Q }], temperature: 0,
    thinking: { type: 'enabled', budget_tokens: 1024 },
  });
  assert.equal(think.content[0]!.type, 'thinking');
  assert.ok((think.content[0] as Anthropic.ThinkingBlock).thinking.length > 0);
  // budget_tokens below Anthropic's minimum of 1024 is refused (the budget's cut itself is
  // tested on the engine in server-thinking.test.ts)
  await assert.rejects(anthropic.messages.create({
    model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: Q }], temperature: 0, thinking: { type: 'enabled', budget_tokens: 3 },
  }), (e: unknown) => e instanceof Anthropic.BadRequestError && /budget_tokens must be at least 1024/.test(e.message));
  const text = (plain.content[0] as Anthropic.TextBlock).text;
  if (text.length >= 2) {
    const stop = text.slice(1, 2);
    const s = await anthropic.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: Q }], temperature: 0, stop_sequences: [stop] });
    assert.equal(s.stop_reason, 'stop_sequence');
    assert.equal(s.stop_sequence, stop);
  }
});

test('messages.stream: the event sequence accumulates to the plain message (thinking on)', async () => {
  const body = { model: MODEL, max_tokens: 96, messages: [{ role: 'user' as const, content: Q }], temperature: 0, thinking: { type: 'enabled' as const, budget_tokens: 1024 } };
  const plain = await anthropic.messages.create(body);
  const types: string[] = [];
  const stream = anthropic.messages.stream(body);
  stream.on('streamEvent', (e) => types.push(e.type));
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, plain.content);
  assert.equal(final.stop_reason, plain.stop_reason);
  assert.equal(types[0], 'message_start');
  assert.equal(types[types.length - 1], 'message_stop');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_delta') && types.includes('content_block_stop'));
  assert.equal(types[types.length - 2], 'message_delta');
});

test('messages: tool_use round trip (forced), streaming tool_use input, tool_result back', async () => {
  const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'Weather', input_schema: WEATHER_SCHEMA as Anthropic.Tool.InputSchema }];
  const ask: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
  const r = await anthropic.messages.create({ model: MODEL, max_tokens: 200, messages: ask, tools, tool_choice: { type: 'tool', name: 'get_weather' }, temperature: 0 });
  assert.equal(r.stop_reason, 'tool_use');
  const use = r.content.find((c) => c.type === 'tool_use') as Anthropic.ToolUseBlock;
  assert.match(use.id, /^toolu_/);
  assert.equal(violation(WEATHER_SCHEMA, use.input), null);
  const streamed = await anthropic.messages.stream({ model: MODEL, max_tokens: 200, messages: ask, tools, tool_choice: { type: 'any' }, temperature: 0 }).finalMessage();
  const su = streamed.content.find((c) => c.type === 'tool_use') as Anthropic.ToolUseBlock;
  assert.deepEqual(su.input, use.input);
  assert.equal(streamed.stop_reason, 'tool_use');
  const next = await anthropic.messages.create({
    model: MODEL, max_tokens: 48, tools, temperature: 0,
    messages: [...ask, { role: 'assistant', content: r.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 C' }] }],
  });
  assert.ok(next.usage.input_tokens + (next.usage.cache_read_input_tokens ?? 0) > r.usage.input_tokens);
  await drained(engine);
});

test('messages.countTokens equals the prompt of messages.create', async () => {
  const params = { model: MODEL, system: 'Be brief.', messages: [{ role: 'user' as const, content: Q }] };
  const count = await anthropic.messages.countTokens(params);
  const r = await anthropic.messages.create({ ...params, max_tokens: 2, temperature: 0 });
  assert.equal(count.input_tokens, r.usage.input_tokens + (r.usage.cache_read_input_tokens ?? 0));
});

test('messages: errors in Anthropic shape; x-api-key and Bearer both authenticate', async () => {
  const bad = new Anthropic({ baseURL: server.url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }), (e: unknown) => e instanceof Anthropic.AuthenticationError);
  const noMax = await post(`${server.url}/v1/messages`, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': KEY });
  assert.equal(noMax.status, 400);
  assert.deepEqual(noMax.json, { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: Field required' } });
  const img = await post(`${server.url}/v1/messages`, { model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, { authorization: `Bearer ${KEY}` });
  assert.equal(img.status, 400);
  assert.match((img.json['error'] as { message: string }).message, /messages\[0\]\.content\[0\]\.source\.type must be "base64" or "url"/);
  const unknown = await post(`${server.url}/v1/messages`, { model: 'other', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': KEY });
  assert.equal(unknown.status, 404);
  assert.equal((unknown.json['error'] as { type: string }).type, 'not_found_error');
});
