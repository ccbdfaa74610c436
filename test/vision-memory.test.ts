// The vision tower in the memory plan: the scratch a tower pass allocates is what
// towerScratchFloats states; the resize bound covers every image the limits let through;
// planMemory takes the tower from the budget first and refuses one that cannot hold it,
// naming the tower and --max-image-pixels; Engine.load on the tiny-vision fixture prints the
// tower in the plan, refuses a budget too small for it, and a request whose image exceeds the
// planned size is a 400 at build time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AnyKernels, Tensor } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { KernelTower, towerPackedBytes, towerScratchFloats } from '../src/vision/kernel-tower.js';
import { maxResizedPixels, towerMemory } from '../src/vision/memory.js';
import { smartResize } from '../src/vision/preprocess.js';
import { DEFAULT_PREPROCESS } from '../src/vision/config.js';
import { type MemoryNeeds, formatPlan, planMemory } from '../src/engine/memory-plan.js';
import { Engine } from '../src/engine/engine.js';
import { ImageParts } from '../src/frontend/images.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT } from './paths.js';
import { encodePng } from './vision-encode.js';
import { TINY_VISION, fixtureVisionConfig, fixtureVisionWeights, randomArray } from './vision-helpers.js';

test('a tower packs the bytes towerPackedBytes counts when made; a tower pass allocates exactly the scratch towerScratchFloats states', async () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const ref = createRefKernels();
  let floats = 0;
  const counting: AnyKernels = Object.assign(Object.create(ref) as AnyKernels, {
    alloc: (n: number): Tensor => { floats += n; return ref.alloc(n); },
  });
  const grid = { t: 1, h: 8, w: 6 };
  let packed = 0;
  const allocWeight = counting.allocWeight.bind(counting);
  counting.allocWeight = (dtype, rows, cols) => { packed += rows * cols * (dtype === 'bf16' ? 2 : 4); return allocWeight(dtype, rows, cols); };
  const tower = new KernelTower(counting, cfg, w, { linearRows: 16 });
  // the matrices through allocWeight, the biases and norm weights as f32 tensors
  const vectorBytes = 4 * floats;
  assert.ok(vectorBytes > 0);
  assert.equal(packed + vectorBytes, towerPackedBytes(w), 'making the tower packs what towerPackedBytes counts');
  await tower.encode(randomArray(new Rng(1), 48 * 1536, 1), grid);
  assert.equal(packed + vectorBytes, towerPackedBytes(w), 'an encode packs nothing more');
  const want = Object.values(towerScratchFloats(cfg, 48, 16)).reduce((a, b) => a + b, 0);
  assert.equal(floats - vectorBytes / 4, want);
});

test('maxResizedPixels bounds smart_resize of every image within the pixel limit', () => {
  const pre = DEFAULT_PREPROCESS;
  const rng = new Rng(7);
  for (const limit of [1000, 50_000, 300_000, 4_000_000, 40_000_000]) {
    const bound = maxResizedPixels(pre, 32, limit);
    assert.ok(bound <= pre.maxPixels);
    for (let i = 0; i < 400; i++) {
      const aspect = Math.exp((2 * rng.next() - 1) * Math.log(200));
      const pixels = 1 + rng.next() * limit;
      const h = Math.max(1, Math.floor(Math.sqrt(pixels / aspect)));
      const wd = Math.max(1, Math.min(Math.floor(limit / h), Math.floor(h * aspect)));
      if (Math.max(h, wd) / Math.min(h, wd) > 200) continue;
      const [rh, rw] = smartResize(h, wd, 32, pre.minPixels, pre.maxPixels);
      assert.ok(rh * rw <= bound, `${wd}×${h} → ${rw}×${rh} > ${bound} (limit ${limit})`);
    }
  }
  assert.equal(maxResizedPixels(pre, 32, 89_478_485), pre.maxPixels, 'the default limit: the processor\'s max_pixels');
});

