// The OpenAI-compatible server driven by the official `openai` client (in-process server on
// 127.0.0.1, ephemeral port): chat (plain, streaming, reasoning_content split, thinking
// off), completions (echo, token ids, logprobs), models, n > 1 with seeds, stop, logprobs,
// usage with cached tokens, tokenize / detokenize, /metrics as Prometheus text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { splitReasoning } from '../src/tokenizer/reasoning.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
let client: OpenAI;
const MODEL = 'tiny-think';
const ASK = [{ role: 'user' as const, content: 'What is 12 + 30?' }];

before(async () => {
  // MTP on with the adaptive k (the defaults): a seeded request's drafts are verified by
  // matching, so what it samples does not depend on the k chosen at run time
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8 });
  server = await startServer(engine, { port: 0 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

test('chat: reasoning_content and content split out of <think>…</think>; usage has cached tokens', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 64, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  const c = r.choices[0]!;
  assert.equal(c.finish_reason, 'stop');
  const msg = c.message as typeof c.message & { reasoning_content: string | null };
  assert.match(msg.content ?? '', /^\d+$/);
  assert.ok((msg.reasoning_content ?? '').length > 0);
  const direct = await engine.complete({ messages: ASK, maxTokens: 64, temperature: 0 });
  assert.deepEqual(splitReasoning(direct.text, true), { reasoning: msg.reasoning_content, content: msg.content });
  assert.equal(r.usage?.prompt_tokens, direct.usage.promptTokens);
  assert.equal(r.usage?.completion_tokens, direct.usage.completionTokens);
  assert.equal(r.usage?.total_tokens, direct.usage.promptTokens + direct.usage.completionTokens);
  assert.equal(typeof r.usage?.prompt_tokens_details?.cached_tokens, 'number');
});

test('usage.prompt_tokens_details.cached_tokens counts a prefix-cache hit', async () => {
  const a = engine.tokenizer.encode('Which word comes first in alphabetical order? A. insect B. dragon C. feather D. pear. '.repeat(4));
  assert.ok(a.length >= 64 && a.length % 64 !== 0, `${a.length} tokens`);
  const b = engine.tokenizer.encode(' Answer with one letter.');
  const first = await client.completions.create({ model: MODEL, prompt: a, max_tokens: 2, temperature: 0 });
  assert.equal(first.usage?.prompt_tokens_details?.cached_tokens, 0);
  const second = await client.completions.create({ model: MODEL, prompt: [...a, ...b], max_tokens: 2, temperature: 0 });
  assert.equal(second.usage?.prompt_tokens, a.length + b.length);
  // hits are bit-exact: they resume at the multiple of 64 at or below the end of `a`
  assert.equal(second.usage?.prompt_tokens_details?.cached_tokens, Math.floor(a.length / 64) * 64);
});

test('chat streaming: role chunk, reasoning_content / content deltas equal the plain response, usage chunk, [DONE]', async () => {
  const plain = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 64, temperature: 0 });
  const stream = await client.chat.completions.create({
    model: MODEL, messages: ASK, max_tokens: 64, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  let role: string | undefined;
  let usage: OpenAI.CompletionUsage | null | undefined;
  let chunks = 0;
  for await (const ch of stream) {
    chunks++;
    assert.equal(ch.object, 'chat.completion.chunk');
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      const d = c.delta as typeof c.delta & { reasoning_content?: string };
      role ??= d.role;
      content += d.content ?? '';
      reasoning += d.reasoning_content ?? '';
      finish = c.finish_reason ?? finish;
    }
  }
  const msg = plain.choices[0]!.message as unknown as { content: string; reasoning_content: string };
  assert.equal(role, 'assistant');
  assert.ok(chunks > 5);
  assert.equal(content, msg.content);
  assert.equal(reasoning, msg.reasoning_content);
  assert.equal(finish, 'stop');
  assert.deepEqual(usage, plain.usage);
});

test('chat with enable_thinking false: no reasoning_content', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages: ASK, max_tokens: 32, temperature: 0, chat_template_kwargs: { enable_thinking: false },
  } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  const msg = r.choices[0]!.message as unknown as { content: string; reasoning_content: string | null };
  assert.equal(msg.reasoning_content, null);
  assert.ok(msg.content.length > 0);
  assert.ok(!msg.content.includes('</think>'));
});

