// MTP drafts of penalised greedy requests chained on the kernels (speculative/draft-device.ts),
// forced on for the wasm engine (the hook; 'auto' turns it on for webgpu only): the drafts ==
// the host path's (the hostDrafts hook: greedyToken over read-back rows), MTP on == off, 2
// read-backs a round plus one per redraft pass (specRedrafts). A wrapped penaltyPicks that
// corrupts the first pick of every pass forces a disagreement each pass: the replay must catch
// it and redraft, and the ids still equal the host path's. A batch mixing penalised, plain and
// biased chains too. Without redrafts (the default) a disagreement ends the chain: ids still
// MTP off's, one draft pass a round.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { withEngine } from './engine-helpers.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { corruptFirstPicks, draftRecorder } from './draft-record.js';

const prompts = (JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: { prompt_ids: number[]; greedy_ids: number[] }[] })
  .prompts.slice(0, 3);
const base = { kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 1 };
const [p0, p1, p2] = prompts;
const penalised: GenerateRequest[] = [
  { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
  { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, repetitionPenalty: 1.4 },
  { promptIds: p2!.prompt_ids, maxTokens: 14, ignoreEos: true, frequencyPenalty: 0.9 },
  { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true, presencePenalty: 0.7, logitsAdjust: { bias: new Map([[p1!.greedy_ids[1]!, -50], [p1!.greedy_ids[3]!, 4.1]]) } },
  // biased, not penalised, 4.1 no f32: its f32 sums are proposals too, replayed
  { promptIds: p0!.prompt_ids, maxTokens: 14, ignoreEos: true, logitsAdjust: { bias: new Map([[p0!.greedy_ids[1]!, -50], [p0!.greedy_ids[2]!, 4.1]]) } },
];

async function ids(e: Engine, reqs: readonly GenerateRequest[]): Promise<number[][]> {
  return Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
}

test('penalised MTP drafts chained on the kernels == host drafts, MTP on == off, 2 read-backs a round; forced disagreements redraft to the same ids (k = 2..4)', async () => {
  const want = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, penalised));
  for (const k of [2, 3, 4]) {
    const rec = draftRecorder();
    // redrafts allowed (specRedrafts): every chain's drafts are the host path's
    await withEngine({ ...base, model: TINY_THINK(), specTokens: k, penaltyChain: true, specRedrafts: k, ...rec.hooks }, async (e) => {
      for (const [i, req] of penalised.entries()) {
        const what = `k = ${k}, request ${i}`;
        const host = await rec.run(e, [req], true);
        const p0s = e.penaltyDrafts;
        const device = await rec.run(e, [req], false);
        const p1s = e.penaltyDrafts;
        const restore = corruptFirstPicks(e, 0);
        const forced = await rec.run(e, [req], false).finally(restore);
        const p2s = e.penaltyDrafts;
        assert.deepEqual(host.out, [want[i]], `${what}: host drafts, MTP on == off`);
        assert.deepEqual(device.out, [want[i]], `${what}: chained drafts, MTP on == off`);
        assert.deepEqual(forced.out, [want[i]], `${what}: forced disagreements, MTP on == off`);
        assert.ok(device.drafts.some((d) => d.length > 2), `${what}: the request drafted`);
        assert.deepEqual(device.drafts, host.drafts, `${what}: chained draft ids == host draft ids`);
        assert.deepEqual(forced.drafts, host.drafts, `${what}: redrafted ids == host draft ids`);
        const [rounds, passes, disagreements] = [p1s.rounds - p0s.rounds, p1s.passes - p0s.passes, p1s.disagreements - p0s.disagreements];
        assert.ok(rounds > 0, `${what}: the chain drafted`);
        // the prefill's read-back, per round the verify's, and one per drafting pass
        // the prefill's read-back (and a last plain decode step's), per round the verify's, and one per drafting pass
        assert.ok(device.reads <= 2 + device.rounds + passes, `${what}: ${device.reads} read-backs for ${device.rounds} rounds, ${passes} passes`);
        assert.ok(device.reads < host.reads, `${what}: fewer read-backs than a read-back per draft step (${device.reads} vs ${host.reads})`);
        assert.equal(passes - rounds, disagreements, `${what}: one redraft pass per disagreement (one chain)`);
        // f32 penalties agree with the f64 definition but at near ties (none on these prompts)
        assert.ok(disagreements * 10 <= rounds, `${what}: the replay disagreed in ${disagreements} of ${rounds} rounds`);
        const forcedPasses = p2s.passes - p1s.passes;
        assert.ok(p2s.disagreements - p1s.disagreements > 0, `${what}: the forced run disagreed`);
        assert.ok(forcedPasses > p2s.rounds - p1s.rounds, `${what}: the forced run redrafted`);
        console.log(JSON.stringify({ k, request: i, rounds: device.rounds, reads: device.reads, hostReads: host.reads, bytes: device.bytes, hostBytes: host.bytes,
          bytesPerRound: Math.round(device.bytes / device.rounds), disagreements, forcedReads: forced.reads, forcedPasses }));
      }
    });
  }
});

