// Conformance of the vision tower's kernels (layerNorm, biasAct) on webgpu (lavapipe where
// the machine has no GPU) against the ref twin (test/tower-ops-check.ts states the cases).
// Tolerances (and why):
//   1e-5    layerNorm (f32 sums in the shader's fixed tree vs the ref's f64, as rmsNorm)
//   exact   biasAct 'none' (one f32 add)
//   1e-6    biasAct 'geluTanh' (x·σ(2u), f32 exp), 'geluErf' (Numerical Recipes' erfcc
//           fit in f32, fractional error < 1.2e-7)
import { after, before, test } from 'node:test';
import type { AnyKernels } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { checkBiasAct, checkLayerNorm } from './tower-ops-check.js';

let k: AnyKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()) as unknown as AnyKernels; });
after(() => k?.dispose());

test('webgpu layerNorm within 1e-5 of ref (tails, tower widths, row blocks and in place: same bits)', () => checkLayerNorm(k, 1e-5));
test('webgpu biasAct: none exact; geluTanh, geluErf within 1e-6 (near 0 and in the tails, in place)', () =>
  checkBiasAct(k, 1e-6));