test('chat stop strings cut the reasoning; finish_reason stop', async () => {
  const r = await client.chat.completions.create({ model: MODEL, messages: ASK, max_tokens: 64, temperature: 0, stop: ['+', '=='] });
  const msg = r.choices[0]!.message as unknown as { content: string; reasoning_content: string };
  assert.equal(r.choices[0]!.finish_reason, 'stop');
  assert.equal(msg.reasoning_content, '12');
  assert.equal(msg.content, '');
});

/** A sampled chat request (one user turn, past EOS) with these settings. */
function sampledChat(o: { max_tokens: number; temperature: number; n: number; seed: number; top_p?: number; top_k?: number }): OpenAI.ChatCompletionCreateParamsNonStreaming {
  return { model: MODEL, messages: [{ role: 'user', content: 'Here are some values:' }], ignore_eos: true, ...o } as OpenAI.ChatCompletionCreateParamsNonStreaming;
}

test('n = 2 with a seed: two choices, reproducible, seeds differ per choice', async () => {
  const req = sampledChat({ max_tokens: 24, temperature: 1.2, top_p: 0.95, n: 2, seed: 1 });
  const a = await client.chat.completions.create(req);
  const b = await client.chat.completions.create(req);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  const texts = (r: OpenAI.ChatCompletion): string[] => r.choices.map((c) => JSON.stringify(c.message));
  assert.deepEqual(texts(a), texts(b));
  assert.notEqual(texts(a)[0], texts(a)[1]);
  assert.equal(a.usage?.completion_tokens, 48);
  // choice 1 of seed 1 is choice 0 of seed 2
  const c = await client.chat.completions.create({ ...req, n: 1, seed: 2 });
  assert.equal(texts(c)[0], texts(a)[1]);
});

test('a seeded sampled chat over HTTP: the same answer from a server with MTP off (and its adaptive k on here)', async () => {
  const req = sampledChat({ max_tokens: 32, temperature: 0.9, top_k: 40, n: 3, seed: 9 });
  const on = await client.chat.completions.create(req);
  const offEngine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8, specTokens: 0 });
  const offServer = await startServer(offEngine, { port: 0 });
  try {
    const off = await new OpenAI({ baseURL: `${offServer.url}/v1`, apiKey: 'unused', maxRetries: 0 }).chat.completions.create(req);
    assert.deepEqual(on.choices.map((c) => c.message), off.choices.map((c) => c.message));
  } finally {
    await offServer.close();
    await offEngine.close();
  }
  assert.ok(engine.stats().spec.rounds > 0, 'MTP ran on this server');
});

test('chat logprobs: greedy token is the top alternative; streaming logprobs match', async () => {
  const req = { model: MODEL, messages: ASK, max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 3 };
  const r = await client.chat.completions.create(req);
  const lp = r.choices[0]!.logprobs!.content!;
  assert.equal(lp.length, r.usage!.completion_tokens);
  for (const e of lp) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0]!.token, e.token);
    assert.equal(e.top_logprobs[0]!.logprob, e.logprob);
    assert.ok(e.top_logprobs[1]!.logprob <= e.top_logprobs[0]!.logprob);
    assert.ok(e.top_logprobs.reduce((a, t) => a + Math.exp(t.logprob), 0) <= 1 + 1e-9);
    assert.deepEqual(Buffer.from(e.bytes!).toString('utf8'), e.token);
  }
  const direct = await engine.complete({ messages: ASK, maxTokens: 16, temperature: 0 });
  assert.equal(lp.map((e) => e.token).join(''), direct.text);
  const stream = await client.chat.completions.create({ ...req, stream: true });
  const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
  for await (const ch of stream) for (const c of ch.choices) streamed.push(...(c.logprobs?.content ?? []));
  assert.deepEqual(streamed, lp);
});

