// Top-k past 128 on the webgpu candidate paths (lavapipe): a random-weight model of 8,192 ids
// (make-model's qwen3.5-moe-tiny cut to one layer, with its MTP head; a tokenizer padded to the
// vocabulary, so every id may be sampled) under top-k 200 and 1000 — 512 and 2,048 candidates,
// a quarter of the row — with and without top-p, MTP k = 2. Two paths that must agree: webgpu
// with device candidates and device-drawn sampled drafts (candidateDraws at c = 2048) against
// wasm with every row read whole and each draft drawn on the host (the reference), the same
// seeds: identical ids. The candidate rows are certified (fallbacks counted) and the sampled
// rounds ran on the device chain.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel } from '../src/tools/make-model.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { runDraws } from './sampled-draw-cases.js';

const VOCAB = 8192;
const dir = mkdtempSync(join(tmpdir(), 'ds-wide-top-k-'));
after(() => rmSync(dir, { recursive: true, force: true }));

before(async () => {
  await webgpuEngineKernels();
  await makeModel({ shape: 'qwen3.5-moe-tiny', dtype: 'bf16', seed: 11, out: dir, layers: 1, layout: 'flat', vocabSize: VOCAB, tokenizer: TINY_THINK() });
  // tiny-think's tokenizer holds 1,000 ids: pad its vocabulary to the model's (ids ≥ 1,000 decode to placeholder text)
  const path = join(dir, 'tokenizer.json');
  const tok = JSON.parse(readFileSync(path, 'utf8')) as { model: { vocab: Record<string, number> } };
  for (let id = 1000; id < VOCAB; id++) tok.model.vocab[`tok${id}`] = id;
  writeFileSync(path, JSON.stringify(tok));
});

function requests(): GenerateRequest[] {
  const cuts = [{ topK: 200 }, { topK: 1000 }, { topK: 1000, topP: 0.9 }];
  return cuts.map((cut, i) => ({ promptIds: Array.from({ length: 12 }, (_, j) => (j * 613 + i * 97 + 5) % VOCAB), maxTokens: 7, ignoreEos: true, seed: 300 + i, temperature: 1, ...cut }));
}

test('top-k 200 / 1000 (± top-p), MTP k = 2: webgpu device candidates and device-drawn drafts == wasm full rows and host drafts (same seeds)', async () => {
  // rejection sampling: its device-drawn drafts are replayed exactly (a matched chain's are taken as they are)
  const base = { model: dir, specTokens: 2, specAdaptive: false, kvCacheTokens: 1024, maxContext: 256, prefixCache: false, maxRunning: 4, specSampling: 'rejection' as const };
  const want = await withEngine({ ...base, kernels: 'wasm', sampledCandidates: false, sampledChain: false }, (e) => runDraws(e, requests()));
  const got = await withEngine({ ...base, kernels: 'webgpu' }, async (e) => {
    const c0 = e.sampledCandidates;
    const run = await runDraws(e, requests());
    const c1 = e.sampledCandidates;
    return { ...run, rows: c1.rows - c0.rows, fallbacks: c1.fallbacks - c0.fallbacks };
  });
  assert.deepEqual(got.ids, want.ids, 'webgpu candidates == wasm full rows');
  assert.ok(got.rows > 0, 'verify positions read candidates');
  assert.ok(got.sampled.rounds > 0 && got.sampled.steps > 0, `sampled rounds on the device chain: ${JSON.stringify(got.sampled)}`);
  console.log(JSON.stringify({ candidateRows: got.rows, fallbacks: got.fallbacks, drafts: got.sampled, reads: got.reads, targetSteps: got.targetSteps, bytes: got.bytes }));
});

test('top-p 0.9 alone over the flat random head: every try refused (read whole, ids == wasm full rows), backing off to tries at steps 0, 2 and 6 of 12', async () => {
  const base = { model: dir, specTokens: 0, kvCacheTokens: 1024, maxContext: 256, prefixCache: false, maxRunning: 4 };
  const reqs: GenerateRequest[] = [0, 1].map((i) => ({ promptIds: [5 + i, 77, 900 + i], maxTokens: 12, ignoreEos: true, seed: 40 + i, temperature: 1, topP: 0.9 }));
  const run = async (kernels: 'wasm' | 'webgpu', sampledCandidates: boolean): Promise<{ ids: number[][]; rows: number; fallbacks: number }> =>
    withEngine({ ...base, kernels, sampledCandidates }, async (e) => {
      const c0 = e.sampledCandidates;
      const ids = await Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
      return { ids, rows: e.sampledCandidates.rows - c0.rows, fallbacks: e.sampledCandidates.fallbacks - c0.fallbacks };
    });
  const want = await run('wasm', false);
  const got = await run('webgpu', true);
  assert.deepEqual(got.ids, want.ids, 'refused rows drawn from their full rows == wasm');
  assert.equal(got.fallbacks, got.rows, `the nucleus never fits 1,024 candidates: every try refused (${got.rows})`);
  // 12 sampled steps a request (the prefill's last position, 11 decodes): tries at 0, 2 and 6
  assert.equal(got.rows, 3 * reqs.length, `candidate tries ${got.rows}`);
});
