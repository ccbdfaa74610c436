// Robustness of the server: ≥ 30 malformed requests each get the right status and OpenAI's
// error shape naming the field, while a concurrent streaming request completes exactly as
// it does alone; body limit (413), auth (401, /health open), queue limit (503 +
// Retry-After), client disconnect frees the request's memory, graceful close.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, joinChat, KERNELS, post, postStream } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];

before(async () => {
  // No prefix cache here, so that freed request memory shows as zero pages in use.
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8, prefixCache: false });
  server = await startServer(engine, { port: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

type Case = [path: string, body: unknown, status: number, param: string | null, message: RegExp];
const LONG = 'hello '.repeat(5000);
const chat = (extra: Record<string, unknown>): Record<string, unknown> => ({ model: 'tiny-think', messages: ASK, max_tokens: 8, ...extra });
const comp = (extra: Record<string, unknown>): Record<string, unknown> => ({ model: 'tiny-think', prompt: 'What is', max_tokens: 8, ...extra });
const C = '/v1/chat/completions';
const P = '/v1/completions';
const CASES: Case[] = [
  [C, '{bad json', 400, null, /not valid JSON/],
  [C, '', 400, null, /body is empty/],
  [C, '[1, 2]', 400, null, /JSON object/],
  [C, 'null', 400, null, /JSON object/],
  [C, { model: 'tiny-think' }, 400, 'messages', /messages is required/],
  [C, chat({ messages: 'hi' }), 400, 'messages', /must be an array/],
  [C, chat({ messages: [] }), 400, 'messages', /must not be empty/],
  [C, chat({ messages: [{ role: 'user' }] }), 400, 'messages[0].content', /messages\[0\]\.content must be/],
  [C, chat({ messages: [{ content: 'x' }] }), 400, 'messages[0].role', /messages\[0\]\.role must be a string/],
  [C, chat({ messages: [42] }), 400, 'messages[0]', /must be an object/],
  [C, chat({ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }), 400, 'messages[0].content[0]', /image URL must be a non-empty string/],
  [C, chat({ messages: [{ role: 'user', content: LONG }] }), 400, 'messages', /context length is 4096/],
  [C, chat({ max_tokens: -1 }), 400, 'max_tokens', /max_tokens must be between 1 and 4096/],
  [C, chat({ max_tokens: 0 }), 400, 'max_tokens', /max_tokens/],
  [C, chat({ max_tokens: 1e12 }), 400, 'max_tokens', /max_tokens must be between/],
  [C, chat({ max_tokens: 'ten' }), 400, 'max_tokens', /max_tokens must be an integer/],
  [C, chat({ max_tokens: 1.5 }), 400, 'max_tokens', /max_tokens must be an integer/],
  [C, chat({ max_completion_tokens: -5 }), 400, 'max_completion_tokens', /max_completion_tokens/],
  [C, chat({ temperature: 3 }), 400, 'temperature', /temperature must be in \[0, 2\]/],
  [C, chat({ temperature: -0.5 }), 400, 'temperature', /temperature/],
  [C, chat({ temperature: 'hot' }), 400, 'temperature', /temperature must be a number/],
  [C, chat({ top_p: 0 }), 400, 'top_p', /top_p must be in \(0, 1\]/],
  [C, chat({ top_p: 1.5 }), 400, 'top_p', /top_p/],
  [C, chat({ top_k: 2.5 }), 400, 'top_k', /top_k must be an integer/],
  [C, chat({ min_p: 2 }), 400, 'min_p', /min_p/],
  [C, chat({ presence_penalty: 5 }), 400, 'presence_penalty', /presence_penalty/],
  [C, chat({ frequency_penalty: -3 }), 400, 'frequency_penalty', /frequency_penalty/],
  [C, chat({ repetition_penalty: 0 }), 400, 'repetition_penalty', /repetition_penalty/],
  [C, chat({ n: 0 }), 400, 'n', /n must be between 1/],
  [C, chat({ n: 1000 }), 400, 'n', /n must be between/],
  [C, chat({ seed: 'abc' }), 400, 'seed', /seed must be an integer/],
  [C, chat({ stop: 5 }), 400, 'stop', /stop must be a string or an array/],
  [C, chat({ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }), 400, 'stop', /at most 16/],
  [C, chat({ stream: 'yes' }), 400, 'stream', /stream must be a boolean/],
  [C, chat({ stream: true, stream_options: { include_usage: 1 } }), 400, 'stream_options.include_usage', /boolean/],
  [C, chat({ logprobs: 'yes' }), 400, 'logprobs', /logprobs must be a boolean/],
  [C, chat({ logprobs: true, top_logprobs: 50 }), 400, 'top_logprobs', /top_logprobs must be between 0 and 20/],
  [C, chat({ top_logprobs: 2 }), 400, 'top_logprobs', /requires logprobs/],
  [C, chat({ chat_template_kwargs: 'x' }), 400, 'chat_template_kwargs', /must be an object/],
  [C, chat({ chat_template_kwargs: { enable_thinking: 'no' } }), 400, 'chat_template_kwargs.enable_thinking', /boolean/],
  [C, chat({ stop_token_ids: [-1] }), 400, 'stop_token_ids', /stop_token_ids\[0\]/],
  [C, chat({ model: 'nope' }), 404, 'model', /"nope" does not exist/],
  [C, chat({ model: 5 }), 400, 'model', /model must be a string/],
  [P, { model: 'tiny-think' }, 400, 'prompt', /prompt is required/],
  [P, comp({ prompt: '' }), 400, 'prompt', /must not be empty/],
  [P, comp({ prompt: [] }), 400, 'prompt', /must not be empty/],
  [P, comp({ prompt: [1, -3] }), 400, 'prompt', /prompt\[1\] = -3 is not a token id/],
  [P, comp({ prompt: [99999] }), 400, 'prompt', /not a token id in \[0, 1024\)/],
  [P, comp({ prompt: { text: 'x' } }), 400, 'prompt', /prompt must be a string/],
  [P, comp({ prompt: ['a', 5] }), 400, 'prompt[1]', /prompt\[1\] must be/],
  [P, comp({ prompt: new Array(5000).fill(10) }), 400, 'prompt', /context length is 4096/],
  [P, comp({ logprobs: 100 }), 400, 'logprobs', /logprobs must be between/],
  [P, comp({ echo: 'x' }), 400, 'echo', /echo must be a boolean/],
  [P, comp({ max_tokens: -2 }), 400, 'max_tokens', /max_tokens/],
  ['/tokenize', {}, 400, 'prompt', /give prompt/],
  ['/detokenize', { tokens: 'x' }, 400, 'tokens', /tokens must be an array/],
  ['/v1/nope', {}, 404, null, /no route/],
];

test(`${CASES.length} malformed requests get 4xx errors naming the field; a concurrent stream is unaffected`, async () => {
  const good = { model: 'tiny-think', messages: ASK, max_tokens: 40, temperature: 0, stream: true };
  const alone = joinChat((await postStream(`${server.url}${C}`, good)).events);
  const during = postStream(`${server.url}${C}`, good);
  const results = await Promise.all(CASES.map(([path, body]) => post(`${server.url}${path}`, body)));
  results.forEach((r, i) => {
    const [path, body, status, param, message] = CASES[i]!;
    const what = `case ${i}: ${path} ${typeof body === 'string' ? body : JSON.stringify(body).slice(0, 120)}`;
    assert.equal(r.status, status, `${what}: ${JSON.stringify(r.json)}`);
    const err = (r.json as { error: { message: string; type: string; param: string | null; code: string | null } }).error;
    assert.ok(err, `${what}: error body`);
    assert.equal(err.type, 'invalid_request_error', what);
    assert.equal(err.param, param, `${what}: ${err.message}`);
    assert.match(err.message, message, what);
    assert.ok('code' in err, what);
  });
  const streamed = await during;
  assert.ok(streamed.sawDone);
  assert.deepEqual(joinChat(streamed.events), alone);
  const wrongMethod = await fetch(`${server.url}${C}`);
  assert.equal(wrongMethod.status, 405);
  await drained(engine);
});

test('request bodies over --max-body-bytes get 413', async () => {
  const small = await startServer(engine, { port: 0, maxBodyBytes: 1000 });
  try {
    const r = await post(`${small.url}${C}`, chat({ messages: [{ role: 'user', content: 'x'.repeat(5000) }] }));
    assert.equal(r.status, 413);
    assert.match((r.json['error'] as { message: string }).message, /larger than the limit of 1000 bytes/);
    const ok = await post(`${small.url}${C}`, chat({ max_tokens: 2 }));
    assert.equal(ok.status, 200);
  } finally {
    await small.close();
  }
});

test('auth: 401 without or with a wrong key, /health open, right key accepted', async () => {
  const auth = await startServer(engine, { port: 0, apiKey: 'sekret' });
  try {
    assert.equal((await fetch(`${auth.url}/v1/models`)).status, 401);
    const wrong = await fetch(`${auth.url}/v1/models`, { headers: { authorization: 'Bearer nope' } });
    assert.equal(wrong.status, 401);
    assert.equal(((await wrong.json()) as { error: { code: string } }).error.code, 'invalid_api_key');
    assert.equal((await fetch(`${auth.url}/metrics`)).status, 401);
    assert.equal((await post(`${auth.url}${C}`, chat({}))).status, 401);
    assert.equal((await fetch(`${auth.url}/health`)).status, 200);
    const right = await fetch(`${auth.url}/v1/models`, { headers: { authorization: 'Bearer sekret' } });
    assert.equal(right.status, 200);
    const client = new OpenAI({ baseURL: `${auth.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(client.models.list(), OpenAI.AuthenticationError);
    const ok = new OpenAI({ baseURL: `${auth.url}/v1`, apiKey: 'sekret', maxRetries: 0 });
    assert.equal((await ok.chat.completions.create({ model: 'tiny-think', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })).choices.length, 1);
  } finally {
    await auth.close();
  }
});

test('queue full: 503 queue_full with Retry-After; admitted requests complete', async () => {
  const busy = await startServer(engine, { port: 0, maxQueue: 2 });
  try {
    const req = chat({ max_tokens: 24, ignore_eos: true, temperature: 0 });
    const rs = await Promise.all(Array.from({ length: 16 }, () => post(`${busy.url}${C}`, req)));
    const rejected = rs.filter((r) => r.status === 503);
    const admitted = rs.filter((r) => r.status === 200);
    assert.equal(rejected.length + admitted.length, 16);
    assert.ok(rejected.length >= 1, 'some requests are rejected');
    assert.ok(admitted.length >= 8, 'a full batch is admitted');
    for (const r of rejected) {
      assert.match(r.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
      const e = r.json['error'] as { code: string; message: string };
      assert.equal(e.code, 'queue_full');
      assert.match(e.message, /requests are waiting \(limit --max-queue 2\); retry in \d+ s/);
    }
    for (const r of admitted) assert.equal((r.json['usage'] as { completion_tokens: number }).completion_tokens, 24);
  } finally {
    await busy.close();
  }
  await drained(engine);
});

test('a client disconnecting mid-stream aborts its request and frees its memory', async () => {
  const body = { model: 'tiny-think', messages: ASK, max_tokens: 2000, ignore_eos: true, stream: true };
  const [a, b] = await Promise.all([postStream(`${server.url}${C}`, body, 5), postStream(`${server.url}${P}`, { ...body, messages: undefined, prompt: 'Hi' }, 3)]);
  assert.equal(a.events.length, 5);
  assert.equal(b.events.length, 3);
  assert.ok(!a.sawDone && !b.sawDone);
  await drained(engine);
  assert.equal(engine.stats().kvPages.used, 0);
  const m = await (await fetch(`${server.url}/metrics`)).text();
  assert.match(m, /deltaserve_request_finished_total\{reason="abort"\} [1-9]/);
});

test('graceful close: in-flight requests finish within the grace period, the rest end with finish_reason abort', async () => {
  const s = await startServer(engine, { port: 0 });
  const long = postStream(`${s.url}${C}`, { messages: ASK, max_tokens: 4000, ignore_eos: true, stream: true });
  const short = post(`${s.url}${C}`, { messages: ASK, max_tokens: 8, ignore_eos: true, temperature: 0 });
  while (s.inFlight < 2 || engine.stats().running < 2) await new Promise((r) => setTimeout(r, 10));
  const t0 = Date.now();
  // A grace period far shorter than the long request's 4000 tokens take on any machine
  // (~1 ms per token at best), far longer than the short one's 8.
  await s.close(500);
  assert.ok(Date.now() - t0 < 10_000);
  const l = await long;
  assert.ok(l.sawDone);
  assert.equal(joinChat(l.events)[0]!.finish, 'abort');
  const sh = await short;
  assert.equal(sh.status, 200);
  assert.equal((sh.json['choices'] as { finish_reason: string }[])[0]!.finish_reason, 'length');
  await assert.rejects(fetch(`${s.url}/health`));
  await drained(engine);
});
