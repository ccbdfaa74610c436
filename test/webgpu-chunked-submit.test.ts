// Chunked submits (kernels/webgpu/submit-chunks.ts, encoder.ts): a step's dispatches go to
// the GPU in command buffers of a few dispatches each while the host records the rest. The
// queue keeps every dependency, so the bits are those of one submit per step. Checked here
// with chunks of 3 dispatches forced (lavapipe's default is one submit):
// - the encoder alone: the submits the policy says, parameter slots of every chunk, a
//   read-back staged in an early chunk, step timestamps across submits;
// - tiny-think on the engine: greedy ids and every token's full logits of a prefill and
//   decode, a batch of 2 and MTP verify rounds (k = 2) == the single-submit engine's, bit for
//   bit, and a step's submits are ceil(dispatches / 3), not 1.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { chunkLimit, parseSubmitChunks, SINGLE_SUBMIT, type SubmitChunks } from '../src/kernels/webgpu/submit-chunks.js';
import { submitChunks } from '../src/kernels/webgpu-node.js';
import { takeUncapturedError } from '../src/kernels/webgpu/device.js';
import { type RunResult, runAll, sameBits, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const CHUNKS_OF_3: SubmitChunks = { first: 3, every: 3 };
const base = { model: '', kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 512, prefixCache: false };
const PROMPTS: GenerateRequest[] = [
  { prompt: 'Name a color.', maxTokens: 4, ignoreEos: true },
  { prompt: 'The capital of France is', maxTokens: 3, ignoreEos: true },
];

function assertSameRun(got: RunResult, want: RunResult, what: string): void {
  assert.deepEqual(got.ids, want.ids, `${what}: ids`);
  assert.equal(got.logits.length, want.logits.length, `${what}: logits rows`);
  got.logits.forEach((l, i) => assert.ok(sameBits(l, want.logits[i]!), `${what}: logits of token ${i} differ`));
}

describe('chunk policy', () => {
  test('chunkLimit and the DELTASERVE_SUBMIT_CHUNK setting', () => {
    assert.equal(chunkLimit(SINGLE_SUBMIT, 0), Infinity);
    assert.equal(chunkLimit({ first: 2, every: 5 }, 0), 2);
    assert.equal(chunkLimit({ first: 2, every: 5 }, 3), 5);
    assert.equal(chunkLimit({ first: 4, every: 0 }, 1), Infinity, 'F,0: the rest in one submit');
    assert.deepEqual(parseSubmitChunks('3'), { first: 3, every: 3 });
    assert.deepEqual(parseSubmitChunks('8, 32'), { first: 8, every: 32 });
    assert.equal(parseSubmitChunks('x'), null);
    assert.equal(submitChunks({}), undefined, 'unset: the adapter default');
    assert.deepEqual(submitChunks({ DELTASERVE_SUBMIT_CHUNK: '0' }), SINGLE_SUBMIT);
    assert.throws(() => submitChunks({ DELTASERVE_SUBMIT_CHUNK: '-1' }), /DELTASERVE_SUBMIT_CHUNK/);
  });
});

describe('chunked submits on webgpu', () => {
  test('the encoder: submits as the policy says, every chunk its own parameters, in queue order', async () => {
    const g = await gpuUnderTest();
    try {
      const n = 11;
      const t = g.alloc.tensor([n]);
      const acc = g.alloc.tensor([n]);
      // each policy's own values (v), so no slot left by an earlier step can pass for this one's
      for (const [chunks, submits, v] of [[SINGLE_SUBMIT, 1, 1], [{ first: 2, every: 4 }, 7, 100], [CHUNKS_OF_3, 8, 10000]] as const) {
        g.submitChunks = chunks;
        const enc = g.encoder(g.adapter.features.timestamps ? 'step' : 'none');
        g.fill(enc, acc, 0, n, 0);
        g.fill(enc, t, 0, n, 0);
        let early = null;
        // 24 dispatches: t[i] = v·(i + 1) (a parameter of its own each), then acc += t
        for (let i = 0; i < n; i++) {
          g.fill(enc, t, i, 1, v * (i + 1));
          g.add(enc, acc, acc, t, n);
          if (i === 2) early = enc.readNow<Float32Array>(acc); // staged in an early submit
        }
        const read = enc.read<Float32Array>(acc);
        await enc.submit();
        assert.equal(takeUncapturedError(), null);
        assert.equal(enc.submits, submits, `${JSON.stringify(chunks)}: submits`);
        // acc[j] = Σ over i ≥ j of v·(j + 1): t[j] holds v·(j + 1) from pass j on
        assert.deepEqual([...read.data!], Array.from({ length: n }, (_, j) => v * (j + 1) * (n - j)), `${JSON.stringify(chunks)}: acc`);
        assert.deepEqual([...early!.data!], Array.from({ length: n }, (_, j) => (j <= 2 ? v * (j + 1) * (3 - j) : 0)), `${JSON.stringify(chunks)}: the early read`);
        if (g.adapter.features.timestamps) {
          assert.equal(enc.timings.length, 1);
          assert.ok(enc.timings[0]!.ns >= enc.gpuBusyNs && enc.gpuBusyNs > 0, `span ${enc.timings[0]!.ns} ≥ busy ${enc.gpuBusyNs} > 0`);
        }
      }
    } finally {
      g.dispose();
    }
  });

  let single: { runs: RunResult[]; steps: number; submits: number } | null = null;
  before(async () => {
    single = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0, maxRunning: 2 }, async (e) => {
      const k = e.model.kernels as unknown as WebGpuBoundaryKernels;
      k.g.submitChunks = SINGLE_SUBMIT;
      const from = { ...k.counters };
      const runs = [...await runAll(e, [PROMPTS[0]!]), ...await runAll(e, PROMPTS)];
      return { runs, steps: k.counters.steps - from.steps, submits: k.counters.submits - from.submits };
    });
  });

  test('tiny-think: a prefill and decode alone, then a batch of 2, chunked == one submit a step, bit for bit', async () => {
    assert.equal(single!.submits, single!.steps, 'one submit a step');
    const chunked = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0, maxRunning: 2 }, async (e) => {
      const k = e.model.kernels as unknown as WebGpuBoundaryKernels;
      k.g.submitChunks = CHUNKS_OF_3;
      const from = { ...k.counters };
      const runs = [...await runAll(e, [PROMPTS[0]!]), ...await runAll(e, PROMPTS)];
      return { runs, steps: k.counters.steps - from.steps, submits: k.counters.submits - from.submits, dispatches: k.counters.dispatches - from.dispatches };
    });
    chunked.runs.forEach((r, i) => assertSameRun(r, single!.runs[i]!, `run ${i}`));
    // each step (one encoder each: no large write flushes here) submits ceil(its dispatches / 3)
    assert.ok(chunked.submits >= chunked.dispatches / 3 && chunked.submits <= chunked.dispatches / 3 + chunked.steps,
      `${chunked.submits} submits for ${chunked.dispatches} dispatches in ${chunked.steps} steps`);
    assert.ok(chunked.submits > 3 * chunked.steps, 'chunked: several submits a step');
  });

  test('tiny-think: MTP verify rounds (k = 2), chunked == one submit a step without MTP, bit for bit', async () => {
    const mtp = await withEngine({ ...base, model: TINY_THINK(), specTokens: 2, maxRunning: 1 }, async (e) => {
      (e.model.kernels as unknown as WebGpuBoundaryKernels).g.submitChunks = CHUNKS_OF_3;
      return { runs: await runAll(e, [PROMPTS[0]!]), spec: e.stats().spec };
    });
    assert.ok(mtp.spec.rounds > 0 && mtp.spec.drafted > 0, 'drafts were verified');
    assertSameRun(mtp.runs[0]!, single!.runs[0]!, 'MTP, chunked');
  });
});
