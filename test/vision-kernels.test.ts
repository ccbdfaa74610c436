// The tower on the kernel backends (vision/kernel-tower.ts) on ref and wasm: equal to the
// plain-TS tower within f32 accumulation error (the fixture's BF16 weights packed as bf16,
// random f32 weights as f32), a frame's queries split over several attention calls and the
// linears run over row blocks give the same bits as one call, a two-frame clip attends within each frame, and a second image on
// the same tower reuses the packed weights and grows the scratch; the 2D rotary as two rope
// passes is the plain tower's rotation bit for bit.
// test/vision-conformance.test.ts runs the same comparison on webgpu too.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { applyRotary, encodeImage, rotaryTables } from '../src/vision/tower.js';
import { rotaryAngles, rotaryPasses } from '../src/vision/grid.js';
import { KernelTower } from '../src/vision/kernel-tower.js';
import type { VisionConfig } from '../src/vision/config.js';
import type { VisionWeights } from '../src/vision/weights.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { Rng } from '../src/util/rng.js';
import { fixtureVisionConfig, fixtureVisionWeights, randomArray, randomVisionWeights } from './vision-helpers.js';
import { relErr } from './numeric.js';

const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());

const cases: [string, () => [VisionConfig, VisionWeights]][] = [
  ['fixture (bf16 weights)', () => { const c = fixtureVisionConfig(); return [c, fixtureVisionWeights(c)]; }],
  ['deepstack (f32 weights)', () => { const c: VisionConfig = { ...fixtureVisionConfig(), depth: 3, deepstackVisualIndexes: [0, 2] }; return [c, randomVisionWeights(c, 3)]; }],
  ['exact GELU in the blocks (hidden_act gelu)', () => { const c: VisionConfig = { ...fixtureVisionConfig(), hiddenAct: 'gelu' }; return [c, fixtureVisionWeights(c)]; }],
];

for (const [name, make] of cases) {
  test(`${name}: the kernel tower (ref, wasm) == plain tower`, async () => {
    const [cfg, w] = make();
    const grid = { t: 1, h: 6, w: 4 };
    const patches = randomArray(new Rng(21), 24 * 1536, 1);
    const plain = encodeImage(cfg, w, patches, grid);
    for (const k of [createRefKernels(), wasm]) {
      const tower = new KernelTower(k, cfg, w);
      const got = await tower.encode(patches, grid);
      assert.equal(got.tokens, plain.tokens);
      const e = relErr(got.embeds, plain.embeds);
      assert.ok(e < 1e-5, `${k.name}: relative error ${e}`);
      assert.equal(got.deepstack.length, plain.deepstack.length);
      got.deepstack.forEach((d, i) => assert.ok(relErr(d, plain.deepstack[i]!) < 1e-5, `${k.name} deepstack ${i}`));
      const big = { t: 1, h: 8, w: 8 };
      const p2 = randomArray(new Rng(22), 64 * 1536, 1);
      assert.ok(relErr((await tower.encode(p2, big)).embeds, encodeImage(cfg, w, p2, big).embeds) < 1e-5, `${k.name} second image`);
    }
  });
}

test('attention split over several calls per frame, linears and MLP over row blocks: the same bits as one call (ref, wasm)', async () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const grid = { t: 1, h: 8, w: 6 }; // 48 queries: calls of 7 rows split them unevenly
  const patches = randomArray(new Rng(5), 48 * 1536, 1);
  for (const k of [createRefKernels(), wasm]) {
    const whole = await new KernelTower(k, cfg, w).encode(patches, grid);
    const split = await new KernelTower(k, cfg, w, { scoresPerCall: 7 * 48 }).encode(patches, grid);
    assert.deepEqual(split.embeds, whole.embeds, `${k.name}: attention split`);
    const blocks = await new KernelTower(k, cfg, w, { linearRows: 5 }).encode(patches, grid);
    assert.deepEqual(blocks.embeds, whole.embeds, `${k.name}: row blocks of 5`);
  }
});

test('a two-frame clip: each frame attends within itself, as the plain tower does', async () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const grid = { t: 2, h: 4, w: 4 };
  const patches = randomArray(new Rng(9), 32 * 1536, 1);
  const plain = encodeImage(cfg, w, patches, grid);
  const got = await new KernelTower(wasm, cfg, w).encode(patches, grid);
  assert.ok(relErr(got.embeds, plain.embeds) < 1e-5, `relative error ${relErr(got.embeds, plain.embeds)}`);
});

test('the 2D rotary as two plain rope passes (grid.ts rotaryPasses) == the plain tower\'s rotation, bit for bit (ref kernels)', () => {
  const cfg = fixtureVisionConfig();
  const d = cfg.hiddenSize;
  for (const grid of [{ t: 1, h: 6, w: 4 }, { t: 2, h: 4, w: 8 }]) {
    const n = grid.t * grid.h * grid.w;
    const qkv = randomArray(new Rng(31), n * 3 * d, 2);
    const want = Float32Array.from(qkv);
    const angles = rotaryTables(rotaryAngles(cfg, grid));
    applyRotary(want, n, 3 * d, 0, cfg.numHeads, cfg.headDim, angles);
    applyRotary(want, n, 3 * d, d, cfg.numHeads, cfg.headDim, angles);
    const got = Float32Array.from(qkv);
    const ref = createRefKernels();
    for (const r of rotaryPasses(cfg, grid)) ref.rope(got, r.positions, n, 2 * cfg.numHeads, cfg.headDim, r.table, 3 * d);
    assert.deepEqual(got, want, `${grid.t}×${grid.h}×${grid.w}`);
    assert.notDeepEqual(got, qkv, 'the rotation moved something');
  }
});
