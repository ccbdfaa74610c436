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

test('MTP drafts of penalised / biased greedy requests: kernel-picked == host-picked draft ids, k = 2..4; biased (f32 values) chain on the kernels', async () => {
  const [p0, p1] = prompts;
  const bias = (b: number): Map<number, number> => new Map([[p1!.greedy_ids[1]!, -50], [p1!.greedy_ids[3]!, b]]);
  // chained: drafts chain on the kernels (2 read-backs a round); else ids + a few logits per draft step
  const cases: { req: GenerateRequest; chained: boolean }[] = [
    { req: { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, repetitionPenalty: 1.4 }, chained: false },
    { req: { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, presencePenalty: 0.7 }, chained: false },
    { req: { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, frequencyPenalty: 0.9 }, chained: false },
    { req: { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, logitsAdjust: { bias: bias(4) } }, chained: true },
    // 4.1 is no f32: its f32 add could round differently from adjustInPlace's, so its drafts finish on the host
    { req: { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, logitsAdjust: { bias: bias(4.1) } }, chained: false },
    { req: { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, repetitionPenalty: 1.2, logitsAdjust: { bias: bias(2) } }, chained: false },
  ];
  const want = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, cases.map((c) => c.req)));
  for (const k of [2, 3, 4]) {
    const rec = draftRecorder();
    await withEngine({ ...base, model: TINY_THINK(), specTokens: k, maxRunning: 1, ...rec.hooks }, async (e) => {
      for (const [i, { req, chained }] of cases.entries()) {
        const device = await rec.run(e, [req], false);
        const host = await rec.run(e, [req], true);
        const what = `k = ${k}, request ${i}`;
        assert.deepEqual(device.out, [want[i]], `${what}: MTP on == off`);
        assert.deepEqual(host.out, [want[i]], `${what}: host drafts, MTP on == off`);
        assert.ok(device.drafts.some((d) => d.length > 2), `${what}: the request drafted`);
        assert.deepEqual(device.drafts, host.drafts, `${what}: the kernels' draft ids == the host's`);
        // the prefill's read-back, then per round the verify's and (but for the last) the drafts'
        if (chained) assert.ok(device.reads <= 2 * device.rounds + 1, `${what}: ${device.reads} read-backs for ${device.rounds} rounds: 2 a round`);
        else assert.equal(device.reads, host.reads, `${what}: a read-back per draft step either way (the finish feeds the next step)`);
        assert.ok(host.reads > 2 * host.rounds, `${what}: the host path reads back per draft step`);
        assert.ok(host.longest >= e.sampleVocab && device.longest < e.sampleVocab, `${what}: longest range ${device.longest} (host path ${host.longest})`);
        console.log(JSON.stringify({ k, request: i, chained, rounds: device.rounds, reads: device.reads, hostReads: host.reads, bytes: device.bytes, hostBytes: host.bytes }));
      }
    });
  }
});
