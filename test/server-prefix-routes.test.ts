// Prefix-cache reuse across chat turns through HTTP, on tiny-think (thinking on), greedy, MTP on (k = 3) and off, each
// against a cache-off server of the same MTP setting:
// - chat turns 2 and 3 cache through the end of the previous turn's last message, and the
//   same prompt twice prefills nothing (message and logprobs bit-identical to cold);
// - a system prompt with tools (inlined into the preamble) is cached through its end;
// - /v1/responses and /v1/messages reuse turn 1 the same way;
// - /metrics and the access log report the re-prefilled tokens per hit.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, type EngineOptions } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { chatPrompt, toolSetup } from '../src/server/api/chat-prompt.js';
import type { ServerContext } from '../src/server/context.js';
import { messageEnds } from '../src/frontend/message-ends.js';
import type { LogFields, Logger } from '../src/util/log.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

type Msg = { role: string; content: string };
interface Served { engine: Engine; server: RunningServer; logged: LogFields[] }

async function serve(opts: EngineOptions): Promise<Served> {
  const engine = await Engine.load(opts);
  const logged: LogFields[] = [];
  const keep = (msg: string, fields?: LogFields): void => void (msg === 'request' && fields && logged.push(fields));
  const logger = { debug: keep, info: keep, warn: keep, error: keep } as unknown as Logger;
  return { engine, server: await startServer(engine, { port: 0, logger }), logged };
}

const servers = new Map<string, Served>();
const at = (spec: number, cache: boolean): Served => servers.get(`${spec}/${cache}`)!;
before(async () => {
  for (const spec of [3, 0]) {
    for (const cache of [true, false]) {
      servers.set(`${spec}/${cache}`, await serve({
        model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, specTokens: spec, specAdaptive: false, prefixCache: cache,
      }));
    }
  }
});
after(async () => {
  for (const s of servers.values()) {
    await s.server.close();
    await s.engine.close();
  }
});

const values = (n: number, tag: string): string => Array.from({ length: n }, (_, i) => `- ${tag}${i}=${(i * 41) % 1000}`).join('\n');

interface Turn { answer: unknown; reply: string; prompt: number; cached: number }

async function chat(s: Served, messages: Msg[], extra: Record<string, unknown> = {}): Promise<Turn> {
  const r = await post(`${s.server.url}/v1/chat/completions`, { messages, max_tokens: 20, temperature: 0, logprobs: true, top_logprobs: 2, ...extra });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const c = (r.json['choices'] as { message: { content: string | null }; logprobs: unknown; finish_reason: string }[])[0]!;
  const u = r.json['usage'] as { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
  return { answer: [c.message, c.logprobs, c.finish_reason], reply: c.message.content ?? '', prompt: u.prompt_tokens, cached: u.prompt_tokens_details.cached_tokens };
}

/** Tokens of `messages` rendered without the generation prompt (the end of the last message). */
async function renderedLength(s: Served, messages: Msg[]): Promise<number> {
  return (await post(`${s.server.url}/tokenize`, { messages, add_generation_prompt: false })).json['count'] as number;
}

test('chat turns 2 and 3 resume at the end of the previous turn, the same prompt prefills nothing (MTP on and off)', async () => {
  for (const spec of [3, 0]) {
    const [hot, cold] = [at(spec, true), at(spec, false)];
    const turn1: Msg[] = [{ role: 'system', content: 'Answer from the table.' }, { role: 'user', content: `Table:\n${values(20, 'q')}\nWhat is q3?` }];
    const t1 = await chat(hot, turn1);
    const again = await chat(hot, turn1);
    assert.equal(again.cached, again.prompt, `k=${spec}: the same prompt: cached ${again.cached} of ${again.prompt}`);
    assert.deepEqual(again.answer, (await chat(cold, turn1)).answer, `k=${spec}: the same prompt differs from cold`);
    const turn2 = [...turn1, { role: 'assistant', content: t1.reply }, { role: 'user', content: 'And q7?' }];
    const t2 = await chat(hot, turn2);
    const end1 = await renderedLength(hot, turn1);
    assert.ok(t2.cached >= end1 && t2.cached < t2.prompt, `k=${spec}: turn 2 cached ${t2.cached}, turn 1 ends at ${end1}`);
    assert.deepEqual(t2.answer, (await chat(cold, turn2)).answer, `k=${spec}: turn 2 differs from cold`);
    const turn3 = [...turn2, { role: 'assistant', content: t2.reply }, { role: 'user', content: 'And q11?' }];
    const t3 = await chat(hot, turn3);
    const end2 = await renderedLength(hot, turn2);
    assert.ok(t3.cached >= end2, `k=${spec}: turn 3 cached ${t3.cached}, turn 2 ends at ${end2}`);
    assert.deepEqual(t3.answer, (await chat(cold, turn3)).answer, `k=${spec}: turn 3 differs from cold`);
  }
});

test('completions: the same prompt twice prefills nothing, also at a multiple of 64 (MTP on and off)', async () => {
  for (const spec of [3, 0]) {
    for (const prompt of [Array.from({ length: 128 }, (_, i) => 50 + ((i * 11) % 700)), `Numbers:\n${values(12, 'n')}\nNext:`]) {
      const body = { prompt, max_tokens: 10, temperature: 0, logprobs: 2 };
      await post(`${at(spec, true).server.url}/v1/completions`, body);
      const again = await post(`${at(spec, true).server.url}/v1/completions`, body);
      const want = await post(`${at(spec, false).server.url}/v1/completions`, body);
      const u = again.json['usage'] as { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
      assert.equal(u.prompt_tokens_details.cached_tokens, u.prompt_tokens, `k=${spec}: cached ${u.prompt_tokens_details.cached_tokens} of ${u.prompt_tokens}`);
      assert.deepEqual(again.json['choices'], want.json['choices'], `k=${spec}: differs from cold`);
    }
  }
});

test('a system prompt with tools is cached through the end of the preamble, identical to cold', async () => {
  const tools = [{ type: 'function', function: { name: 'lookup', description: 'Look a key up in the table', parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] } } }];
  const system = { role: 'system', content: `You answer from this table:\n${values(16, 't')}` };
  for (const spec of [3, 0]) {
    const hot = at(spec, true);
    const ctx = { engine: hot.engine } as ServerContext;
    const setup = toolSetup(ctx, tools.map((t) => t.function), { kind: 'auto' }, true);
    for (const [i, q] of ['What is t2?', 'What is t9?', 'Look up t14.'].entries()) {
      const messages = [system, { role: 'user', content: q }];
      const r = await chat(hot, messages, { tools });
      const preamble = messageEnds(hot.engine.tokenizer, (await chatPrompt(ctx, messages, true, {}, setup)).ids)[0]!;
      assert.ok(preamble > 64, `preamble of ${preamble} tokens`);
      if (i > 0) assert.ok(r.cached >= preamble, `k=${spec} request ${i}: cached ${r.cached} < preamble ${preamble}`);
      assert.deepEqual(r.answer, (await chat(at(spec, false), messages, { tools })).answer, `k=${spec} request ${i} differs from cold`);
    }
  }
});

