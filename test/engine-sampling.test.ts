// The engine's batched sampling path (BatchSampler: one kernel call per step for decode,
// verify and draft rows). Two paths that must agree:
//  - logprobs from the kernel's normaliser == an f64 log-softmax of the captured raw logits
//    (same token, same top ids), with MTP on and off, greedy and sampled, with penalties;
//  - a seeded sampled request gives the same tokens alone and in a batch of others
//    (MTP off, and MTP on with a fixed k).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { TokenLogprob } from '../src/engine/sample-batch.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

function logSoftmax(logits: Float32Array, vocab: number): Float64Array {
  let max = -Infinity;
  for (let i = 0; i < vocab; i++) max = Math.max(max, logits[i]!);
  let sum = 0;
  for (let i = 0; i < vocab; i++) sum += Math.exp(logits[i]! - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits.subarray(0, vocab), (x) => x - lse);
}

const REQS: GenerateRequest[] = [
  { prompt: 'What is 12 + 30?', maxTokens: 24, temperature: 0 },
  { prompt: 'Name a colour.', maxTokens: 24, temperature: 0.8, topP: 0.9, presencePenalty: 1.5, seed: 3 },
  { prompt: 'Count to five.', maxTokens: 24, temperature: 1, topK: 20, minP: 0.05, repetitionPenalty: 1.2, seed: 4 },
];

async function checkLogprobs(engine: Engine): Promise<void> {
  await Promise.all(REQS.map(async (r) => {
    const raw: Float32Array[] = [];
    const lps: TokenLogprob[] = [];
    const done = await engine.complete({
      ...r, captureLogits: (l) => raw.push(l.slice()), logprobs: { top: 5, onToken: (e) => lps.push(e) },
    });
    assert.equal(lps.length, done.outputIds.length, 'one logprob entry per generated token');
    assert.equal(raw.length, done.outputIds.length);
    lps.forEach((e, t) => {
      assert.equal(e.id, done.outputIds[t]);
      const want = logSoftmax(raw[t]!, engine.sampleVocab);
      assert.ok(Math.abs(e.logprob - want[e.id]!) < 1e-5, `token ${t}: ${e.logprob} vs ${want[e.id]}`);
      const order = [...want.keys()].sort((a, b) => want[b]! - want[a]! || a - b).slice(0, 5);
      assert.deepEqual(e.top.map((x) => x.id), order, `token ${t}: top ids`);
      e.top.forEach((x) => assert.ok(Math.abs(x.logprob - want[x.id]!) < 1e-5));
    });
  }));
}

test('logprobs from the sampling kernel equal an f64 log-softmax of the raw logits (MTP off)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 0 }, checkLogprobs);
});

test('logprobs from the sampling kernel equal an f64 log-softmax of the raw logits (MTP on)', async () => {
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, specAdaptive: false }, checkLogprobs);
});

for (const specTokens of [0, 2]) {
  test(`seeded sampling: same tokens alone and in a batch (spec tokens ${specTokens})`, async () => {
    await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens, specAdaptive: false, maxRunning: 8 }, async (engine) => {
      const target: GenerateRequest = { prompt: 'Tell me a story.', maxTokens: 32, temperature: 0.9, topP: 0.95, topK: 40, presencePenalty: 1, seed: 11, ignoreEos: true };
      const alone = await engine.complete(target);
      const others = [1, 2, 3, 4].map((s) => engine.complete({ prompt: `Say ${s}.`, maxTokens: 20 + s, temperature: s % 2 ? 0.7 : 0, seed: s }));
      const batched = await engine.complete(target);
      await Promise.all(others);
      assert.deepEqual(batched.outputIds, alone.outputIds);
      const other = await engine.complete({ ...target, seed: 12 });
      assert.notDeepEqual(other.outputIds, alone.outputIds, 'another seed draws differently');
    });
  });
}
