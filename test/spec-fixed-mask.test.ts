// MTP rounds under a constraint whose mask can no longer change (Matcher.fixedMask: the
// closed-think mask of every chat answer on a model with think tags) stay on the kernels like
// unconstrained ones (speculative/pending-drafts.ts): drafts picked or drawn under the mask on
// the kernels, verify positions under it, one read-back a round. On wasm with the device paths
// forced, against MTP off under the same mask:
// - a test constraint whose fixed mask removes ids the model picks often (so the mask decides
//   tokens): greedy ids == MTP off, seeded sampled (matching) ids == MTP off, and top-k 1
//   requests verified by rejection sampling, every step's first device draw corrupted, ==
//   greedy MTP off; every round deferred;
// - the closed-think mask itself: a closed block defers from the start, an open one once
//   `</think>` is committed; ids == MTP off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Constraint, Matcher } from '../src/constrain/constraint.js';
import { withClosedThinkMask } from '../src/constrain/think.js';
import type { Engine, EngineOptions } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks } from '../src/engine/test-hooks.js';
import { THINK_CLOSE, THINK_OPEN } from '../src/tokenizer/reasoning.js';
import { countingReadBacks, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, DRAW_CASES, drawRequests } from './sampled-draw-cases.js';

const N = 24;
const base = {
  kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false, maxRunning: 8,
  sampledChain: true, sampledCandidates: true, deferredDrafts: true,
};

/** A constraint that masks `banned` at every position, and says so (fixedMask). */
function fixedBan(banned: readonly number[], vocab: number): Constraint {
  const mask = new Uint32Array(Math.ceil(vocab / 32)).fill(0xffffffff);
  for (const id of banned) mask[id >>> 5]! &= ~(1 << (id & 31));
  const matcher = (n: number): Matcher => ({
    get length() { return n; },
    mask: () => mask,
    advance() { n++; },
    fork: () => matcher(n),
    endError: () => null,
    fixedMask: () => mask,
  });
  return { start: () => matcher(0) };
}

/** rounds: requests' verify rounds; deferred: verify steps whose drafts came back with them, of `verifySteps`. */
interface Run { ids: number[][]; rounds: number; deferred: number; verifySteps: number; accepted: number; readBacks: number; steps: number }

async function run(o: Partial<EngineOptions> & EngineTestHooks, reqs: (e: Engine) => GenerateRequest[], corrupt = false): Promise<Run> {
  return withEngine({ ...base, model: TINY_THINK(), ...o }, async (e) => {
    const restore = corrupt ? corruptDraws(e) : () => undefined;
    try {
      const { value: ids, readBacks } = await countingReadBacks(e, () => Promise.all(reqs(e).map(async (r) => [...(await e.complete(r)).outputIds])));
      const s = e.stats();
      return { ids, rounds: s.spec.rounds, deferred: s.spec.deferredRounds, verifySteps: s.steps.verify, accepted: s.spec.accepted, readBacks,
        steps: s.steps.prefill + s.steps.decode + s.steps.verify };
    } finally {
      restore();
    }
  });
}

/** The ids MTP off picks most often on these requests, unconstrained: the mask bans them. */
async function banned(reqs: GenerateRequest[]): Promise<number[]> {
  const off = await run({ specTokens: 0 }, () => reqs);
  const count = new Map<number, number>();
  for (const id of off.ids.flat()) count.set(id, (count.get(id) ?? 0) + 1);
  return [...count].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([id]) => id);
}

