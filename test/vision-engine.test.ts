// An image answered end to end in the engine (tiny-vision fixture): the image changes the
// answer; ref and wasm agree; a prefix hit over an image is bit-exact with a cold run (turn 2
// with the same image hits; a different image of the same size misses); MTP on == off with
// images; a text-only model refuses images; the tower runs only for images whose rows reach
// a forward.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Engine } from '../src/engine/engine.js';
import type { EngineOptions } from '../src/engine/engine-options.js';
import { ImageParts } from '../src/frontend/images.js';
import { REPO_ROOT, TINY_THINK } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';
import { encodePng } from './vision-encode.js';

/** A 64×48 PNG whose pixels depend on `seed`. */
async function png(seed: number): Promise<Uint8Array> {
  const rgba = new Uint8Array(64 * 48 * 4).map((_, i) => (i % 4 === 3 ? 255 : (i * 37 + seed * 101) % 251));
  return encodePng(rgba, 64, 48);
}

const IMAGES = join(REPO_ROOT, 'test', 'fixtures', 'vision-images');
const JPG = readFileSync(join(IMAGES, 'rgb-q90.jpg'));
const PNG = readFileSync(join(IMAGES, 'rgba.png'));
const engines: Engine[] = [];
after(async () => { for (const e of engines) await e.close(); });

async function load(opts: EngineOptions): Promise<Engine> {
  const e = await Engine.load({ model: TINY_VISION, kernels: 'ref', maxRunning: 4, specTokens: 0, ...opts });
  engines.push(e);
  return e;
}

type Turn = { role: string; content: string | Uint8Array[] };

/** Greedy ids and cached-token count of a chat whose user turns may hold images. */
async function answer(e: Engine, turns: readonly Turn[], maxTokens = 12): Promise<{ ids: readonly number[]; cached: number; prompt: readonly number[]; logits: Float32Array[]; drafted: number }> {
  const parts = new ImageParts();
  const messages = turns.map((t, i) => ({
    role: t.role,
    content: typeof t.content === 'string' ? t.content : t.content.map((b, j) => `see ${parts.add(b, `messages[${i}].content[${j}]`)}`).join(' '),
  }));
  const req = await e.info.frontend.withPrompt({ messages, images: parts, maxTokens, temperature: 0, ignoreEos: true });
  const logits: Float32Array[] = [];
  const done = await e.complete({ ...req, captureLogits: (l) => logits.push(l.slice()) });
  return { ids: done.outputIds, cached: done.usage.cachedTokens, prompt: done.promptIds, logits, drafted: done.spec?.drafted ?? 0 };
}

test('an image is answered; it changes the answer; ref == wasm', async () => {
  const ref = await load({ prefixCache: false });
  const a = await answer(ref, [{ role: 'user', content: [JPG] }]);
  const b = await answer(ref, [{ role: 'user', content: [PNG] }]);
  assert.equal(a.ids.length, 12);
  assert.ok(a.prompt.filter((id) => id === 1003).length > 1, 'pads expanded');
  assert.notDeepEqual(a.logits[0], b.logits[0], 'a different image gives different logits');
  const text = await answer(ref, [{ role: 'user', content: 'see' }]);
  assert.notDeepEqual(a.logits[0]!.subarray(0, 8), text.logits[0]!.subarray(0, 8));
  assert.equal(ref.vision!.encoded, 2);
  const wasm = await load({ prefixCache: false, kernels: 'wasm' });
  const w = await answer(wasm, [{ role: 'user', content: [JPG] }]);
  assert.deepEqual(w.ids, a.ids, 'wasm == ref greedy ids');
  const scale = Math.max(...a.logits[0]!.map(Math.abs));
  const diff = Math.max(...a.logits[0]!.map((x, i) => Math.abs(x - w.logits[0]![i]!)));
  assert.ok(diff <= 1e-3 * scale, `wasm logits within 1e-3 of ref (max |Δ| ${diff} of ${scale})`);
});

