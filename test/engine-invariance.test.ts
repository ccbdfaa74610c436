// Invariant 3 (docs/ARCHITECTURE.md "Invariants"): a request's greedy ids and every step's logits are
// bit-identical whether it runs alone or batched with others, whatever --max-running and
// the chunked-prefill budget; padding never reaches a real request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { type RunResult, evalPrompts, runAll, sameBits, withEngine } from './engine-helpers.js';
import { TINY_NEXT_MOE, TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

function requests(n: number): GenerateRequest[] {
  // 12 prompts of different lengths (20..~140 tokens), varied max_tokens
  return evalPrompts(n).map((messages, i) => ({ messages, maxTokens: 6 + (i % 5) * 2, ignoreEos: i % 4 === 0 }));
}

async function alone(model: string, reqs: GenerateRequest[]): Promise<RunResult[]> {
  return withEngine({ model, kernels: KERNELS, maxRunning: 1 }, async (e) => {
    const out: RunResult[] = [];
    for (const r of reqs) out.push(...(await runAll(e, [r])));
    return out;
  });
}

function assertSame(got: RunResult[], want: RunResult[], label: string): void {
  got.forEach((g, i) => {
    const w = want[i]!;
    assert.deepEqual(g.ids, w.ids, `${label}: request ${i} ids`);
    assert.equal(g.logits.length, w.logits.length, `${label}: request ${i} steps`);
    g.logits.forEach((l, s) => assert.ok(sameBits(l, w.logits[s]!), `${label}: request ${i} step ${s} logits differ`));
  });
}

for (const [name, dir] of [['tiny-think', TINY_THINK], ['tiny-next-moe', TINY_NEXT_MOE]] as const) {
  test(`${name}: batched == alone, bit for bit (max-running 1/3/5/12, prefill budgets 64/128/512)`, async () => {
    const reqs = requests(12);
    const ref = await alone(dir(), reqs);
    for (const [maxRunning, budget] of [[1, 64], [3, 128], [5, 64], [12, 512], [12, 64]] as const) {
      const got = await withEngine({ model: dir(), kernels: KERNELS, maxRunning, maxPrefillTokens: budget, poisonPadding: true },
        (e) => runAll(e, reqs));
      assertSame(got, ref, `max-running ${maxRunning}, budget ${budget}`);
      for (const r of got) for (const l of r.logits) assert.ok(l.every(Number.isFinite), 'NaN/Inf reached a real request');
    }
  });
}
