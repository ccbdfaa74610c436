// Penalised greedy MTP drafts on webgpu (lavapipe), chained on the device (speculative/
// draft-device.ts, on by default there): Kernels.penaltyPicks' WGSL twin gathers exactly what
// the ref's does (the best, its raw logit, the touched ids' raw logits), so the host's replay
// == greedyToken over the full row, and the near tie's f32 pick differs as the ref's does; on
// tiny-think, the device-chained drafts == the host path's drafts (the hostDrafts hook), MTP on
// == off (wasm), and a round costs 2 read-backs (plus one per redraft pass); forced
// disagreements redraft on the device to the same ids; tables past the draft memory's reserved
// bound (a wide logit bias) grow the penalty values buffer, ids unchanged.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { packPenaltyTable, penaltyPicksOn } from '../src/kernels/webgpu/penalty-picks.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { idsOf } from '../src/engine/device-picks.js';
import { withEngine } from './engine-helpers.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { gpuUnderTest, run, webgpuEngineKernels } from './webgpu-helpers.js';
import { corruptFirstPicks, draftRecorder } from './draft-record.js';
import { applying, chainCase, check, checkApplied, checkChain, nearTieCase, randomCases, runChain, runOn, type PickCase } from './penalty-pick-cases.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { AnyKernels } from '../src/kernels/types.js';
import { draftPassMemory, penaltyTableBound } from '../src/engine/draft-memory.js';
import { runDraws } from './sampled-draw-cases.js';
import { GROWTH_ENGINE, growthRequests, WIDE_BIAS } from './penalty-growth-cases.js';

const gpu = { kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 1 };
const prompts = (JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: { prompt_ids: number[] }[] }).prompts;

before(webgpuEngineKernels);

async function onGpu(g: WebGpuKernels, c: PickCase): Promise<{ ids: Int32Array; vals: Float32Array; x: Float32Array }> {
  const x = g.alloc.tensor([c.x.length], 'f32');
  g.alloc.write(x, c.x, 0);
  const ids = g.alloc.tensor([c.ids.length], 'i32');
  g.alloc.write(ids, c.ids, 0);
  const vals = g.alloc.tensor([c.valsLength], 'f32');
  const upload = (words: Uint32Array) => {
    const t = g.alloc.tensor([words.length], 'i32');
    g.alloc.write(t, new Int32Array(words.buffer, words.byteOffset, words.length), 0);
    return t;
  };
  const [idsRead, valsRead, xRead] = await run(g, (enc) => penaltyPicksOn(g, enc, ids, x, vals, c.call, upload(packPenaltyTable(c.call.rows, c.call.n))), ids, vals, x);
  return { ids: idsOf(idsRead).slice(), vals: valsRead.slice(), x: xRead.slice() };
}

test('webgpu penaltyPicks: the gathered values == ref\'s, the replay == greedyToken, the near tie disagrees', async () => {
  const g = await gpuUnderTest();
  const ref = createRefKernels();
  let [rows, same] = [0, 0];
  for (const c of [...randomCases(), nearTieCase()]) {
    const got = await onGpu(g, c);
    const { ids, vals } = runOn(ref, c);
    const { m, steps, idsStride, bestOffset } = c.call;
    assert.deepEqual(got.ids.subarray(bestOffset, bestOffset + m), ids.subarray(bestOffset, bestOffset + m), `${c.name}: untouched best == ref`);
    assert.deepEqual(got.vals, vals, `${c.name}: gathered raw logits == ref (copies)`);
    check(c, got.ids, got.vals);
    for (let i = 0; i < m; i++) {
      rows++;
      // f32 arithmetic: WGSL's division may round differently from the ref's (a proposal, replayed)
      if (got.ids[steps * idsStride + i] === ids[steps * idsStride + i]) same++;
    }
  }
  const tie = nearTieCase();
  assert.deepEqual(check(tie, (await onGpu(g, tie)).ids, (await onGpu(g, tie)).vals), [false], 'the near tie: the device pick differs from the exact one');
  assert.ok(same >= rows - 1, `${same} of ${rows} webgpu picks == ref's`);
});

test('webgpu penaltyPicks with apply: x == the ref\'s adjusted rows (division may round apart), untouched ids raw, gathers as without apply', async () => {
  const g = await gpuUnderTest();
  const ref = createRefKernels();
  let [touched, same, values] = [0, 0, 0];
  for (const base of randomCases()) {
    const c = applying(base);
    const got = await onGpu(g, c);
    const want = runOn(ref, c);
    assert.deepEqual(got.vals, want.vals, `${c.name}: gathered raw logits == ref`);
    touched += checkApplied(c, got.x);
    values += got.x.length;
    got.x.forEach((v, i) => { if (Object.is(v, want.x[i])) same++; });
  }
  assert.ok(touched > 100, `${touched} touched values checked`);
  assert.ok(same >= values - 4, `${same} of ${values} adjusted values bit-equal to the ref's`);
});

test('webgpu penaltyPicks in a draft chain (one step, calls over a prefix of the same rows: one table upload): == ref\'s gathers, replay exact', async () => {
  const k = new WebGpuBoundaryKernels(await gpuUnderTest()) as unknown as AnyKernels;
  const c = chainCase();
  const got = await runChain(k, c);
  const want = await runChain(createRefKernels(), c);
  assert.deepEqual([got.bests, got.vals], [want.bests, want.vals], 'untouched bests and gathered values == ref');
  assert.equal(checkChain(c, got), c.live.reduce((a, m) => a + m, 0), 'every f32 pick == exact (no near tie here)');
  assert.deepEqual(got.picks, want.picks, 'picks == ref');
});

