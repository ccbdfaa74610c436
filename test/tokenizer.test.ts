import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, copyFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { renderChat, type ChatMessage } from '../src/frontend/chat-template.js';
import { IncrementalDetokenizer } from '../src/tokenizer/detokenizer.js';
import { ReasoningSplitter, splitReasoning, extractFinalAnswer } from '../src/tokenizer/reasoning.js';
import { DeltaserveError } from '../src/util/errors.js';
import { TINY_THINK, TINY_NEXT_MOE, sharedPath } from './paths.js';
import { rng } from './numeric.js';

interface GoldenPrompt {
  messages: ChatMessage[];
  enable_thinking: boolean;
  prompt_text: string;
  prompt_ids: number[];
  greedy_ids: number[];
  greedy_text: string;
}
const FFFD = '\uFFFD';

function golden(name: string): GoldenPrompt[] {
  return (JSON.parse(readFileSync(sharedPath('golden', `${name}.json`), 'utf8')) as { prompts: GoldenPrompt[] }).prompts;
}

function isDeltaserveError(code: string, pattern: RegExp) {
  return (e: unknown): boolean => e instanceof DeltaserveError && e.code === code && pattern.test(e.message);
}

const think = TextTokenizer.load(TINY_THINK());

for (const [name, dir] of [['tiny-think', TINY_THINK], ['tiny-next-moe', TINY_NEXT_MOE]] as const) {
  test(`golden prompts and greedy text of ${name}`, () => {
    const tok = TextTokenizer.load(dir());
    assert.ok(tok.chatTemplate !== undefined);
    for (const [i, p] of golden(name).entries()) {
      const text = renderChat(tok.chatTemplate, p.messages, { addGenerationPrompt: true, enableThinking: p.enable_thinking });
      assert.equal(text, p.prompt_text, `prompt ${i} text`);
      assert.deepEqual(tok.encode(text), p.prompt_ids, `prompt ${i} ids`);
      assert.equal(tok.decode(p.prompt_ids), p.prompt_text, `prompt ${i} decode`);
      assert.equal(tok.decode(p.greedy_ids), p.greedy_text, `prompt ${i} greedy text`);
    }
  });
}

test('tokenizer basics: size, special ids, stop ids, token lookups', () => {
  assert.equal(think.size, 1000);
  const imEnd = think.tokenToId('<|im_end|>');
  const eot = think.tokenToId('<|endoftext|>');
  assert.equal(imEnd, 997);
  assert.equal(eot, 995);
  assert.ok(think.specialIds.has(996) && think.specialIds.has(997) && think.specialIds.has(995));
  const thinkId = think.tokenToId('<think>');
  assert.ok(thinkId !== undefined && !think.specialIds.has(thinkId), '<think> is not special');
  assert.deepEqual(think.stopIds([997, 995, 7]), [997, 995, 7]);
  assert.equal(think.idToToken(997), '<|im_end|>');
  assert.equal(think.idToToken(think.size), undefined);
  // added tokens in text are matched; decode keeps them
  const ids = think.encode('a<|im_start|>b<think>c</think>');
  assert.ok(ids.includes(996) && ids.includes(thinkId));
  assert.equal(think.decode(ids), 'a<|im_start|>b<think>c</think>');
  assert.deepEqual(think.encode(''), []);
  assert.equal(think.decode([]), '');
});

test('missing or invalid tokenizer files give errors naming the file', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'dstok-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.throws(() => TextTokenizer.load(dir), isDeltaserveError('bad_tokenizer', /tokenizer\.json: file is missing/));
  copyFileSync(join(TINY_THINK(), 'tokenizer.json'), join(dir, 'tokenizer.json'));
  assert.throws(() => TextTokenizer.load(dir), isDeltaserveError('bad_tokenizer', /tokenizer_config\.json: file is missing/));
  writeFileSync(join(dir, 'tokenizer_config.json'), '{ not json');
  assert.throws(() => TextTokenizer.load(dir), isDeltaserveError('bad_tokenizer', /tokenizer_config\.json: not valid JSON/));
  writeFileSync(join(dir, 'tokenizer_config.json'), '{}');
  writeFileSync(join(dir, 'tokenizer.json'), '{"model": {}}');
  assert.throws(() => TextTokenizer.load(dir), isDeltaserveError('bad_tokenizer', /tokenizer\.json: missing "model.vocab"/));
});

