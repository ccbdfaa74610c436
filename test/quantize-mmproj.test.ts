// `deltaserve quantize` writes a release checkpoint's vision tower beside the text GGUF as
// llama.cpp's projector (mmproj-<name>-F16.gguf) and says where. Two writers must agree: the
// file quantize derives from the fixture's safetensors is byte for byte the one make-model
// wrote from its generated values (the fixture's mmproj); the pair then answers an image.
// A text-only checkpoint gets none, and --no-mmproj skips it.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { readGgufHeader } from '../src/checkpoint/gguf-file.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';
import { answerImage } from './vision-gguf-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-quantize-mmproj-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

function run(args: string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), 'quantize', '--threads', '1', ...args], { encoding: 'utf8' });
}

/** Quantize into `--out`'s directory (made first). */
function quantize(args: string[]): { out: string; mmproj: string | null; stderr: string } {
  mkdirSync(dirname(args[args.indexOf('--out') + 1]!), { recursive: true });
  const r = run(args);
  assert.equal(r.status, 0, r.stderr);
  return { ...(JSON.parse(r.stdout) as { out: string; mmproj: string | null }), stderr: r.stderr };
}

test('quantize writes the tower beside the GGUF, the same bytes make-model wrote, and the pair answers an image', async () => {
  const dir = join(ROOT, 'vision');
  const r = quantize(['--model', TINY_VISION, '--out', join(dir, 'tiny-vision-Q8_0.gguf'), '--type', 'q8_0']);
  const written = join(dir, 'mmproj-tiny-vision-F16.gguf');
  assert.equal(r.mmproj, written);
  assert.match(r.stderr, new RegExp(`the vision tower is in ${written.replace(/[.]/g, '\\.')} \\(F16`));
  assert.deepEqual(readFileSync(written), readFileSync(join(TINY_VISION, 'mmproj-tiny-vision-F16.gguf')), 'byte for byte the fixture\'s mmproj');
  // llama.cpp's converter types: matrices F16 but the position table F32 (clip.cpp
  // interpolates it with ggml_interpolate, which asserts F32), vectors F32
  const types = new Map(readGgufHeader(written).tensors.map((t) => [t.name, { type: t.type, dims: t.shape.length }]));
  assert.equal(types.get('v.position_embd.weight')?.type, 'F32');
  for (const [name, t] of types) {
    if (name !== 'v.position_embd.weight') assert.equal(t.type, t.dims >= 2 ? 'F16' : 'F32', name);
  }
  const e = await Engine.load({ model: r.out, mmproj: written, kernels: 'ref', maxRunning: 1, specTokens: 0 });
  try {
    const a = await answerImage(e, readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgba.png')), 'look', 4);
    assert.equal(a.ids.length, 4);
    assert.ok(a.prompt.filter((id) => id === 1003).length > 1, 'image pads expanded');
  } finally {
    await e.close();
  }
});

test('no projector for a text-only checkpoint, nor with --no-mmproj; --name names it; a missing --out directory is named', () => {
  const missing = run(['--model', TINY_VISION, '--out', join(ROOT, 'absent', 'x.gguf'), '--type', 'bf16']);
  assert.notEqual(missing.status, 0);
  assert.match(missing.stderr, /--out .*absent\/x\.gguf: the directory .*absent does not exist/);
  const text = quantize(['--model', TINY_THINK(), '--out', join(ROOT, 'text', 'tt.gguf'), '--type', 'bf16']);
  assert.equal(text.mmproj, null);
  assert.deepEqual(readdirSync(join(ROOT, 'text')), ['tt.gguf']);
  const skipped = quantize(['--model', TINY_VISION, '--out', join(ROOT, 'skip', 'tv.gguf'), '--type', 'bf16', '--no-mmproj']);
  assert.equal(skipped.mmproj, null);
  assert.deepEqual(readdirSync(join(ROOT, 'skip')), ['tv.gguf']);
  const named = quantize(['--model', TINY_VISION, '--out', join(ROOT, 'named', 'tv.gguf'), '--type', 'bf16', '--name', 'Pix']);
  assert.ok(named.mmproj?.endsWith('mmproj-Pix-F16.gguf') && existsSync(named.mmproj));
});
