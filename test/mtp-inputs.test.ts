// Kernels.mtpInputs on the CPU backends (ref, wasm): cat equals the calls mtpForward made
// before the op, element by element, with host and device ids, first rows and not, several
// sequences; the MTP head's draft logits (mtpForward + lmHeadInto reading a view of contiguous
// rows) equal the old calls + a gathered lm_head; a view's lm_head rows equal a gather's.
// tiny-think (BF16 embedding) and its Q8_0 GGUF (quantized embedding). (webgpu:
// test/webgpu-mtp-inputs.)
import { after, describe, test } from 'node:test';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { AnyKernels } from '../src/kernels/types.js';
import { loadModel } from '../src/model/model.js';
import { CASES, checkCat, registerDraftChecks } from './mtp-inputs-cases.js';
import { sharedPath, TINY_THINK } from './paths.js';

const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());
const BACKENDS: readonly [string, AnyKernels][] = [['ref', createRefKernels() as unknown as AnyKernels], ['wasm', wasm as unknown as AnyKernels]];
const MODELS: readonly [string, () => string][] = [['tiny-think BF16', TINY_THINK], ['tiny-think Q8_0 GGUF', () => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf')]];

for (const [backend, k] of BACKENDS) {
  for (const [name, path] of MODELS) {
    describe(`${backend}, ${name}`, () => {
      const model = loadModel(path(), k);
      test('cat == the old calls, every case, host and device ids', async () => {
        for (const [i, c] of CASES.entries()) for (const device of [false, true]) await checkCat(model, c, device, 11 + i);
      });
      registerDraftChecks(() => model);
    });
  }
}
