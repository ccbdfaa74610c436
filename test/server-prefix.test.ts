// The prefix cache through the HTTP server, on tiny-think, greedy:
// - the same request twice → cached_tokens = prompt_tokens: nothing prefilled (chat and
//   completions with ids);
// - a second turn → cached_tokens ≥ the end of turn 1's last message;
// - three requests sharing a system prompt → the 2nd and 3rd reuse it through its end;
// each answer (message and logprobs) identical to a server with the prefix cache off;
// - a restart with --prefix-cache-dir serves turn 2 from the cache, answering like a cold
//   server, and turn 1 again with nothing to prefill; a corrupt, truncated or mismatched
//   cache file is reported and ignored.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, type EngineOptions } from '../src/engine/engine.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { STORE_FILE } from '../src/cache/prefix-store.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

type Msg = { role: string; content: string };
interface Served { engine: Engine; server: RunningServer }

const base = (): EngineOptions => ({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, specAdaptive: false });
async function serve(opts: EngineOptions): Promise<Served> {
  const engine = await Engine.load(opts);
  return { engine, server: await startServer(engine, { port: 0 }) };
}
async function stop(s: Served): Promise<void> {
  await s.server.close();
  await s.engine.close();
}

let hot: Served;
let cold: Served;
before(async () => {
  hot = await serve(base());
  cold = await serve({ ...base(), prefixCache: false });
});
after(async () => {
  await stop(hot);
  await stop(cold);
});

const values = (n: number, tag: string): string => Array.from({ length: n }, (_, i) => `- ${tag}${i}=${(i * 53) % 1000}`).join('\n');

async function chat(s: Served, messages: Msg[]): Promise<{ answer: unknown; usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }> {
  const r = await post(`${s.server.url}/v1/chat/completions`, { messages, max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 2 });
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const c = (r.json['choices'] as { message: unknown; logprobs: unknown; finish_reason: string }[])[0]!;
  return { answer: { message: c.message, logprobs: c.logprobs, finish: c.finish_reason }, usage: r.json['usage'] as never };
}

/** Tokens of `messages` rendered without the generation prompt (the end of the last message). */
async function renderedLength(s: Served, messages: Msg[]): Promise<number> {
  const r = await post(`${s.server.url}/tokenize`, { messages, add_generation_prompt: false });
  return r.json['count'] as number;
}

test('the same request twice: everything cached, answer identical to a cache-off server (chat and completions)', async () => {
  for (const n of [8, 14, 40]) { // ≈ 68 … 220+ token prompts
    const messages = [{ role: 'user', content: `Values:\n${values(n, 'a')}\nWhat is a1?` }];
    const want = await chat(cold, messages);
    await chat(hot, messages);
    const again = await chat(hot, messages);
    const p = again.usage.prompt_tokens;
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, p, `n=${n}: cached ${again.usage.prompt_tokens_details.cached_tokens} of ${p}`);
    assert.deepEqual(again.answer, want.answer, `n=${n}: answer differs from cold`);
  }
  const ids = Array.from({ length: 150 }, (_, i) => 100 + ((i * 7) % 500));
  const body = { prompt: ids, max_tokens: 12, temperature: 0, logprobs: 2 };
  const want = await post(`${cold.server.url}/v1/completions`, body);
  await post(`${hot.server.url}/v1/completions`, body);
  const again = await post(`${hot.server.url}/v1/completions`, body);
  const usage = again.json['usage'] as { prompt_tokens_details: { cached_tokens: number } };
  assert.equal(usage.prompt_tokens_details.cached_tokens, 150, `completions: cached ${usage.prompt_tokens_details.cached_tokens}`);
  const strip = (j: Record<string, unknown>): unknown => (j['choices'] as { text: string; logprobs: unknown }[]).map((c) => [c.text, c.logprobs]);
  assert.deepEqual(strip(again.json), strip(want.json));
});

test('a second turn: cached ≥ the end of turn 1\'s last message, identical to cold', async () => {
  for (const n of [8, 14, 40]) {
    const first = [{ role: 'user', content: `Remember:\n${values(n, 'b')}\nWhat is b2?` }];
    const t1 = await chat(hot, first);
    const reply = (t1.answer as { message: { content: string } }).message.content ?? '';
    const second = [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'And b3?' }];
    const t2 = await chat(hot, second);
    const want = await renderedLength(hot, first);
    assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= want, `n=${n}: cached ${t2.usage.prompt_tokens_details.cached_tokens} < ${want}`);
    assert.deepEqual(t2.answer, (await chat(cold, second)).answer, `n=${n}: turn 2 differs from cold`);
  }
});

