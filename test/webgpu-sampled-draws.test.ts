// Sampled MTP drafts drawn on the device (speculative/draft-device.ts, on by default on webgpu)
// on lavapipe: Kernels.candidateDraws' WGSL twin == the ref's proposals on the seeded cases;
// on tiny-think at k = 3, a batch of sampled streams (the task's cuts) with a greedy stream
// gives the wasm engine's host-path ids (forced off), one draft read-back a round when clean
// (2 with the verify), and a corrupted device draw is replaced by the host's (redraft), ids
// unchanged; penalised and biased sampled streams (their rows adjusted in f32 on the device
// before the draw, replayed exactly) give the wasm host path's ids too. Short prompts, few
// tokens: lavapipe costs ~0.25 CPU-s a step. A JSON-schema sampled stream (its mask applied by
// the replay) and a penalised JSON-schema greedy one give the wasm host path's ids.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { drawsOnGpu, gpuUnderTest, webgpuEngineKernels } from './webgpu-helpers.js';
import { drawCases } from './candidate-draw-cases.js';
import { corruptDraws, DRAW_CASES, drawRequests, runDraws } from './sampled-draw-cases.js';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';

before(webgpuEngineKernels);

/** The requests on BRIEF_TOKENS ids of their golden prompts' text (after `<|im_start|>user\n`):
 * lavapipe prefills at ~0.12 CPU-s a prompt token (as much as a decode step), and the drafts
 * checked here come after the prompt, whatever its length (the 89-token few-shot prompt of
 * the penalised stream was a sixth of the file's CPU). */
const BRIEF_TOKENS = 8;
const brief = (reqs: GenerateRequest[]): GenerateRequest[] => reqs.map((r) => ({ ...r, promptIds: r.promptIds!.slice(3, 3 + BRIEF_TOKENS) }));

test('webgpu candidateDraws == ref proposals (every cut, a greedy row left as it was)', async () => {
  const g = await gpuUnderTest();
  const ref = createRefKernels();
  for (const c of drawCases()) {
    const m = c.rows.length;
    const want = new Int32Array(m + 1).fill(-7);
    ref.candidateDraws(want, 1, c.ids, c.vals, 0, c.c, c.rows);
    assert.deepEqual(await drawsOnGpu(g, c.ids, c.vals, c.c, c.rows), want, `${c.name}: webgpu proposals == ref`);
  }
});

