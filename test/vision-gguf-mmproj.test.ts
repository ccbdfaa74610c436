// `--mmproj FILE`: the vision tower from llama.cpp's projector GGUF beside a text GGUF or a
// model directory. Two paths that must agree: the fixture's text GGUF + an F32 mmproj of its
// tower answer an image with the same logits, bit for bit, as the safetensors directory
// (same weights); the fixture's F16 mmproj gives the same greedy ids. A hub `:QUANT`
// reference loads its recorded projector; --no-mmproj loads none; a projector that does not
// fit the text model is an error naming both files and the mismatch.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import type { EngineOptions } from '../src/engine/engine-options.js';
import { writeMmproj } from '../src/tools/mmproj-writer.js';
import { DEFAULT_PREPROCESS } from '../src/vision/config.js';
import { engineOptions } from '../src/cli/engine-flags.js';
import { resolveModel } from '../src/hub/resolve.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { TINY_VISION, fixtureVisionConfig } from './vision-helpers.js';
import { answerImage, fixtureF32Mmproj, fixtureTextGguf } from './vision-gguf-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-gguf-mmproj-'));
const JPG = readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg'));
const F16_MMPROJ = join(TINY_VISION, 'mmproj-tiny-vision-F16.gguf');
const engines: Engine[] = [];
let textGguf = '';
let f32Mmproj = '';

before(async () => {
  textGguf = await fixtureTextGguf(ROOT);
  f32Mmproj = await fixtureF32Mmproj(ROOT);
});
after(async () => {
  for (const e of engines) await e.close();
  rmSync(ROOT, { recursive: true, force: true });
});

async function load(opts: EngineOptions): Promise<Engine> {
  const e = await Engine.load({ kernels: 'ref', maxRunning: 2, specTokens: 0, prefixCache: false, ...opts });
  engines.push(e);
  return e;
}

test('text GGUF + F32 mmproj == the safetensors directory, bit for bit; F16 mmproj: same greedy ids', async () => {
  const dir = await answerImage(await load({ model: TINY_VISION }), JPG, 'what is this');
  const gguf = await answerImage(await load({ model: textGguf, mmproj: f32Mmproj }), JPG, 'what is this');
  assert.deepEqual(gguf.prompt, dir.prompt, 'same prompt ids (placeholders from the GGUF vocabulary)');
  assert.ok(gguf.prompt.filter((id) => id === 1003).length > 1, 'image pads expanded');
  assert.deepEqual(gguf.ids, dir.ids, 'same greedy ids');
  assert.deepEqual(gguf.logits, dir.logits, 'same logits bit for bit');
  const f16 = await answerImage(await load({ model: textGguf, mmproj: F16_MMPROJ }), JPG, 'what is this');
  assert.deepEqual(f16.ids, dir.ids, 'F16 mmproj: same greedy ids');
  // a directory with --mmproj takes the projector's tower (here the same weights)
  const both = await answerImage(await load({ model: TINY_VISION, mmproj: f32Mmproj }), JPG, 'what is this');
  assert.deepEqual(both.logits, dir.logits);
});

test('without a projector a text GGUF refuses images; --no-mmproj drops a directory\'s tower', async () => {
  const bare = await load({ model: textGguf });
  assert.equal(bare.vision, null);
  await assert.rejects(answerImage(bare, JPG, 'x'), /text-only .*without --mmproj/);
  const none = await load({ model: TINY_VISION, mmproj: false });
  assert.equal(none.vision, null);
});

test('a projector that does not fit is an error naming both files and the mismatch', async () => {
  const narrow = join(ROOT, 'mmproj-narrow-F32.gguf');
  const cfg = { ...fixtureVisionConfig(), outHiddenSize: 32 };
  await writeMmproj(narrow, { cfg, pre: DEFAULT_PREPROCESS, name: 'narrow', matrixType: 'F32' },
    (_, shape) => new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.01));
  await assert.rejects(load({ model: textGguf, mmproj: narrow }),
    (e: Error) => e.message.includes(narrow) && e.message.includes(textGguf) && /projection_dim\b.* 32, the text hidden size is 64/.test(e.message));
  await assert.rejects(load({ model: TINY_THINK(), mmproj: f32Mmproj }), /mmproj .*mmproj-tiny-vision-F32\.gguf does not fit the text model .*tiny-think: .*256/);
  await assert.rejects(load({ model: textGguf, mmproj: join(ROOT, 'absent.gguf') }), /mmproj file not found: .*absent\.gguf/);
  await assert.rejects(load({ model: TINY_VISION, mmproj: textGguf }), /general\.architecture is "qwen35", expected "clip"/);
});

test('CLI flags: --mmproj is made absolute, --no-mmproj is false, both together is an error', () => {
  assert.equal(engineOptions({ mmproj: 'x/mmproj.gguf' }).mmproj, join(process.cwd(), 'x', 'mmproj.gguf'));
  assert.equal(engineOptions({ 'no-mmproj': true }).mmproj, false);
  assert.equal('mmproj' in engineOptions({}), false);
  assert.throws(() => engineOptions({ mmproj: 'a.gguf', 'no-mmproj': true }), /--mmproj and --no-mmproj exclude each other/);
});

test('hub name org/name:QUANT loads the projector recorded with it (or the only one); --no-mmproj skips it', async () => {
  const cache = join(ROOT, 'hub');
  const commit = 'c'.repeat(40);
  const repo = join(cache, 'models--TestOrg--Tiny-Vision-GGUF');
  const snap = join(repo, 'snapshots', commit);
  mkdirSync(snap, { recursive: true });
  mkdirSync(join(repo, 'refs'));
  writeFileSync(join(repo, 'refs', 'main'), commit);
  symlinkSync(textGguf, join(snap, 'Tiny-Vision-BF16.gguf'));
  symlinkSync(f32Mmproj, join(snap, 'mmproj-F32.gguf'));
  const saved = { cache: process.env['HF_HUB_CACHE'], offline: process.env['HF_HUB_OFFLINE'] };
  process.env['HF_HUB_CACHE'] = cache;
  process.env['HF_HUB_OFFLINE'] = '1';
  try {
    const name = 'TestOrg/Tiny-Vision-GGUF:BF16';
    assert.deepEqual(await resolveModel(name), { path: join(snap, 'Tiny-Vision-BF16.gguf'), mmproj: join(snap, 'mmproj-F32.gguf') },
      'no record (files from another tool): the snapshot\'s only projector');
    writeFileSync(join(repo, 'deltaserve.json'), JSON.stringify({ gguf: [{ commit, quant: 'BF16', parts: ['Tiny-Vision-BF16.gguf'], mmproj: null }] }));
    assert.equal((await resolveModel(name)).mmproj, null, 'a record without a projector: none');
    writeFileSync(join(repo, 'deltaserve.json'), JSON.stringify({ gguf: [{ commit, quant: 'BF16', parts: ['Tiny-Vision-BF16.gguf'], mmproj: 'mmproj-F32.gguf' }] }));
    const dir = await answerImage(await load({ model: TINY_VISION }), JPG, 'hub');
    const hub = await answerImage(await load({ model: name }), JPG, 'hub');
    assert.deepEqual(hub.logits, dir.logits, 'the hub name loads its projector');
    assert.equal((await load({ model: name, mmproj: false })).vision, null);
  } finally {
    for (const [k, v] of [['HF_HUB_CACHE', saved.cache], ['HF_HUB_OFFLINE', saved.offline]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});
