// Tower conformance: the vision tower on every kernel backend (vision/kernel-tower.ts on ref,
// wasm and webgpu — lavapipe where the machine has no GPU) against the plain-TS tower
// (tower.ts, itself checked against a float64 reference in vision-tower.test.ts), on the
// same patches. Error = max|Δ| / max|plain| over the merged embeddings and every deepstack
// feature. Bounds (and why):
//   1e-5  ref, wasm, webgpu: f32 matmul and attention accumulation in each backend's fixed
//         order against the plain tower's f64 sums (the same bound as the kernel
//         conformance suite's float matmul and attention); measured on this fixture:
//         ref ~1e-7, wasm ~6e-7, webgpu ~3e-7.
// Cases: the tiny-vision fixture's BF16 tower (weights packed as bf16), a deepstack tower of
// random f32 weights (packed as f32) on a non-square grid, and a two-frame clip.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AnyKernels } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { encodeImage } from '../src/vision/tower.js';
import { KernelTower } from '../src/vision/kernel-tower.js';
import type { VisionConfig } from '../src/vision/config.js';
import type { ImageGrid } from '../src/vision/grid.js';
import type { VisionWeights } from '../src/vision/weights.js';
import { Rng } from '../src/util/rng.js';
import { relErr } from './numeric.js';
import { fixtureVisionConfig, fixtureVisionWeights, randomArray, randomVisionWeights } from './vision-helpers.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';

const TOLERANCE = 1e-5;
const backends: AnyKernels[] = [];
before(async () => {
  backends.push(createRefKernels(), await createWasmKernels({ threads: 2 }), new WebGpuBoundaryKernels(await gpuUnderTest()) as unknown as AnyKernels);
});
after(() => { for (const k of backends) k.dispose(); });

const cases: [string, () => [VisionConfig, VisionWeights], ImageGrid][] = [
  ['fixture, bf16 weights, 6×4 grid', () => { const c = fixtureVisionConfig(); return [c, fixtureVisionWeights(c)]; }, { t: 1, h: 6, w: 4 }],
  ['deepstack, f32 weights, 4×10 grid', () => { const c: VisionConfig = { ...fixtureVisionConfig(), depth: 3, deepstackVisualIndexes: [0, 2] }; return [c, randomVisionWeights(c, 3)]; }, { t: 1, h: 4, w: 10 }],
  ['fixture, two-frame clip 2×4×4', () => { const c = fixtureVisionConfig(); return [c, fixtureVisionWeights(c)]; }, { t: 2, h: 4, w: 4 }],
];

cases.forEach(([name, make, grid], i) => {
  test(`tower conformance: ${name} — ref, wasm, webgpu within ${TOLERANCE} of the plain tower`, async (t) => {
    const [cfg, w] = make();
    const n = grid.t * grid.h * grid.w;
    const patches = randomArray(new Rng(100 + i), n * 1536, 1);
    const plain = encodeImage(cfg, w, patches, grid);
    assert.equal(backends.map((k) => k.name).join(), 'ref,wasm,webgpu');
    for (const k of backends) {
      const got = await new KernelTower(k, cfg, w).encode(patches, grid);
      assert.equal(got.tokens, plain.tokens, k.name);
      const e = relErr(got.embeds, plain.embeds);
      t.diagnostic(`${k.name}: rel err ${e.toExponential(2)}`);
      assert.ok(e <= TOLERANCE, `${k.name}: embeddings rel err ${e}`);
      assert.equal(got.deepstack.length, cfg.deepstackVisualIndexes.length, k.name);
      got.deepstack.forEach((d, j) => {
        const ed = relErr(d, plain.deepstack[j]!);
        assert.ok(ed <= TOLERANCE, `${k.name}: deepstack ${j} rel err ${ed}`);
      });
    }
  });
});
