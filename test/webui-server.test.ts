// The web UI's server side: static pages and bundles (content types, CSP and nosniff, no
// inline script, ETag revalidation, gzip, year-long caching of hashed bundles), --no-webui,
// /metrics.json (samples that follow the /metrics counters, `since`, auth like /metrics),
// and the chat completion's `speculative` field against the same counters.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Engine } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { StatsSampler } from '../src/server/api/stats.js';
import { ServerMetrics } from '../src/server/api/metrics.js';
import { WEBUI_DIR } from '../src/server/http/webui.js';
import { REPO_ROOT } from './paths.js';
import { type ServeProcess, spawnServe } from './serve-process.js';
import { KERNELS, post } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
const TINY = join(REPO_ROOT, 'models', 'tiny-think');
const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];

before(async () => {
  if (!existsSync(join(WEBUI_DIR, 'index.html'))) throw new Error(`the web UI is not built (${WEBUI_DIR} is missing): run \`npm run build\``);
  engine = await Engine.load({ model: TINY, kernels: KERNELS, maxRunning: 4 });
  server = await startServer(engine, { port: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

function counter(text: string, name: string): number {
  const m = new RegExp(`^deltaserve_${name} (\\S+)$`, 'm').exec(text);
  assert.ok(m, `/metrics has deltaserve_${name}`);
  return Number(m[1]);
}

test('pages: HTML with a strict CSP, nosniff, no inline script; every referenced bundle is served with its type', async () => {
  for (const path of ['/', '/dashboard']) {
    const res = await fetch(`${server.url}${path}`);
    assert.equal(res.status, 200, path);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('cache-control'), 'no-cache');
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline <script>');
    assert.doesNotMatch(html, /\son[a-z]+=|style=|<style/i, 'no inline handlers or styles');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
    const refs = [...html.matchAll(/(?:src|href)="(\/webui\/[^"]+)"/g)].map((m) => m[1]!);
    assert.ok(refs.some((r) => r.endsWith('.js')) && refs.some((r) => r.endsWith('.css')), `${path} loads a script and a stylesheet`);
    for (const ref of refs) {
      const a = await fetch(`${server.url}${ref}`);
      assert.equal(a.status, 200, ref);
      const type = ref.endsWith('.js') ? 'text/javascript; charset=utf-8' : ref.endsWith('.css') ? 'text/css; charset=utf-8' : 'image/svg+xml';
      assert.equal(a.headers.get('content-type'), type, ref);
      assert.equal(a.headers.get('x-content-type-options'), 'nosniff');
      if (/-[A-Za-z0-9]{8}\.(js|css)$/.test(ref)) assert.match(a.headers.get('cache-control') ?? '', /max-age=31536000, immutable/);
      await a.arrayBuffer();
    }
  }
});

test('pages: ETag revalidation (304), gzip when accepted (same bytes), HEAD, 404 for unknown files, open without the API key', async () => {
  const first = await fetch(`${server.url}/`);
  const plain = Buffer.from(await first.arrayBuffer());
  const etag = first.headers.get('etag')!;
  assert.ok(etag);
  const again = await fetch(`${server.url}/`, { headers: { 'if-none-match': etag } });
  assert.equal(again.status, 304);
  // node's fetch decompresses on its own: ask with node:http semantics through a raw request
  const { request } = await import('node:http');
  const gz = await new Promise<{ enc: string | undefined; body: Buffer }>((resolve, reject) => {
    request(`${server.url}/`, { headers: { 'accept-encoding': 'gzip' } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => resolve({ enc: res.headers['content-encoding'], body: Buffer.concat(parts) }));
    }).on('error', reject).end();
  });
  assert.equal(gz.enc, 'gzip');
  assert.deepEqual(gunzipSync(gz.body), plain);
  const head = await fetch(`${server.url}/dashboard`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal((await head.arrayBuffer()).byteLength, 0);
  const missing = await fetch(`${server.url}/webui/nope.js`);
  assert.equal(missing.status, 404);
  assert.match(((await missing.json()) as { error: { message: string } }).error.message, /no web UI file \/webui\/nope\.js/);
  const keyed = await startServer(engine, { port: 0, apiKey: 'k' });
  try {
    assert.equal((await fetch(`${keyed.url}/`)).status, 200, 'the page itself needs no key (it asks for one)');
    assert.equal((await fetch(`${keyed.url}/metrics.json`)).status, 401);
    assert.equal((await fetch(`${keyed.url}/metrics.json`, { headers: { authorization: 'Bearer k' } })).status, 200);
  } finally {
    await keyed.close();
  }
});

test('--no-webui (webui: false): / and /dashboard are 404 like any unknown route; the API still answers', async () => {
  const off = await startServer(engine, { port: 0, webui: false });
  try {
    for (const path of ['/', '/dashboard', '/webui/favicon.svg']) {
      const res = await fetch(`${off.url}${path}`);
      assert.equal(res.status, 404, path);
      assert.match(((await res.json()) as { error: { message: string } }).error.message, /no route/);
    }
    assert.equal((await fetch(`${off.url}/v1/models`)).status, 200);
  } finally {
    await off.close();
  }
});

test('chat `speculative` field and /metrics.json samples agree with the /metrics counters', async () => {
  const before = await (await fetch(`${server.url}/metrics`)).text();
  const r = await post(`${server.url}/v1/chat/completions`, { messages: ASK, max_tokens: 64 });
  assert.equal(r.status, 200);
  const after = await (await fetch(`${server.url}/metrics`)).text();
  const rounds = counter(after, 'spec_rounds_total') - counter(before, 'spec_rounds_total');
  const accepted = counter(after, 'spec_accepted_tokens_total') - counter(before, 'spec_accepted_tokens_total');
  const spec = r.json['speculative'] as Record<string, number> | undefined;
  assert.ok(rounds > 0, 'tiny-think decodes greedily with MTP drafts');
  assert.ok(spec, 'the response has a speculative field');
  assert.equal(spec['rounds'], rounds);
  assert.equal(spec['accepted_tokens'], accepted);
  assert.equal(spec['accept_length'], (accepted + rounds) / rounds);
  const usage = r.json['usage'] as { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };

  // the sampler's deltas over the request equal the counters' deltas
  const m = new ServerMetrics();
  const sampler = new StatsSampler(engine, m);
  sampler.sample(1000);
  m.promptTokens.inc({}, usage.prompt_tokens);
  m.cachedTokens.inc({}, 5);
  m.specRounds.inc({}, rounds);
  m.specAccepted.inc({}, accepted);
  m.specDrafted.inc({}, spec['draft_tokens']!);
  m.ttft.observe(0.25);
  m.ttft.observe(0.75);
  const s = sampler.sample(2000);
  assert.equal(s.prompt_tokens, usage.prompt_tokens);
  assert.equal(s.cached_tokens, 5);
  assert.equal(s.cache_hit_rate, 5 / usage.prompt_tokens);
  assert.equal(s.accept_length, (accepted + rounds) / rounds);
  assert.equal(s.acceptance_rate, accepted / spec['draft_tokens']!);
  assert.equal(s.ttft_seconds, 0.5);
  const idle = sampler.sample(3000);
  assert.equal(idle.prompt_tokens, 0);
  assert.equal(idle.accept_length, null, 'no rounds in the interval: no accept length');
  assert.equal(idle.ttft_seconds, null);
  assert.deepEqual(sampler.samples(1000).map((x) => x.t), [2000, 3000], 'since filters by sample time');
});

test('/metrics.json: a sample per second with the model card; since filters; a bad since is a 400', async () => {
  await new Promise((r) => setTimeout(r, 2300));
  const res = await fetch(`${server.url}/metrics.json`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const j = (await res.json()) as { samples: { t: number; prompt_tokens: number }[]; model: Record<string, unknown> };
  assert.ok(j.samples.length >= 2, `samples taken each second (got ${j.samples.length})`);
  const served = j.samples.reduce((a, s) => a + s.prompt_tokens, 0);
  const metricsText = await (await fetch(`${server.url}/metrics`)).text();
  assert.equal(served, counter(metricsText, 'prompt_tokens_total'), 'the samples add up to the prompt-token counter');
  assert.equal(j.model['id'], 'tiny-think');
  assert.equal(j.model['model_type'], 'qwen3_5_text');
  assert.equal(j.model['linear_attention_layers'], 6);
  assert.equal(j.model['full_attention_layers'], 2);
  assert.equal(j.model['kernels'], engine.model.kernels.name);
  assert.equal(j.model['threads'], engine.model.kernels.threads);
  assert.equal(j.model['spec_tokens'], 3);
  assert.ok(Number((j.model['weights_by_type'] as Record<string, number>)['bf16']) > 0);
  const last = j.samples[j.samples.length - 1]!.t;
  const later = (await (await fetch(`${server.url}/metrics.json?since=${last}`)).json()) as { samples: { t: number }[] };
  assert.ok(later.samples.every((s) => s.t > last));
  const bad = await fetch(`${server.url}/metrics.json?since=yesterday`);
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: { message: string } }).error.message, /since must be a sample time/);
});

/** Start `deltaserve serve` with `flags`; resolves once it is ready (the memory plan printed). */
const serveProcess = (flags: string[]): Promise<ServeProcess> => spawnServe(flags, { model: TINY, readyWhen: /memory plan/ });

test('deltaserve serve prints the chat and dashboard URLs; --no-webui turns the pages off', { timeout: 60_000 }, async () => {
  const on = await serveProcess([]);
  try {
    for (let i = 0; i < 50 && !on.stdout().includes('chat at'); i++) await new Promise((r) => setTimeout(r, 40));
    assert.match(on.stdout(), new RegExp(`chat at ${on.url}/, dashboard at ${on.url}/dashboard\n`));
    assert.equal((await fetch(`${on.url}/`)).status, 200);
  } finally {
    await on.stop();
  }
  const off = await serveProcess(['--no-webui']);
  try {
    assert.doesNotMatch(off.stdout(), /chat at/);
    assert.equal((await fetch(`${off.url}/`)).status, 404);
    assert.equal((await fetch(`${off.url}/dashboard`)).status, 404);
  } finally {
    await off.stop();
  }
});