test('a fixed mask: MTP rounds on the kernels, deferred; greedy, matched and rejection ids == MTP off under the mask', async () => {
  const greedy = drawRequests({ temperature: 0 }, N, 3);
  const ban = await banned(greedy);
  const under = (reqs: GenerateRequest[]) => (e: Engine): GenerateRequest[] => reqs.map((r) => ({ ...r, logitsAdjust: { bias: null, constraint: fixedBan(ban, e.sampleVocab) } }));
  const unmasked = await run({ specTokens: 0 }, () => greedy);
  const off = await run({ specTokens: 0 }, under(greedy));
  assert.notDeepEqual(off.ids, unmasked.ids, 'the mask decides tokens');
  assert.ok(off.ids.flat().every((id) => !ban.includes(id)));
  const on = await run({ specTokens: 3 }, under(greedy));
  assert.deepEqual(on.ids, off.ids, 'greedy');
  assert.ok(on.deferred > 0 && on.deferred === on.verifySteps, `greedy: ${on.deferred} of ${on.verifySteps} verify steps deferred`);
  assert.ok(on.readBacks <= on.steps, `greedy: ${on.readBacks} read-backs in ${on.steps} steps`);
  // the drafts are the exact masked picks: as many accepted as with the host's picks (read back step by step)
  const replayed = await run({ specTokens: 3, hostDrafts: () => true }, under(greedy));
  assert.deepEqual(replayed.ids, off.ids);
  assert.equal(on.accepted, replayed.accepted, 'drafts accepted: deferred vs the host picks');
  // seeded sampled (matching): MTP off's draws under the mask
  const sampled = drawRequests(DRAW_CASES.hot, N, 3);
  const sampledOff = await run({ specTokens: 0 }, under(sampled));
  const sampledOn = await run({ specTokens: 3 }, under(sampled));
  assert.deepEqual(sampledOn.ids, sampledOff.ids, 'matched');
  assert.ok(sampledOn.deferred === sampledOn.verifySteps && sampledOn.accepted > 0, `matched: ${sampledOn.deferred} of ${sampledOn.verifySteps} deferred`);
  // drawn on the kernels under the mask: as many accepted as the host's exact draws but at an f32 boundary
  const sampledHost = await run({ specTokens: 3, hostDrafts: () => true }, under(sampled));
  assert.ok(Math.abs(sampledOn.accepted - sampledHost.accepted) <= 2, `matched: ${sampledOn.accepted} accepted, ${sampledHost.accepted} with the host's draws`);
  // unseeded top-k 1 (rejection; p and q one-hot under the mask), device draws corrupted: greedy off's ids
  const top1 = greedy.map(({ seed: _, ...r }) => ({ ...r, temperature: 1, topK: 1 }));
  const rejection = await run({ specTokens: 3 }, under(top1), true);
  assert.deepEqual(rejection.ids, off.ids, 'rejection, redrawn drafts');
  assert.ok(rejection.deferred === rejection.verifySteps && rejection.rounds > 0, `rejection: ${rejection.deferred} of ${rejection.verifySteps} deferred`);
});

test('the closed-think mask: a closed block defers from the start, an open one after </think>; ids == MTP off', async () => {
  const think = (start: 'open' | 'closed') => (e: Engine): GenerateRequest[] => {
    const t = e.tokenizer;
    const ids = { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
    const head = start === 'open' ? '<think>\n' : '<think>\n\n</think>\n\n';
    return ['What is 2 + 3?', 'Name a color.'].map((q) => ({
      promptIds: t.encode(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n${head}`), maxTokens: 40, ignoreEos: true,
      logitsAdjust: { bias: null, constraint: withClosedThinkMask(null, start, ids, e.sampleVocab) },
    }));
  };
  for (const start of ['closed', 'open'] as const) {
    const off = await run({ specTokens: 0 }, think(start));
    const on = await run({ specTokens: 3 }, think(start));
    assert.deepEqual(on.ids, off.ids, start);
    if (start === 'closed') assert.equal(on.deferred, on.verifySteps, `closed: ${on.deferred} of ${on.verifySteps} verify steps deferred`);
    else assert.ok(on.deferred > 0 && on.deferred < on.verifySteps, `open: ${on.deferred} of ${on.verifySteps} verify steps deferred (after </think>)`);
  }
});
