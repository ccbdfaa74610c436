// Sampled decode rows drawn from their top candidates on the webgpu backend (lavapipe):
// Kernels.topCandidates selects on the device, the step reads back c (id, value) pairs per
// sampled row instead of its vocabulary row, and the host draws the reference's token
// (engine/sampled-candidates.ts). Two paths that must agree: candidates on == forced off
// (seeded ids) == the wasm engine's full rows; and the read-back bytes per sampled token drop.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { CASES, runAll, sampledRequests } from './sampled-candidates-cases.js';

const gpu = { kernels: 'webgpu' as const, specTokens: 0, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 6;
// the bias shares the penalties' path (touched ids gathered): the wasm test runs both; here
// one, to keep the file well within the system tier's time on a loaded 2-core lavapipe
const GPU_CASES = Object.fromEntries(Object.entries(CASES).filter(([name]) => name !== 'biased'));
/** sampledRequests' first and third golden prompts (22 and 39 tokens), each with its own
 * seed: the second (89 tokens, a few-shot prompt) was most of the file's CPU (lavapipe
 * prefills at ~0.12 CPU-s a prompt token, as much as a decode step, every case again) and
 * no check here depends on a prompt's length; two rows still make every sampled step a batch. */
const gpuRequests = (sampling: Parameters<typeof sampledRequests>[0], n: number): GenerateRequest[] =>
  sampledRequests(sampling, n).filter((_, i) => i !== 1);
/** The same requests on BRIEF_TOKENS ids of their prompts' text (after `<|im_start|>user\n`),
 * for the checks whose every case prefills again: the candidate rows come from the steps
 * after the prompt, whatever its length. */
const BRIEF_TOKENS = 8;
const brief = (reqs: GenerateRequest[]): GenerateRequest[] => reqs.map((r) => ({ ...r, promptIds: r.promptIds!.slice(3, 3 + BRIEF_TOKENS) }));

function counters(e: Engine): WebGpuBoundaryKernels['counters'] {
  const k = e.model.kernels as unknown as Partial<WebGpuBoundaryKernels>;
  assert.ok(k.counters, 'the engine runs on the webgpu backend');
  return k.counters;
}

before(webgpuEngineKernels);

test('webgpu candidates == wasm full rows (forced off), for the qwen cut, hot top-k, min-p, refused min-p, top-p alone and penalties', async () => {
  const runCases = (e: Engine): Promise<Awaited<ReturnType<typeof runAll>>[]> =>
    Object.values(GPU_CASES).reduce<Promise<Awaited<ReturnType<typeof runAll>>[]>>(async (acc, sampling) => [...await acc, await runAll(e, brief(gpuRequests(sampling, N)))], Promise.resolve([]));
  const want = await withEngine({ ...gpu, kernels: 'wasm', model: TINY_THINK(), sampledCandidates: false }, runCases);
  const got = await withEngine({ ...gpu, model: TINY_THINK() }, runCases);
  Object.keys(GPU_CASES).forEach((name, i) => {
    assert.deepEqual(got[i]!.ids, want[i]!.ids, `${name}: webgpu candidates == wasm full rows`);
    assert.ok(got[i]!.rows > 0, `${name}: candidate rows ${got[i]!.rows}`);
    if (name === 'minPWide') assert.equal(got[i]!.fallbacks, got[i]!.rows, 'more kept ids than candidates: every row refused');
    else assert.equal(got[i]!.fallbacks, 0, `${name}: fallbacks`);
  });
});

test('webgpu: a sampled decode step reads back c pairs, not its logits row (one read-back per step)', async () => {
  const [req] = brief(sampledRequests(CASES.hotTopK, N));
  const measure = async (sampledCandidates: boolean): Promise<{ ids: number[]; reads: number; bytes: number; rows: number; fallbacks: number; vocab: number }> =>
    // overlap off: a chained sampled step also reads back the 4-byte token it embedded (overlap.ts)
    withEngine({ ...gpu, model: TINY_THINK(), maxRunning: 1, sampledCandidates, overlapSteps: false }, async (e) => {
      const c = counters(e);
      const [r0, b0] = [c.steps, c.readBackBytes];
      const got = await runAll(e, [req!]);
      return { ids: got.ids[0]!, reads: c.steps - r0, bytes: c.readBackBytes - b0, rows: got.rows, fallbacks: got.fallbacks, vocab: e.model.config.vocabSize };
    });
  const off = await measure(false);
  const on = await measure(true);
  assert.deepEqual(on.ids, off.ids);
  assert.equal(on.fallbacks, 0, 'tiny-think under top-k 20: every row certified');
  assert.equal(on.reads, off.reads, 'no second read-back');
  const vocab = on.vocab; // the logits row's stride
  // each candidate row: 64 ids + 64 values instead of a logits row
  assert.equal(off.bytes - on.bytes, on.rows * (vocab - 2 * 64) * 4, `read-back bytes: off ${off.bytes}, on ${on.bytes}, rows ${on.rows}`);
  console.log(JSON.stringify({ tinyThinkBytesPerSampledStep: { off: off.bytes / off.reads, on: on.bytes / on.reads }, rows: on.rows }));
});

test('webgpu MTP k = 3: sampled verify positions and drafts read candidates only; ids == wasm full rows (forced off)', async () => {
  // the per-step draft path (webgpu-sampled-draws tests the chained one, on by default),
  // now taken only by constrained and penalised / biased sampled chains: one request of 5
  // tokens is 2 rounds (4 drafts, one of them rejected) of both step kinds that read back
  // candidates (drafts, verify positions); an off-by-one verify distribution or a draft
  // drawn with 1 − u changes its ids (checked on wasm, candidates on vs off)
  const reqs = gpuRequests(CASES.qwen, 5).slice(0, 1);
  const mtp = { ...gpu, specTokens: 3, sampledChain: false, specSampling: 'rejection' as const };
  const want = await withEngine({ ...mtp, kernels: 'wasm', model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
  const got = await withEngine({ ...mtp, model: TINY_THINK() }, async (e) => {
    const c = counters(e);
    const [r0, b0] = [c.steps, c.readBackBytes];
    const run = await runAll(e, reqs);
    return { ...run, reads: c.steps - r0, bytes: c.readBackBytes - b0, verify: e.stats().steps.verify };
  });
  assert.deepEqual(got.ids, want.ids);
  assert.equal(got.fallbacks, 0, 'tiny-think under top-k 20: every row certified');
  assert.ok(got.verify > 0 && got.rows > got.ids.flat().length, `verify steps ${got.verify}, candidate rows ${got.rows}`);
  // nothing but candidates comes back (no prefix cache: no hidden rows): 64 ids + 64 values a row
  assert.equal(got.bytes, got.rows * 8 * 64, `read-back bytes ${got.bytes} for ${got.rows} candidate rows`);
  console.log(JSON.stringify({ mtpReadBacks: got.reads, verifySteps: got.verify, bytes: got.bytes, rows: got.rows }));
});