/** Output items / content blocks without their random ids. */
const withoutIds = (v: unknown): unknown => JSON.parse(JSON.stringify(v, (k, x: unknown) => (k === 'id' || k === 'call_id' ? undefined : x)));

test('/v1/responses and /v1/messages: turn 2 resumes at the end of turn 1, the same input prefills nothing', async () => {
  const hot = at(3, true);
  const cold = at(3, false);
  const turn1: Msg[] = [{ role: 'user', content: `Remember:\n${values(14, 'm')}\nWhat is m5?` }];
  const end1 = await renderedLength(hot, turn1);
  const routes = [
    {
      path: '/v1/responses', body: (m: Msg[]) => ({ input: m, max_output_tokens: 20, temperature: 0 }),
      cached: (j: Record<string, unknown>) => (j['usage'] as { input_tokens_details: { cached_tokens: number } }).input_tokens_details.cached_tokens,
      prompt: (j: Record<string, unknown>) => (j['usage'] as { input_tokens: number }).input_tokens,
      output: (j: Record<string, unknown>) => withoutIds(j['output']),
      text: (j: Record<string, unknown>) => (j['output'] as { type: string; content?: { text: string }[] }[]).filter((o) => o.type === 'message').map((o) => o.content![0]!.text).join(''),
    },
    {
      path: '/v1/messages', body: (m: Msg[]) => ({ messages: m, max_tokens: 20, temperature: 0 }),
      cached: (j: Record<string, unknown>) => (j['usage'] as { cache_read_input_tokens: number }).cache_read_input_tokens,
      prompt: (j: Record<string, unknown>) => { const u = j['usage'] as { input_tokens: number; cache_read_input_tokens: number }; return u.input_tokens + u.cache_read_input_tokens; },
      output: (j: Record<string, unknown>) => withoutIds(j['content']),
      text: (j: Record<string, unknown>) => (j['content'] as { type: string; text?: string }[]).filter((c) => c.type === 'text').map((c) => c.text).join(''),
    },
  ];
  for (const r of routes) {
    const call = async (s: Served, m: Msg[]): Promise<Record<string, unknown>> => {
      const res = await post(`${s.server.url}${r.path}`, r.body(m));
      assert.equal(res.status, 200, `${r.path}: ${JSON.stringify(res.json)}`);
      return res.json;
    };
    const t1 = await call(hot, turn1);
    const again = await call(hot, turn1);
    assert.equal(r.cached(again), r.prompt(again), `${r.path}: the same input cached ${r.cached(again)} of ${r.prompt(again)}`);
    assert.deepEqual(r.output(again), r.output(await call(cold, turn1)), `${r.path}: the same input differs from cold`);
    const turn2 = [...turn1, { role: 'assistant', content: r.text(t1) }, { role: 'user', content: 'And m9?' }];
    const t2 = await call(hot, turn2);
    assert.ok(r.cached(t2) >= end1, `${r.path}: turn 2 cached ${r.cached(t2)}, turn 1 ends at ${end1}`);
    assert.deepEqual(r.output(t2), r.output(await call(cold, turn2)), `${r.path}: turn 2 differs from cold`);
  }
});

test('/metrics and the access log report the re-prefilled tokens per hit', async () => {
  const hot = at(0, true);
  const m = await (await fetch(`${hot.server.url}/metrics`)).text();
  const metric = (name: string): number => Number(new RegExp(`^deltaserve_engine_prefix_cache_${name} (\\S+)`, 'm').exec(m)?.[1]);
  const hits = metric('hit_requests');
  const tokens = metric('reprefill_tokens');
  assert.ok(hits > 0 && tokens > 0, `hit_requests ${hits}, reprefill_tokens ${tokens}`);
  assert.equal(metric('reprefill_tokens_per_hit'), tokens / hits);
  const withHit = hot.logged.filter((f) => (f['cached_tokens'] as number) > 0);
  assert.ok(withHit.length > 0, 'logged requests that hit');
  for (const f of withHit) assert.equal(f['reprefill_tokens'], (f['prompt_tokens'] as number) - (f['cached_tokens'] as number));
  assert.ok(withHit.some((f) => f['reprefill_tokens'] === 0), 'a whole-prompt hit logs 0 re-prefilled tokens');
  assert.equal(hot.logged.find((f) => f['cached_tokens'] === 0)?.['reprefill_tokens'], null, 'no hit: null');
});
