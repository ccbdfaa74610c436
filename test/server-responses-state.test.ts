// Stateful Responses through the official `openai` client on tiny-think:
// store (default true), previous_response_id (two turns, and a tool loop), item_reference inputs,
// GET / DELETE /v1/responses/{id}, reasoning.encrypted_content handed back by a stateless
// client, reasoning.summary (plain and streamed), the store's TTL / LRU bound, and the store
// and key kept on disk across a restart. A stateful turn must equal the same conversation sent
// whole, and a continuation must resume from the prefix cache (cached tokens in usage).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { KEY_FILE, openReasoning, responsesKey, sealReasoning } from '../src/server/api/responses-crypto.js';
import { responsesMessages } from '../src/server/api/responses-input.js';
import { type Item, ResponseStore } from '../src/server/api/responses-store.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { type ServeProcess, spawnServe } from './serve-process.js';
import { drained, KERNELS, post } from './server-helpers.js';

const MODEL = 'tiny-think';
let engine: Engine;
let server: RunningServer;
let client: OpenAI;
const dirs: string[] = [];
const WEATHER: OpenAI.Responses.FunctionTool = {
  type: 'function', name: 'get_weather', strict: true, description: 'Weather of a city',
  parameters: { type: 'object', additionalProperties: false, required: ['city'], properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } } },
};
type Output = OpenAI.Responses.ResponseOutputItem;
const PASS = 'responses-test-passphrase';
const KEY = (): Buffer => responsesKey(PASS, undefined);

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 });
  server = await startServer(engine, { port: 0, servedModelName: MODEL, responsesKey: PASS });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const tmp = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'deltaserve-responses-'));
  dirs.push(d);
  return d;
};

/** Output items as input items of a later turn (what a stateless client sends back). */
const asInput = (items: Output[]): OpenAI.Responses.ResponseInputItem[] => items as unknown as OpenAI.Responses.ResponseInputItem[];

// long enough that turn 1's message ends past a 64-token chunk boundary the cache can resume at
const LONG_Q = `${'Here are some numbers: 3, 8, 13, 21, 34, 55, 89. '.repeat(6)}What is 12 + 30?`;
const stored = (r: OpenAI.Responses.Response): unknown => (r as unknown as { store: unknown }).store;

