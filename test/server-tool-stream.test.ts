// Tool-call arguments stream as they are generated, on the live server with
// tiny-think (calls forced by tool_choice, so the grammar guarantees valid JSON): chat chunks
// (id + name first, then argument fragments), Responses `function_call_arguments.delta` and
// Messages `input_json_delta` events. The fragments join to exactly the arguments of the
// non-streamed answer; a call cut by max_tokens ends the stream with finish_reason "length".
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS, post, postStream } from './server-helpers.js';

const MODEL = 'tiny-think';
let engine: Engine;
let server: RunningServer;
const PARAMS = {
  type: 'object', additionalProperties: false, required: ['city', 'note'],
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, note: { type: 'string', minLength: 12, maxLength: 40 }, days: { type: 'integer', minimum: 0, maximum: 9 } },
};
const ASK = 'What is the weather in Paris?';

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 });
  server = await startServer(engine, { port: 0, servedModelName: MODEL });
});
after(async () => {
  await server.close();
  await engine.close();
});

type ChatDelta = { tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] };
type ChatChunk = { choices: { delta: ChatDelta; finish_reason: string | null }[] };

test('chat: argument fragments stream before the call closes and join to the non-streamed arguments', async () => {
  const body = {
    model: MODEL, messages: [{ role: 'user', content: ASK }], max_tokens: 200, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: PARAMS } }], tool_choice: 'required',
  };
  const plain = await post(`${server.url}/v1/chat/completions`, body);
  const call = (plain.json['choices'] as { message: { tool_calls: { function: { arguments: string } }[] } }[])[0]!.message.tool_calls[0]!;
  const raw = await postStream(`${server.url}/v1/chat/completions`, { ...body, stream: true });
  const deltas = (raw.events as unknown as ChatChunk[]).flatMap((e) => e.choices[0]?.delta.tool_calls ?? []);
  assert.equal(deltas[0]!.function.name, 'get_weather');
  const fragments = deltas.slice(1).map((d) => d.function.arguments);
  assert.ok(fragments.length >= 5, `arguments in ${fragments.length} fragments`);
  assert.equal(fragments.join(''), call.function.arguments);
  assert.ok(fragments[0]!.length < call.function.arguments.length);
  const finish = (raw.events as unknown as ChatChunk[]).map((e) => e.choices[0]?.finish_reason).filter(Boolean);
  assert.deepEqual(finish, ['tool_calls']);
  // cut by max_tokens inside the arguments: the call stays as sent, the stream ends with "length"
  const cut = await postStream(`${server.url}/v1/chat/completions`, { ...body, max_tokens: 60, stream: true });
  const cutDeltas = (cut.events as unknown as ChatChunk[]).flatMap((e) => e.choices[0]?.delta.tool_calls ?? []);
  assert.equal(cutDeltas[0]?.function.name, 'get_weather');
  assert.ok(call.function.arguments.startsWith(cutDeltas.slice(1).map((d) => d.function.arguments).join('')));
  assert.deepEqual((cut.events as unknown as ChatChunk[]).map((e) => e.choices[0]?.finish_reason).filter(Boolean), ['length']);
  await drained(engine);
});

test('responses: function_call_arguments.delta events join to the done arguments and the non-streamed call', async () => {
  const body = {
    model: MODEL, input: ASK, max_output_tokens: 200, temperature: 0, reasoning: { effort: 'none' }, store: false,
    tools: [{ type: 'function', name: 'get_weather', parameters: PARAMS }], tool_choice: 'required',
  };
  const plain = await post(`${server.url}/v1/responses`, body);
  const item = (plain.json['output'] as { type: string; arguments: string }[]).find((o) => o.type === 'function_call')!;
  const raw = await postStream(`${server.url}/v1/responses`, { ...body, stream: true });
  const deltas = raw.events.filter((e) => e['type'] === 'response.function_call_arguments.delta').map((e) => e['delta'] as string);
  const done = raw.events.find((e) => e['type'] === 'response.function_call_arguments.done')!;
  assert.ok(deltas.length >= 5, `${deltas.length} deltas`);
  assert.equal(deltas.join(''), done['arguments']);
  assert.equal(done['arguments'], item.arguments);
  const added = raw.events.findIndex((e) => e['type'] === 'response.output_item.added' && (e['item'] as { type: string }).type === 'function_call');
  assert.ok(added >= 0 && added < raw.events.findIndex((e) => e['type'] === 'response.function_call_arguments.delta'));
});

test('messages: input_json_delta fragments join to the non-streamed tool_use input', async () => {
  const body = {
    model: MODEL, max_tokens: 200, temperature: 0, messages: [{ role: 'user', content: ASK }],
    tools: [{ name: 'get_weather', input_schema: PARAMS }], tool_choice: { type: 'any' },
  };
  const plain = await post(`${server.url}/v1/messages`, body);
  const use = (plain.json['content'] as { type: string; input: unknown }[]).find((c) => c.type === 'tool_use')!;
  const raw = await postStream(`${server.url}/v1/messages`, { ...body, stream: true });
  const parts = raw.events.filter((e) => e['type'] === 'content_block_delta' && (e['delta'] as { type: string }).type === 'input_json_delta')
    .map((e) => (e['delta'] as { partial_json: string }).partial_json);
  assert.ok(parts.length >= 5, `${parts.length} fragments`);
  assert.deepEqual(JSON.parse(parts.join('')), use.input);
  const stop = raw.events.find((e) => e['type'] === 'message_delta')!;
  assert.equal((stop['delta'] as { stop_reason: string }).stop_reason, 'tool_use');
  await drained(engine);
});