test('renderChat validates messages and reports template failures', () => {
  const tpl = think.chatTemplate ?? '';
  const ok: ChatMessage = { role: 'user', content: 'hi' };
  const opts = { addGenerationPrompt: true };
  const cases: [unknown, RegExp][] = [
    ['nope', /^messages must be an array$/],
    [[], /^messages must not be empty$/],
    [[ok, 3], /^messages\[1\] must be an object$/],
    [[ok, { content: 'x' }], /^messages\[1\]\.role must be a string$/],
    [[ok, ok, { role: 'user', content: 5 }], /^messages\[2\]\.content must be a string$/],
    [[{ role: 'assistant', content: '', reasoning_content: 1 }], /^messages\[0\]\.reasoning_content must be a string$/],
  ];
  for (const [msgs, re] of cases) {
    assert.throws(() => renderChat(tpl, msgs as ChatMessage[], opts), isDeltaserveError('bad_request', re));
  }
  const raising = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('first message must be system') }}{% endif %}ok";
  assert.throws(() => renderChat(raising, [ok], opts),
    isDeltaserveError('bad_request', /^chat template failed: .*first message must be system/));
  assert.equal(renderChat(raising, [{ role: 'system', content: '' }], opts), 'ok');
  assert.throws(() => renderChat('{% for %}', [ok], opts), isDeltaserveError('bad_tokenizer', /does not parse/));
  // enable_thinking is absent unless given; extra variables reach the template
  assert.equal(renderChat('{{ enable_thinking is defined }} {{ x }}', [ok], { ...opts, extra: { x: 7 } }), 'false 7');
  assert.match(renderChat(tpl, [ok], { addGenerationPrompt: true, enableThinking: false }), /<think>\n\n<\/think>\n\n$/);
  assert.match(renderChat(tpl, [ok], { addGenerationPrompt: true }), /assistant\n<think>\n$/);
});

/** Push every id; check each delta is clean and return the concatenated output (with flush). */
function detokenize(ids: readonly number[], context: readonly number[] = [], tok = think): { text: string; deltas: string[] } {
  const d = new IncrementalDetokenizer(tok, context);
  const all = tok.decode(ids);
  let emitted = '';
  const deltas = ids.map((id) => {
    const delta = d.push(id);
    assert.ok(!delta.endsWith(FFFD), `delta ${JSON.stringify(delta)} ends in U+FFFD`);
    emitted += delta;
    assert.ok(all.startsWith(emitted), `emitted ${JSON.stringify(emitted)} is not a prefix of ${JSON.stringify(all)}`);
    return delta;
  });
  return { text: emitted + d.flush(), deltas };
}

test('detokenizer: multibyte characters split across tokens are held until complete', () => {
  const s = 'héllo wörld 日本語 🎉 <think>x</think>ü<|im_end|>';
  const ids = think.encode(s);
  // The tiny vocab really splits characters: some single token decodes to a broken sequence.
  assert.ok(ids.some((id) => think.decode([id]).includes(FFFD)), 'test text must split a character');
  const { text, deltas } = detokenize(ids);
  assert.equal(text, s);
  assert.ok(deltas.includes('é') && deltas.includes('日') && deltas.includes('🎉'));
  assert.equal(detokenize(ids, think.encode('<|im_start|>assistant\n')).text, s);
});

test('detokenizer: concatenated deltas equal decode() on the golden outputs', () => {
  for (const [name, dir] of [['tiny-think', TINY_THINK], ['tiny-next-moe', TINY_NEXT_MOE]] as const) {
    const tok = TextTokenizer.load(dir());
    for (const p of golden(name)) {
      const { text } = detokenize(p.greedy_ids, p.prompt_ids, tok);
      assert.equal(text, tok.decode(p.greedy_ids));
    }
  }
});

test('detokenizer: random text round-trips and random ids never yield a broken delta', () => {
  const r = rng(1234);
  const pieces = ['a', ' ', 'é', 'ö', '日', '本', '語', '🎉', '👍🏽', 'Ω', '\n', '<think>', '</think>', '<|im_end|>', 'x1'];
  for (let n = 0; n < 300; n++) {
    let s = '';
    const len = 1 + Math.floor(r() * 12);
    for (let i = 0; i < len; i++) s += pieces[Math.floor(r() * pieces.length)];
    assert.equal(detokenize(think.encode(s)).text, s, JSON.stringify(s));
  }
  // Random ids (high bytes over-represented, some ids beyond the tokenizer). The stream must
  // reproduce decode(all) when that has no U+FFFD; it does so even with invalid sequences,
  // because the window only ever starts where the decoder is between characters.
  let withFffd = 0;
  for (let n = 0; n < 500; n++) {
    const ids: number[] = [];
    const len = 1 + Math.floor(r() * 24);
    for (let i = 0; i < len; i++) {
      const u = r();
      ids.push(u < 0.6 ? 128 + Math.floor(r() * 128) : u < 0.95 ? Math.floor(r() * think.size) : think.size + Math.floor(r() * 8));
    }
    const all = think.decode(ids);
    if (all.includes(FFFD)) withFffd++;
    assert.equal(detokenize(ids).text, all, `ids ${JSON.stringify(ids)}`);
  }
  assert.ok(withFffd > 50, 'the random ids exercise invalid sequences');
});

