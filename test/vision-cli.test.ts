// `deltaserve generate --image FILE` (repeatable) on the tiny-vision fixture: the same ids as
// the library path (frontend.withPrompt + Engine.complete) with the same images; a file that
// is not an image is refused naming the file.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { ImageParts } from '../src/frontend/images.js';
import { REPO_ROOT } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';

const IMAGES = join(REPO_ROOT, 'test', 'fixtures', 'vision-images');
const FILES = [join(IMAGES, 'rgb-q90.jpg'), join(IMAGES, 'palette.png')];
const engines: Engine[] = [];
after(async () => { for (const e of engines) await e.close(); });

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('generate --image: the library path\'s ids with the same images', async () => {
  const r = cli(['generate', '--model', TINY_VISION, '--kernels', 'ref', '--prompt', 'what is it', ...FILES.flatMap((f) => ['--image', f]),
    '--max-tokens', '6', '--temperature', '0', '--json']);
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { prompt_ids: number[]; output_ids: number[] };
  const engine = await Engine.load({ model: TINY_VISION, kernels: 'ref', maxRunning: 2 });
  engines.push(engine);
  const parts = new ImageParts();
  const content = FILES.map((f) => parts.add(readFileSync(f), f)).join('') + 'what is it';
  const req = await engine.info.frontend.withPrompt({ messages: [{ role: 'user', content }], images: parts, maxTokens: 6, temperature: 0 });
  const done = await engine.complete(req);
  assert.deepEqual(out.prompt_ids, done.promptIds);
  assert.ok(out.prompt_ids.filter((id) => id === 1003).length > 2, 'two images, pads expanded');
  assert.deepEqual(out.output_ids, done.outputIds);
});

test('generate --image with a file that is not an image names the file', () => {
  const r = cli(['generate', '--model', TINY_VISION, '--kernels', 'ref', '--prompt', 'x', '--image', join(REPO_ROOT, 'package.json'), '--max-tokens', '2']);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--image .*package\.json: unsupported image format/);
  const raw = cli(['generate', '--model', TINY_VISION, '--raw', '--prompt', 'x', '--image', FILES[0]!]);
  assert.notEqual(raw.status, 0);
  assert.match(raw.stderr, /--image goes with --prompt/);
});