test('two turns through previous_response_id equal the conversation sent whole; the second resumes from the prefix cache', async () => {
  const first = await client.responses.create({ model: MODEL, input: LONG_Q, max_output_tokens: 48, temperature: 0 });
  assert.equal(stored(first), true);
  const second = await client.responses.create({
    model: MODEL, previous_response_id: first.id, input: 'And 5 + 5?', max_output_tokens: 48, temperature: 0,
  });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(second.usage!.input_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
  assert.ok(second.usage!.input_tokens > first.usage!.input_tokens);
  const whole = await client.responses.create({
    model: MODEL, store: false, max_output_tokens: 48, temperature: 0,
    input: [{ role: 'user', content: LONG_Q }, ...asInput(first.output), { role: 'user', content: 'And 5 + 5?' }],
  });
  assert.equal(second.output_text, whole.output_text);
  assert.equal(second.usage!.input_tokens, whole.usage!.input_tokens);
  // the third turn chains through the second
  const third = await client.responses.create({ model: MODEL, previous_response_id: second.id, input: 'Thanks!', max_output_tokens: 8, temperature: 0 });
  assert.ok(third.usage!.input_tokens > second.usage!.input_tokens);
  await drained(engine);
});

test('a tool loop: forced call, then previous_response_id + function_call_output; item_reference gives the same turn', async () => {
  const ask = `${LONG_Q} Also: weather in Paris?`;
  const call1 = await client.responses.create({
    model: MODEL, input: ask, tools: [WEATHER], tool_choice: 'required', max_output_tokens: 300, temperature: 0,
  });
  const fc = call1.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
  assert.ok(fc, JSON.stringify(call1.output));
  assert.ok(['Paris', 'Oslo'].includes((JSON.parse(fc.arguments) as { city: string }).city), fc.arguments);
  const result = { type: 'function_call_output' as const, call_id: fc.call_id, output: '{"temp_c": 21}' };
  const answer = await client.responses.create({
    model: MODEL, previous_response_id: call1.id, input: [result], tools: [WEATHER], max_output_tokens: 48, temperature: 0,
  });
  assert.ok(answer.usage!.input_tokens_details.cached_tokens > 0);
  // the same turn by reference: the user message is sent, the model's items are referenced
  const refs = await client.responses.create({
    model: MODEL, tools: [WEATHER], max_output_tokens: 48, temperature: 0, store: false,
    input: [{ role: 'user', content: ask }, ...call1.output.map((o) => ({ type: 'item_reference' as const, id: o.id! })), result],
  });
  assert.equal(refs.output_text, answer.output_text);
  assert.equal(refs.usage!.input_tokens, answer.usage!.input_tokens);
  // sent whole (reasoning included) it is the same again
  const whole = await client.responses.create({
    model: MODEL, tools: [WEATHER], max_output_tokens: 48, temperature: 0, store: false,
    input: [{ role: 'user', content: ask }, ...asInput(call1.output), result],
  });
  assert.equal(whole.output_text, answer.output_text);
  await drained(engine);
});

test('item_reference: an unknown reasoning reference is dropped, any other is a 400 naming it', async () => {
  const q = { role: 'user' as const, content: 'Hi' };
  const plain = await client.responses.create({ model: MODEL, input: [q], max_output_tokens: 4, temperature: 0, store: false });
  const dropped = await client.responses.create({
    model: MODEL, input: [q, { type: 'item_reference', id: 'rs_missing' }], max_output_tokens: 4, temperature: 0, store: false,
  });
  assert.equal(dropped.usage!.input_tokens, plain.usage!.input_tokens);
  const r = await post(`${server.url}/v1/responses`, { model: MODEL, input: [q, { type: 'item_reference', id: 'msg_missing' }] });
  assert.equal(r.status, 400);
  assert.deepEqual([(r.json['error'] as { param: string }).param, (r.json['error'] as { code: string }).code], ['input[1].id', 'item_not_found']);
  const prev = await post(`${server.url}/v1/responses`, { model: MODEL, input: 'x', previous_response_id: 'resp_nope' });
  assert.equal(prev.status, 400);
  assert.equal((prev.json['error'] as { param: string }).param, 'previous_response_id');
});

test('GET and DELETE /v1/responses/{id}; store: false keeps nothing', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 6, temperature: 0, metadata: { run: 'x' } });
  const got = await client.responses.retrieve(r.id);
  assert.deepEqual(got, r);
  assert.deepEqual(got.metadata, { run: 'x' });
  await client.responses.delete(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.delete(r.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  const prev = await post(`${server.url}/v1/responses`, { model: MODEL, input: 'x', previous_response_id: r.id });
  assert.equal(prev.status, 400);
  const wrong = await post(`${server.url}/v1/responses/${r.id}`, {});
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get('allow'), 'GET, DELETE');
  const off = await client.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 2, store: false });
  assert.equal(stored(off), false);
  await assert.rejects(client.responses.retrieve(off.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
});

