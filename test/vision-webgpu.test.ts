// An image answered on webgpu (Dawn; lavapipe on a machine without a GPU), the tower itself
// on the webgpu kernels (vision/kernel-tower.ts, async read-backs), and on wasm: the same
// greedy ids as ref and logits within float tolerance — the multimodal angles ride in the step's
// cos/sin table (kernels/webgpu/batch.ts); without them the first logits differ by ~1.6e-2
// on this fixture, with them by ~1e-7.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import { ImageParts } from '../src/frontend/images.js';
import { REPO_ROOT } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';

const JPG = readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg'));
const engines: Engine[] = [];
after(async () => { for (const e of engines) await e.close(); });

async function answer(kernels: 'ref' | 'wasm' | 'webgpu'): Promise<{ ids: readonly number[]; logits: Float32Array[] }> {
  const e = await Engine.load({ model: TINY_VISION, kernels, maxRunning: 2, prefixCache: false, specTokens: 0 });
  engines.push(e);
  const parts = new ImageParts();
  const req = await e.info.frontend.withPrompt({ messages: [{ role: 'user', content: `${parts.add(JPG, 'img')}what` }], images: parts, maxTokens: 8, temperature: 0, ignoreEos: true });
  const logits: Float32Array[] = [];
  const done = await e.complete({ ...req, captureLogits: (l) => logits.push(l.slice()) });
  assert.equal(e.vision!.encoded, 1, `${kernels}: the tower ran once`);
  return { ids: done.outputIds, logits };
}

test('webgpu and wasm: an image answered with ref\'s greedy ids and logits within 1e-5 of their scale', async () => {
  const ref = await answer('ref');
  for (const kernels of ['webgpu', 'wasm'] as const) {
    const got = await answer(kernels);
    assert.deepEqual(got.ids, ref.ids, kernels);
    ref.logits.forEach((l, step) => {
      const scale = Math.max(...l.map(Math.abs));
      const diff = Math.max(...l.map((x, i) => Math.abs(x - got.logits[step]![i]!)));
      assert.ok(diff <= 1e-5 * scale, `${kernels} step ${step}: max |Δ| ${diff} of ${scale}`);
    });
  }
});
