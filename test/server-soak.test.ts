// Soak: 64 concurrent streaming clients, 2 requests each (short chat and completion
// prompts, greedy and seeded sampling), ~20% of them disconnecting at a random point. Afterwards every
// completed output equals the same request run alone, the engine drains, and the pools
// pass their integrity check. Bounded: 128 requests of ≤ 12 tokens, loopback only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { Rng } from '../src/util/rng.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { drained, joinChat, KERNELS, post, postStream } from './server-helpers.js';

const CLIENTS = 64;
const PER_CLIENT = 2;

let engine: Engine;
let server: RunningServer;
before(async () => {
  // Fixed MTP k keeps seeded sampling independent of timing (see server.test.ts).
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 16, specAdaptive: false });
  server = await startServer(engine, { port: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

interface Job {
  path: string;
  body: Record<string, unknown>;
  /** Disconnect after this many SSE events (Infinity = read to the end). */
  stopAfter: number;
}

function workload(): Job[] {
  const rng = new Rng(7);
  // short single-turn prompts keep the run bounded on the reference kernels
  const lines = ['add', 'mcq'].flatMap((t) => readFileSync(sharedPath('eval', `${t}.public.jsonl`), 'utf8').trim().split('\n'))
    .map((l) => (JSON.parse(l) as { messages: { content: string }[] }).messages)
    .filter((m) => m.length === 1 && m[0]!.content.length < 100).slice(0, 30);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;
  return Array.from({ length: CLIENTS * PER_CLIENT }, (): Job => {
    const sampling = rng.next() < 0.3 ? { temperature: 0.8, top_p: 0.95, seed: Math.floor(rng.next() * 1000) } : { temperature: 0 };
    const max_tokens = 4 + Math.floor(rng.next() * 9);
    const stopAfter = rng.next() < 0.2 ? 1 + Math.floor(rng.next() * 6) : Infinity;
    if (rng.next() < 0.7) {
      return { path: '/v1/chat/completions', body: { messages: pick(lines), max_tokens, ...sampling }, stopAfter };
    }
    return { path: '/v1/completions', body: { prompt: pick(['What is', 'Which word', 'Here are some values:', 'A B C']), max_tokens, ...sampling }, stopAfter };
  });
}

/** Comparable output of a streamed run. */
function streamedOutput(job: Job, events: Record<string, unknown>[]): string {
  if (job.path === '/v1/chat/completions') return JSON.stringify(joinChat(events)[0]);
  type C = { choices: { text: string; finish_reason: string | null }[] };
  let text = '';
  let finish: string | null = null;
  for (const ev of events as unknown as C[]) for (const c of ev.choices) {
    text += c.text;
    finish = c.finish_reason ?? finish;
  }
  return JSON.stringify({ text, finish });
}

/** The same for a plain (non-streamed) response. */
function plainOutput(job: Job, json: Record<string, unknown>): string {
  if (job.path === '/v1/chat/completions') {
    const c = (json['choices'] as { message: { content: string; reasoning_content: string | null }; finish_reason: string }[])[0]!;
    return JSON.stringify({ content: c.message.content, reasoning: c.message.reasoning_content ?? '', finish: c.finish_reason });
  }
  const c = (json['choices'] as { text: string; finish_reason: string }[])[0]!;
  return JSON.stringify({ text: c.text, finish: c.finish_reason });
}

test(`soak: ${CLIENTS} streaming clients × ${PER_CLIENT} requests, ~20% disconnecting; outputs equal solo runs`, { timeout: 240_000 }, async () => {
  const jobs = workload();
  const outputs: (string | null)[] = new Array<string | null>(jobs.length).fill(null);
  let disconnected = 0;
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    for (let k = 0; k < PER_CLIENT; k++) {
      const i = c * PER_CLIENT + k;
      const job = jobs[i]!;
      const r = await postStream(`${server.url}${job.path}`, { ...job.body, stream: true }, job.stopAfter);
      assert.equal(r.status, 200);
      if (r.sawDone) outputs[i] = streamedOutput(job, r.events);
      else disconnected++;
    }
  }));
  assert.ok(disconnected >= 10, `disconnected ${disconnected}`);
  await drained(engine);
  // Solo runs, one at a time, of every request that completed.
  let compared = 0;
  for (let i = 0; i < jobs.length; i++) {
    if (outputs[i] === null) continue;
    const job = jobs[i]!;
    const solo = await post(`${server.url}${job.path}`, job.body);
    assert.equal(solo.status, 200);
    assert.equal(outputs[i], plainOutput(job, solo.json), `request ${i}: ${JSON.stringify(job.body).slice(0, 200)}`);
    compared++;
  }
  assert.ok(compared >= 90, `compared ${compared}`);
  await drained(engine);
});