test('completions: text, echo, token-id prompts, logprobs, stream', async () => {
  const r = await client.completions.create({ model: MODEL, prompt: 'What is', max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  const text = r.choices[0]!.text;
  assert.equal(r.usage?.completion_tokens, 6);
  const ids = engine.tokenizer.encode('What is');
  const e = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 6, temperature: 0, echo: true, logprobs: 2 });
  assert.equal(e.choices[0]!.text, 'What is' + text);
  const lp = e.choices[0]!.logprobs!;
  assert.equal(lp.tokens!.length, ids.length + 6);
  assert.deepEqual(lp.token_logprobs!.slice(0, ids.length), ids.map(() => null));
  for (const t of lp.top_logprobs!.slice(ids.length)) assert.ok(Object.keys(t!).length >= 1 && Object.keys(t!).length <= 2);
  assert.deepEqual(lp.text_offset!.slice(0, 2), [0, lp.tokens![0]!.length]);
  const batch = await client.completions.create({ model: MODEL, prompt: ['What is', 'Which'], max_tokens: 4, temperature: 0, n: 2 });
  assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(batch.choices[0]!.text, batch.choices[1]!.text);
  assert.equal(batch.choices[0]!.text, text.slice(0, batch.choices[0]!.text.length));
  const stream = await client.completions.create({ model: MODEL, prompt: 'What is', max_tokens: 6, temperature: 0, stream: true });
  let streamed = '';
  let finish = '';
  for await (const ch of stream) {
    streamed += ch.choices[0]?.text ?? '';
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(streamed, text);
  assert.equal(finish, 'length');
});

test('models: list and retrieve; unknown model is 404 model_not_found', async () => {
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), [MODEL]);
  assert.equal((await client.models.retrieve(MODEL)).id, MODEL);
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: ASK }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal((e as InstanceType<typeof OpenAI.APIError>).code, 'model_not_found');
    return true;
  });
});

test('tokenize / detokenize round trip; chat tokenize equals the prompt the server generates from', async () => {
  const t = await post(`${server.url}/tokenize`, { prompt: 'What is 12 + 30?' });
  assert.equal(t.status, 200);
  const tokens = t.json['tokens'] as number[];
  assert.equal(t.json['count'], tokens.length);
  const d = await post(`${server.url}/detokenize`, { tokens });
  assert.equal(d.json['prompt'], 'What is 12 + 30?');
  const chat = await post(`${server.url}/tokenize`, { messages: ASK });
  const direct = await engine.complete({ messages: ASK, maxTokens: 1 });
  assert.deepEqual(chat.json['tokens'], direct.promptIds);
});

test('/metrics is Prometheus text with the expected families', async () => {
  const res = await fetch(`${server.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  const text = await res.text();
  const typed = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const m = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$/.exec(line);
    if (m) {
      if (m[1] === 'TYPE') {
        assert.ok(!typed.has(m[2]!), `duplicate TYPE ${m[2]}`);
        assert.match(m[3]!, /^(counter|gauge|histogram|summary|untyped)$/);
        typed.set(m[2]!, m[3]!);
      }
      continue;
    }
    const s = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/.exec(line);
    assert.ok(s, `not a Prometheus sample line: ${line}`);
    const family = s[1]!.replace(/_(bucket|sum|count)$/, '');
    assert.ok(typed.has(s[1]!) || typed.get(family) === 'histogram', `sample without TYPE: ${line}`);
    samples.set(s[1]! + (s[2] ?? ''), Number(s[3]));
  }
  for (const name of ['deltaserve_http_requests_total', 'deltaserve_prompt_tokens_total', 'deltaserve_generation_tokens_total',
    'deltaserve_prompt_tokens_cached_total', 'deltaserve_time_to_first_token_seconds', 'deltaserve_inter_token_latency_seconds',
    'deltaserve_e2e_request_latency_seconds', 'deltaserve_queue_depth', 'deltaserve_kv_cache_usage_ratio',
    'deltaserve_spec_accept_length_mean', 'deltaserve_engine_kv_pages_used', 'deltaserve_engine_requests_finished']) {
    assert.ok(typed.has(name), `missing ${name}`);
  }
  assert.equal(typed.get('deltaserve_time_to_first_token_seconds'), 'histogram');
  assert.ok(samples.get('deltaserve_time_to_first_token_seconds_count')! > 0);
  assert.ok(samples.get('deltaserve_inter_token_latency_seconds_count')! > 0);
  assert.ok(samples.get('deltaserve_http_requests_total{route="chat",status="200"}')! > 0);
  assert.ok(samples.get('deltaserve_generation_tokens_total')! > 0);
});
