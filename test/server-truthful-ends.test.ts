// Truthful ends: every generation route, streaming or not, cut by a shutdown mid-generation
// tells the client its answer is incomplete — chat and completions `finish_reason: "abort"`,
// Responses `status: "incomplete"` with `reason: "interrupted"` (and the output item it was
// cut inside `status: "incomplete"`), Messages an `error` event
// (`overloaded_error`, streaming) or a 503 (non-streaming) — and never a normal end (stop,
// length, tool_calls, end_turn, completed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import { startServer } from '../src/server/index.js';
import { TINY_THINK } from './paths.js';
import { drained, type JsonResponse, KERNELS, post, postStream, type SseResult } from './server-helpers.js';

const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// Responses and Messages have no ignore_eos: a forced tool call whose arguments must hold
// three strings of at least 2000 characters (the grammar's cap) keeps them generating until
// the shutdown cuts them.
const LONG = { type: 'string', minLength: 2000 };
const LONG_ARG = { type: 'object', properties: { a: LONG, b: LONG, c: LONG }, required: ['a', 'b', 'c'], additionalProperties: false };

type Route = { name: string; path: string; body: Record<string, unknown> };
const ROUTES: Route[] = [
  { name: 'chat', path: '/v1/chat/completions', body: { messages: ASK, max_tokens: 3000, ignore_eos: true } },
  { name: 'completions', path: '/v1/completions', body: { prompt: 'Once upon a time', max_tokens: 3000, ignore_eos: true } },
  {
    name: 'responses', path: '/v1/responses', body: {
      input: ASK, max_output_tokens: 3000, reasoning: { effort: 'none' },
      tools: [{ type: 'function', name: 'write', parameters: LONG_ARG }], tool_choice: { type: 'function', name: 'write' },
    },
  },
  {
    name: 'messages', path: '/v1/messages', body: {
      messages: ASK, max_tokens: 3000,
      tools: [{ name: 'write', input_schema: LONG_ARG }], tool_choice: { type: 'tool', name: 'write' },
    },
  },
];

type Outcome = { route: Route; stream: true; r: SseResult } | { route: Route; stream: false; r: JsonResponse };

function checkStreamed(route: Route, r: SseResult): void {
  const ev = r.events;
  const what = `${route.name} (stream): ${JSON.stringify(ev.slice(-2)).slice(0, 400)}`;
  assert.equal(r.status, 200, what);
  // cut mid-generation: the answer had started
  assert.ok(ev.length >= 3, what);
  const last = ev[ev.length - 1]!;
  if (route.name === 'chat' || route.name === 'completions') {
    const finishes = ev.flatMap((e) => (e['choices'] as { finish_reason: string | null }[] | undefined ?? []).map((c) => c.finish_reason)).filter((f) => f !== null);
    assert.deepEqual(finishes, ['abort'], what);
    assert.ok(r.sawDone, what);
  } else if (route.name === 'responses') {
    assert.equal(last['type'], 'response.incomplete', what);
    const resp = last['response'] as { status: string; incomplete_details: { reason: string } | null };
    assert.equal(resp.status, 'incomplete', what);
    assert.deepEqual(resp.incomplete_details, { reason: 'interrupted' }, what);
    assert.ok(!ev.some((e) => e['type'] === 'response.completed'), what);
    // the item the generation was inside when cut is incomplete, in its done event and the final response
    const lastDone = ev.filter((e) => e['type'] === 'response.output_item.done').pop()!;
    assert.equal((lastDone['item'] as { status: string }).status, 'incomplete', what);
    assert.equal((last['response'] as { output: { status: string }[] }).output.at(-1)!.status, 'incomplete', what);
  } else {
    assert.equal(last['type'], 'error', what);
    assert.equal((last['error'] as { type: string }).type, 'overloaded_error', what);
    assert.ok(!ev.some((e) => e['type'] === 'message_delta' || e['type'] === 'message_stop'), what);
  }
}

function checkWhole(route: Route, r: JsonResponse): void {
  const what = `${route.name}: ${r.status} ${JSON.stringify(r.json).slice(0, 400)}`;
  if (route.name === 'chat' || route.name === 'completions') {
    assert.equal(r.status, 200, what);
    assert.equal((r.json['choices'] as { finish_reason: string }[])[0]!.finish_reason, 'abort', what);
  } else if (route.name === 'responses') {
    assert.equal(r.status, 200, what);
    assert.equal(r.json['status'], 'incomplete', what);
    assert.deepEqual(r.json['incomplete_details'], { reason: 'interrupted' }, what);
    assert.equal((r.json['output'] as { status: string }[]).at(-1)!.status, 'incomplete', what);
  } else {
    assert.equal(r.status, 503, what);
    assert.equal(r.json['type'], 'error', what);
    assert.equal((r.json['error'] as { type: string }).type, 'overloaded_error', what);
  }
}

test('every generation route, streaming or not, cut by shutdown mid-generation reports an incomplete answer', async () => {
  const engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8, prefixCache: false });
  const s = await startServer(engine, { port: 0, maxQueueWait: 1_000_000 });
  try {
    const pending: Promise<Outcome>[] = [];
    for (const route of ROUTES) {
      pending.push(postStream(`${s.url}${route.path}`, { ...route.body, stream: true }).then((r) => ({ route, stream: true as const, r })));
      pending.push(post(`${s.url}${route.path}`, route.body).then((r) => ({ route, stream: false as const, r })));
    }
    const t0 = Date.now();
    while (engine.stats().running < ROUTES.length * 2) {
      if (Date.now() - t0 > 60_000) throw new Error(`the 8 requests did not all start: ${JSON.stringify(engine.stats())}`);
      await sleep(10);
    }
    // each has generated some tokens (none can finish: 3000 tokens, or 6000 characters of arguments)
    await sleep(500);
    await s.close(0);
    for (const o of await Promise.all(pending)) {
      if (o.stream) checkStreamed(o.route, o.r);
      else checkWhole(o.route, o.r);
    }
    await drained(engine);
  } finally {
    await s.close(0);
    await engine.close();
  }
});
