// Invariant 4 (docs/ARCHITECTURE.md "Invariants"): greedy output with MTP on is token-for-token identical to MTP
// off, for every k in 1..4, alone and batched with padding rows, with real acceptance
// (tiny-think) and near-zero acceptance (tiny-next-moe), with forced all-accept and
// all-reject drafters, and when eos / stop strings / max-tokens land inside a round.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { evalPrompts, runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { TINY_NEXT_MOE, TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

function requests(n: number, maxTokens: number): GenerateRequest[] {
  return evalPrompts(n).map((messages, i) => ({ messages, maxTokens: maxTokens + (i % 3) * 4 }));
}

async function run(model: string, k: number, reqs: GenerateRequest[], maxRunning = 8,
  draftOverride?: Parameters<typeof withEngine>[0]['draftOverride']) {
  return withEngine({ model, kernels: KERNELS, specTokens: k, specAdaptive: false, maxRunning, poisonPadding: true,
    ...(draftOverride ? { draftOverride } : {}) }, async (e) => ({ results: await runAll(e, reqs), stats: e.stats() }));
}

function assertParity(got: RunResult[], want: RunResult[], label: string): void {
  got.forEach((g, i) => {
    assert.deepEqual(g.ids, want[i]!.ids, `${label}: request ${i} ids`);
    assert.equal(g.text, want[i]!.text, `${label}: request ${i} text`);
    assert.equal(g.finishReason, want[i]!.finishReason, `${label}: request ${i} finish`);
    g.logits.forEach((l, s) => assert.ok(sameBits(l, want[i]!.logits[s]!), `${label}: request ${i} step ${s} logits differ`));
  });
}

for (const [name, dir, minAccept] of [['tiny-think', TINY_THINK, 1.5], ['tiny-next-moe', TINY_NEXT_MOE, 1]] as const) {
  test(`${name}: MTP on == MTP off (greedy, k = 1..4, 1 / 3 / 8 concurrent)`, async () => {
    const reqs = requests(8, 16);
    const { results: off } = await run(dir(), 0, reqs);
    for (const k of [1, 2, 3, 4]) {
      for (const n of [1, 3, 8]) {
        const { results, stats } = await run(dir(), k, reqs.slice(0, n));
        assertParity(results, off.slice(0, n), `k=${k} n=${n}`);
        assert.ok(stats.spec.rounds > 0, 'speculation ran');
        if (n === 8) assert.ok(stats.spec.acceptLenMean >= minAccept, `${name} k=${k}: accept length ${stats.spec.acceptLenMean}`);
      }
    }
  });
}

test('a restricted draft vocabulary (--draft-vocab) keeps greedy parity, only lowering acceptance', async () => {
  const reqs = requests(6, 16);
  const { results: off } = await run(TINY_THINK(), 0, reqs);
  const accept: number[] = [];
  for (const draftVocab of [1000, 400, 64]) {
    const { results, stats } = await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 2, specAdaptive: false, maxRunning: 8,
      poisonPadding: true, draftVocab }, async (e) => ({ results: await runAll(e, reqs), stats: e.stats() }));
    assertParity(results, off, `draftVocab=${draftVocab}`);
    assert.ok(stats.spec.rounds > 0);
    accept.push(stats.spec.acceptLenMean);
  }
  assert.ok(accept[0]! >= accept[2]! && accept[2]! >= 1, `accept length by draft vocabulary 1000/400/64: ${accept}`);
  assert.ok(accept[0]! > accept[2]!, `a 64-id draft vocabulary should accept less: ${accept}`);
});

test('forced drafters: oracle drafts accept k+1 per round, wrong drafts 1 per round, in one batch; parity holds', async () => {
  const reqs = requests(4, 20).map((r) => ({ ...r, ignoreEos: true, maxTokens: 21 }));
  const { results: off } = await run(TINY_THINK(), 0, reqs);
  const truth = new Map(reqs.map((r, i) => [i, off[i]!.ids]));
  // request 0 is always wrong; the others get the target's own greedy continuation
  const k = 4;
  const promptLens: number[] = [];
  const { results, stats } = await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: k, specAdaptive: false, maxRunning: 8,
    draftOverride: (req, drafts) => {
      const idx = promptLens.indexOf(req.promptIds.length);
      const generated = req.tokens.length - req.promptIds.length; // bonus included
      const cont = truth.get(idx)!;
      if (idx === 0) return drafts.map((_, i) => (cont[generated + i]! + 1) % 990);
      return drafts.map((_, i) => cont[generated + i] ?? 0);
    } }, async (e) => {
    for (const r of reqs) promptLens.push((await e.complete({ ...r, maxTokens: 1 })).promptIds.length);
    assert.equal(new Set(promptLens).size, promptLens.length, 'prompts must have distinct lengths for this test');
    return { results: await runAll(e, reqs), stats: e.stats() };
  });
  assertParity(results, off, 'forced');
  // 21 tokens: the first from prefill, then rounds of 5 (oracle) → 4 rounds; wrong drafts
  // → 19 rounds of 1, and the 21st token by a plain decode (no room left for a draft)
  const hist = stats.spec.acceptLenHistogram;
  assert.equal(hist[1], 19, `all-reject request: 19 rounds of accept length 1 (histogram ${hist})`);
  assert.equal(hist[5], 3 * 4, `oracle requests: 4 rounds each of accept length k+1 (histogram ${hist})`);
});

test('eos, stop strings and max-tokens inside a round truncate exactly as MTP off', async () => {
  const base = evalPrompts(6);
  const reqs: GenerateRequest[] = [
    ...base.slice(0, 2).map((messages) => ({ messages, maxTokens: 200 })), // eos (<|im_end|>) mid-round
    ...base.slice(2, 4).map((messages) => ({ messages, maxTokens: 200, stop: ['\n', '+'] })),
    ...base.slice(4, 6).map((messages, i) => ({ messages, maxTokens: 5 + i, ignoreEos: true })),
  ];
  const { results: off } = await run(TINY_THINK(), 0, reqs);
  for (const k of [2, 4]) {
    const { results } = await run(TINY_THINK(), k, reqs);
    assertParity(results, off, `k=${k}`);
  }
  assert.ok(off.slice(0, 2).every((r) => r.finishReason === 'stop'));
  assert.ok(off.slice(2, 4).every((r) => r.finishReason === 'stop' && !/[\n+]/.test(r.text)));
  assert.deepEqual(off.slice(4).map((r) => r.ids.length), [5, 6]);
});