// k = 3 (the host path and forced disagreements) and k = 4 (the longest chain); k = 2 (one
// engine load and run, ~9 CPU-s on lavapipe) is the wasm twin's, draft-penalty-engine (k = 2..4,
// the same chain code over the kernels' penaltyPicks, whose WGSL the tests above check).
test('webgpu: penalised drafts chained on the device == host drafts, MTP on == off, 2 read-backs a round (k = 3, 4)', async () => {
  const req: GenerateRequest = { promptIds: prompts[0]!.prompt_ids, maxTokens: 12, ignoreEos: true, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 };
  const [want] = await withEngine({ ...gpu, kernels: 'wasm', model: TINY_THINK(), specTokens: 0 }, async (e) => [[...(await e.complete(req)).outputIds]]);
  // k is an engine option: one load each (slow on lavapipe); the host path runs at k = 3 only
  for (const k of [3, 4]) {
    const rec = draftRecorder();
    // redrafts allowed (specRedrafts): the chain's drafts are the host path's, forced disagreements too
    await withEngine({ ...gpu, model: TINY_THINK(), specTokens: k, specRedrafts: k, ...rec.hooks }, async (e: Engine) => {
      const c = (e.model.kernels as unknown as Partial<WebGpuBoundaryKernels>).counters;
      assert.ok(c, 'the engine runs on the webgpu backend');
      const s0 = e.penaltyDrafts;
      const device = await rec.run(e, [req], false);
      const s1 = e.penaltyDrafts;
      const [rounds, passes, disagreements] = [s1.rounds - s0.rounds, s1.passes - s0.passes, s1.disagreements - s0.disagreements];
      assert.deepEqual(device.out, [want], `k = ${k}: MTP on == off (wasm)`);
      assert.ok(rounds > 0 && device.drafts.some((d) => d.length > 2), `k = ${k}: drafted on the device chain`);
      assert.ok(device.reads <= 2 + device.rounds + passes, `k = ${k}: ${device.reads} read-backs for ${device.rounds} rounds, ${passes} passes`);
      if (k === 3) {
        const host = await rec.run(e, [req], true);
        assert.deepEqual(host.out, [want], 'host drafts: MTP on == off');
        assert.deepEqual(device.drafts, host.drafts, 'device-chained draft ids == host draft ids');
        assert.ok(host.longest >= e.sampleVocab && device.longest < e.sampleVocab, `longest range ${device.longest} (host path ${host.longest})`);
        // a wrong first pick written on the device after every pass's first step: the replay
        // disagrees, the chain redrafts from its kept hidden rows, the ids stay the host's
        const d0 = e.penaltyDrafts.disagreements;
        const restore = corruptFirstPicks(e, 0);
        const forced = await rec.run(e, [req], false).finally(restore);
        assert.deepEqual(forced.out, [want], 'forced disagreements: MTP on == off');
        assert.deepEqual(forced.drafts, host.drafts, 'forced disagreements: redrafted ids == host draft ids');
        assert.ok(e.penaltyDrafts.disagreements > d0, 'the forced run disagreed and redrafted');
        console.log(JSON.stringify({ k, forcedReads: forced.reads, forcedDisagreements: e.penaltyDrafts.disagreements - d0 }));
      }
      console.log(JSON.stringify({ k, rounds: device.rounds, reads: device.reads, readsPerRound: +(device.reads / device.rounds).toFixed(2), bytes: device.bytes,
        bytesPerRound: Math.round(device.bytes / device.rounds), chainRounds: rounds, passes, disagreements }));
    });
  }
});

test('webgpu: chains whose penalty tables pass the reserved bound (600 bias ids, context 128) grow the penalty values, ids == the wasm host path', async () => {
  const reqs = growthRequests(6); // the first pass grows: few tokens on lavapipe
  const want = await withEngine({ ...GROWTH_ENGINE, model: TINY_THINK(), kernels: 'wasm', sampledCandidates: true, sampledChain: false, penaltyChain: false, specSampling: 'rejection' as const },
    (e) => runDraws(e, reqs));
  await withEngine({ ...GROWTH_ENGINE, model: TINY_THINK(), kernels: 'webgpu', specSampling: 'rejection' as const }, async (e) => {
    const v = Math.min(32768, e.info.sampleVocab);
    const mem = draftPassMemory(e.model.kernels, v);
    const reserved = mem.vals.cap;
    assert.ok(penaltyTableBound(v, e.maxContext, 4) < WIDE_BIAS.size, 'the bias passes the bound');
    const got = await runDraws(e, reqs);
    assert.deepEqual(got.ids, want.ids, 'ids == wasm host path');
    assert.ok(got.sampled.rounds > 0, 'drafted on the device');
    assert.ok(mem.vals.cap > reserved, `penalty values grew: ${reserved} → ${mem.vals.cap}`);
    console.log(JSON.stringify({ reservedVals: reserved, grownVals: mem.vals.cap, rounds: got.rounds, reads: got.reads }));
  });
});
