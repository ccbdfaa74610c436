// Deferred MTP rounds of sampled requests verified by rejection sampling (speculative/
// deferred-rejection.ts), on wasm with the device paths forced (candidates, draws on the
// kernels, deferred rounds): the drafts are drawn on the kernels, their candidates read back
// with the verify, and resolved on the host. Two paths that must agree, and one forced
// disagreement whose outcome is known exactly:
// - where every device draw is the host's exact draw, the ids are those of the replayed round
//   (drafts read back, then the verify), for the same seeds, with fewer read-backs;
// - with every step's first device draw corrupted (the host redraws it: the round ends after
//   that draft, with no bonus), a request whose cut is top-k 1 (its p and q one-hot at the
//   argmax: rejection sampling emits the target's argmax whatever the drafts) gives greedy
//   MTP off's ids: a commit of the wrong row, or a bonus after the redrawn draft, breaks them.
//   Preempted now and then (a pending round's claim dropped mid-flight), the same ids; with
//   candidate rows refused (chains ending before a refused draft), the same ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine, EngineOptions } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks } from '../src/engine/test-hooks.js';
import { countingReadBacks, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, DRAW_CASES, drawRequests } from './sampled-draw-cases.js';

const N = 24;
const base = {
  kernels: 'wasm' as const, specAdaptive: false, specTokens: 3, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false, maxRunning: 8,
  specSampling: 'rejection' as const, sampledChain: true, sampledCandidates: true, deferredDrafts: true,
};

interface Run { ids: number[][]; ends: Engine['deferredRejection']; deferred: number; accepted: number; readBacks: number; steps: number; preemptions: number }

async function run(o: Partial<EngineOptions> & EngineTestHooks, reqs: readonly GenerateRequest[], corrupt = false): Promise<Run> {
  return withEngine({ ...base, model: TINY_THINK(), ...o }, async (e) => {
    const restore = corrupt ? corruptDraws(e) : () => undefined;
    try {
      const { value: ids, readBacks } = await countingReadBacks(e, () => Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds])));
      const s = e.stats();
      return { ids, ends: e.deferredRejection, deferred: s.spec.deferredRounds, accepted: s.spec.accepted, readBacks, steps: s.steps.prefill + s.steps.decode + s.steps.verify,
        preemptions: s.preemptions };
    } finally {
      restore();
    }
  });
}

test('deferred rejection rounds: ids == the replayed rounds\' for the same seeds, one read-back a step', async () => {
  // a hot cut and the qwen cut (seeded, so both engines draw the same uniforms), with a greedy stream
  const reqs = [...drawRequests(DRAW_CASES.hot, N, 3), ...drawRequests(DRAW_CASES.qwen, N, 2, true)];
  const replayed = await run({ deferredRejection: false }, reqs);
  const deferred = await run({ deferSeededRejection: true }, reqs);
  console.log(JSON.stringify({ ends: deferred.ends, deferred: deferred.deferred, readBacks: [replayed.readBacks, deferred.readBacks], steps: [replayed.steps, deferred.steps] }));
  assert.equal(replayed.ends.whole + replayed.ends.refused + replayed.ends.redrawn, 0, 'the replayed engine defers no rejection chain');
  assert.ok(deferred.ends.whole > 0 && deferred.deferred > 0, `${deferred.ends.whole} chains resolved whole in ${deferred.deferred} deferred rounds`);
  // every chain resolved whole: the drafts and q's are the replayed path's, so the ids are
  assert.deepEqual([deferred.ends.refused, deferred.ends.redrawn], [0, 0]);
  assert.deepEqual(deferred.ids, replayed.ids);
  assert.equal(deferred.accepted, replayed.accepted);
  assert.ok(deferred.readBacks <= deferred.steps, `deferred: ${deferred.readBacks} read-backs in ${deferred.steps} steps`);
  assert.ok(replayed.readBacks > replayed.steps + replayed.deferred, `replayed: ${replayed.readBacks} read-backs in ${replayed.steps} steps`);
});

test('deferred rejection rounds, drafts redrawn on the host: top-k 1 sampled ids == greedy MTP off\'s', async () => {
  const greedy = drawRequests({ temperature: 0 }, N, 3);
  const top1 = greedy.map((r) => ({ ...r, temperature: 1, topK: 1 }));
  const off = await run({ specTokens: 0 }, greedy);
  const redrawn = await run({ deferSeededRejection: true }, top1, true);
  console.log(JSON.stringify({ ends: redrawn.ends, deferred: redrawn.deferred, accepted: redrawn.accepted }));
  assert.ok(redrawn.ends.redrawn > 0, `${redrawn.ends.redrawn} chains ended by a redraw`);
  assert.ok(redrawn.accepted > 0, 'redrawn drafts are accepted');
  assert.deepEqual(redrawn.ids, off.ids);
  // unseeded requests defer by default (no test hook): the same ids; preempted now and then
  // (a pending round's claim dropped, its request recomputed), the same ids again
  const unseeded = await run({}, top1.map(({ seed: _, ...r }) => r), true);
  assert.ok(unseeded.ends.redrawn > 0);
  assert.deepEqual(unseeded.ids, off.ids);
  let asked = 0;
  const preempted = await run({ preemptIf: () => ++asked % 11 === 0 }, top1.map(({ seed: _, ...r }) => r), true);
  assert.ok(preempted.preemptions > 2 && preempted.ends.redrawn > 0, `${preempted.preemptions} preemptions`);
  assert.deepEqual(preempted.ids, off.ids);
  // a third of the candidate rows refused (draft rows: the chain ends before one; verify rows:
  // read whole), none corrupted: chains end before a refused step, some with no draft left
  let rows = 0;
  const refused = await run({ refuseCandidate: () => ++rows % 3 === 0 }, top1.map(({ seed: _, ...r }) => r));
  assert.ok(refused.ends.refused > 0 && refused.ends.whole > 0, JSON.stringify(refused.ends));
  assert.deepEqual(refused.ids, off.ids);
});
