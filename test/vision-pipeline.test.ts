// From bytes to language-model rows: the release-checkpoint loader reads the same tower as an
// independent BF16 read, prepared images carry their token count and a pixel hash that is
// equal across lossless formats, and image embeddings land exactly on the pad rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadVisionModel } from '../src/vision/load.js';
import { prepareImage, spliceImageEmbeddings } from '../src/vision/pipeline.js';
import { encodeImage } from '../src/vision/tower.js';
import { expandImagePads } from '../src/vision/positions.js';
import { REPO_ROOT } from './paths.js';
import { TINY_VISION, fixtureVisionConfig, fixtureVisionWeights } from './vision-helpers.js';
import { encodePng, encodeWebpLossless } from './vision-encode.js';

const IMAGES = join(REPO_ROOT, 'test', 'fixtures', 'vision-images');

test('loadVisionModel: config, ids, preprocessing, mrope and weights of the fixture', () => {
  const vm = loadVisionModel(TINY_VISION);
  assert.ok(vm);
  assert.deepEqual(vm.cfg, fixtureVisionConfig());
  assert.deepEqual(vm.weights, fixtureVisionWeights(vm.cfg));
  assert.deepEqual(vm.tokens, { imageTokenId: 1003, videoTokenId: 1004, visionStartTokenId: 1000, visionEndTokenId: 1001 });
  assert.deepEqual(vm.mrope, { section: [2, 2, 0], interleaved: true });
  assert.equal(loadVisionModel(join(REPO_ROOT, 'models', 'tiny-think')), null, 'text-only model');
});

test('prepared image: grid, token count, pixel hash equal across PNG and WebP lossless', async () => {
  const vm = loadVisionModel(TINY_VISION)!;
  const [w, h] = [70, 45];
  const rgba = Uint8Array.from({ length: w * h * 4 }, (_, i) => (i % 4 === 3 ? 255 : (i * 29 + (i >> 7)) & 255));
  const pre = { ...vm.pre, minPixels: 1024 };
  const a = await prepareImage(await encodePng(rgba, w, h), vm.cfg, pre);
  const b = await prepareImage(await encodeWebpLossless(rgba, w, h), vm.cfg, pre);
  assert.deepEqual([a.grid, a.tokens, a.width, a.height], [{ t: 1, h: 2, w: 4 }, 2, 70, 45]); // 45×70 → 32×64
  assert.equal(a.hash, b.hash);
  assert.deepEqual(a.patches, b.patches);
  const c = await prepareImage(new Uint8Array(readFileSync(join(IMAGES, 'rgb-q90.jpg'))), vm.cfg, vm.pre);
  assert.notEqual(c.hash, a.hash);
  assert.deepEqual(c.grid, { t: 1, h: 14, w: 20 }); // 40×30 scaled up past 65,536 pixels: 224×320
});

test('image embeddings replace exactly the pad rows, in order', async () => {
  const vm = loadVisionModel(TINY_VISION)!;
  const img = await prepareImage(new Uint8Array(readFileSync(join(IMAGES, 'palette.png'))), vm.cfg, { ...vm.pre, minPixels: 1024 });
  const out = encodeImage(vm.cfg, vm.weights, img.patches, img.grid);
  assert.equal(out.tokens, img.tokens);
  const { imageTokenId: pad, visionStartTokenId: vs, visionEndTokenId: ve } = vm.tokens as { imageTokenId: number; visionStartTokenId: number; visionEndTokenId: number };
  const ids = expandImagePads([5, vs, pad, ve, 6, vs, pad, ve], pad, [img.grid, img.grid], 2);
  const hidden = vm.cfg.outHiddenSize;
  const embeds = new Float32Array(ids.length * hidden).fill(7);
  const second = out.embeds.map((v) => -v);
  spliceImageEmbeddings(embeds, hidden, ids, pad, [out.embeds, second]);
  const rowsOf = (id: number): number[] => ids.flatMap((x, i) => (x === id ? [i] : []));
  const padRows = rowsOf(pad);
  assert.equal(padRows.length, 2 * img.tokens);
  padRows.forEach((r, k) => {
    const src = k < img.tokens ? out.embeds : second;
    const j = k % img.tokens;
    assert.deepEqual(embeds.subarray(r * hidden, (r + 1) * hidden), src.subarray(j * hidden, (j + 1) * hidden));
  });
  for (const r of [...rowsOf(5), ...rowsOf(vs), ...rowsOf(ve)]) assert.ok(embeds.subarray(r * hidden, (r + 1) * hidden).every((v) => v === 7));
  assert.throws(() => spliceImageEmbeddings(embeds, hidden, ids, pad, [out.embeds]), /no image embedding/);
  assert.throws(() => spliceImageEmbeddings(embeds, hidden, ids, pad, [out.embeds, second, second]), /do not match the 3 image embeddings/);
});