test('detokenizer: works over a plain decode function with O(window) decodes', () => {
  const lens: number[] = [];
  const d = new IncrementalDetokenizer((ids) => { lens.push(ids.length); return think.decode(ids); });
  const s = 'abc 日本語 '.repeat(200);
  let out = '';
  for (const id of think.encode(s)) out += d.push(id);
  assert.equal(out + d.flush(), s);
  assert.ok(Math.max(...lens) <= 8, `window grew to ${Math.max(...lens)}`);
});

test('detokenizer: a long run of invalid bytes is released, keeping the window bounded', () => {
  const lens: number[] = [];
  const d = new IncrementalDetokenizer((ids) => { lens.push(ids.length); return think.decode(ids); });
  const ids = [...Array<number>(200).fill(0x80), ...think.encode('ok')]; // id 0x80 is the lone byte 0x80
  let out = '';
  for (const id of ids) out += d.push(id);
  assert.equal(out + d.flush(), think.decode(ids));
  assert.ok(Math.max(...lens) <= 70, `window grew to ${Math.max(...lens)}`);
});

const SAMPLES: [string, boolean][] = [
  ['966+368\n6+8+0=14\n</think>\n\n1454<|im_end|>', true],
  ['still thinking </thi', true],
  ['a </think> b </think> c', true],
  ['<think>\nhmm\n</think>\n\n  answer', false],
  ['<thinking> no', false],
  ['plain answer', false],
  ['<think>', false],
  ['<thi', false],
  ['</think>\n\n', true],
  ['x<</think>y', true],
];

test('reasoning splitter: streaming at every split point equals the at-once split', () => {
  for (const [text, starts] of SAMPLES) {
    const want = splitReasoning(text, starts);
    const cuts: number[][] = [];
    for (let i = 0; i <= text.length; i++) {
      cuts.push([i]);
      for (let j = i; j <= text.length; j++) cuts.push([i, j]);
    }
    cuts.push(Array.from({ length: text.length }, (_, i) => i)); // one char per delta
    for (const cut of cuts) {
      const s = new ReasoningSplitter(starts);
      let reasoning = '';
      let content = '';
      let prev = 0;
      for (const c of [...cut, text.length]) {
        const o = s.push(text.slice(prev, c));
        reasoning += o.reasoning;
        content += o.content;
        prev = c;
      }
      const f = s.flush();
      reasoning += f.reasoning;
      content += f.content;
      const where = `${JSON.stringify(text)} cut at ${cut.join(',')}`;
      assert.equal(reasoning, want.reasoning ?? '', where);
      assert.equal(content, want.content, where);
      assert.equal(s.hasReasoning, want.reasoning !== null, where);
    }
  }
});

test('reasoning splitter: expected splits and held-back partial tags', () => {
  assert.deepEqual(splitReasoning('r1\n</think>\n\nA<|im_end|>', true), { reasoning: 'r1\n', content: 'A<|im_end|>' });
  assert.deepEqual(splitReasoning('<think>r</think> A', false), { reasoning: 'r', content: 'A' });
  assert.deepEqual(splitReasoning('A', false), { reasoning: null, content: 'A' });
  assert.deepEqual(splitReasoning('cut short', true), { reasoning: 'cut short', content: '' });
  const s = new ReasoningSplitter(true);
  assert.deepEqual(s.push('abc</th'), { reasoning: 'abc', content: '' });
  assert.deepEqual(s.push('ink>\n'), { reasoning: '', content: '' });
  assert.deepEqual(s.push('\nB'), { reasoning: '', content: 'B' });
  const t = new ReasoningSplitter(false);
  assert.deepEqual(t.push('<th'), { reasoning: '', content: '' });
  assert.deepEqual(t.push('e'), { reasoning: '', content: '<the' });
});

test('extractFinalAnswer takes the text after the last </think>', () => {
  assert.equal(extractFinalAnswer('a</think>b</think>\n\n 97<|im_end|>'), '97');
  assert.equal(extractFinalAnswer('B<|im_end|>'), 'B');
  assert.equal(extractFinalAnswer(' x <|endoftext|>'), 'x');
  for (const p of golden('tiny-think')) {
    if (!p.greedy_text.includes('</think>')) continue;
    const a = extractFinalAnswer(p.greedy_text);
    assert.ok(a.length > 0 && !a.includes('<') && !a.includes('\n'), JSON.stringify(a));
  }
});
