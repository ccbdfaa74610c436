// HTTP operations: CORS (off by default; allowed origins get headers; preflights answered
// before auth; other origins refused), /health answers 503 while the server drains (and
// keeps listening until in-flight requests are done), --metrics-no-auth, /v1/models shows
// no local paths, /version, and the access log: one structured line per request, prompts
// only with logPrompts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { startServer } from '../src/server/index.js';
import { createLogger, type Logger } from '../src/util/log.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { KERNELS, post, postStream } from './server-helpers.js';

let engine: Engine;
const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];
const C = '/v1/chat/completions';

before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 });
});
after(async () => engine.close());

/** A JSON logger whose lines are collected in memory. */
function memoryLogger(level: 'info' | 'debug' = 'info'): { log: Logger; records: () => Record<string, unknown>[] } {
  const lines: string[] = [];
  const log = createLogger({ level, format: 'json', stream: { write: (s: string) => lines.push(s) } });
  return { log, records: () => lines.join('').trim().split('\n').filter((l) => l).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

/** GET on a new connection (a keep-alive one may be closed by the draining server). */
function getFresh(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpGet(url, { agent: false }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => (body += b.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

const preflight = (url: string, origin: string): Promise<Response> => fetch(url, {
  method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
});

test('CORS: off by default; allowed origins get headers and preflights (no API key needed); others are refused', async () => {
  const plain = await startServer(engine, { port: 0 });
  const off = await preflight(`${plain.url}${C}`, 'https://app.example.com');
  assert.equal(off.status, 405);
  assert.equal(off.headers.get('access-control-allow-origin'), null);
  await plain.close();

  const s = await startServer(engine, { port: 0, apiKey: 'k', allowedOrigins: ['https://app.example.com', 'http://localhost:5173'] });
  try {
    const ok = await preflight(`${s.url}${C}`, 'https://app.example.com');
    assert.equal(ok.status, 204);
    assert.equal(ok.headers.get('access-control-allow-origin'), 'https://app.example.com');
    assert.match(ok.headers.get('access-control-allow-methods') ?? '', /POST/);
    assert.match(ok.headers.get('access-control-allow-headers') ?? '', /authorization/);
    const bad = await preflight(`${s.url}${C}`, 'https://evil.example.com');
    assert.equal(bad.status, 403);
    assert.equal(bad.headers.get('access-control-allow-origin'), null);
    assert.match(((await bad.json()) as { error: { message: string } }).error.message, /evil\.example\.com.*not allowed/);
    const r = await post(`${s.url}${C}`, { messages: ASK, max_tokens: 2 }, { authorization: 'Bearer k', origin: 'http://localhost:5173' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://localhost:5173');
    assert.match(r.headers.get('access-control-expose-headers') ?? '', /x-request-id/);
    const other = await post(`${s.url}${C}`, { messages: ASK, max_tokens: 2 }, { authorization: 'Bearer k', origin: 'https://evil.example.com' });
    assert.equal(other.headers.get('access-control-allow-origin'), null);
  } finally {
    await s.close();
  }
  const any = await startServer(engine, { port: 0, allowedOrigins: ['*'] });
  assert.equal((await preflight(`${any.url}/v1/models`, 'https://x.example')).headers.get('access-control-allow-origin'), '*');
  await any.close();
  await assert.rejects(startServer(engine, { port: 0, allowedOrigins: ['https://app.example.com/'] }), /no path/);
});

test('draining: /health answers 503 (not a refused connection) until in-flight requests finish', async () => {
  const { log, records } = memoryLogger();
  const s = await startServer(engine, { port: 0, logger: log });
  assert.equal((await fetch(`${s.url}/health`)).status, 200);
  const long = postStream(`${s.url}${C}`, { messages: ASK, max_tokens: 3000, ignore_eos: true, stream: true });
  while (engine.stats().running < 1) await new Promise((r) => setTimeout(r, 10));
  const closing = s.close(60_000);
  const h = await getFresh(`${s.url}/health`);
  assert.equal(h.status, 503);
  assert.equal((JSON.parse(h.body) as { error: { code: string } }).error.code, 'shutting_down');
  assert.equal((await getFresh(`${s.url}/v1/models`)).status, 503);
  await s.close(0); // cut the grace period: the stream ends with finish_reason abort
  await closing;
  const l = await long;
  assert.ok(l.sawDone);
  await assert.rejects(fetch(`${s.url}/health`));
  const msgs = records().map((r) => r['msg']);
  assert.ok(msgs.includes('shutdown: draining') && msgs.includes('shutdown: aborting in-flight requests') && msgs.includes('shutdown: server closed'), JSON.stringify(msgs));
  const aborted = records().find((r) => r['msg'] === 'request' && r['route'] === C && r['status'] === 200);
  assert.equal(aborted?.['finish_reason'], 'abort');
});

test('--metrics-no-auth, /v1/models without local paths, /version', async () => {
  const s = await startServer(engine, { port: 0, apiKey: 'k', metricsNoAuth: true });
  try {
    assert.equal((await fetch(`${s.url}/metrics`)).status, 200);
    assert.equal((await fetch(`${s.url}/v1/models`)).status, 401);
    const auth = { authorization: 'Bearer k' };
    const models = await (await fetch(`${s.url}/v1/models`, { headers: auth })).text();
    assert.ok(!models.includes(engine.model.dir) && !models.includes('/work') && !models.includes(REPO_ROOT), models);
    const one = await (await fetch(`${s.url}/v1/models/tiny-think`, { headers: auth })).text();
    assert.ok(!one.includes(engine.model.dir), one);
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    const v = (await (await fetch(`${s.url}/version`, { headers: auth })).json()) as Record<string, string>;
    assert.deepEqual(v, { name: 'deltaserve', version: pkg.version, node: process.versions.node, kernels: KERNELS });
  } finally {
    await s.close();
  }
  const closed = await startServer(engine, { port: 0, apiKey: 'k' });
  assert.equal((await fetch(`${closed.url}/metrics`)).status, 401);
  await closed.close();
});

test('access log: one line per request with tokens, TTFT, total time, finish reason, abort; prompts only with logPrompts', async () => {
  const { log, records } = memoryLogger();
  const s = await startServer(engine, { port: 0, logger: log });
  const secret = 'What is 12 + 30? my-secret-words';
  const ok = await post(`${s.url}${C}`, { messages: [{ role: 'user', content: secret }], max_tokens: 4, ignore_eos: true }, { 'x-request-id': 'trace-1' });
  assert.equal(ok.headers.get('x-request-id'), 'trace-1');
  await post(`${s.url}${C}`, { messages: ASK, temperature: 7 });
  await postStream(`${s.url}${C}`, { messages: ASK, max_tokens: 2000, ignore_eos: true, stream: true }, 3);
  for (let i = 0; i < 500 && records().filter((r) => r['msg'] === 'request').length < 3; i++) await new Promise((r) => setTimeout(r, 10));
  await s.close();
  const reqs = records().filter((r) => r['msg'] === 'request');
  assert.equal(reqs.length, 3, JSON.stringify(reqs));
  const [a, b, c] = reqs.sort((x, y) => String(x['status']).localeCompare(String(y['status'])) || Number(x['client_abort']) - Number(y['client_abort']));
  const usage = ok.json['usage'] as { prompt_tokens: number; completion_tokens: number };
  assert.deepEqual({ ...a, time: 0, total_ms: 0, ttft_ms: 0 }, {
    time: 0, level: 'info', msg: 'request', id: 'trace-1', method: 'POST', route: C, status: 200, prompt_tokens: usage.prompt_tokens,
    completion_tokens: 4, cached_tokens: 0, reprefill_tokens: null, ttft_ms: 0, total_ms: 0, finish_reason: 'length', client_abort: false,
  });
  assert.ok((a!['ttft_ms'] as number) > 0 && (a!['total_ms'] as number) >= (a!['ttft_ms'] as number));
  assert.equal(c!['status'], 400);
  assert.equal(c!['level'], 'warn');
  assert.equal(b!['client_abort'], true);
  assert.equal(b!['finish_reason'], 'abort');
  assert.ok(!JSON.stringify(records()).includes('my-secret-words'), 'no prompt text without logPrompts');

  const withPrompts = memoryLogger();
  const s2 = await startServer(engine, { port: 0, logger: withPrompts.log, logPrompts: true });
  await post(`${s2.url}${C}`, { messages: [{ role: 'user', content: secret }], max_tokens: 2 });
  await s2.close();
  assert.match(JSON.stringify(withPrompts.records()), /my-secret-words/);
});
