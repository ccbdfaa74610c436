// The tower with its linear layers on the kernel backends (ref and wasm) equals the plain-TS
// tower within f32 accumulation error, on the fixture and on a deepstack config.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { encodeImage } from '../src/vision/tower.js';
import { kernelLinear } from '../src/vision/kernel-linear.js';
import type { VisionConfig } from '../src/vision/config.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { Rng } from '../src/util/rng.js';
import { fixtureVisionConfig, fixtureVisionWeights, randomArray, randomVisionWeights } from './vision-helpers.js';

const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());

function relErr(a: Float32Array, b: Float32Array): number {
  let num = 0, den = 0;
  for (let i = 0; i < a.length; i++) {
    num = Math.max(num, Math.abs(a[i]! - b[i]!));
    den = Math.max(den, Math.abs(b[i]!));
  }
  return num / den;
}

const cases: [string, () => [VisionConfig, ReturnType<typeof fixtureVisionWeights>]][] = [
  ['fixture', () => { const c = fixtureVisionConfig(); return [c, fixtureVisionWeights(c)]; }],
  ['deepstack', () => { const c: VisionConfig = { ...fixtureVisionConfig(), depth: 3, deepstackVisualIndexes: [0, 2] }; return [c, randomVisionWeights(c, 3)]; }],
];

for (const [name, make] of cases) {
  test(`${name}: kernel-backed linears (ref, wasm) == plain tower`, () => {
    const [cfg, w] = make();
    const grid = { t: 1, h: 6, w: 4 };
    const patches = randomArray(new Rng(21), 24 * 1536, 1);
    const plain = encodeImage(cfg, w, patches, grid);
    for (const k of [createRefKernels(), wasm]) {
      const op = kernelLinear(k);
      const got = encodeImage(cfg, w, patches, grid, op);
      const e = relErr(got.embeds, plain.embeds);
      assert.ok(e < 1e-5, `${k.name}: relative error ${e}`);
      got.deepstack.forEach((d, i) => assert.ok(relErr(d, plain.deepstack[i]!) < 1e-5, `${k.name} deepstack ${i}`));
      // a second image through the same op reuses the packed weights and grows the scratch
      const big = { t: 1, h: 8, w: 8 };
      const p2 = randomArray(new Rng(22), 64 * 1536, 1);
      assert.ok(relErr(encodeImage(cfg, w, p2, big, op).embeds, encodeImage(cfg, w, p2, big).embeds) < 1e-5, `${k.name} second image`);
    }
  });
}
