// Sampled MTP verified by matching (speculative/accept.ts; 'auto' for seeded requests) on
// lavapipe: drafts drawn on the device with the target's uniforms (draft-device.ts), verify
// positions drawn from their certified candidates (Speculator.acceptCandidates): seeded sampled
// streams batched with a greedy one give the ids of MTP off on webgpu, at k = 1 and 3, and with
// the policy switching k every round. Short prompts, few tokens: lavapipe costs ~0.25 CPU-s a step.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';
import { DRAW_CASES, drawRequests } from './sampled-draw-cases.js';

before(webgpuEngineKernels);

const base = { kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const brief = (reqs: GenerateRequest[]): GenerateRequest[] => reqs.map((r) => ({ ...r, promptIds: r.promptIds!.slice(3, 11) }));
const reqs = brief([...drawRequests(DRAW_CASES.qwen, 10, 2), ...drawRequests(DRAW_CASES.hot, 10, 1), ...drawRequests(DRAW_CASES.minP, 10, 1, true)]);

async function ids(o: Record<string, unknown>): Promise<{ ids: number[][]; accepted: number; rounds: number }> {
  return withEngine({ ...base, model: TINY_THINK(), ...o }, async (e) => {
    const out = await Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
    return { ids: out, accepted: e.stats().spec.accepted, rounds: e.stats().spec.rounds };
  });
}

test('webgpu, match: seeded sampled ids == MTP off at k = 1 and 3, and with k switching every round', async () => {
  const off = await ids({ specTokens: 0 });
  for (const k of [1, 3]) {
    const on = await ids({ specTokens: k });
    assert.deepEqual(on.ids, off.ids, `k = ${k}`);
    assert.ok(on.accepted > 0 && on.rounds > 0, `k = ${k}: ${on.accepted} drafts accepted in ${on.rounds} rounds`);
  }
  let round = 0;
  const switching = await ids({ specTokens: 3, specAdaptive: true, specK: () => [2, 0, 3, 1][round++ % 4]! });
  assert.deepEqual(switching.ids, off.ids, 'k switching');
});