test('three requests sharing a system prompt: the 2nd and 3rd reuse it, identical to cold', async () => {
  const system = { role: 'system', content: `You are a lookup table.\n${values(30, 's')}` };
  const sysEnd = await renderedLength(hot, [system]);
  assert.ok(sysEnd >= 128, `system prompt of ${sysEnd} tokens`);
  for (const [i, q] of ['What is s4?', 'What is s9?', 'What is s17?'].entries()) {
    const messages = [system, { role: 'user', content: q }];
    const r = await chat(hot, messages);
    if (i > 0) assert.ok(r.usage.prompt_tokens_details.cached_tokens >= sysEnd, `request ${i}: cached ${r.usage.prompt_tokens_details.cached_tokens} < ${sysEnd}`);
    assert.deepEqual(r.answer, (await chat(cold, messages)).answer, `request ${i} differs from cold`);
  }
  const m = await (await fetch(`${hot.server.url}/metrics`)).text();
  for (const name of ['lookups', 'hits', 'hit_tokens', 'snapshots', 'snapshot_bytes', 'evictions', 'inserted']) {
    assert.match(m, new RegExp(`^deltaserve_engine_prefix_cache_${name} \\d`, 'm'), `/metrics has prefix_cache_${name}`);
  }
  assert.match(m, /^deltaserve_engine_prefix_cache_hits [1-9]/m);
});

test('restart with --prefix-cache-dir: turn 2 hits on the new server and answers like a cold one; bad files are ignored', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-prefix-'));
  const logs: string[] = [];
  const opts = { ...base(), prefixCacheDir: dir, log: (m: string) => logs.push(m) };
  try {
    const first = [{ role: 'user', content: `Keep these:\n${values(30, 'r')}\nWhat is r5?` }];
    const a = await serve(opts);
    const t1 = await chat(a, first);
    await stop(a); // graceful shutdown saves
    const reply = (t1.answer as { message: { content: string } }).message.content ?? '';
    const second = [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'And r6?' }];
    const want = await chat(cold, second);
    const goodFile = readFileSync(join(dir, STORE_FILE));

    const b = await serve(opts);
    const disk = b.engine.stats().prefixCache!.disk!;
    assert.ok(disk.loads === 1 && disk.loadedSnapshots > 0, `loaded: ${JSON.stringify(disk)} ${logs.join('; ')}`);
    const t2 = await chat(b, second);
    const end = await renderedLength(b, first);
    assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= end, `after restart: cached ${t2.usage.prompt_tokens_details.cached_tokens} < ${end}`);
    assert.deepEqual(t2.answer, want.answer, 'turn 2 after restart differs from cold');
    const again = await chat(b, first); // the stored hidden row came back too: nothing to prefill
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens, 'turn 1 again after restart');
    assert.deepEqual(again.answer, t1.answer, 'turn 1 again after restart differs from its first answer');
    assert.match(await (await fetch(`${b.server.url}/metrics`)).text(), /^deltaserve_engine_prefix_cache_disk_loads 1/m);
    await stop(b);

    const corrupt = Buffer.from(goodFile);
    corrupt[corrupt.length - 5] = corrupt[corrupt.length - 5]! ^ 0x40;
    const cases: [string, Buffer | string, EngineOptions][] = [
      ['corrupt', corrupt, opts],
      ['truncated', goodFile.subarray(0, goodFile.length - 1000), opts],
      ['not a cache file', 'hello', opts],
      ['another configuration', goodFile, { ...opts, specTokens: 0 }],
    ];
    for (const [what, bytes, o] of cases) {
      writeFileSync(join(dir, STORE_FILE), bytes);
      logs.length = 0;
      const c = await serve({ ...o, prefixCacheSaveMs: 0 });
      const st = c.engine.stats().prefixCache!;
      assert.ok(st.disk!.rejected === 1 && st.disk!.loads === 0 && st.snapshots === 0, `${what}: ${JSON.stringify(st.disk)}`);
      assert.match(logs.join('\n'), /ignoring saved cache/, `${what}: reported`);
      const r = await chat(c, second);
      if (o === opts) assert.deepEqual(r.answer, want.answer, `${what}: the server still answers like a cold one`);
      await stop(c);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('periodic save when idle; --prefix-cache-disk-bytes bounds the saved file (least recently used snapshots left out)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ds-prefix-'));
  try {
    const e = await Engine.load({ ...base(), prefixCacheDir: dir, prefixCacheDiskBytes: 3_000_000, prefixCacheSaveMs: 50, log: () => {} });
    for (const t of ['x', 'y', 'z']) await e.complete({ messages: [{ role: 'user', content: `${values(30, t)}\nWhat is ${t}1?` }], maxTokens: 4 });
    const inMemory = e.stats().prefixCache!.snapshots;
    for (let i = 0; i < 300 && e.stats().prefixCache!.disk!.savedSnapshots === 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(e.stats().prefixCache!.disk!.saves >= 1, 'saved while running, when idle');
    await e.close();
    const size = readFileSync(join(dir, STORE_FILE)).length;
    assert.ok(size <= 3_000_000, `file of ${size} bytes`);
    const e2 = await Engine.load({ ...base(), prefixCacheDir: dir, log: () => {} });
    const loaded = e2.stats().prefixCache!.snapshots;
    assert.ok(loaded > 0 && loaded < inMemory, `loaded ${loaded} of ${inMemory} snapshots`);
    // the most recent conversation survived
    const r = await e2.complete({ messages: [{ role: 'user', content: `${values(30, 'z')}\nWhat is z1?` }], maxTokens: 4 });
    assert.ok(r.usage.cachedTokens >= 64, `recent prompt cached ${r.usage.cachedTokens}`);
    e2.checkIntegrity();
    await e2.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
