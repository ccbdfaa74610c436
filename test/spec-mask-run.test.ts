// MTP rounds under a constraint's mask run (Matcher.maskRun: a mask that holds until one of a
// few ids is taken; the closed-think mask of every chat answer on a model with think tags, for
// good, and an open reasoning block's "any id", until `</think>`) stay on the kernels like
// unconstrained ones (speculative/pending-drafts.ts): drafts picked or drawn under the mask on
// the kernels, verify positions under it, one read-back a round; a round is cut after a drafted
// id that ends the run (no bonus: the positions after it were masked as before it). On wasm
// with the device paths forced, against MTP off under the same mask:
// - a test constraint whose fixed mask removes ids the model picks often (so the mask decides
//   tokens): greedy ids == MTP off, seeded sampled (matching) ids == MTP off, and top-k 1
//   requests verified by rejection sampling, every step's first device draw corrupted, ==
//   greedy MTP off; every round deferred;
// - a test run that switches masks after an id the model picks mid-answer (the second mask bans
//   what MTP off picks most after it): the same three, every round deferred, rounds cut;
// - the closed-think mask itself, closed and open blocks, and with a reasoning budget (a run of
//   a few positions, then only `</think>`): every round deferred, ids == MTP off;
// - a JSON-schema answer with reasoning open (the grammar's free reasoning is a mask run): the
//   reasoning's rounds deferred, the answer's not, ids == MTP off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Constraint, Matcher } from '../src/constrain/constraint.js';
import { withClosedThinkMask, withReasoningBudget } from '../src/constrain/think.js';
import type { Engine, EngineOptions } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { EngineTestHooks } from '../src/engine/test-hooks.js';
import { THINK_CLOSE, THINK_OPEN } from '../src/tokenizer/reasoning.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';
import type { ServerContext } from '../src/server/context.js';
import { switchesTo } from './constraint-helpers.js';
import { countingReadBacks, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { corruptDraws, DRAW_CASES, drawRequests } from './sampled-draw-cases.js';

const N = 24;
const base = {
  kernels: 'wasm' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 1024, prefixCache: false, maxRunning: 8,
  sampledChain: true, sampledCandidates: true, deferredDrafts: true,
};

/** A constraint that masks `banned` at every position, and says so (a mask run with no end). */
function fixedBan(banned: readonly number[], vocab: number): Constraint {
  const mask = new Uint32Array(Math.ceil(vocab / 32)).fill(0xffffffff);
  for (const id of banned) mask[id >>> 5]! &= ~(1 << (id & 31));
  const matcher = (n: number): Matcher => ({
    get length() { return n; },
    mask: () => mask,
    advance() { n++; },
    fork: () => matcher(n),
    endError: () => null,
    maskRun: () => ({ mask, until: [] }),
  });
  return { start: () => matcher(0) };
}

/** rounds: requests' verify rounds; deferred: verify steps whose drafts came back with them, of `verifySteps`. */
interface Run { ids: number[][]; rounds: number; deferred: number; verifySteps: number; accepted: number; readBacks: number; steps: number }

/** `cuts.n`: chains of deferred rounds cut after a draft that ended their mask run. */
async function run(o: Partial<EngineOptions> & EngineTestHooks, reqs: (e: Engine) => GenerateRequest[], corrupt = false, cuts = { n: 0 }): Promise<Run> {
  return withEngine({ ...base, model: TINY_THINK(), ...o }, async (e) => {
    const restore = corrupt ? corruptDraws(e) : () => undefined;
    try {
      const { value: ids, readBacks } = await countingReadBacks(e, () => Promise.all(reqs(e).map(async (r) => [...(await e.complete(r)).outputIds])));
      const s = e.stats();
      cuts.n = e.maskRunCuts;
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

test('a mask run that a drafted id ends: rounds cut after it, every round deferred; greedy, matched and rejection ids == MTP off', async () => {
  const greedy = drawRequests({ temperature: 0 }, N, 3);
  // the switch: the id MTP off picks most away from an answer's ends; the mask after it bans
  // what MTP off picks most right after it (itself included, as `</think>` is)
  const unmasked = await run({ specTokens: 0 }, () => greedy);
  const count = (ids: number[]) => ids.reduce((m, id) => m.set(id, (m.get(id) ?? 0) + 1), new Map<number, number>());
  const top = (m: Map<number, number>, n: number) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([id]) => id);
  const switchId = top(count(unmasked.ids.flatMap((ids) => ids.slice(2, -4))), 1)[0]!;
  const followers = unmasked.ids.flatMap((ids) => ids.flatMap((id, i) => (id === switchId ? ids.slice(i + 1, i + 3) : [])));
  const after = [switchId, ...top(count(followers), 6).filter((id) => id !== switchId)].slice(0, 6);
  const banAfter = (vocab: number): Uint32Array => {
    const then = new Uint32Array(Math.ceil(vocab / 32)).fill(0xffffffff);
    for (const id of after) then[id >>> 5]! &= ~(1 << (id & 31));
    return then;
  };
  const under = (reqs: GenerateRequest[]) => (e: Engine): GenerateRequest[] => reqs.map((r) => ({ ...r, logitsAdjust: { bias: null, constraint: switchesTo(switchId, banAfter(e.sampleVocab)) } }));
  const cuts = { n: 0 };
  const off = await run({ specTokens: 0 }, under(greedy));
  assert.notDeepEqual(off.ids, unmasked.ids, 'the mask after the switch decides tokens');
  assert.ok(off.ids.filter((ids) => ids.slice(0, -1).includes(switchId)).length >= 2, 'the switch is taken mid-answer');
  const on = await run({ specTokens: 3 }, under(greedy), false, cuts);
  assert.deepEqual(on.ids, off.ids, 'greedy');
  assert.ok(on.deferred > 0 && on.deferred === on.verifySteps, `greedy: ${on.deferred} of ${on.verifySteps} verify steps deferred`);
  assert.ok(cuts.n > 0, 'rounds were cut after a drafted switch');
  assert.ok(on.readBacks <= on.steps, `greedy: ${on.readBacks} read-backs in ${on.steps} steps`);
  // seeded sampled (matching): MTP off's draws under the run
  const sampled = drawRequests(DRAW_CASES.hot, N, 3);
  const sampledOff = await run({ specTokens: 0 }, under(sampled));
  const sampledOn = await run({ specTokens: 3 }, under(sampled));
  assert.deepEqual(sampledOn.ids, sampledOff.ids, 'matched');
  assert.ok(sampledOn.deferred === sampledOn.verifySteps && sampledOn.accepted > 0, `matched: ${sampledOn.deferred} of ${sampledOn.verifySteps} deferred`);
  // unseeded top-k 1 (rejection), device draws corrupted: greedy off's ids
  const top1 = greedy.map(({ seed: _, ...r }) => ({ ...r, temperature: 1, topK: 1 }));
  const rejectionCuts = { n: 0 };
  const rejection = await run({ specTokens: 3 }, under(top1), true, rejectionCuts);
  assert.deepEqual(rejection.ids, off.ids, 'rejection, redrawn drafts');
  assert.ok(rejection.deferred === rejection.verifySteps && rejectionCuts.n > 0, `rejection: ${rejection.deferred} of ${rejection.verifySteps} deferred, ${rejectionCuts.n} cut`);
});

test('the closed-think mask: closed and open blocks, and a reasoning budget, defer every round (cut at the run\'s end); ids == MTP off', async () => {
  // budgets: one request per prompt and budget (a round spans the budget's end with its drafts
  // accepted for some: the positions past it must be cut)
  const think = (start: 'open' | 'closed', budgets: readonly (number | null)[]) => (e: Engine): GenerateRequest[] => {
    const t = e.tokenizer;
    const ids = { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
    const head = start === 'open' ? '<think>\n' : '<think>\n\n</think>\n\n';
    return ['What is 2 + 3?', 'Name a color.'].flatMap((q) => budgets.map((budget) => ({
      promptIds: t.encode(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n${head}`), maxTokens: 40, ignoreEos: true,
      logitsAdjust: { bias: null, constraint: withClosedThinkMask(budget === null ? null : withReasoningBudget(null, ids.close, budget, e.sampleVocab), start, ids, e.sampleVocab) },
    })));
  };
  for (const [start, budgets] of [['closed', [null]], ['open', [null]], ['open', [3, 4, 5, 6, 7, 8]]] as const) {
    const budget = budgets[0];
    const what = `${start}${budget === null ? '' : `, budgets ${budgets.join(' ')}`}`;
    const off = await run({ specTokens: 0 }, think(start, budgets));
    const cuts = { n: 0 };
    const on = await run({ specTokens: 3 }, think(start, budgets), false, cuts);
    assert.deepEqual(on.ids, off.ids, what);
    assert.equal(on.deferred, on.verifySteps, `${what}: ${on.deferred} of ${on.verifySteps} verify steps deferred`);
    // the budget's end cuts a round (its positions), then forces </think> (a drafted </think> cuts the next)
    if (budget !== null) assert.ok(cuts.n >= 2, `${what}: ${cuts.n} chains cut`);
  }
});

test('a JSON-schema answer with reasoning open: the reasoning\'s rounds defer (free reasoning\'s mask run), the answer\'s read drafts back; ids == MTP off', async () => {
  const reqs = (e: Engine): GenerateRequest[] => {
    const t = e.tokenizer;
    const ids = { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
    const ctx = { engine: e, texts: new TokenTexts(t) } as unknown as ServerContext;
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    return ['What is 2 + 3?', 'What is 7 + 5?'].map((q) => ({
      promptIds: t.encode(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n<think>\n`), maxTokens: 40,
      logitsAdjust: { bias: null, constraint: withClosedThinkMask(structuredConstraint(ctx, { kind: 'json_schema', name: 'a', schema }, null, true), 'open', ids, e.sampleVocab) },
    }));
  };
  const off = await run({ specTokens: 0 }, reqs);
  const on = await run({ specTokens: 3 }, reqs);
  assert.deepEqual(on.ids, off.ids, 'greedy');
  assert.ok(on.deferred > 0 && on.deferred < on.verifySteps, `${on.deferred} of ${on.verifySteps} verify steps deferred (the reasoning's)`);
});
