// Sampled MTP chains WITH penalties or a logit bias drafted on the kernels (speculative/
// draft-device.ts: penaltyPicks adjusts the rows in f32 (`apply`), candidateDraws draws, the host
// replays the exact draw from the candidates and the touched ids' raw logits) == the per-step
// host path (both switches forced off), on the wasm engine (the path forced on: its default is
// webgpu's): identical ids at k = 2, 3, 4 for penalised, biased (f32 and non-f32 values), top-p
// alone (the raw row restored from the gathered values) and a min-p the candidates cannot hold
// (refused rows read whole); one draft read-back a round when clean (2 with the verify); a
// corrupted device draw is caught and the ids stay identical. Every proposal (the draftOverride
// hook) equals the host path's, not only the output ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, drawRequests, runDraws, type DrawRun } from './sampled-draw-cases.js';

// rejection sampling (seeded requests are matched under 'auto'): its q's and p's must be exact
const opts = { kernels: 'wasm' as const, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 8;
const PENALTIES = { repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 };

export const ADJUSTED_CASES = {
  penalised: { temperature: 2, topK: 20, topP: 0.95, ...PENALTIES },
  // bias values that are not f32s (the replay's f64 sum is the definition, not the f32 add)
  biased: { temperature: 2, topK: 20, topP: 0.95, logitsAdjust: { bias: new Map([[54, 2.1], [55, 3.5], [57, -4], [200, 6], [999, -100]]) } },
  // top-p alone: the replay reads each row whole, the touched ids' raw logits put back (the
  // device proposes from its top 256 candidates: a cool temperature keeps the mass there)
  topPOnlyPenalised: { temperature: 0.6, topP: 0.9, ...PENALTIES, logitsAdjust: { bias: new Map([[54, 1.5]]) } },
} as const;

/** One draft read-back a pass, one a pass with refused rows; the host path one a draft step. */
function assertReads(a: DrawRun, b: DrawRun, name: string): void {
  const s = a.sampled;
  assert.deepEqual(a.ids, b.ids, `${name}: ids == host path`);
  assert.equal(b.sampled.rounds, 0, 'forced off: no chained round');
  assert.ok(s.rounds > 0, `${name}: chained rounds`);
  assert.ok(s.passes >= s.rounds && s.passes <= s.rounds + s.disagreements, `${name}: passes`);
  // every read-back is a target step's or a draft pass's (a round of greedy chains alone, once the
  // sampled streams are done, is one pass too): 2 a clean round
  assert.equal(a.reads, a.targetSteps + s.passes + s.refusedReads + a.greedyPasses, `${name}: read-backs ${a.reads}, ${a.targetSteps} target steps`);
  if (s.refused === 0 && a.greedyPasses === 0) assert.equal(b.reads - a.reads, s.steps - s.passes, `${name}: read-backs ${b.reads} → ${a.reads}`);
  if (s.disagreements === 0 && s.refused === 0) assert.equal(s.passes, s.rounds, `${name}: one draft read-back a round`);
}

for (const k of [2, 3, 4]) {
  test(`wasm MTP k = ${k}: penalised / biased sampled drafts on the kernels == host path (alone, batched with greedy, 4 seeds)`, async () => {
    const sets = Object.entries(ADJUSTED_CASES).flatMap(([name, s]) => [
      { name: `${name} batched`, reqs: drawRequests(s, N, 2, true) },
      { name: `${name}, 4 seeds`, reqs: drawRequests(s, N, 4) },
    ]);
    // every proposal in order ([committed length, ...drafts]): the drafts, not only the ids, are the host path's
    const run = async (on: boolean) => {
      const drafts: number[][] = [];
      const draftOverride = (req: { tokens: readonly number[] }, d: number[]): number[] => { drafts.push([req.tokens.length, ...d]); return d; };
      const out = await withEngine({ ...opts, model: TINY_THINK(), specTokens: k, sampledChain: on, penaltyChain: on, sampledCandidates: true, draftOverride },
        async (e) => { const runs = []; for (const s of sets) runs.push(await runDraws(e, s.reqs)); return runs; });
      return Object.assign(out, { drafts });
    };
    const off = await run(false);
    const on = await run(true);
    sets.forEach((s, i) => assertReads(on[i]!, off[i]!, s.name));
    assert.deepEqual(on.drafts, off.drafts, 'every proposal == the host path\'s');
    const disagreements = on.reduce((n, r) => n + r.sampled.disagreements, 0);
    assert.ok(disagreements <= 2, `${disagreements} disagreements`);
    console.log(JSON.stringify({ k, rounds: on.map((r) => r.sampled.rounds), steps: on.map((r) => r.sampled.steps), passes: on.map((r) => r.sampled.passes),
      disagreements: on.map((r) => r.sampled.disagreements) }));
  });
}

test('wasm MTP k = 3: penalised sampled chains, corrupted device draws and a min-p the candidates cannot hold: ids == host path', async () => {
  const corrupted = drawRequests(ADJUSTED_CASES.penalised, N, 2, true);
  const wide = drawRequests({ temperature: 2, minP: 1e-6, ...PENALTIES }, N, 2);
  const base = { ...opts, model: TINY_THINK(), specTokens: 3, sampledCandidates: true };
  const want = await withEngine({ ...base, sampledChain: false, penaltyChain: false }, async (e) => [await runDraws(e, corrupted), await runDraws(e, wide)]);
  const got = await withEngine({ ...base, sampledChain: true, penaltyChain: true }, async (e) => {
    const restore = corruptDraws(e);
    const forced = await runDraws(e, corrupted).finally(restore);
    return [forced, await runDraws(e, wide)];
  });
  assert.deepEqual(got[0]!.ids, want[0]!.ids, 'corrupted draws: ids == host path');
  assert.ok(got[0]!.sampled.disagreements > 0 && got[0]!.sampled.passes > got[0]!.sampled.rounds, 'the replay caught them and redrafted');
  assert.deepEqual(got[1]!.ids, want[1]!.ids, 'refused rows: ids == host path');
  const s = got[1]!.sampled;
  assert.ok(s.refused > 0 && s.refusedReads > 0 && s.refusedReads <= s.passes, `refused rows ${s.refused}, read in ${s.refusedReads}`);
  // the host path reads each draft step twice (candidates, then the refused rows): here one pass and one read of its refused rows
  assert.equal(want[1]!.reads - got[1]!.reads, 2 * s.steps - s.passes - s.refusedReads);
});
