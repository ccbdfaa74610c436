// The repo's vision fixture (test/fixtures/tiny-vision) is exactly what make-model writes for
// the tiny-vision shape, its config parses with the tower and the vision token ids, the
// tokenizer knows the vision tokens, and the text model runs from it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel } from '../src/tools/make-model.js';
import { planVisionTokens } from '../src/tools/vision-tokens.js';
import { loadModelConfig } from '../src/model/config.js';
import { loadModel } from '../src/model/model.js';
import { probePrompt } from '../src/model/probe.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { parsePreprocessConfig, parseVisionConfig, parseVisionTokens } from '../src/vision/config.js';
import { DeltaserveError } from '../src/util/errors.js';
import { REPO_ROOT } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-vision-fixture-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

test('fixture == make-model --shape tiny-vision --tokenizer models/tiny-think --mmproj f16 (byte for byte)', async () => {
  const out = join(ROOT, 'regen');
  const res = await makeModel({ shape: 'tiny-vision', dtype: 'bf16', seed: 0, out, tokenizer: join(REPO_ROOT, 'models', 'tiny-think'), layout: 'release', mmproj: 'F16' });
  assert.deepEqual(res.files, ['model.safetensors', 'mmproj-tiny-vision-F16.gguf']);
  const files = readdirSync(TINY_VISION).filter((f) => f !== 'README.md').sort();
  assert.deepEqual(readdirSync(out).sort(), files);
  for (const f of files) assert.ok(readFileSync(join(out, f)).equals(readFileSync(join(TINY_VISION, f))), `${f} differs: regenerate the fixture`);
});

test('fixture config: tower, token ids, preprocessor bounds; the text model runs', () => {
  const cfg = loadModelConfig(TINY_VISION);
  assert.equal(cfg.vision?.depth, 2);
  assert.equal(cfg.vision?.outHiddenSize, cfg.hiddenSize);
  assert.deepEqual(cfg.vision?.deepstackVisualIndexes, []);
  const outer = JSON.parse(readFileSync(join(TINY_VISION, 'config.json'), 'utf8')) as Record<string, unknown>;
  const ids = parseVisionTokens(outer);
  const tok = TextTokenizer.load(TINY_VISION);
  assert.deepEqual(tok.encode('<|vision_start|><|image_pad|><|image_pad|><|vision_end|>'),
    [ids.visionStartTokenId, ids.imageTokenId, ids.imageTokenId, ids.visionEndTokenId]);
  assert.equal(ids.videoTokenId, tok.encode('<|video_pad|>')[0]);
  const pre = parsePreprocessConfig(JSON.parse(readFileSync(join(TINY_VISION, 'preprocessor_config.json'), 'utf8')));
  assert.deepEqual(pre, { minPixels: 65536, maxPixels: 16777216, imageMean: [0.5, 0.5, 0.5], imageStd: [0.5, 0.5, 0.5] });
  const probe = probePrompt(loadModel(TINY_VISION, createRefKernels()), tok.encode('hello <|image_pad|> world'));
  assert.ok(probe.lastLogits.every(Number.isFinite));
});

test('vision tokens: existing ids kept, new ids only below the vocab', () => {
  const have = [{ id: 7, content: '<|image_pad|>' }];
  const plan = planVisionTokens(have, 10, 13);
  assert.deepEqual(plan.ids, { visionStart: 10, visionEnd: 11, imagePad: 7, videoPad: null });
  assert.deepEqual(plan.add.map((t) => t.content), ['<|vision_start|>', '<|vision_end|>', '<|vision_pad|>']);
});

test('vision_config errors name the field', () => {
  const base = { depth: 1, hidden_size: 32, num_heads: 2, intermediate_size: 64, out_hidden_size: 64, num_position_embeddings: 16 };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...base, depth: undefined }, /vision_config.*"depth" is missing/],
    [{ ...base, num_heads: 3 }, /"num_heads" \(3\) must divide hidden_size/],
    [{ ...base, num_heads: 16 }, /head dim 2; 2D rotary needs a multiple of 4/],
    [{ ...base, num_position_embeddings: 15 }, /"num_position_embeddings" \(15\) must be a square/],
    [{ ...base, deepstack_visual_indexes: [1] }, /"deepstack_visual_indexes" must be a list of block indexes in \[0, 1\)/],
    [{ ...base, hidden_act: 'relu' }, /"hidden_act" is "relu"/],
  ];
  for (const [vc, re] of cases) {
    assert.throws(() => parseVisionConfig({ vision_config: vc }), (e: unknown) => e instanceof DeltaserveError && re.test(e.message), JSON.stringify(vc));
  }
  assert.equal(parseVisionConfig({}), null);
  assert.throws(() => parsePreprocessConfig({ size: { shortest_edge: 10, longest_edge: 5 } }), /max_pixels.*must be ≥ min_pixels/);
  assert.throws(() => parsePreprocessConfig({ image_std: [0.5, 0, 0.5] }), /"image_std" must not be 0/);
});
