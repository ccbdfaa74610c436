// Kernels.mtpInputs on webgpu (lavapipe here): the one dispatch's cat equals the calls
// mtpForward made before the op (embed / embedIds, two rms_norms, three copies), element by
// element, with host and device ids, first rows and not, several sequences; the MTP head's
// draft logits (mtpForward + lmHeadInto reading a view of contiguous rows) equal the old calls
// + a gathered lm_head. Embedding tables: BF16 (tiny-think), Q8_0 and Q6_K (its GGUFs), and a
// BF16 table split in row parts (a low binding limit: the op takes the old calls). CPU
// backends: test/mtp-inputs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { AnyKernels, Tensor } from '../src/kernels/types.js';
import { loadModel, type Model } from '../src/model/model.js';
import { CASES, checkCat, registerDraftChecks } from './mtp-inputs-cases.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { gpuUnderTest } from './webgpu-helpers.js';

/** Splits tiny-think's [1024, 256] BF16 embedding in 4 parts (as test/webgpu-split-tables). */
const LOW_BINDING = 150_000;
const MODELS: readonly { name: string; path: () => string; binding?: number; dtype: string; fused: boolean }[] = [
  { name: 'tiny-think BF16', path: TINY_THINK, dtype: 'bf16', fused: true },
  { name: 'tiny-think Q8_0 GGUF', path: () => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf'), dtype: 'q8_0', fused: true },
  { name: 'tiny-think Q4_K_M GGUF', path: () => sharedPath('models', 'gguf', 'tiny-think-Q4_K_M.gguf'), dtype: 'q6_k', fused: true },
  { name: 'tiny-think BF16, tables split', path: TINY_THINK, binding: LOW_BINDING, dtype: 'bf16', fused: false },
];

for (const spec of MODELS) {
  describe(spec.name, () => {
    let k: WebGpuBoundaryKernels;
    let model: Model<Tensor, Tensor>;
    before(async () => {
      k = new WebGpuBoundaryKernels(await gpuUnderTest(spec.binding === undefined ? {} : { maxBindingOverride: spec.binding }));
      model = loadModel(spec.path(), k as unknown as AnyKernels);
    });
    after(() => k.dispose());
    const dispatches = (): number => k.recordedDispatches;

    test(`cat == the old calls, every case, host and device ids (${spec.fused ? 'one dispatch' : 'the old calls'})`, async () => {
      assert.equal(model.weights.embed.dtype, spec.dtype);
      for (const [i, c] of CASES.entries()) {
        for (const device of [false, true]) {
          const n = await checkCat(model, c, device, 11 + i, dispatches);
          if (spec.fused) assert.equal(n, 1, `${c.name}: mtpInputs dispatches`);
          else assert.ok(n > 1, `${c.name}: a split table takes the old calls (${n} dispatches)`);
        }
      }
    });
    registerDraftChecks(() => model);
  });
}