test('reasoning.encrypted_content: sealed reasoning handed back by a stateless client counts as the reasoning itself', async () => {
  const first = await client.responses.create({
    model: MODEL, input: 'Weather in Paris?', tools: [WEATHER], tool_choice: 'required', max_output_tokens: 120, temperature: 0,
    store: false, include: ['reasoning.encrypted_content'],
  });
  const rs = first.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem;
  assert.ok(rs?.encrypted_content, JSON.stringify(first.output));
  const fc = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
  const result = { type: 'function_call_output' as const, call_id: fc.call_id, output: '21 C' };
  const ask = { role: 'user' as const, content: 'Weather in Paris?' };
  // only the blob: no reasoning text, no summary
  const sealed = { type: 'reasoning' as const, id: rs.id, summary: [], encrypted_content: rs.encrypted_content };
  const viaBlob = await client.responses.create({ model: MODEL, tools: [WEATHER], max_output_tokens: 24, temperature: 0, store: false, input: [ask, sealed, fc, result] });
  const viaText = await client.responses.create({ model: MODEL, tools: [WEATHER], max_output_tokens: 24, temperature: 0, store: false, input: [ask, rs, fc, result] });
  assert.equal(viaBlob.usage!.input_tokens, viaText.usage!.input_tokens);
  assert.equal(viaBlob.output_text, viaText.output_text);
  // the opened blob is the assistant turn's reasoning (tiny-think's template does not render
  // reasoning; Qwen templates render it in a tool loop)
  const msgs = responsesMessages([ask, sealed, fc, result].map((item, i) => ({ item: item as unknown as Item, param: `input[${i}]` })), undefined, KEY());
  assert.equal(msgs[1]!.reasoning_content, rs.content![0]!.text);
  assert.equal(msgs[1]!.tool_calls?.[0]?.id, fc.call_id);
  const blob = rs.encrypted_content!;
  const altered = blob.slice(0, -2) + (blob.endsWith('AA') ? 'BA' : 'AA');
  const bad = await post(`${server.url}/v1/responses`, { model: MODEL, store: false, input: [ask, { ...sealed, encrypted_content: altered }, fc, result] });
  assert.equal(bad.status, 400);
  assert.equal((bad.json['error'] as { param: string }).param, 'input[1].encrypted_content');
  const other = await post(`${server.url}/v1/responses`, { model: MODEL, input: 'x', include: ['message.output_text.logprobs'] });
  assert.equal(other.status, 400);
  assert.equal((other.json['error'] as { param: string }).param, 'include');
});

test('reasoning.summary: the reasoning as one summary part, plain and streamed with the summary events', async () => {
  const body = { model: MODEL, input: 'What is 12 + 30?', max_output_tokens: 48, temperature: 0, store: false, reasoning: { summary: 'auto' as const } };
  const r = await client.responses.create(body);
  const rs = r.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem;
  assert.equal(r.reasoning?.summary, 'auto');
  assert.deepEqual(rs.summary, [{ type: 'summary_text', text: rs.content![0]!.text }]);
  const types: string[] = [];
  let deltas = '';
  const stream = client.responses.stream(body);
  stream.on('event', (e) => {
    types.push(e.type);
    if (e.type === 'response.reasoning_summary_text.delta') {
      assert.equal(e.summary_index, 0);
      deltas += e.delta;
    }
  });
  const final = await stream.finalResponse();
  assert.equal(deltas, rs.summary[0]!.text);
  assert.deepEqual((final.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem).summary, rs.summary);
  const order = ['response.reasoning_summary_part.added', 'response.reasoning_summary_text.delta', 'response.reasoning_summary_text.done',
    'response.reasoning_summary_part.done'].map((t) => types.indexOf(t));
  assert.ok(order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1]!)), JSON.stringify(order));
  const none = await client.responses.create({ ...body, reasoning: {} });
  assert.deepEqual((none.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem).summary, []);
});

test('the store on disk: a restarted server finds stored responses and opens blobs sealed before', async () => {
  const dir = tmp();
  const a = await startServer(engine, { port: 0, servedModelName: MODEL, responsesDir: dir });
  const ca = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: 'none', maxRetries: 0 });
  const r = await ca.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 8, temperature: 0, include: ['reasoning.encrypted_content'] });
  await a.close();
  const b = await startServer(engine, { port: 0, servedModelName: MODEL, responsesDir: dir });
  try {
    const cb = new OpenAI({ baseURL: `${b.url}/v1`, apiKey: 'none', maxRetries: 0 });
    assert.deepEqual(await cb.responses.retrieve(r.id), r);
    const next = await cb.responses.create({ model: MODEL, previous_response_id: r.id, input: 'Again', max_output_tokens: 4, temperature: 0 });
    assert.equal(next.status === 'completed' || next.status === 'incomplete', true);
    const rs = r.output.find((o) => o.type === 'reasoning') as OpenAI.Responses.ResponseReasoningItem | undefined;
    if (rs?.encrypted_content) {
      const back = await post(`${b.url}/v1/responses`, { model: MODEL, store: false, max_output_tokens: 2, input: [{ role: 'user', content: 'Hi' }, { type: 'reasoning', id: rs.id, summary: [], encrypted_content: rs.encrypted_content }] });
      assert.equal(back.status, 200, JSON.stringify(back.json));
    }
    await cb.responses.delete(r.id);
  } finally {
    await b.close();
  }
  const c = await startServer(engine, { port: 0, servedModelName: MODEL, responsesDir: dir });
  try {
    assert.equal((await fetch(`${c.url}/v1/responses/${r.id}`)).status, 404, 'a deleted response stays deleted after a restart');
  } finally {
    await c.close();
  }
});

