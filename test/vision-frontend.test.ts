// Chat messages with images → the template's placeholder expanded to each image's token
// count, the split points moved with it, and the decoded images in order; refusals name the
// part at fault (text-only model, corrupt bytes, too many images).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PromptFrontend } from '../src/frontend/frontend.js';
import { ImageParts } from '../src/frontend/images.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { loadVisionModel } from '../src/vision/load.js';
import { REPO_ROOT } from './paths.js';
import { TINY_VISION } from './vision-helpers.js';

const IMAGE = readFileSync(join(REPO_ROOT, 'test', 'fixtures', 'vision-images', 'rgb-q90.jpg'));

function frontend(vision: boolean): PromptFrontend {
  const vm = loadVisionModel(TINY_VISION)!;
  return new PromptFrontend(TextTokenizer.load(TINY_VISION), {
    vocabSize: 1024, maxContext: 4096, modelType: 'qwen3_5', vision: vision ? { cfg: vm.cfg, pre: vm.pre, tokens: vm.tokens } : null,
  });
}

test('an image part becomes <|vision_start|> pads×n <|vision_end|>; split points move with it', async () => {
  const fe = frontend(true);
  const parts = new ImageParts();
  const messages = [
    { role: 'user', content: `look ${parts.add(IMAGE, 'messages[0].content[1]')} and <|image_pad|> typed` },
    { role: 'assistant', content: 'ok' },
    { role: 'user', content: `again ${parts.add(IMAGE, 'messages[2].content[1]')}` },
  ];
  const p = await fe.preparePrompt({ messages, images: parts });
  assert.equal(p.images?.length, 2);
  const n = p.images![0]!.tokens;
  assert.ok(n > 1);
  const pads = p.ids.filter((id) => id === 1003).length;
  assert.equal(pads, 2 * n, 'typed <|image_pad|> text stays plain text');
  const first = p.ids.indexOf(1000);
  assert.equal(p.ids[first + n + 1], 1001, 'the pad run is exactly n long');
  // the same conversation as text (no images): its split points, moved by 2(n − 1)
  const plain = fe.prompt({ messages: messages.map((m) => ({ ...m, content: m.content.split(parts.sentinel).join('X') })) });
  assert.equal(p.boundaries.length, plain.boundaries.length);
  assert.ok(p.boundaries.length >= 2);
  // each split point sits after the same token as in the text twin (a message end), and
  // the ids after it are the same up to the next image
  p.boundaries.forEach((b, i) => {
    const pb = plain.boundaries[i]!;
    assert.equal(p.ids[b - 1], plain.ids[pb - 1], `split ${i}`);
    assert.deepEqual(p.ids.slice(b, b + 3), plain.ids.slice(pb, pb + 3), `after split ${i}`);
  });
  assert.equal(p.images![0]!.hash, p.images![1]!.hash);
});

test('refusals name the part: text-only model, corrupt image, too many images', async () => {
  const parts = new ImageParts();
  const messages = [{ role: 'user', content: `x ${parts.add(IMAGE, 'messages[0].content[1]')}` }];
  await assert.rejects(frontend(false).preparePrompt({ messages, images: parts }), /messages\[0\]\.content\[1\]: this model is text-only/);
  const bad = new ImageParts();
  const cut = [{ role: 'user', content: `x ${bad.add(IMAGE.subarray(0, IMAGE.length / 2), 'messages[0].content[2]')}` }];
  await assert.rejects(frontend(true).preparePrompt({ messages: cut, images: bad }), (e: Error) => e.message.startsWith('messages[0].content[2]'));
  const two = new ImageParts();
  const many = [{ role: 'user', content: `${two.add(IMAGE, 'a')} ${two.add(IMAGE, 'b')}` }];
  await assert.rejects(frontend(true).preparePrompt({ messages: many, images: two }, { maxImages: 1, maxImagePixels: 1e9 }), /b: a request takes at most 1 images \(the server's --max-images\); this one has 2\. Send fewer .*earlier turns.*larger --max-images/);
  await assert.rejects(frontend(true).preparePrompt({ messages, images: parts }, { maxImages: 4, maxImagePixels: 100 }),
    (e: Error) => e.message.startsWith('messages[0].content[1]') && /pixels|limit/i.test(e.message));
  assert.throws(() => frontend(true).withPromptIds({ messages, images: parts }), /async path/);
});
