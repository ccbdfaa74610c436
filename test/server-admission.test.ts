// Admission when the pools are momentarily full: a request that cannot start within
// --max-queue-wait gets 503 + Retry-After and an error naming the reason (pool_full; on
// /v1/messages Anthropic's overloaded_error) on every generation route, streaming or not,
// while the request in flight completes exactly as it does alone; once it is done the same
// requests succeed. The start estimate itself is checked on hand-worked loads.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { type Demand, expectedLeft, type PoolLoad, startSteps } from '../src/engine/admission.js';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, joinChat, KERNELS, post, postStream, type JsonResponse } from './server-helpers.js';

const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
const open: { engine: Engine; server: RunningServer }[] = [];
after(async () => {
  for (const o of open) {
    await o.server.close();
    await o.engine.close();
  }
});

async function serve(opts: Parameters<typeof Engine.load>[0]): Promise<{ engine: Engine; url: string }> {
  const engine = await Engine.load(opts);
  const server = await startServer(engine, { port: 0, maxQueueWait: 0 });
  open.push({ engine, server });
  return { engine, url: server.url };
}

/** One small request per generation route, on `text`. */
function probes(text: string): [path: string, body: Record<string, unknown>][] {
  const messages = [{ role: 'user', content: text }];
  return [
    ['/v1/chat/completions', { messages, max_tokens: 8 }],
    ['/v1/chat/completions', { messages, max_tokens: 8, stream: true }],
    ['/v1/completions', { prompt: text, max_tokens: 8 }],
    ['/v1/responses', { input: text, max_output_tokens: 8 }],
    ['/v1/messages', { messages, max_tokens: 8 }],
  ];
}

/** 503 with a whole number of seconds ≥ 1 in Retry-After, the reason in the route's error shape. */
function assertFull(path: string, r: JsonResponse, reason: RegExp): void {
  assert.equal(r.status, 503, `${path}: ${JSON.stringify(r.json)}`);
  const retry = r.headers.get('retry-after') ?? '';
  assert.match(retry, /^[1-9]\d*$/, `${path}: Retry-After "${retry}"`);
  if (path === '/v1/messages') {
    assert.equal(r.json['type'], 'error');
    const e = r.json['error'] as { type: string; message: string };
    assert.equal(e.type, 'overloaded_error');
    assert.match(e.message, reason);
  } else {
    const e = r.json['error'] as { code: string; type: string; message: string };
    assert.equal(e.code, 'pool_full');
    assert.equal(e.type, 'server_error');
    assert.match(e.message, reason);
    assert.match(e.message, new RegExp(`retry in ${retry} s`));
  }
}

/** Start `body` streaming, wait until it generates, probe every route, then finish it. */
async function probeWhileBusy(engine: Engine, url: string, body: Record<string, unknown>, probeText: string,
  reason: RegExp): Promise<string> {
  const generated = engine.stats().tokens.generated;
  const busy = postStream(`${url}/v1/chat/completions`, { ...body, stream: true });
  while (engine.stats().tokens.generated < generated + 2) await new Promise((r) => setTimeout(r, 2));
  const rs = await Promise.all(probes(probeText).map(([path, b]) => post(`${url}${path}`, b).then((r) => [path, r] as const)));
  assert.equal(engine.stats().running, 1, 'the busy request was still running while the probes were answered');
  for (const [path, r] of rs) assertFull(path, r, reason);
  const done = await busy;
  assert.equal(done.status, 200);
  assert.ok(done.sawDone);
  const [choice] = joinChat(done.events);
  assert.equal(choice!.finish, 'length');
  return choice!.reasoning + choice!.content;
}

test('all request slots busy: 503 pool_full + Retry-After on every route; the running request is unaffected', async () => {
  const { engine, url } = await serve({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 1, prefixCache: false });
  const long = { messages: ASK, max_tokens: 1500, ignore_eos: true, temperature: 0 };
  const alone = await post(`${url}/v1/chat/completions`, long);
  assert.equal(alone.status, 200);
  const msg = (alone.json['choices'] as { message: { content: string; reasoning_content?: string } }[])[0]!.message;
  const text = await probeWhileBusy(engine, url, long, ASK[0]!.content, /all 1 request slots are in use/);
  assert.equal(text, (msg.reasoning_content ?? '') + msg.content, 'the busy request generated what it generates alone');
  await drained(engine);
  for (const [path, b] of probes(ASK[0]!.content)) assert.equal((await post(`${url}${path}`, b)).status, 200, `${path} once idle`);
  await drained(engine);
});

