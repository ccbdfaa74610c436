// The tokenizer of a GGUF file, from its metadata: gpt2-style byte-level BPE
// (`tokenizer.ggml.tokens`, `.merges`, `.token_type`), the pre-tokenizer named by
// `tokenizer.ggml.pre`, bos/eos ids and `tokenizer.chat_template`. It is rebuilt as the
// Hugging Face tokenizer.json it came from, so TextTokenizer behaves the same either way.
//
// Token types (llama.cpp): 1 normal → BPE vocabulary; 3 control, 4 user-defined → added
// tokens (matched in text before BPE); 5 unused (vocab padding rows) → left out, so the
// tokenizer's size stays the number of real tokens; 2 unknown, 6 byte → vocabulary.
// Special = control and spelled `<|…|>`: converters also mark added tokens that merely look
// special (`<think>`, `<tool_call>`) as control, which the HF tokenizer has as non-special.
import { DeltaserveError } from '../util/errors.js';
import type { GgufMetadata } from '../checkpoint/gguf-file.js';

type Json = Record<string, unknown>;

const CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
/** Split regexes of llama.cpp's pre-tokenizer types (contractions spelled out, as there:
 * JS regexes have no inline (?i:…)). */
const SPLIT_REGEX: Readonly<Record<string, string>> = {
  qwen2: `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
  qwen35: `${CONTRACTIONS}|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`,
};
/** Pre-tokenizer names that mean GPT-2's own byte-level regex. */
const GPT2_NAMES = ['gpt2', 'gpt-2', 'default'];
const SPECIAL_TEXT = /^<\|.*\|>$/s;
const TYPE_NORMAL = 1;
const TYPE_CONTROL = 3;
const TYPE_USER_DEFINED = 4;
const TYPE_UNUSED = 5;

function byteLevel(useRegex: boolean): Json {
  return { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex };
}

function preTokenizer(pre: string, where: string): Json {
  if (GPT2_NAMES.includes(pre)) return byteLevel(true);
  const regex = SPLIT_REGEX[pre];
  if (!regex) {
    throw new DeltaserveError('bad_tokenizer',
      `${where}: tokenizer.ggml.pre "${pre}" is not supported (supported: ${[...Object.keys(SPLIT_REGEX), ...GPT2_NAMES].join(', ')})`);
  }
  return {
    type: 'Sequence',
    pretokenizers: [
      { type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false },
      byteLevel(false),
    ],
  };
}

function stringList(meta: GgufMetadata, key: string, where: string): string[] {
  const v = meta.get(key);
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) {
    throw new DeltaserveError('bad_tokenizer', `${where}: metadata ${key} is missing or not a list of strings`);
  }
  return v as string[];
}

function optionalId(meta: GgufMetadata, key: string, n: number, where: string): number | undefined {
  const v = meta.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= n) {
    throw new DeltaserveError('bad_tokenizer', `${where}: metadata ${key} = ${String(v)} is not a token id (0..${n - 1})`);
  }
  return v;
}

export interface GgufTokenizerParts {
  readonly tokenizerJson: Json;
  readonly configJson: Json;
  readonly chatTemplate: string | undefined;
}

/** tokenizer.json / tokenizer_config.json equivalents of a GGUF's tokenizer metadata.
 * `where` names the file in error messages. */
export function ggufTokenizerParts(meta: GgufMetadata, where: string): GgufTokenizerParts {
  const model = meta.get('tokenizer.ggml.model');
  if (model !== 'gpt2') {
    throw new DeltaserveError('bad_tokenizer',
      `${where}: tokenizer.ggml.model is ${model === undefined ? 'missing' : `"${String(model)}"`}; only "gpt2" (byte-level BPE) is supported`);
  }
  const tokens = stringList(meta, 'tokenizer.ggml.tokens', where);
  const merges = stringList(meta, 'tokenizer.ggml.merges', where);
  const rawTypes = meta.get('tokenizer.ggml.token_type');
  const types = rawTypes === undefined ? tokens.map(() => TYPE_NORMAL) : rawTypes;
  if (!Array.isArray(types) || types.length !== tokens.length) {
    throw new DeltaserveError('bad_tokenizer', `${where}: tokenizer.ggml.token_type must list one type per token (${tokens.length})`);
  }
  const vocab: Record<string, number> = {};
  const added: Json[] = [];
  tokens.forEach((content, id) => {
    const type = types[id];
    if (type === TYPE_UNUSED) return;
    if (type === TYPE_CONTROL || type === TYPE_USER_DEFINED) {
      added.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type === TYPE_CONTROL && SPECIAL_TEXT.test(content) });
    } else {
      vocab[content] = id;
    }
  });
  const pre = meta.get('tokenizer.ggml.pre');
  const tokenizerJson: Json = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: preTokenizer(typeof pre === 'string' ? pre : 'default', where),
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges,
    },
  };
  const name = (key: string): string | null => {
    const id = optionalId(meta, key, tokens.length, where);
    return id === undefined ? null : tokens[id]!;
  };
  const template = meta.get('tokenizer.chat_template');
  if (template !== undefined && typeof template !== 'string') {
    throw new DeltaserveError('bad_tokenizer', `${where}: tokenizer.chat_template must be a string`);
  }
  const configJson: Json = {
    add_bos_token: meta.get('tokenizer.ggml.add_bos_token') === true,
    add_prefix_space: false,
    clean_up_tokenization_spaces: false,
    bos_token: name('tokenizer.ggml.bos_token_id'),
    eos_token: name('tokenizer.ggml.eos_token_id'),
    pad_token: name('tokenizer.ggml.padding_token_id'),
    ...(template !== undefined ? { chat_template: template } : {}),
  };
  return { tokenizerJson, configJson, chatTemplate: template };
}
