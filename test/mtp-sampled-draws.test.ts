// Sampled MTP drafts drawn on the kernels and replayed on the host (speculative/draft-device.ts)
// == the per-step host path (forced off), on the wasm engine (the path forced on: its default
// is webgpu's): identical ids for the task's cuts at k = 2, 3, 4, one stream and a batch with a
// greedy stream, 8 seeds batched; one draft read-back a round when every proposal agreed; a corrupted device
// draw is caught by the replay (disagreements counted) and the ids stay identical.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, DRAW_CASES, drawRequests, runDraws } from './sampled-draw-cases.js';

// rejection sampling (seeded requests are matched under 'auto'): its q's must be exact
const opts = { kernels: 'wasm' as const, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 8;

for (const k of [2, 3, 4]) {
  test(`wasm MTP k = ${k}: sampled drafts on the kernels == host path (seeded ids, every cut, alone and batched with greedy)`, async () => {
    const sets = Object.entries(DRAW_CASES).flatMap(([name, s]) => [
      { name: `${name} alone`, reqs: drawRequests(s, N, 1) },
      { name: `${name} batched`, reqs: drawRequests(s, N, 2, true) },
      { name: `${name}, 8 seeds`, reqs: drawRequests(s, N, 8) },
    ]);
    const run = (sampledChain: boolean) => withEngine({ ...opts, model: TINY_THINK(), specTokens: k, sampledChain, sampledCandidates: true },
      async (e) => { const out = []; for (const s of sets) out.push(await runDraws(e, s.reqs)); return out; });
    const off = await run(false);
    const on = await run(true);
    sets.forEach((s, i) => {
      const [a, b] = [on[i]!, off[i]!];
      assert.deepEqual(a.ids, b.ids, `${s.name}: ids == host path`);
      assert.equal(b.sampled.rounds, 0, 'forced off: no chained round');
      assert.ok(a.sampled.rounds > 0, `${s.name}: chained rounds`);
      // a pass per round, plus one per redraft (at most one per disagreement)
      assert.ok(a.sampled.passes >= a.sampled.rounds && a.sampled.passes <= a.sampled.rounds + a.sampled.disagreements, `${s.name}: passes`);
      // the host path reads back once a draft step; this path once a pass, once a round of refused rows
      assert.equal(b.reads - a.reads, a.sampled.steps - a.sampled.passes - a.sampled.refusedReads, `${s.name}: read-backs ${b.reads} → ${a.reads}`);
      // clean: one draft read-back a round (2 with the verify step's)
      if (a.sampled.disagreements === 0 && a.sampled.refused === 0) assert.equal(a.sampled.passes, a.sampled.rounds, `${s.name}: one pass a round`);
      // every read-back is a target step's (one each) or a draft pass's: 2 a clean round
      assert.equal(a.reads, a.targetSteps + a.sampled.passes + a.sampled.refusedReads, `${s.name}: read-backs ${a.reads}, ${a.targetSteps} steps`);
    });
    // the f32 proposals are the exact draws off cut and draw boundaries: disagreements are rare
    const disagreements = on.reduce((n, r) => n + r.sampled.disagreements, 0);
    assert.ok(disagreements <= 1, `${disagreements} disagreements`);
    console.log(JSON.stringify({ k, steps: on.map((r) => r.sampled.steps), rounds: on.map((r) => r.sampled.rounds), disagreements: on.map((r) => r.sampled.disagreements), refused: on.map((r) => r.sampled.refused) }));
  });
}

test('wasm MTP k = 3: a corrupted device draw is replaced by the host\'s, the chain redrafts, ids == host path', async () => {
  const reqs = drawRequests(DRAW_CASES.hot, N, 2, true);
  const base = { ...opts, model: TINY_THINK(), specTokens: 3, sampledCandidates: true };
  const want = await withEngine({ ...base, sampledChain: false }, (e) => runDraws(e, reqs));
  const got = await withEngine({ ...base, sampledChain: true }, async (e) => {
    const restore = corruptDraws(e);
    try { return await runDraws(e, reqs); } finally { restore(); }
  });
  assert.deepEqual(got.ids, want.ids);
  assert.ok(got.sampled.disagreements > 0, 'the replay caught the corrupted draws');
  assert.ok(got.sampled.passes > got.sampled.rounds, 'and redrafted');
});

test('wasm MTP k = 3: a min-p the candidates cannot hold: every row refused, read whole, drawn from the full row; ids == host path', async () => {
  const reqs = drawRequests({ temperature: 2, minP: 1e-6 }, N, 2, true);
  const base = { ...opts, model: TINY_THINK(), specTokens: 3, sampledCandidates: true };
  const want = await withEngine({ ...base, sampledChain: false }, (e) => runDraws(e, reqs));
  const got = await withEngine({ ...base, sampledChain: true }, (e) => runDraws(e, reqs));
  assert.deepEqual(got.ids, want.ids);
  assert.ok(got.sampled.refused > 0 && got.sampled.refusedReads > 0, `refused rows ${got.sampled.refused}`);
  // the host path reads each draft step twice (candidates, then the refused rows): here one pass and one read of its refused rows
  assert.equal(want.reads - got.reads, 2 * got.sampled.steps - got.sampled.passes - got.sampled.refusedReads);
  assert.ok(got.sampled.refusedReads <= got.sampled.passes, 'at most one read of refused rows a pass');
});

test('wasm MTP k = 3: sampled chains batched with penalised and biased greedy chains chain together (penaltyPicks replayed), ids == host path', async () => {
  const [a, b, c] = drawRequests(DRAW_CASES.hot, N, 3);
  const reqs = [
    a!, { ...b!, ...DRAW_CASES.qwen },
    { ...c!, temperature: 0, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
    { ...a!, temperature: 0, seed: 3, logitsAdjust: { bias: new Map([[54, 2], [57, -4]]) } },
  ];
  const base = { ...opts, model: TINY_THINK(), specTokens: 3, sampledCandidates: true };
  const want = await withEngine({ ...base, sampledChain: false, penaltyChain: false }, (e) => runDraws(e, reqs));
  const got = await withEngine({ ...base, sampledChain: true, penaltyChain: true }, async (e) => {
    const clean = await runDraws(e, reqs);
    const restore = corruptDraws(e);
    try { return { clean, forced: await runDraws(e, reqs) }; } finally { restore(); }
  });
  assert.deepEqual(got.clean.ids, want.ids);
  assert.deepEqual(got.forced.ids, want.ids, 'corrupted draws: ids == host path');
  const s = got.clean.sampled;
  assert.ok(s.rounds > 0, 'the mixed batch chained');
  assert.equal(want.reads - got.clean.reads, s.steps - s.passes - s.refusedReads, `read-backs ${want.reads} → ${got.clean.reads}`);
  assert.ok(got.forced.sampled.disagreements > 0);
  console.log(JSON.stringify({ mixed: s, forced: got.forced.sampled }));
});