test('prefix cache: same image hits bit-exact (turn 1 again, turn 2); a different image misses', async () => {
  const cold = await load({ prefixCache: false });
  const warm = await load({});
  const t1: Turn[] = [{ role: 'user', content: [JPG] }];
  const first = await answer(warm, t1);
  const again = await answer(warm, t1);
  assert.deepEqual(again.logits, first.logits, 'whole-prompt hit: bit-exact logits');
  assert.ok(again.cached > first.prompt.indexOf(1001), `whole image cached (${again.cached})`);
  const t2: Turn[] = [...t1, { role: 'assistant', content: 'fine' }, { role: 'user', content: [JPG] }];
  const hot2 = await answer(warm, t2);
  const cold2 = await answer(cold, t2);
  assert.deepEqual(hot2.logits, cold2.logits, 'turn 2: hit == cold, bit-exact logits');
  assert.ok(hot2.cached > first.prompt.indexOf(1001), `turn 2 hits past the first image (${hot2.cached})`);
  // two images of one size (same pad count): the second misses at its first pad
  const [x, y] = [await png(1), await png(2)];
  const px = await answer(warm, [{ role: 'user', content: [x] }]);
  const py = await answer(warm, [{ role: 'user', content: [y] }]);
  assert.deepEqual(px.prompt, py.prompt, 'same ids: only the pixels differ');
  assert.ok(py.cached <= py.prompt.indexOf(1003), `another image is a miss at its first pad (${py.cached})`);
  assert.deepEqual(py.logits, (await answer(cold, [{ role: 'user', content: [y] }])).logits);
  assert.ok((await answer(warm, [{ role: 'user', content: [x] }])).cached === px.prompt.length, 'the first one still hits whole');
});

test('MTP on == off with images', async () => {
  const off = await load({ prefixCache: false });
  const on = await load({ prefixCache: false, specTokens: 2 });
  const turns: Turn[] = [{ role: 'user', content: [JPG, PNG] }];
  const [a, b] = [await answer(on, turns, 24), await answer(off, turns, 24)];
  assert.deepEqual(a.ids, b.ids);
  assert.deepEqual(a.logits, b.logits, 'MTP on == off: bit-exact logits');
  assert.ok(a.drafted > 0, 'drafts were made');
});

test('a text-only model refuses images, naming the part', async () => {
  const text = await Engine.load({ model: TINY_THINK(), kernels: 'ref', maxRunning: 2 });
  engines.push(text);
  await assert.rejects(answer(text, [{ role: 'user', content: [JPG] }]), /messages\[0\]\.content\[0\]: this model is text-only/);
});

test('the tower runs only for images whose rows reach a forward (not for prefix-cache rows)', async () => {
  const e = await load({ prefixCache: false });
  const parts = new ImageParts();
  const req = await e.info.frontend.withPrompt({ messages: [{ role: 'user', content: `see ${parts.add(JPG, 'img')} now` }], images: parts, maxTokens: 1 });
  const ids = e.info.frontend.withPromptIds(req).promptIds;
  const v = e.vision!.requestVision(ids, req.visionImages!);
  const first = ids.indexOf(e.vision!.imageTokenId);
  const last = ids.lastIndexOf(e.vision!.imageTokenId);
  await e.vision!.encodeRows(v, 0, first); // text rows before the image
  await e.vision!.encodeRows(v, last + 1, ids.length - last - 1); // text rows after it (as after a prefix hit over the image)
  assert.equal(e.vision!.encoded, 0, 'no image row: no encode');
  assert.throws(() => e.vision!.rows(v, first, 1, e.info.config.hiddenSize), /was not encoded before its rows/);
  await e.vision!.encodeRows(v, last, 1);
  assert.equal(e.vision!.encoded, 1);
  assert.ok(v.encoded[0]);
});
