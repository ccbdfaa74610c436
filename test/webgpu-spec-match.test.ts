// Sampled MTP verified by matching (speculative/accept.ts; 'auto' for seeded requests) on
// lavapipe: drafts drawn on the device with the target's uniforms (draft-device.ts), verify
// positions drawn from their certified candidates (Speculator.acceptCandidates): seeded sampled
// streams batched with a greedy one give the ids of MTP off on webgpu at k = 3. With the round
// deferred (pending-drafts.ts: drafts drawn on the device, taken as they are, read back with
// the verify) the ids are the same, as many drafts are accepted (the device draws with the
// same uniforms), and a step reads back once. Short prompts, few tokens: lavapipe costs
// ~0.25 CPU-s a step. Rejection sampling (--spec-sampling rejection) defers its rounds too:
// the candidates of its device draws come back with the verify (deferred-rejection.ts).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { countingReadBacks, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { DRAW_CASES, drawRequests } from './sampled-draw-cases.js';

before(webgpuEngineKernels);

const base = { kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const brief = (reqs: GenerateRequest[]): GenerateRequest[] => reqs.map((r) => ({ ...r, promptIds: r.promptIds!.slice(3, 11) }));
// a hot cut (T 2, top-k 20: a draw's uniform decides it), the qwen cut, and a greedy stream
const reqs = brief([...drawRequests(DRAW_CASES.hot, 18, 4), ...drawRequests(DRAW_CASES.qwen, 18, 2, true)]);

interface Outcome { ids: number[][]; accepted: number; rounds: number; deferred: number; steps: number; readBacks: number; rejectionChains: number }

async function ids(o: Record<string, unknown>, set: readonly GenerateRequest[] = reqs): Promise<Outcome> {
  return withEngine({ ...base, model: TINY_THINK(), ...o }, async (e) => {
    const { value: out, readBacks } = await countingReadBacks(e, () => Promise.all(set.map(async (r) => [...(await e.complete(r)).outputIds])));
    const s = e.stats();
    const ends = e.deferredRejection;
    return { ids: out, accepted: s.spec.accepted, rounds: s.spec.rounds, deferred: s.spec.deferredRounds, steps: s.steps.prefill + s.steps.decode + s.steps.verify, readBacks,
      rejectionChains: ends.whole + ends.refused + ends.redrawn };
  });
}

// MTP off and the k = 3 round with its drafts read back, run once for both tests
let offRun: Promise<Outcome> | null = null;
let readRun: Promise<Outcome> | null = null;
const off = (): Promise<Outcome> => (offRun ??= ids({ specTokens: 0 }));
const twoReads = (): Promise<Outcome> => (readRun ??= ids({ specTokens: 3, deferredDrafts: false }));

test('webgpu, match: seeded sampled ids == MTP off at k = 3 (k switching between rounds: spec-match on wasm)', async () => {
  const on = await twoReads();
  assert.deepEqual(on.ids, (await off()).ids, 'k = 3');
  assert.ok(on.accepted > 0 && on.rounds > 0, `${on.accepted} drafts accepted in ${on.rounds} rounds`);
});

test('webgpu, match, deferred rounds: sampled drafts drawn on the device stay there until the verify; ids == MTP off, a read-back a step', async () => {
  const two = await twoReads();
  const one = await ids({ specTokens: 3, deferredDrafts: true });
  assert.deepEqual(one.ids, (await off()).ids, 'deferred');
  assert.equal(two.deferred, 0);
  assert.ok(one.deferred > 0, `${one.deferred} rounds deferred`);
  // the device's f32 draws with the chains' uniforms are the host's exact draws but at a boundary
  assert.ok(Math.abs(one.accepted - two.accepted) <= 2, `drafts accepted: ${one.accepted} deferred, ${two.accepted} read back`);
  assert.ok(two.readBacks > two.steps, `drafts read back: ${two.readBacks} read-backs in ${two.steps} steps`);
  // a verify position whose candidates the certificate refuses is read whole (one more read-back)
  assert.ok(one.readBacks <= one.steps + 2, `deferred: ${one.readBacks} read-backs in ${one.steps} steps`);
  console.log(JSON.stringify({ accepted: [two.accepted, one.accepted], steps: [two.steps, one.steps], readBacks: [two.readBacks, one.readBacks] }));
});

test('webgpu, rejection, deferred rounds: drafts drawn on the device, their candidates read with the verify; ids == the replayed rounds\', a read-back a step', async () => {
  // seeded requests verified by rejection sampling (a test hook lets them defer, as unseeded ones
  // do by default), so both engines draw the same uniforms: spec-defer-rejection on wasm
  const o = { specTokens: 3, specSampling: 'rejection', deferredDrafts: true };
  // fewer and shorter streams than the match tests' (lavapipe time): two hot, one qwen, a greedy one
  const few = brief([...drawRequests(DRAW_CASES.hot, 12, 2), ...drawRequests(DRAW_CASES.qwen, 12, 1, true)]);
  const replayed = await ids({ ...o, deferredRejection: false }, few);
  const deferred = await ids({ ...o, deferSeededRejection: true }, few);
  console.log(JSON.stringify({ rejection: { steps: [replayed.steps, deferred.steps], readBacks: [replayed.readBacks, deferred.readBacks], chains: deferred.rejectionChains } }));
  assert.deepEqual(deferred.ids, replayed.ids);
  assert.equal(deferred.accepted, replayed.accepted);
  assert.ok(deferred.rejectionChains > 0 && replayed.rejectionChains === 0, `${deferred.rejectionChains} rejection chains deferred`);
  assert.ok(replayed.readBacks > replayed.steps, `replayed: ${replayed.readBacks} read-backs in ${replayed.steps} steps`);
  assert.ok(deferred.readBacks <= deferred.steps + 2, `deferred: ${deferred.readBacks} read-backs in ${deferred.steps} steps`);
});
