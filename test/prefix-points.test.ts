// Where the prefix cache snapshots: prompt points are multiples of 64 (message ends and
// the prompt end rounded down, interval multiples), generated points interval multiples;
// every
// message boundary of a chat prompt is found by rendering its message prefixes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSnapshotPoint, nextSnapshotPoint, promptSnapshotPoints, type PrefixContext } from '../src/engine/prefix.js';
import { messageBoundaries } from '../src/engine/request-builder.js';
import type { Request } from '../src/engine/request.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { renderChat } from '../src/tokenizer/chat.js';
import { TINY_THINK } from './paths.js';

const ctx = { interval: 256 } as PrefixContext;
const req = (promptLength: number, boundaries: number[]): Request =>
  ({ promptIds: new Array<number>(promptLength).fill(1), snapshotPoints: promptSnapshotPoints(boundaries, promptLength) }) as unknown as Request;

test('snapshot points: aligned in the prompt, interval multiples after it; chunks end at the next one', () => {
  assert.deepEqual([...promptSnapshotPoints([70, 130, 200], 300)].sort((a, b) => a - b), [64, 128, 192, 256]);
  assert.deepEqual([...promptSnapshotPoints([], 128)].sort((a, b) => a - b), [64, 128], 'prompt end, and below its last token');
  assert.deepEqual([...promptSnapshotPoints([10], 40)], [], 'nothing below 64');
  const r = req(600, [100, 330]);
  const points = Array.from({ length: 1200 }, (_, p) => p).filter((p) => isSnapshotPoint(ctx, r, p));
  assert.deepEqual(points, [64, 256, 320, 512, 576, 768, 1024], 'message ends 100 → 64, 330 → 320, prompt end 600 → 576');
});

test('next snapshot point', () => {
  const r = req(600, [100, 330]);
  assert.equal(nextSnapshotPoint(ctx, r, 0), 64);
  assert.equal(nextSnapshotPoint(ctx, r, 64), 256);
  assert.equal(nextSnapshotPoint(ctx, r, 256), 320);
  assert.equal(nextSnapshotPoint(ctx, r, 600), 768);
});

test('message boundaries: the end of every message whose rendering is a prefix of the prompt', () => {
  const tok = TextTokenizer.load(TINY_THINK());
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is 1 + 1?' },
    { role: 'assistant', content: '2' },
    { role: 'user', content: 'And 2 + 2?' },
  ];
  const ctxReq = { tokenizer: tok } as Parameters<typeof messageBoundaries>[0];
  const opts = { addGenerationPrompt: true, enableThinking: true };
  const ids = tok.encode(renderChat(tok.chatTemplate!, messages, opts));
  const got = messageBoundaries(ctxReq, messages, ids, { ...opts, addGenerationPrompt: false });
  const ends = messages.map((_, i) => tok.encode(messages.slice(0, i + 1).map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('')).length);
  // the assistant turn renders differently once a user turn follows (reasoning dropped),
  // so its prefix may or may not qualify; the others always do
  for (const i of [0, 1, 3]) assert.ok(got.includes(ends[i]!), `message ${i} ends at ${ends[i]}: got ${JSON.stringify(got)}`);
  assert.ok(got.every((b) => b <= ids.length && ids.length > 0));
});
