// Engine API: golden outputs through the engine path, request validation, aborts, stop
// strings, seeded sampling, stats.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Engine } from '../src/engine/engine.js';
import { DeltaserveError } from '../src/util/errors.js';
import { sharedPath, TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';
let engine: Engine;
before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 8 });
});
after(async () => engine.close());

interface Golden { name: string; messages: { role: string; content: string }[]; enable_thinking: boolean; greedy_ids: number[]; last_logits: number[] }

test('golden greedy ids and first-step logits through the engine (all prompts at once)', async () => {
  const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: Golden[] };
  await Promise.all(golden.prompts.map(async (p) => {
    let first: Float32Array | null = null;
    const done = await engine.complete({
      messages: p.messages, think: p.enable_thinking, maxTokens: p.greedy_ids.length,
      captureLogits: (l) => (first ??= l.slice()),
    });
    assert.deepEqual(done.outputIds, p.greedy_ids, p.name);
    const maxAbs = Math.max(...p.last_logits.map(Math.abs));
    const err = Math.max(...p.last_logits.map((v, i) => Math.abs(v - first![i]!))) / maxAbs;
    assert.ok(err <= 1e-4, `${p.name}: logits rel err ${err}`);
  }));
});

test('invalid requests are rejected with a message naming the field', () => {
  const cases: [Parameters<Engine['generate']>[0], RegExp][] = [
    [{ prompt: '' }, /prompt is empty/],
    [{ prompt: 'a', messages: [] }, /exactly one of prompt, messages or prompt_ids/],
    [{}, /exactly one of/],
    [{ promptIds: [1, 5000] }, /prompt_ids\[1\]/],
    [{ prompt: 'hi', temperature: -1 }, /temperature/],
    [{ prompt: 'hi', topP: 0 }, /top_p/],
    [{ prompt: 'hi', maxTokens: 0 }, /max_tokens/],
    [{ prompt: 'hi', maxTokens: 1.5 }, /max_tokens/],
    [{ messages: [{ role: 'user' }] as never }, /messages\[0\]\.content/],
    [{ promptIds: new Array(5000).fill(10) }, /prompt is 5000 tokens; the context length is 4096/],
    [{ prompt: 'hi', stop: [1] as never }, /stop must be/],
  ];
  for (const [req, msg] of cases) {
    assert.throws(() => engine.generate(req), (e: Error) => e instanceof DeltaserveError && msg.test(e.message), String(msg));
  }
});

test('abort mid-stream ends with finish_reason abort and frees memory; others unaffected', async () => {
  const ctl = new AbortController();
  const other = engine.complete({ prompt: 'What is 1 + 1?', maxTokens: 30, ignoreEos: true });
  let deltas = 0;
  let reason = '';
  for await (const ev of engine.generate({ prompt: 'What is 2 + 2?', maxTokens: 200, ignoreEos: true, signal: ctl.signal })) {
    if (ev.type === 'delta' && ++deltas === 3) ctl.abort();
    if (ev.type === 'done') reason = ev.finishReason;
  }
  assert.equal(reason, 'abort');
  assert.ok(deltas <= 4);
  const o = await other;
  assert.equal(o.outputIds.length, 30);
  const alone = await engine.complete({ prompt: 'What is 1 + 1?', maxTokens: 30, ignoreEos: true });
  assert.deepEqual(o.outputIds, alone.outputIds);
  await new Promise((r) => setTimeout(r, 10));
  const st = engine.stats();
  assert.equal(st.kvPages.used, st.kvPages.cached);
  assert.equal(st.stateSlots.used, st.stateSlots.cached);
});

test('stop strings cut the text before the match; eos text is not emitted', async () => {
  const full = await engine.complete({ messages: [{ role: 'user', content: 'What is 12 + 30?' }], maxTokens: 80 });
  assert.equal(full.finishReason, 'stop');
  assert.ok(!full.text.includes('<|im_end|>'));
  assert.ok(full.text.includes('</think>'));
  const cut = await engine.complete({ messages: [{ role: 'user', content: 'What is 12 + 30?' }], maxTokens: 80, stop: '</think>' });
  assert.equal(cut.finishReason, 'stop');
  assert.equal(cut.text, full.text.slice(0, full.text.indexOf('</think>')));
});

test('seeded sampling is reproducible; different seeds differ', async () => {
  const req = { prompt: 'Here are some values:', maxTokens: 24, temperature: 1.2, topP: 0.95, ignoreEos: true };
  const a = await engine.complete({ ...req, seed: 1 });
  const b = await engine.complete({ ...req, seed: 1 });
  const c = await engine.complete({ ...req, seed: 2 });
  assert.deepEqual(a.outputIds, b.outputIds);
  assert.notDeepEqual(a.outputIds, c.outputIds);
});

test('stats report pools, counters and throughput', async () => {
  const s = engine.stats();
  assert.ok(s.requests.finished >= 6);
  assert.ok(s.tokens.generated > 0);
  assert.ok(s.tokensPerSecond > 0);
  assert.ok(s.stateSlots.total >= 8, 'max-running slots plus prefix-cache slots');
  assert.ok(s.prefixCache !== null && s.prefixCache.lookups > 0);
  assert.ok(s.kvPages.total > 0);
});