test('ResponseStore: TTL, least-recently-used eviction by bytes, item index follows eviction', async () => {
  const entry = (id: string, n: number): Parameters<ResponseStore['put']>[0] => ({
    id, response: { id }, conversation: [{ type: 'message', id: `msg_${id}`, role: 'user', content: 'x'.repeat(n) }], storedAt: Date.now(),
  });
  const one = JSON.stringify(entry('a', 100)).length;
  const s = new ResponseStore({ maxBytes: one * 2 + 10, ttlSeconds: 60 });
  s.put(entry('a', 100));
  s.put(entry('b', 100));
  assert.ok(s.get('a')); // a is now the most recently used
  s.put(entry('c', 100));
  assert.equal(s.get('b'), null);
  assert.ok(s.get('a') && s.get('c'));
  assert.equal(s.item('msg_b'), null);
  assert.equal(s.item('msg_a')?.['id'], 'msg_a');
  assert.ok(s.size <= one * 2 + 10);
  const short = new ResponseStore({ maxBytes: 1e6, ttlSeconds: 0.05 });
  short.put(entry('t', 1));
  assert.ok(short.get('t'));
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(short.get('t'), null);
  assert.equal(short.item('msg_t'), null);
});

test('sealed reasoning: opens under its key only; a key file is made once and reused', () => {
  const dir = tmp();
  const k1 = responsesKey(undefined, dir);
  assert.deepEqual(responsesKey(undefined, dir), k1);
  assert.notDeepEqual(responsesKey('pass', dir), k1);
  const blob = sealReasoning(k1, { text: 'think', model: 'm' });
  assert.deepEqual(openReasoning(k1, blob), { text: 'think', model: 'm' });
  assert.equal(openReasoning(responsesKey('pass', undefined), blob), null);
  assert.equal(openReasoning(k1, blob.slice(0, -4)), null);
  assert.equal(openReasoning(k1, 'not a blob'), null);
});

/** `deltaserve serve` with the given flags; resolves its URL once ready. */
const serve = (args: string[]): Promise<ServeProcess> => spawnServe(['--served-model-name', MODEL, ...args]);

test('serve --prefix-cache-dir keeps the responses store and its key beside the prefix cache, across a restart', { timeout: 120_000 }, async () => {
  const dir = tmp();
  const a = await serve(['--prefix-cache-dir', dir, '--responses-ttl', '600']);
  let id: string;
  try {
    const c = new OpenAI({ baseURL: `${a.url}/v1`, apiKey: 'none', maxRetries: 0 });
    id = (await c.responses.create({ model: MODEL, input: 'Hi', max_output_tokens: 4, temperature: 0 })).id;
    assert.ok(existsSync(join(dir, 'responses', `${id}.json`)));
    assert.ok(existsSync(join(dir, 'responses', KEY_FILE)));
  } finally {
    assert.equal(await a.stop(), 0);
  }
  const b = await serve(['--prefix-cache-dir', dir]);
  try {
    const got = await fetch(`${b.url}/v1/responses/${id}`);
    assert.equal(got.status, 200);
    assert.equal(((await got.json()) as { id: string }).id, id);
  } finally {
    assert.equal(await b.stop(), 0);
  }
  const bad = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'serve', '--model', TINY_THINK(), '--responses-ttl', '0'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--responses-ttl must be a number of seconds > 0 \(got 0\)/);
});
