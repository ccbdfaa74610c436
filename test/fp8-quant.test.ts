// FP8 checkpoints under --quantize q8_0. The FP8 weights are read through the
// BF16 view of checkpoint/fp8.ts (w = e4m3 · scale_inv, per read, tensor by tensor) and
// re-quantized to Q8_0 as they load. What must agree:
//  - bit for bit: FP8 → Q8_0 at load, and the same FP8 checkpoint first written out as the
//    BF16 model it dequantizes to, then → Q8_0 (the logits of every step are equal), on a
//    dense model and on a Qwen3-Next MoE whose experts are loaded by ranged reads;
//  - against the BF16 source itself (FP8 is lossy): the trained tiny-think agrees on greedy
//    output over 32 tokens, FP8 + q8_0 vs BF16 + q8_0, as the unquantized FP8 check does.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { makeModel } from '../src/tools/make-model.js';
import { evalPrompts, runAll, type RunResult, sameBits, withEngine } from './engine-helpers.js';
import { writeDequantizedCopy, writeFp8Copy } from './fp8-helpers.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-fp8q-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

const run = (model: string, reqs: readonly GenerateRequest[], specTokens = 0): Promise<RunResult[]> =>
  withEngine({ model, quantize: 'q8_0', specTokens }, (e) => runAll(e, reqs));

function assertSameRuns(a: readonly RunResult[], b: readonly RunResult[], what: string): void {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => {
    const y = b[i]!;
    assert.deepEqual(y.ids, x.ids, `${what}, request ${i}: ids`);
    assert.equal(y.logits.length, x.logits.length);
    x.logits.forEach((l, s) => assert.ok(sameBits(l, y.logits[s]!), `${what}, request ${i}, step ${s}: logits differ`));
  });
}

/** Token-id prompts that fit any shape's vocabulary. */
function idPrompts(vocab: number): GenerateRequest[] {
  return [7, 300, 1000].map((len, i) => ({
    promptIds: Array.from({ length: len }, (_, j) => (j * 7919 + i * 104729 + 13) % vocab), maxTokens: 12, ignoreEos: true,
  }));
}

for (const shape of ['tiny', 'qwen3-next-tiny']) {
  test(`${shape}: FP8 + q8_0 at load == its dequantized BF16 checkpoint + q8_0, bit for bit`, async () => {
    const fp8 = join(ROOT, `${shape}-fp8`);
    const deq = join(ROOT, `${shape}-deq`);
    await makeModel({ shape, dtype: 'fp8', seed: 11, out: fp8, layout: 'release', tokenizer: TINY_THINK() });
    writeDequantizedCopy(fp8, deq);
    const reqs = idPrompts(shape === 'tiny' ? 1024 : 2048);
    const [a, b] = [await run(deq, reqs, 1), await run(fp8, reqs, 1)];
    for (const r of a) assert.equal(r.ids.length, 12);
    assertSameRuns(a, b, shape);
  });
}

test('tiny-think: FP8 + q8_0 agrees with its BF16 source + q8_0 on greedy output over 32 tokens (MTP on)', async () => {
  const fp8 = join(ROOT, 'tiny-think-fp8');
  writeFp8Copy(TINY_THINK(), fp8);
  const reqs = evalPrompts(3).map((messages) => ({ messages, maxTokens: 32, ignoreEos: true }));
  const [a, b] = [await run(TINY_THINK(), reqs, 2), await run(fp8, reqs, 2)];
  a.forEach((x, i) => {
    assert.equal(x.ids.length, 32);
    assert.deepEqual(b[i]!.ids, x.ids, `prompt ${i}: FP8 + q8_0 greedy output differs from BF16 + q8_0`);
  });
  // and the FP8 weights did change the numbers (the comparison is not of identical models)
  assert.ok(a.some((x, i) => x.logits.some((l, s) => !sameBits(l, b[i]!.logits[s]!))), 'FP8 logits differ from BF16 somewhere');
});
