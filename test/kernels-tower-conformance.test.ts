// Conformance of the vision tower's kernels (layerNorm, biasAct) on every wasm build against
// the ref twin (test/tower-ops-check.ts states the cases). Tolerances (and why):
//   exact   layerNorm (the ref's f64 arithmetic, in the same order), biasAct 'none' (one f32 add)
//   1e-6    biasAct 'geluTanh' (x·σ(2u) with one f32 exp vs the ref's f64 tanh),
//           'geluErf' (1 + erf as erfc by Numerical Recipes' erfcc fit, fractional
//           error < 1.2e-7, in f32, vs the ref's series to ~1e-15)
import { describe, test } from 'node:test';
import type { AnyKernels } from '../src/kernels/types.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import { checkBiasAct, checkLayerNorm } from './tower-ops-check.js';

const backends = await wasmBackendsUnderTest();

for (const { label, k } of backends) {
  describe(`tower kernel conformance [${label}]`, () => {
    const kernels = k as unknown as AnyKernels;
    test('layerNorm == ref bit for bit (tails, pool-sized, row blocks, in place)', () => checkLayerNorm(kernels, 0));
    test('biasAct: none exact; geluTanh, geluErf within 1e-6 (near 0 and in the tails, in place)', () =>
      checkBiasAct(kernels, 1e-6));
  });
}
