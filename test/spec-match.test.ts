// Sampled MTP verified by matching (speculative/accept.ts 'match', the default): every token a
// seeded sampled request emits is the plain loop's, so its ids equal MTP off's bit for bit, at
// any k, with the adaptive policy switching k between rounds, batched with other requests, for
// every cut, penalties and a constraint; on the host draft path and the kernels' (wasm forced).
// The drafts take the target's uniforms (draft.ts draftUniforms): with the draft rng instead,
// the first draft's acceptance drops on a hot cut (the test measures both on the same requests).
// Under 'auto' (the default) a seeded request is matched; rejection sampling keeps a seeded
// request's k fixed, and only its. A matched chain drafting on the kernels takes the device's
// draws as they are (draft-device.ts: no replay).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine, EngineOptions } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks } from '../src/engine/test-hooks.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, DRAW_CASES, drawRequests, runDraws } from './sampled-draw-cases.js';

const opts = { kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 24;

/** Every case's 6 seeds batched with a greedy request, and one penalised, one constrained. */
function requests(): GenerateRequest[][] {
  const cases = Object.values(DRAW_CASES).map((s) => drawRequests(s, N, 6, true));
  const [a, b] = drawRequests(DRAW_CASES.qwen, N, 2);
  const extra: GenerateRequest[] = [
    { ...a!, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3, seed: 5 },
    { ...b!, temperature: 1, seed: 6, logitsAdjust: { bias: new Map([[54, 2], [57, -4]]) } },
  ];
  return [...cases, extra];
}

interface Run { ids: number[][]; drafted: number; accepted: number; firstRate: number; rounds: number }

async function run(e: Engine, sets: readonly GenerateRequest[][]): Promise<Run> {
  const ids: number[][] = [];
  for (const reqs of sets) ids.push(...(await Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]))));
  const s = e.stats().spec;
  return { ids, drafted: s.drafted, accepted: s.accepted, firstRate: s.acceptRateByPosition[0] ?? 0, rounds: s.rounds };
}

const engine = (o: Partial<EngineOptions> & EngineTestHooks, sets: readonly GenerateRequest[][]): Promise<Run> =>
  withEngine({ ...opts, model: TINY_THINK(), ...o }, (e) => run(e, sets));

test('match: seeded sampled ids == MTP off at k = 1..4, host drafts and drafts on the kernels', async () => {
  const sets = requests();
  const off = await engine({ specTokens: 0 }, sets);
  for (const k of [1, 2, 3, 4]) {
    for (const sampledChain of [false, true]) {
      const on = await engine({ specTokens: k, sampledChain, penaltyChain: sampledChain, sampledCandidates: sampledChain }, sets);
      assert.deepEqual(on.ids, off.ids, `k = ${k}, drafts ${sampledChain ? 'on the kernels' : 'on the host'}: ids == MTP off`);
      assert.ok(on.accepted > on.rounds / 2, `k = ${k}: drafts accepted (${on.accepted} in ${on.rounds} rounds)`);
    }
  }
});

test('match, drafts on the kernels: the device\'s draws are the drafts as they are (no replay): a corrupted draw is proposed, ids == MTP off', async () => {
  const reqs = drawRequests(DRAW_CASES.hot, N, 4, true);
  const base = { ...opts, model: TINY_THINK(), specTokens: 3, sampledChain: true, sampledCandidates: true };
  const off = await withEngine({ ...base, specTokens: 0 }, (e) => runDraws(e, reqs));
  const got = await withEngine(base, async (e) => {
    const restore = corruptDraws(e);
    try { return await runDraws(e, reqs); } finally { restore(); }
  });
  assert.deepEqual(got.ids, off.ids);
  assert.ok(got.sampled.rounds > 0, 'rounds drafted on the kernels');
  assert.equal(got.sampled.disagreements, 0, 'nothing replayed');
  assert.equal(got.sampled.passes, got.sampled.rounds, 'one pass a round');
});

test('match: the adaptive policy switching k every round (0..4) keeps the ids of MTP off', async () => {
  const sets = requests();
  const off = await engine({ specTokens: 0 }, sets);
  let round = 0;
  const on = await engine({ specTokens: 4, specAdaptive: true, specK: () => [3, 0, 1, 4, 2][round++ % 5]! }, sets);
  assert.deepEqual(on.ids, off.ids);
  assert.ok(round > 20 && on.accepted > 0, `${round} rounds chose k, ${on.accepted} drafts accepted`);
});

test('match: drafts drawn with the target\'s uniforms are accepted more than with the draft rng (a hot cut)', async () => {
  const sets = [drawRequests(DRAW_CASES.hot, 48, 8), drawRequests(DRAW_CASES.hot, 48, 8).map((r) => ({ ...r, seed: r.seed! + 100 }))];
  const target = await engine({ specTokens: 1 }, sets);
  // the 'rejection' drafts' uniforms, verified by matching: only the drafts' uniforms differ
  const own = await engine({ specTokens: 1, draftUniforms: 'rejection' }, sets);
  assert.deepEqual(own.ids, target.ids, 'the same ids either way');
  assert.ok(target.firstRate > own.firstRate + 0.02, `draft accepted ${target.firstRate.toFixed(3)} vs ${own.firstRate.toFixed(3)}`);
});

test('rejection: the same seeds draw other tokens than MTP off (why a seeded request is matched under auto)', async () => {
  const sets = requests();
  const off = await engine({ specTokens: 0 }, sets);
  const on = await engine({ specTokens: 3, specSampling: 'rejection' }, sets);
  assert.notDeepEqual(on.ids, off.ids, 'rejection sampling draws other tokens for the same seeds');
  assert.ok(on.accepted > 0);
});

test('the policy\'s k applies to every sampled request but a seeded one verified by rejection (its tokens depend on k)', async () => {
  const [seeded] = drawRequests(DRAW_CASES.qwen, 16, 1);
  const unseeded = { ...seeded!, seed: undefined };
  const drafted = (specSampling: 'auto' | 'match' | 'rejection', r: GenerateRequest) =>
    engine({ specTokens: 3, specAdaptive: true, specSampling, specK: () => 0 }, [[r]]).then((x) => x.drafted);
  assert.ok(await drafted('rejection', seeded!) > 0, 'seeded, rejection: the configured k');
  assert.equal(await drafted('rejection', unseeded), 0, 'unseeded, rejection: the policy\'s 0');
  assert.equal(await drafted('match', seeded!), 0, 'seeded, match: the policy\'s 0');
  assert.equal(await drafted('auto', seeded!), 0, 'seeded, auto (match): the policy\'s 0');
  assert.equal(await drafted('auto', unseeded), 0, 'unseeded, auto (rejection): the policy\'s 0');
});