const NEEDS: MemoryNeeds = {
  weightBytes: 1e8, kvBytesPerToken: 8 * 1024, kvLayerBytesPerToken: 2048, slotBytes: 1e6, scratchRowBytes: 4e6, modelMaxContext: 32768,
};

test('planMemory: the tower comes out of the budget first; a budget that cannot hold it names the tower', () => {
  const cfg = fixtureVisionConfig();
  const vision = towerMemory(cfg, DEFAULT_PREPROCESS, fixtureVisionWeights(cfg), 89_478_485);
  const reserved = vision.packedWeightBytes + vision.activationBytes;
  const budget = reserved + 2e8;
  const plan = planMemory({ ...NEEDS, vision }, { prefixCache: true, pageSize: 16, budget: { bytes: budget } }, 8e9);
  const pools = plan.kvBytes + plan.runningStateBytes + plan.cacheStateBytes + plan.scratchBytes;
  assert.equal(plan.visionReservedBytes, reserved);
  assert.ok(pools + reserved <= budget, `${pools} + ${reserved} > ${budget}`);
  const without = planMemory(NEEDS, { prefixCache: true, pageSize: 16, budget: { bytes: budget } }, 8e9);
  assert.ok(without.kvTokens > plan.kvTokens, 'the tower leaves less for the KV cache');
  assert.match(formatPlan(plan), /vision tower: weights .*largest image \(65536 patches\)/);
  assert.doesNotMatch(formatPlan(without), /vision/);
  assert.throws(() => planMemory({ ...NEEDS, vision }, { prefixCache: true, pageSize: 16, budget: { bytes: reserved - 1 } }, 8e9),
    /cannot hold the vision tower: .* \(65536 patches, --max-image-pixels 89478485\); raise --memory-budget or lower --max-image-pixels/);
});

test('Engine.load: the plan shows the tower; too small a budget is refused at load; a larger image than planned is a 400', async () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const small = towerMemory(cfg, DEFAULT_PREPROCESS, w, 100_000);
  const big = towerMemory(cfg, DEFAULT_PREPROCESS, w, 89_478_485);
  const reservedBig = big.packedWeightBytes + big.activationBytes;
  await assert.rejects(Engine.load({ model: TINY_VISION, kernels: 'ref', memoryBudget: reservedBig }), /cannot hold the vision tower/);
  // the fixture's processor: min 65536 px, so a 40×30 image is resized to ~65536 px (64 patches of 32×32 → 256 patches of 16²)
  const e = await Engine.load({ model: TINY_VISION, kernels: 'ref', memoryBudget: reservedBig + 64e6, maxImagePixels: 100_000 });
  try {
    assert.match(formatPlan(e.memoryPlan!), new RegExp(`vision tower: .*largest image \\(${small.maxTokens} patches\\)`));
    assert.equal(e.vision!.maxTokens, small.maxTokens);
    const jpg = readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg'));
    const parts = new ImageParts();
    const req = await e.info.frontend.withPrompt({ messages: [{ role: 'user', content: `${parts.add(jpg, 'img')}what` }], images: parts, maxTokens: 2, temperature: 0 });
    const done = await e.complete(req);
    assert.equal(done.outputIds.length, 2, 'an image within the plan is answered');
  } finally {
    await e.close();
  }
  // a 600×600 image passes the frontend's default decode limit but not this engine's plan
  const tight = await Engine.load({ model: TINY_VISION, kernels: 'ref', memoryBudget: reservedBig + 64e6, maxImagePixels: 100_000 });
  try {
    const png = await encodePng(new Uint8Array(600 * 600 * 4).fill(200), 600, 600);
    const parts = new ImageParts();
    const req = await tight.info.frontend.withPrompt({ messages: [{ role: 'user', content: `${parts.add(png, 'img')}what` }], images: parts, maxTokens: 2, temperature: 0 });
    assert.throws(() => tight.generate(req), /image 1 \(600×600\) is \d+ patches; the memory plan holds the tower's encode of at most \d+ \(raise --max-image-pixels\)/);
  } finally {
    await tight.close();
  }
});