test('a batch of penalised, plain and biased greedy chains drafts on the kernels: MTP on == off, with and without forced redrafts', async () => {
  const reqs: GenerateRequest[] = [
    penalised[0]!,
    { promptIds: p1!.prompt_ids, maxTokens: 14, ignoreEos: true },
    { promptIds: p2!.prompt_ids, maxTokens: 14, ignoreEos: true, logitsAdjust: { bias: new Map([[p2!.greedy_ids[2]!, -50], [7, 4]]) } },
    penalised[1]!,
  ];
  const batch = { ...base, maxRunning: 4 };
  const want = await withEngine({ ...batch, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, reqs));
  await withEngine({ ...batch, model: TINY_THINK(), specTokens: 3, penaltyChain: true, specRedrafts: 3 }, async (e) => {
    assert.deepEqual(await ids(e, reqs), want, 'batched chains: MTP on == off');
    const s0 = e.penaltyDrafts;
    assert.ok(s0.rounds > 0, 'the batch drafted through the penalised chain');
    // corrupt row 1 of every pass: a plain or biased chain there is exact as picked, so no
    // replay runs on it, but a penalised one redrafts; rows of a redraft pass change, so all
    // kinds of chain come through row 1 at some point
    const restore = corruptFirstPicks(e, 1);
    const got = await ids(e, reqs.filter((_, i) => i !== 1)).finally(restore);
    assert.deepEqual(got, want.filter((_, i) => i !== 1), 'forced redrafts in a batch: MTP on == off');
    assert.ok(e.penaltyDrafts.disagreements > s0.disagreements, 'the batch redrafted');
  });
});

test('no redraft pass (the default): a disagreement ends its chain there; MTP on == off, one draft pass a round', async () => {
  const want = await withEngine({ ...base, model: TINY_THINK(), specTokens: 0 }, (e) => ids(e, penalised));
  await withEngine({ ...base, model: TINY_THINK(), specTokens: 3, penaltyChain: true }, async (e) => {
    const s0 = e.penaltyDrafts;
    const restore = corruptFirstPicks(e, 0);
    const got = await ids(e, penalised).finally(restore);
    const s1 = e.penaltyDrafts;
    assert.deepEqual(got, want, 'forced disagreements, no redraft: MTP on == off');
    const [rounds, passes, disagreements, ended] = [s1.rounds - s0.rounds, s1.passes - s0.passes, s1.disagreements - s0.disagreements, s1.ended - s0.ended];
    // (a disagreement at a chain's last draft ends nothing: the host's pick is the last draft anyway)
    assert.ok(ended > 0 && ended <= disagreements, `disagreements ended chains (${ended} of ${disagreements})`);
    assert.equal(passes, rounds, 'one draft pass a round: drafts and verify, two read-backs');
  });
});