test('webgpu MTP k = 3: sampled streams + a greedy one, drafts drawn on the device == wasm host path; 2 read-backs a round; corrupted draws redraft', async () => {
  const reqs = brief([...drawRequests(DRAW_CASES.qwen, 6, 1), ...drawRequests(DRAW_CASES.minP, 6, 1), ...drawRequests(DRAW_CASES.topP, 6, 1, true)]);
  const base = { kernels: 'webgpu' as const, specTokens: 3, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
  const want = await withEngine({ ...base, kernels: 'wasm', model: TINY_THINK(), sampledCandidates: false, sampledChain: false }, (e) => runDraws(e, reqs));
  await withEngine({ ...base, model: TINY_THINK() }, async (e) => {
    const got = await runDraws(e, reqs);
    assert.deepEqual(got.ids, want.ids, 'device-drawn drafts: ids == wasm host path');
    const s = got.sampled;
    assert.ok(s.rounds > 0, 'chained rounds');
    // the f32 proposal is the exact draw off cut and draw boundaries (none met in these seeded rounds)
    assert.ok(s.disagreements <= 1, `${s.disagreements} disagreements in ${s.rounds} rounds`);
    assert.equal(s.refused, 0, 'tiny-think under these cuts: every candidate row certified');
    if (s.disagreements === 0) assert.equal(s.passes, s.rounds, 'one draft read-back a round');
    // every read-back is a target step's (one each: no refused candidate row) or a draft pass's: 2 a round
    assert.equal(got.reads, got.targetSteps + s.passes + s.refusedReads, `read-backs ${got.reads}: ${got.targetSteps} steps, ${s.passes} passes`);
    const restore = corruptDraws(e);
    const forced = await runDraws(e, reqs).finally(restore);
    assert.deepEqual(forced.ids, want.ids, 'corrupted draws: ids == wasm host path');
    assert.ok(forced.sampled.disagreements > 0 && forced.sampled.passes > forced.sampled.rounds, 'the replay caught them and redrafted');
    console.log(JSON.stringify({ rounds: s.rounds, steps: s.steps, passes: s.passes, disagreements: s.disagreements, refused: s.refused, reads: got.reads,
      bytes: got.bytes, forcedDisagreements: forced.sampled.disagreements, forcedPasses: forced.sampled.passes }));
  });
});

test('webgpu MTP k = 3: penalised and biased sampled streams + a penalised greedy one, adjusted on the device (penaltyPicks apply) == wasm host path; 2 read-backs a clean round; a JSON-schema stream too', async () => {
  const penalties = { repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 };
  const [a, b] = drawRequests({ ...DRAW_CASES.hot, ...penalties }, 6, 2, true);
  const [c] = drawRequests({ ...DRAW_CASES.qwen, logitsAdjust: { bias: new Map([[54, 2.1], [57, -4], [200, 6]]) } }, 6, 1);
  const reqs = brief([a!, { ...c!, seed: 1001 }, { ...b!, ...penalties }]);
  const [briefA] = reqs;
  const base = { kernels: 'webgpu' as const, specTokens: 3, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
  // every proposal in order ([committed length, ...drafts]): the drafts, not only the ids
  const recorder = () => {
    const drafts: number[][] = [];
    return { drafts, draftOverride: (req: { tokens: readonly number[] }, d: number[]): number[] => { drafts.push([req.tokens.length, ...d]); return d; } };
  };
  const host = recorder();
  const want = await withEngine({ ...base, kernels: 'wasm', model: TINY_THINK(), sampledCandidates: false, sampledChain: false, penaltyChain: false, draftOverride: host.draftOverride },
    (e) => runDraws(e, reqs));
  const device = recorder();
  // redrafts allowed (specRedrafts): every proposal the host path's, the greedy stream's included
  await withEngine({ ...base, model: TINY_THINK(), specRedrafts: 3, draftOverride: device.draftOverride }, async (e) => {
    const got = await runDraws(e, reqs);
    assert.deepEqual(got.ids, want.ids, 'device-adjusted drafts: ids == wasm host path');
    assert.deepEqual(device.drafts, host.drafts, 'every proposal == the wasm host path\'s');
    const s = got.sampled;
    assert.ok(s.rounds > 0, 'chained rounds');
    assert.ok(s.passes <= s.rounds + s.disagreements, `${s.passes} passes`);
    if (s.disagreements === 0 && s.refused === 0) assert.equal(s.passes, s.rounds, 'one draft read-back a round');
    assert.equal(got.reads, got.targetSteps + s.passes + s.refusedReads + got.greedyPasses, `read-backs ${got.reads}: ${got.targetSteps} steps, ${s.passes} passes`);
    console.log(JSON.stringify({ adjusted: true, rounds: s.rounds, steps: s.steps, passes: s.passes, disagreements: s.disagreements, refused: s.refused, reads: got.reads,
      targetSteps: got.targetSteps, greedyPasses: got.greedyPasses }));
    // a JSON-schema sampled stream: proposals drawn without the mask, the replay applies it
    // with a penalised constrained greedy stream: its later untouched bests unmasked, kept where
    // the mask allows them, finished under it (a plain one: webgpu-device-picks at k = 3)
    const json = (en: Engine): GenerateRequest[] => [{ ...briefA!, maxTokens: 5, logitsAdjust: { bias: null, constraint: schemaConstraint(en) } },
      { ...briefA!, temperature: 0, maxTokens: 8, logitsAdjust: { bias: null, constraint: schemaConstraint(en) } }];
    const wantJson = await withEngine({ ...base, kernels: 'wasm', model: TINY_THINK(), sampledCandidates: false, sampledChain: false, penaltyChain: false }, (w) => runDraws(w, json(w)));
    const gotJson = await runDraws(e, json(e));
    assert.deepEqual(gotJson.ids, wantJson.ids, 'JSON-schema drafts: ids == wasm host path');
    assert.ok(gotJson.sampled.rounds > 0, 'the constrained chain drafted on the device');
    assert.ok(gotJson.reads <= wantJson.reads, `JSON-schema read-backs ${wantJson.reads} → ${gotJson.reads}`);
    console.log(JSON.stringify({ constrained: true, ...gotJson.sampled, greedyPasses: gotJson.greedyPasses, reads: [wantJson.reads, gotJson.reads], targetSteps: gotJson.targetSteps }));
  });
});

/** The chat route's JSON-schema constraint over an engine (a fresh matcher per request). */
function schemaConstraint(e: Engine): Constraint {
  const ctx = { engine: e, texts: new TokenTexts(e.tokenizer) } as unknown as ServerContext;
  const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false)!;
}
