// The pre-load weight estimate (weights-fit.ts) against what loading really allocates:
// for dense, Qwen3-Next and fused-expert MoE shapes, as stored and under both --quantize
// modes, the estimate from the tensor table equals the engine's measured weight bytes
// (to 1%, norms and small vectors may be widened at load); and a model that does not fit
// is a clear error naming the quantize modes that would.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel } from '../src/tools/make-model.js';
import { openModelFiles } from '../src/model/model.js';
import type { QuantizeMode } from '../src/checkpoint/quantize-load.js';
import type { TensorInfo } from '../src/checkpoint/safetensors.js';
import { checkWeightsFit, residentWeightBytes } from '../src/model/weights-fit.js';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-fit-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

const tensorsOf = (dir: string): TensorInfo[] => {
  const { ckpt } = openModelFiles(dir);
  try {
    return [...ckpt.tensors.values()];
  } finally {
    ckpt.close();
  }
};

for (const shape of ['tiny', 'qwen3-next-tiny', 'qwen3.5-moe-tiny']) {
  test(`${shape}: the estimate from the tensor table matches the loaded weights (as stored, q8_0, q4_k)`, async () => {
    const dir = join(ROOT, shape);
    await makeModel({ shape, dtype: 'bf16', seed: 3, out: dir, layout: 'release', tokenizer: TINY_THINK() });
    const tensors = tensorsOf(dir);
    for (const quantize of [undefined, 'q8_0', 'q4_k'] as (QuantizeMode | undefined)[]) {
      // sized as the engine's backend stores them (the wasm backend repacks q8_0 / q4_k / q6_k)
      const [est, real] = await withEngine({ model: dir, ...(quantize ? { quantize } : {}), specTokens: 0 }, async (e) => {
        const k = e.model.kernels;
        return [residentWeightBytes(tensors, quantize, k.quantWeightBytes?.bind(k)), e.memoryPlan!.weightBytes];
      });
      assert.ok(Math.abs(est - real) <= real * 0.01, `${shape} ${quantize ?? 'as stored'}: estimate ${est} vs loaded ${real}`);
    }
    assert.ok(residentWeightBytes(tensors, 'q4_k') < residentWeightBytes(tensors, 'q8_0'));
    assert.ok(residentWeightBytes(tensors, 'q8_0') < residentWeightBytes(tensors));
  });
}

test('weights that do not fit: a clear error before loading, naming what would fit', () => {
  const tensors = tensorsOf(TINY_THINK());
  const stored = residentWeightBytes(tensors);
  const q8 = residentWeightBytes(tensors, 'q8_0');
  assert.doesNotThrow(() => checkWeightsFit(tensors, undefined, stored));
  assert.throws(() => checkWeightsFit(tensors, undefined, q8 + 1),
    /the model's weights need about [\d.]+ GB of memory as stored, but only [\d.]+ GB is available; --quantize q8_0 needs about [\d.]+ GB \(fits\), --quantize q4_k needs about [\d.]+ GB \(fits\)/);
  assert.throws(() => checkWeightsFit(tensors, 'q8_0', 1000), /with --quantize q8_0, but only 0\.0 GB is available; --quantize q4_k needs about/);
});
