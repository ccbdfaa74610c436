// The gated norm writes out_proj's head order itself (Kernels.gatedRmsNorm's headOrder,
// gdnRecurrentGatedSeqs' perm) and out_proj may take the norm along (project): a quantized
// GGUF (tiny-think-Q8_0: value heads tiled, out_proj's columns in another head order) and the
// BF16 safetensors model give the same logits and states, bit for bit, as the former path
// (norm in place, one gather_rows of the head blocks, then out_proj: head-order-oracle.ts),
// on ref and wasm, over prefills, a prefill beside a decode, decodes, a verify and a step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Kernels, Tensor } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { loadModel, type AnyModel } from '../src/model/model.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { formerHeadPath, headPathSteps } from './head-order-oracle.js';
import { sameBits } from './engine-helpers.js';

const Q8 = (): string => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf');

async function compare(k: Kernels<Tensor, Tensor>, path: string, ordered: boolean): Promise<void> {
  const read = (t: Tensor, n: number): Promise<Float32Array> => Promise.resolve(Float32Array.from((t as Float32Array).subarray(0, n)));
  const now = loadModel(path, k) as unknown as AnyModel;
  const hasOrder = now.weights.layers.some((l) => l.mixer.kind === 'linear' && l.mixer.outProjHeadOrder !== undefined);
  assert.equal(hasOrder, ordered, `${path}: out_proj head order`);
  const got = await headPathSteps(now, read);
  const before = await headPathSteps(loadModel(path, formerHeadPath(k)) as unknown as AnyModel, read);
  assert.equal(got.length, before.length);
  assert.ok(got[0]!.some((x) => x !== 0));
  got.forEach((g, i) => assert.ok(sameBits(g, before[i]!), `${path}: result ${i} differs (logits of each step, then states)`));
}

test('ref: tiny-think Q8_0 GGUF and BF16 == the former head-order path, bit for bit', async () => {
  const k = createRefKernels() as unknown as Kernels<Tensor, Tensor>;
  await compare(k, Q8(), true);
  await compare(k, TINY_THINK(), false);
});

test('wasm: tiny-think Q8_0 GGUF and BF16 == the former head-order path, bit for bit', async () => {
  const k = await createWasmKernels({ threads: 2 }) as unknown as Kernels<Tensor, Tensor>;
  try {
    await compare(k, Q8(), true);
    await compare(k, TINY_THINK(), false);
  } finally {
    k.dispose();
  }
});
