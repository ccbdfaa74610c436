// The engine's events carry the reasoning and the answer apart: over a request the deltas'
// reasoning and content join to the done event's, which equal the at-once split of the
// text (the server's parser, tokenizer/reasoning.ts); MTP on and off agree.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { splitReasoning, THINK_CLOSE } from '../src/tokenizer/reasoning.js';
import { TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';
let engine: Engine;
let noSpec: Engine;
before(async () => {
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4 });
  noSpec = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, specTokens: 0 });
});
after(async () => {
  await engine.close();
  await noSpec.close();
});

interface Streamed { text: string; reasoning: string; content: string; done: { text: string; reasoning: string | null; content: string } }

async function stream(e: Engine, req: GenerateRequest): Promise<Streamed> {
  const s = { text: '', reasoning: '', content: '' };
  for await (const ev of e.generate(req)) {
    if (ev.type === 'delta') {
      s.text += ev.text;
      s.reasoning += ev.reasoning;
      s.content += ev.content;
    } else return { ...s, done: { text: ev.text, reasoning: ev.reasoning, content: ev.content } };
  }
  throw new Error('no done event');
}

const ADD: GenerateRequest = { messages: [{ role: 'user', content: 'What is 12 + 30?' }], maxTokens: 64 };

test('a thinking chat turn: reasoning and content apart, streamed == at once == the parser', async () => {
  const s = await stream(engine, ADD);
  assert.ok(s.done.text.includes(THINK_CLOSE), `the model closes its reasoning: ${JSON.stringify(s.done.text)}`);
  assert.ok(s.done.reasoning !== null && s.done.reasoning.trim().length > 0, 'reasoning');
  assert.match(s.done.content, /^\d+$/, 'a numeric answer, no tag');
  assert.equal(s.text, s.done.text);
  assert.equal(s.reasoning, s.done.reasoning);
  assert.equal(s.content, s.done.content);
  // the prompt ends with `<think>\n`: the text starts inside the block
  assert.deepEqual(splitReasoning(s.done.text, true), { reasoning: s.done.reasoning, content: s.done.content });
});

test('MTP on and off give the same reasoning and content', async () => {
  const [on, off] = await Promise.all([stream(engine, ADD), stream(noSpec, ADD)]);
  assert.deepEqual(on, off);
});

test('thinking off and a raw prompt: everything is content unless the text opens a block', async () => {
  const off = await stream(engine, { ...ADD, think: false });
  assert.equal(off.done.reasoning, null);
  assert.ok(off.done.text.length > 0);
  assert.equal(off.done.content, off.done.text);
  assert.equal(off.content, off.done.content);
  const raw = await stream(engine, { prompt: 'What is 12 + 30?', maxTokens: 12 });
  assert.deepEqual(splitReasoning(raw.done.text, false), { reasoning: raw.done.reasoning, content: raw.done.content });
  assert.equal(raw.content, raw.done.content);
});

test('a cut-short answer (max tokens inside the reasoning) is all reasoning', async () => {
  const s = await stream(engine, { ...ADD, maxTokens: 3 });
  assert.equal(s.done.content, '');
  assert.equal(s.reasoning, s.done.reasoning);
  assert.equal(s.done.reasoning, s.done.text);
});
