// Greedy requests with penalties or logit bias on the wasm engine: picked on the kernels
// (the untouched ids' argmax, finished on the host: engine/device-finish.ts) == the host path
// (a logits capture reads the rows back and samples on the host), with MTP off and on — a
// verify position's finish counts the drafts before it as outputs (greedyToken's `extra`);
// MTP drafts of such requests picked the same way (the drafts before counted as outputs) ==
// drafts picked on the host (the hostDrafts hook), with no vocabulary row read back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { withEngine } from './engine-helpers.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { draftRecorder } from './draft-record.js';

const prompts = (JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: { prompt_ids: number[]; greedy_ids: number[] }[] })
  .prompts.slice(0, 2);
const base = { kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 4 };

async function ids(e: Engine, reqs: readonly GenerateRequest[]): Promise<number[][]> {
  return Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
}

test('penalised / biased greedy: kernel-picked + host finish == host path, MTP off and on (k = 3)', async () => {
  const reqs: GenerateRequest[] = prompts.flatMap((p) => [
    { promptIds: p.prompt_ids, maxTokens: 12, ignoreEos: true, presencePenalty: 0.8, frequencyPenalty: 0.4 },
    { promptIds: p.prompt_ids, maxTokens: 12, ignoreEos: true, repetitionPenalty: 1.5 },
    { promptIds: p.prompt_ids, maxTokens: 12, ignoreEos: true, logitsAdjust: { bias: new Map([[p.greedy_ids[1]!, -50], [p.greedy_ids[3]!, 4]]) } },
  ]);
  const host = reqs.map((r) => ({ ...r, captureLogits: () => undefined }));
  const want = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0 }, async (e) => {
    const [h, d] = [await ids(e, host), await ids(e, reqs)];
    assert.deepEqual(d, h, 'MTP off: kernel-picked == host path');
    return h;
  });
  const plain = prompts.map((p) => p.greedy_ids.slice(0, 12));
  assert.ok(want.some((w, i) => i % 3 === 2 && plain.every((g) => JSON.stringify(g) !== JSON.stringify(w))), 'the bias changes the picks');
  const spec = await withEngine({ ...base, model: TINY_THINK(), specTokens: 3 }, (e) => ids(e, reqs));
  assert.deepEqual(spec, want, 'MTP k = 3 (verify rows finished on the host) == MTP off');
});

test('MTP drafts of penalised / biased greedy requests: kernel-picked (ids + a few logits read back) == host-picked draft ids, k = 2..4', async () => {
  const [p0, p1] = prompts;
  const reqs: GenerateRequest[] = [
    { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, repetitionPenalty: 1.4 },
    { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, presencePenalty: 0.7 },
    { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, frequencyPenalty: 0.9 },
    { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, logitsAdjust: { bias: new Map([[p1!.greedy_ids[1]!, -50], [p1!.greedy_ids[3]!, 4]]) } },
  ];
  const want = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, reqs));
  for (const k of [2, 3, 4]) {
    const rec = draftRecorder();
    const { device, host, vocab } = await withEngine({ ...base, model: TINY_THINK(), specTokens: k, maxRunning: 1, ...rec.hooks },
      async (e) => ({ device: await rec.run(e, reqs, false), host: await rec.run(e, reqs, true), vocab: e.sampleVocab }));
    assert.deepEqual(device.out, want, `k = ${k}: MTP on == off`);
    assert.deepEqual(host.out, want, `k = ${k}: host drafts, MTP on == off`);
    assert.ok(device.drafts.length > 0 && device.drafts.some((d) => d.length > 2), `k = ${k}: the requests drafted`);
    assert.deepEqual(device.drafts, host.drafts, `k = ${k}: the kernels' draft ids == the host's`);
    // one read-back per draft step either way (a draft's finish feeds the next step's
    // penalties); the kernels' steps carry ids and a few logits, never a vocabulary row
    assert.equal(device.reads, host.reads, `k = ${k}: read-backs`);
    assert.ok(host.longest >= vocab && device.longest < vocab, `k = ${k}: longest range ${device.longest} (host path ${host.longest})`);
    console.log(JSON.stringify({ k, rounds: device.rounds, reads: device.reads, deviceBytes: device.bytes, hostBytes: host.bytes }));
  }
});
