// System tier (lavapipe on machines without a GPU). --quantize on the webgpu backend: the
// blocks come from the backend's Kernels.startQuantizer (the host SIMD quantizer, loaded on
// demand: test/checkpoint-layering.test.ts), are uploaded, and the engine on them gives the
// same greedy tokens as the wasm engine with the same --quantize, and the golden ids.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { gpuAdapterOf } from '../src/kernels/index.js';
import { runAll, withEngine } from './engine-helpers.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

const common = { specTokens: 0, prefixCache: false, maxRunning: 2, kvCacheTokens: 2048, maxContext: 1024, quantize: 'q8_0' as const };

before(async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
});

test('--quantize q8_0 on webgpu: the golden greedy ids, and the wasm engine\'s tokens', async () => {
  const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as
    { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };
  const p = golden.prompts.find((x) => x.name === 'recall-zeroshot-think')!;
  const reqs = [
    { messages: [{ role: 'user' as const, content: 'What is 12 + 7?' }], maxTokens: 8, ignoreEos: true },
    { prompt: 'The capital of France is', maxTokens: 7, ignoreEos: true },
  ];
  const onGpu = await withEngine({ ...common, model: TINY_THINK(), kernels: 'webgpu' }, async (e) => {
    assert.ok(gpuAdapterOf(e.model.kernels), 'the engine runs on a GPU adapter');
    const done = await e.complete({ promptIds: p.prompt_ids, maxTokens: p.greedy_ids.length, ignoreEos: true });
    assert.deepEqual([...done.outputIds], p.greedy_ids, 'golden greedy ids');
    return runAll(e, reqs);
  });
  const onWasm = await withEngine({ ...common, model: TINY_THINK(), kernels: 'wasm', threads: 2 }, (e) => runAll(e, reqs));
  onGpu.forEach((g, i) => assert.deepEqual(g.ids, onWasm[i]!.ids, `request ${i}: webgpu ids == wasm ids`));
});
