// Where a prompt splits and snapshots (prefix.ts, message-ends.ts): chunks end at multiples
// of the chunk, at every message end and at the prompt's end; snapshots at the first and
// last message ends, the prompt's end and interval multiples; the cache key marks the
// request's own splits; message ends come from the template's end-of-message marker, at the
// same places in turn 1 and turn 2 of a conversation (tools in the preamble: server-prefix).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSnapshotPoint, lastSplitBy, nextSnapshotPoint, prefixKey, promptSnapshotPoints, promptSplits, type PrefixContext } from '../src/engine/prefix.js';
import { markerEnds, markerRest, messageEndMarker, messageEnds } from '../src/frontend/message-ends.js';
import type { Request } from '../src/engine/request.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { renderChat } from '../src/frontend/chat-template.js';
import { stateLayout } from '../src/model/model.js';
import { loadModelConfig } from '../src/model/config.js';
import { TINY_THINK } from './paths.js';

const ctx = { interval: 256, chunk: 64 } as PrefixContext;
const req = (promptLength: number, ends: number[]): Request => {
  const promptIds = Array.from({ length: promptLength }, (_, i) => i % 50);
  return { promptIds, tokens: [...promptIds], splits: promptSplits(ends, promptLength), snapshotPoints: promptSnapshotPoints(ends, promptLength, 64) } as unknown as Request;
};

test('the chunk size comes from the model layout (one definition)', () => {
  assert.equal(stateLayout(loadModelConfig(TINY_THINK())).chunk, 64);
});

test('split and snapshot points: message ends exactly, the prompt end, interval multiples', () => {
  assert.deepEqual(promptSplits([70, 130, 0, 700, 130, 200], 300), [70, 130, 200, 300], 'inside the prompt, sorted, unique, with the end');
  assert.deepEqual([...promptSnapshotPoints([70, 130, 200], 300, 64)].sort((a, b) => a - b), [70, 200, 256, 300],
    'first and last message ends, the prompt end and the multiple of 64 below it');
  assert.deepEqual([...promptSnapshotPoints([], 128, 64)].sort((a, b) => a - b), [64, 128]);
  assert.deepEqual([...promptSnapshotPoints([], 40, 64)], [40]);
  const r = req(600, [100, 330, 450]);
  const points = Array.from({ length: 1200 }, (_, p) => p).filter((p) => isSnapshotPoint(ctx, r, p));
  assert.deepEqual(points, [100, 256, 450, 512, 576, 600, 768, 1024]);
  assert.equal(nextSnapshotPoint(ctx, r, 0), 100);
  assert.equal(nextSnapshotPoint(ctx, r, 100), 256);
  assert.equal(nextSnapshotPoint(ctx, r, 512), 576);
  assert.equal(nextSnapshotPoint(ctx, r, 576), 600);
  assert.equal(nextSnapshotPoint(ctx, r, 600), 768);
});

test('a chunk that must stop by a budget ends at the last split point before it', () => {
  const r = req(600, [100, 330]);
  assert.equal(lastSplitBy(r, 0, 120, 64), 100);
  assert.equal(lastSplitBy(r, 100, 150, 64), 128);
  assert.equal(lastSplitBy(r, 100, 120, 64), 100, 'none: no progress');
  assert.equal(lastSplitBy(r, 256, 340, 64), 330);
});

test('the cache key marks the request\'s own splits (not the shared multiples of the chunk)', () => {
  const a = req(200, [70, 128]);
  const key = prefixKey(a, 200, 64);
  assert.equal(key.length, 200);
  const marked = key.flatMap((k, i) => (k % 2 === 1 ? [i + 1] : []));
  assert.deepEqual(marked, [70, 200], 'a chunk ends after tokens 69 and 199 (128 splits in every run)');
  assert.deepEqual(key.map((k) => k >> 1), a.tokens);
  // a longer prompt with the same tokens that does not split at 70 differs from position 69 on
  const b = req(300, [128]);
  assert.deepEqual(prefixKey(b, 69, 64), key.slice(0, 69));
  assert.notEqual(prefixKey(b, 70, 64)[69], key[69]);
});

test('message ends: after each end-of-message marker, the same in turn 1 and turn 2', () => {
  const tok = TextTokenizer.load(TINY_THINK());
  const marker = messageEndMarker(tok);
  assert.deepEqual(marker, tok.encode('<|im_end|>\n'), 'ChatML closes a message with <|im_end|>\\n');
  const turn1 = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'What is 1 + 1?' },
  ];
  const turn2 = [...turn1, { role: 'assistant', content: '2' }, { role: 'user', content: 'And 2 + 2?' }];
  const opts = { addGenerationPrompt: true, enableThinking: true };
  const ids1 = tok.encode(renderChat(tok.chatTemplate!, turn1, opts));
  const ids2 = tok.encode(renderChat(tok.chatTemplate!, turn2, opts));
  const ends = (msgs: typeof turn2): number[] => msgs.map((_, i) => tok.encode(renderChat(tok.chatTemplate!, msgs.slice(0, i + 1), { addGenerationPrompt: false })).length);
  const e1 = messageEnds(tok, ids1);
  const e2 = messageEnds(tok, ids2);
  assert.deepEqual(e1, ends(turn1), 'every message of turn 1 ends where its rendering ends');
  assert.deepEqual(e2.filter((b) => b <= ids1.length), e1, 'turn 2 splits where turn 1 did');
  assert.ok(e2.includes(ends(turn2)[3]!), 'turn 2 ends its last user message');
  assert.deepEqual(markerEnds([5, 1, 2, 1, 2, 7], [1, 2]), [3, 5]);
  assert.deepEqual(markerEnds([5, 1, 2, 1, 2, 7], [1, 2], 4), [5]);
  assert.deepEqual(markerRest(tok, [...ids1, 9, marker![0]!]), marker!.slice(1), 'an output ending with <|im_end|> gets \\n');
  assert.equal(markerRest(tok, [...ids1, 9]), null);
});
