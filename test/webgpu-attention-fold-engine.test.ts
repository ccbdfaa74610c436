// The attention inputs folded into the decode / verify attention (kernels/webgpu/
// attention-fold.ts) end to end on tiny-think (2 full-attention layers of 8; G 2, blocks of 8
// rows): greedy ids and every step's logits with the fold on == off, bit for bit, MTP off and
// on (k = 3: verify steps of 4 rows and the MTP head's decoder layer fold too; MTP on with
// the fold == MTP off without it); and each decode step takes 2 dispatches fewer (one per
// full-attention layer).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { forceAttentionFold } from '../src/kernels/webgpu/attention-fold.js';
import { type RunResult, runAll, sameBits, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { dispatchesPerReadBack } from './webgpu-helpers.js';

const base = { kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 256, prefixCache: false, maxRunning: 2 };
// two prompts together (8 and 9 tokens: the 9-token prefill is two blocks, not folded)
const PROMPTS = [{ prompt: 'Name a color.', maxTokens: 6, ignoreEos: true }, { prompt: 'What is 12 + 7?', maxTokens: 7, ignoreEos: true }];

/** The runs with the fold on or off and MTP k = `spec`, and the dispatches of each step. */
async function runs(fold: boolean, spec: number): Promise<{ out: RunResult[]; steps: number[]; rounds: number }> {
  return withEngine({ ...base, model: TINY_THINK(), specTokens: spec }, async (e: Engine) => {
    const k = e.model.kernels as unknown as WebGpuBoundaryKernels;
    forceAttentionFold(k.g, fold);
    const steps = dispatchesPerReadBack(k);
    const out = await runAll(e, PROMPTS);
    return { out, steps, rounds: e.stats().spec.rounds };
  });
}

function assertSame(got: RunResult[], want: RunResult[], what: string): void {
  got.forEach((r, i) => {
    assert.deepEqual(r.ids, want[i]!.ids, `${what}: prompt ${i} ids`);
    assert.equal(r.logits.length, want[i]!.logits.length, `${what}: prompt ${i} logits rows`);
    r.logits.forEach((l, j) => assert.ok(sameBits(l, want[i]!.logits[j]!), `${what}: prompt ${i} logits of token ${j} differ`));
  });
}

describe('webgpu attention fold end to end (tiny-think)', () => {
  test('greedy ids and logits: fold on == off (MTP off, and MTP k = 3 on == off); decode steps 2 dispatches fewer', async () => {
    const off = await runs(false, 0);
    const on = await runs(true, 0);
    assertSame(on.out, off.out, 'fold on vs off');
    // the steps after the prefill where both requests decode one row each
    const decode = (s: number[]) => s.slice(1, 4);
    assert.deepEqual(decode(on.steps).map((n, i) => decode(off.steps)[i]! - n), [2, 2, 2], `dispatches per step: off ${off.steps.join(' ')}, on ${on.steps.join(' ')}`);
    const mtp = await runs(true, 3);
    assert.ok(mtp.rounds > 0, 'drafts were verified');
    assertSame(mtp.out, off.out, 'MTP k = 3 with the fold vs MTP off without');
  });
});
