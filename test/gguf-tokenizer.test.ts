// The tokenizer and chat template rebuilt from GGUF metadata behave exactly like the
// safetensors twin's tokenizer.json / tokenizer_config.json: same ids for varied text (ASCII,
// unicode, combining marks, digits, whitespace, code, chat prompts with added tokens), same
// decoded text, same size, special and stop ids, and the same rendered chat prompts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readGgufHeader } from '../src/checkpoint/gguf-file.js';
import { ggufTokenizerParts } from '../src/tokenizer/gguf-tokenizer.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { renderChat, type ChatMessage } from '../src/frontend/chat-template.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { rng } from './numeric.js';

const hf = TextTokenizer.load(TINY_THINK());
const GGUF_FILES = ['tiny-think-BF16.gguf', 'tiny-think-Q4_K_M.gguf', 'tiny-moe-BF16.gguf'];

const TEXTS = [
  'Hello world', "It's 2024; I'll pay $12.50 (approx.)!", 'héllo wörld — naïve café', '日本語のテキスト 😀👍 한국어',
  '  multiple   spaces\n\nnew\tlines\r\n', 'x=1234567890+98765', "DON'T you're WE'VE they'd", 'e\u0301 combining a\u0308 \u0915\u093f',
  'def f(x):\n    return x**2  # square', '...!!!???', 'the quick brown fox jumps over the lazy dog',
  '<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>',
  '<|endoftext|><think>a</think>b', ' leading and trailing ', '',
];

/** Random strings over a mix of scripts, digits, punctuation, whitespace and added tokens. */
function randomTexts(count: number): string[] {
  const r = rng(11);
  const pieces = ['a', 'Z', 'é', 'ß', '中', '😀', '0', '7', ' ', '  ', '\n', '\t', "'s", '.', ',', '!', '(', '<', '>', '|',
    'the', ' and', 'ing', '<|im_end|>', '<think>', '\u0301', '-', '_', '$', '%'];
  return Array.from({ length: count }, () => Array.from({ length: 1 + Math.floor(r() * 30) }, () => pieces[Math.floor(r() * pieces.length)]!).join(''));
}

/** tiny-think's tokenizer.json splits words with GPT-2's regex, but its GGUF names the
 * qwen35 pre-tokenizer (as real Qwen3.5 files do), which llama.cpp — and we — honour. They
 * agree on ordinary text (TEXTS); on random mixes (a combining mark after punctuation, …)
 * the GGUF tokenizer is compared with tokenizer.json given the qwen35 split instead. */
function hfWithQwen35Split(): TextTokenizer {
  const dir = TINY_THINK();
  const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
  const cfg = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  const gguf = ggufTokenizerParts(readGgufHeader(sharedPath('models', 'gguf', 'tiny-think-BF16.gguf')).metadata, 'x');
  json['pre_tokenizer'] = gguf.tokenizerJson['pre_tokenizer'];
  return TextTokenizer.fromJson(json, cfg);
}
const hfQwen35 = hfWithQwen35Split();

for (const file of GGUF_FILES) {
  test(`${file}: encodes and decodes like tokenizer.json`, () => {
    const tok = TextTokenizer.load(sharedPath('models', 'gguf', file));
    assert.equal(tok.size, hf.size);
    assert.deepEqual([...tok.specialIds].sort(), [...hf.specialIds].sort());
    assert.deepEqual(tok.stopIds([997]), hf.stopIds([997]));
    const check = (ref: TextTokenizer, text: string): void => {
      const ids = ref.encode(text);
      assert.deepEqual(tok.encode(text), ids, JSON.stringify(text));
      assert.equal(tok.decode(ids), ref.decode(ids), JSON.stringify(text));
      assert.equal(tok.decode(ids), text);
    };
    for (const text of TEXTS) check(hf, text);
    const random = randomTexts(300);
    for (const text of random) check(hfQwen35, text);
    assert.ok(random.some((t) => JSON.stringify(hf.encode(t)) !== JSON.stringify(hfQwen35.encode(t))), 'the qwen35 split is in effect');
    for (let id = 0; id < hf.size; id++) assert.equal(tok.idToToken(id), hf.idToToken(id), `token ${id}`);
  });
}

test('tiny-think-BF16.gguf: the chat template renders the golden prompts like tokenizer_config.json', () => {
  const tok = TextTokenizer.load(sharedPath('models', 'gguf', 'tiny-think-BF16.gguf'));
  assert.equal(tok.chatTemplate, hf.chatTemplate);
  const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as
    { prompts: { messages: ChatMessage[]; enable_thinking: boolean; prompt_ids: number[] }[] };
  for (const p of golden.prompts) {
    for (const enableThinking of [p.enable_thinking, !p.enable_thinking]) {
      const opts = { addGenerationPrompt: true, enableThinking };
      const text = renderChat(tok.chatTemplate!, p.messages, opts);
      assert.equal(text, renderChat(hf.chatTemplate!, p.messages, opts));
      assert.deepEqual(tok.encode(text), hf.encode(text));
      if (enableThinking === p.enable_thinking) assert.deepEqual(tok.encode(text), p.prompt_ids);
    }
  }
});