test('KV cache full with a slot free: 503 pool_full naming the pages; the running request is unaffected', async () => {
  // 2048 KV tokens: the busy request holds ≥ 1200 of them from its first step, a ~900-token
  // prompt does not fit in the rest although a second request slot is free
  const { engine, url } = await serve({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 2, prefixCache: false, kvCacheTokens: 2048 });
  const longPrompt = 'hello '.repeat(420);
  const long = { messages: [{ role: 'user', content: longPrompt }], max_tokens: 600, ignore_eos: true, temperature: 0 };
  const alone = await post(`${url}/v1/chat/completions`, long);
  assert.equal(alone.status, 200, JSON.stringify(alone.json));
  const usage = alone.json['usage'] as { prompt_tokens: number };
  assert.ok(usage.prompt_tokens >= 1200 && usage.prompt_tokens + 600 <= engine.maxContext, `prompt of ${usage.prompt_tokens} tokens`);
  const msg = (alone.json['choices'] as { message: { content: string; reasoning_content?: string } }[])[0]!.message;
  const text = await probeWhileBusy(engine, url, long, 'hello '.repeat(300), /the KV cache has \d+ of \d+ pages free and the prompt needs \d+/);
  assert.equal(text, (msg.reasoning_content ?? '') + msg.content, 'the busy request generated what it generates alone');
  await drained(engine);
});

test('a negative --max-queue-wait is refused with a clear message', async () => {
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 1, prefixCache: false });
  try {
    await assert.rejects(startServer(engine, { port: 0, maxQueueWait: -1 }), /--max-queue-wait must be a number of seconds ≥ 0 \(got -1\)/);
  } finally {
    await engine.close();
  }
});

const load = (o: Partial<PoolLoad>): PoolLoad => ({ freeSlots: 0, freePages: 0, running: [], waiting: [], ...o });
const d = (pages: number, steps: number): Demand => ({ pages, steps });

test('start estimate: slots free at the running requests\' finishing steps, queued requests first', () => {
  // the waiting request takes the slot freed at step 2 and frees it again at 2 + 4 = 6;
  // the new one takes the slot freed at step 5 (3 + 1 pages then free ≥ 4)
  const l = load({ freePages: 2, running: [{ steps: 5, pages: 3 }, { steps: 2, pages: 1 }], waiting: [d(2, 4)] });
  assert.deepEqual(startSteps(l, [d(4, 1)]), { steps: [2, 5], blockedBy: 'slots' });
  // two new ones with one running: the second starts when the first new one finishes
  assert.deepEqual(startSteps(load({ freeSlots: 1, freePages: 10, running: [{ steps: 9, pages: 1 }] }), [d(1, 3), d(1, 3)]),
    { steps: [0, 3], blockedBy: 'slots' });
});

test('start estimate: pages, not slots, hold a request back; a demand larger than the pool never starts', () => {
  const l = load({ freeSlots: 3, freePages: 1, running: [{ steps: 7, pages: 2 }, { steps: 3, pages: 1 }] });
  assert.deepEqual(startSteps(l, [d(3, 5)]), { steps: [7], blockedBy: 'kv' });
  assert.deepEqual(startSteps(l, [d(2, 5)]), { steps: [3], blockedBy: 'kv' });
  assert.deepEqual(startSteps(l, [d(1, 5)]), { steps: [0], blockedBy: null });
  assert.deepEqual(startSteps(l, [d(5, 1), d(1, 1)]), { steps: [Infinity, Infinity], blockedBy: 'kv' });
});

test('expected output: the typical length minus what was generated, at least 1, at most what max_tokens leaves', () => {
  assert.equal(expectedLeft(100, 0, null), 100, 'no history: all of max_tokens');
  assert.equal(expectedLeft(100, 10, 30), 20);
  assert.equal(expectedLeft(100, 50, 30), 1, 'past the typical length: about to finish');
  assert.equal(expectedLeft(5, 0, 30), 5, 'max_tokens caps it');
});
