// Property test: random JSON shapes sent to every route get a 2xx or a 4xx in the route's
// error shape, never a 5xx, and the server keeps serving afterwards. Bodies are valid requests
// with random fields replaced or added (so validation is exercised deep inside), or random
// JSON values, or broken JSON text; keys include `__proto__`, `constructor` and the field
// names the routes read. Seeded (DELTASERVE_FUZZ_SEED, default 2101): a failure names its
// case and is reproducible.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { Rng } from '../src/util/rng.js';
import { TINY_THINK } from './paths.js';
import { drained, KERNELS } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8, prefixCache: false });
  server = await startServer(engine, { port: 0, maxQueueWait: 1_000_000 });
});
after(async () => {
  await server.close();
  await engine.close();
});

const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
/** A valid body per POST route, the starting point of most cases. */
const BASES: Readonly<Record<string, Record<string, unknown>>> = {
  '/v1/chat/completions': { model: 'tiny-think', messages: ASK, max_tokens: 4 },
  '/v1/completions': { model: 'tiny-think', prompt: 'What is', max_tokens: 4 },
  '/v1/responses': { model: 'tiny-think', input: 'What is 12 + 30?', max_output_tokens: 4 },
  '/v1/messages': { model: 'tiny-think', messages: ASK, max_tokens: 4 },
  '/v1/messages/count_tokens': { model: 'tiny-think', messages: ASK },
  '/tokenize': { prompt: 'What is' },
  '/detokenize': { tokens: [1, 2, 3] },
};
const KEYS = [
  '__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'role', 'content', 'type', 'text', 'name', 'function',
  'arguments', 'parameters', 'properties', 'schema', 'json_schema', 'enum', 'items', 'required', 'tool_calls', 'tool_call_id',
  'input_schema', 'tools', 'tool_choice', 'messages', 'prompt', 'input', 'instructions', 'system', 'tokens', 'stream', 'n',
  'response_format', 'format', 'logit_bias', 'stop', 'seed', 'temperature', 'top_p', 'top_k', 'logprobs', 'top_logprobs',
  'chat_template_kwargs', 'enable_thinking', 'thinking', 'budget_tokens', 'reasoning', 'effort', 'metadata', 'echo',
  'stream_options', 'include_usage', 'anyOf', '$ref', '$defs', 'additionalProperties', 'model', 'stop_sequences',
];
const STRINGS = [
  '', 'hi', 'user', 'system', 'assistant', 'tool', 'developer', 'wizard', '<|im_start|>system', '<|im_end|>', 'function', 'text',
  'json_schema', 'json_object', 'auto', 'required', 'none', 'any', 'object', 'string', 'array', 'integer', 'enabled', 'disabled',
  'tiny-think', '{"a": 1}', '{', 'input_text', 'message', 'function_call', 'function_call_output', 'tool_use', 'tool_result',
  '#/$defs/x', 'x'.repeat(300), '\u0000', '\ud800',
];
const NUMBERS = [0, 1, -1, 2, 3, 0.5, -0.5, 1e12, -1e12, 2 ** 31, 2 ** 53, 1e-9, 100, 4096, 4097];

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;

function randomValue(rng: Rng, depth: number): unknown {
  const r = rng.next();
  if (depth <= 0 || r < 0.45) {
    const leaf = rng.next();
    if (leaf < 0.1) return null;
    if (leaf < 0.2) return rng.next() < 0.5;
    if (leaf < 0.5) return pick(rng, NUMBERS);
    return pick(rng, STRINGS);
  }
  if (r < 0.7) return Array.from({ length: Math.floor(rng.next() * 4) }, () => randomValue(rng, depth - 1));
  return randomObject(rng, depth - 1);
}

/** A null-prototype object, so that `__proto__` becomes an ordinary (serialized) key. */
function randomObject(rng: Rng, depth: number): Record<string, unknown> {
  const o = Object.create(null) as Record<string, unknown>;
  const n = Math.floor(rng.next() * 5);
  for (let i = 0; i < n; i++) o[pick(rng, KEYS)] = randomValue(rng, depth);
  return o;
}

/** Keep generation short: no case may ask for long outputs. */
function bounded(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const o = body as Record<string, unknown>;
  for (const k of ['max_tokens', 'max_completion_tokens', 'max_output_tokens']) {
    if (typeof o[k] === 'number' && (o[k] as number) > 8) o[k] = 8;
  }
  if (typeof o['n'] === 'number' && (o['n'] as number) > 2) o['n'] = 2;
  return o;
}

/** One case: a mutated valid body (most), a random value, or broken JSON text. */
function randomBody(rng: Rng, path: string): string {
  const r = rng.next();
  if (r < 0.08) return pick(rng, ['{', '{"messages": [', '[]', 'null', '"x"', '1e999', '{"a":1,}', '\u0000', '{"__proto__": {"x": 1}}']);
  if (r < 0.2) return JSON.stringify(bounded(randomValue(rng, 4)));
  const body = Object.assign(Object.create(null) as Record<string, unknown>, structuredClone(BASES[path]!));
  const changes = 1 + Math.floor(rng.next() * 3);
  for (let i = 0; i < changes; i++) {
    const key = rng.next() < 0.6 ? pick(rng, Object.keys(BASES[path]!).concat(KEYS)) : pick(rng, KEYS);
    body[key] = randomValue(rng, 5);
  }
  return JSON.stringify(bounded(body));
}

test('random JSON shapes on every route: 2xx or 4xx in the route\'s error shape, never 5xx', async () => {
  const rng = new Rng(Number(process.env['DELTASERVE_FUZZ_SEED'] ?? 2101));
  const cases: [string, string][] = [];
  for (const path of Object.keys(BASES)) for (let i = 0; i < 60; i++) cases.push([path, randomBody(rng, path)]);
  const statuses = new Map<number, number>();
  // four at a time: concurrent cases must not disturb each other either
  for (let i = 0; i < cases.length; i += 4) {
    await Promise.all(cases.slice(i, i + 4).map(async ([path, body], j) => {
      const what = `case ${i + j}: POST ${path} ${body.slice(0, 300)}`;
      const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const text = await res.text();
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(res.status < 500, `${what} → ${res.status} ${text.slice(0, 300)}`);
      if (res.status >= 400) {
        const json = JSON.parse(text) as { error?: { message?: unknown }; type?: unknown };
        assert.equal(typeof json.error?.message, 'string', `${what}: error shape ${text.slice(0, 200)}`);
        if (path.startsWith('/v1/messages')) assert.equal(json.type, 'error', what);
      }
    }));
  }
  for (const path of ['/health', '/v1/models', '/v1/models/tiny-think', '/v1/models/%E0%A4%A', '/metrics', '/version']) {
    assert.ok((await fetch(`${server.url}${path}`)).status < 500, path);
  }
  // both outcomes were exercised, and the server still serves
  assert.ok((statuses.get(200) ?? 0) > 10 && [...statuses.keys()].some((s) => s >= 400), JSON.stringify([...statuses]));
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
  await drained(engine);
});
