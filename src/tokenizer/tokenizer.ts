// TextTokenizer: the model's byte-level BPE tokenizer (tokenizer.json) and its chat template
// (tokenizer_config.json), wrapped around @huggingface/tokenizers.
//
// Invariants:
// - encode() never adds special tokens, but added tokens written in the text (`<|im_start|>`,
//   `<think>`, ...) are matched as their ids, exactly like HF's tokenizer.
// - encodeText() never matches added tokens: the text is split and merged by the BPE model
//   alone, so client text can never become an added id — special or not (see safe-chat.ts).
// - decode() keeps special tokens and never cleans up spaces, so decoding is prefix-stable
//   (what IncrementalDetokenizer relies on). Ids the tokenizer does not know decode to ''.
// - size = max known id + 1; ids in [size, vocab_size) are untrained padding rows.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { DeltaserveError } from '../util/errors.js';
import { resolveModelSource } from '../checkpoint/source.js';
import { readGgufHeader } from '../checkpoint/gguf-file.js';
import { ggufTokenizerParts } from './gguf-tokenizer.js';

type Json = Record<string, unknown>;

/** The part of @huggingface/tokenizers' Tokenizer used here (its bundled types do not resolve). */
interface HfTokenizer {
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], opts: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
  get_added_tokens_decoder(): Map<number, { content: string; special: boolean }>;
  get_vocab(withAddedTokens: boolean): Map<string, number>;
}

/** The pipeline stages of @huggingface/tokenizers' Tokenizer (public fields, callable objects). */
interface HfStages {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: ((text: string, opts: { section_index: number }) => string[]) | null;
  model: ((pieces: string[]) => string[]) & { tokens_to_ids: Map<string, number>; unk_token_id?: number };
}

/** Where a tokenizer came from, so that a worker thread can build the same one. */
export type TokenizerSource =
  | { readonly kind: 'dir'; readonly dir: string }
  | { readonly kind: 'gguf'; readonly file: string }
  | { readonly kind: 'json'; readonly tokenizerJson: Json; readonly configJson: Json; readonly where: string; readonly chatTemplate?: string };

/** Token texts that end a turn when present in the vocabulary. */
const STOP_TOKENS = ['<|im_end|>', '<|endoftext|>'];

function readJsonObject(path: string): Json {
  if (!existsSync(path)) throw new DeltaserveError('bad_tokenizer', `${path}: file is missing`);
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new DeltaserveError('bad_tokenizer', `${path}: not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new DeltaserveError('bad_tokenizer', `${path}: expected a JSON object`);
  }
  return json as Json;
}

/**
 * The chat template: `chat_template` of tokenizer_config.json (a string, or HF's list of named
 * templates, of which "default" is used), else a `chat_template.jinja` file beside it.
 */
function findChatTemplate(dir: string, config: Json, where: string): string | undefined {
  const t = config['chat_template'];
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t.find((x: unknown) => (x as Json | null)?.['name'] === 'default') as Json | undefined;
    if (typeof named?.['template'] === 'string') return named['template'];
    throw new DeltaserveError('bad_tokenizer', `${where}: "chat_template" list has no "default" template`);
  }
  if (t !== undefined && t !== null) {
    throw new DeltaserveError('bad_tokenizer', `${where}: "chat_template" must be a string`);
  }
  const file = join(dir, 'chat_template.jinja');
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

export class TextTokenizer {
  /** Number of ids the tokenizer knows (max id + 1). The model's vocab may be larger. */
  readonly size: number;
  /** Ids of added tokens marked special (`<|im_start|>`, `<|im_end|>`, ...). */
  readonly specialIds: ReadonlySet<number>;
  readonly chatTemplate: string | undefined;
  /** Ids of every added token, special or not: control tokens (`<think>`, `<tool_call>`,
   * `<|image_pad|>` are `special: false` in Qwen3.5's vocabularies) that client text must
   * never produce. */
  readonly addedIds: ReadonlySet<number>;
  /** Texts of every added token (`<|im_start|>`, `<think>`, `<tool_response>`, ...). */
  readonly addedTexts: readonly string[];
  /** How to build this tokenizer again (in a worker thread). */
  source: TokenizerSource | undefined;
  private readonly tok: HfTokenizer;

  private constructor(tok: HfTokenizer, chatTemplate: string | undefined) {
    this.tok = tok;
    this.chatTemplate = chatTemplate;
    let maxId = -1;
    for (const id of tok.get_vocab(true).values()) maxId = Math.max(maxId, id);
    const special = new Set<number>();
    const added = new Set<number>();
    const texts: string[] = [];
    for (const [id, t] of tok.get_added_tokens_decoder()) {
      maxId = Math.max(maxId, id);
      added.add(id);
      if (t.special) special.add(id);
      if (t.content.length > 0) texts.push(t.content);
    }
    this.size = maxId + 1;
    this.specialIds = special;
    this.addedIds = added;
    this.addedTexts = texts;
  }

  /** Load tokenizer.json and tokenizer_config.json from a model directory, or the tokenizer
   * of a GGUF model (a .gguf file or a directory holding one; see checkpoint/source.ts). */
  static load(dir: string): TextTokenizer {
    if (existsSync(dir)) {
      const src = resolveModelSource(dir);
      if (src.kind === 'gguf') return TextTokenizer.fromGguf(src.file);
    }
    const tokPath = join(dir, 'tokenizer.json');
    const cfgPath = join(dir, 'tokenizer_config.json');
    const tokJson = readJsonObject(tokPath);
    const cfgJson = readJsonObject(cfgPath);
    const t = TextTokenizer.fromJson(tokJson, cfgJson, tokPath, findChatTemplate(dir, cfgJson, cfgPath));
    t.source = { kind: 'dir', dir };
    return t;
  }

  /** Build the tokenizer a source describes (TextTokenizer.source of another thread's). */
  static fromSource(src: TokenizerSource): TextTokenizer {
    switch (src.kind) {
      case 'dir':
        return TextTokenizer.load(src.dir);
      case 'gguf':
        return TextTokenizer.fromGguf(src.file);
      case 'json':
        return TextTokenizer.fromJson(src.tokenizerJson, src.configJson, src.where, src.chatTemplate);
    }
  }

  /** The tokenizer and chat template in a GGUF file's metadata. */
  static fromGguf(file: string): TextTokenizer {
    const parts = ggufTokenizerParts(readGgufHeader(file).metadata, file);
    const t = TextTokenizer.fromJson(parts.tokenizerJson, parts.configJson, file, parts.chatTemplate);
    t.source = { kind: 'gguf', file };
    return t;
  }

  /** Build from parsed JSON objects. `where` names the tokenizer file in error messages. */
  static fromJson(tokenizerJson: Json, configJson: Json, where = 'tokenizer.json',
    chatTemplate?: string): TextTokenizer {
    const model = tokenizerJson['model'] as Json | undefined;
    if (typeof model !== 'object' || model === null || typeof model['vocab'] !== 'object') {
      throw new DeltaserveError('bad_tokenizer', `${where}: missing "model.vocab"`);
    }
    let tok: HfTokenizer;
    try {
      tok = new Tokenizer(tokenizerJson, configJson) as HfTokenizer;
    } catch (e) {
      throw new DeltaserveError('bad_tokenizer', `${where}: cannot build the tokenizer (${(e as Error).message})`);
    }
    const template = chatTemplate ?? (typeof configJson['chat_template'] === 'string'
      ? configJson['chat_template'] : undefined);
    const t = new TextTokenizer(tok, template);
    if (t.size === 0) throw new DeltaserveError('bad_tokenizer', `${where}: empty vocabulary`);
    t.source = { kind: 'json', tokenizerJson, configJson, where, ...(template !== undefined ? { chatTemplate: template } : {}) };
    return t;
  }

  /** Token ids of `text`; no special tokens are added, added tokens in the text are matched. */
  encode(text: string): number[] {
    if (typeof text !== 'string') throw new DeltaserveError('bad_request', 'text to encode must be a string');
    if (text.length === 0) return [];
    return this.tok.encode(text, { add_special_tokens: false }).ids;
  }

  /** Token ids of `text` as plain text: added tokens written in it (`<|im_start|>`) are NOT
   * matched, the BPE model splits them like any other characters. */
  encodeText(text: string): number[] {
    if (text.length === 0) return [];
    const st = this.tok as unknown as HfStages;
    const normalized = st.normalizer ? st.normalizer(text) : text;
    const pieces = st.pre_tokenizer ? st.pre_tokenizer(normalized, { section_index: 0 }) : [normalized];
    const ids = st.model(pieces).map((t) => st.model.tokens_to_ids.get(t) ?? st.model.unk_token_id ?? -1);
    for (const id of ids) {
      if (id < 0 || this.addedIds.has(id)) {
        throw new DeltaserveError('bad_request', `text ${JSON.stringify(text.slice(0, 40))} cannot be tokenized as plain text by this tokenizer`);
      }
    }
    return ids;
  }

  /** Text of `ids`, special tokens kept; ids outside [0, size) decode to ''. */
  decode(ids: readonly number[]): string {
    if (ids.length === 0) return '';
    for (const id of ids) {
      if (!Number.isInteger(id)) throw new DeltaserveError('bad_request', `token id ${id} is not an integer`);
    }
    return this.tok.decode(ids.slice(), { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  tokenToId(s: string): number | undefined {
    return this.tok.token_to_id(s);
  }

  /** The vocabulary entry of `id` (byte-level form, e.g. 'Ġw'), or undefined. */
  idToToken(id: number): string | undefined {
    if (!Number.isInteger(id) || id < 0 || id >= this.size) return undefined;
    return this.tok.id_to_token(id);
  }

  /** Ids that end generation: `<|im_end|>` and `<|endoftext|>` when present, then `extra` (deduplicated). */
  stopIds(extra: readonly number[] = []): number[] {
    const ids: number[] = [];
    for (const s of STOP_TOKENS) {
      const id = this.tokenToId(s);
      if (id !== undefined) ids.push(id);
    }
    for (const id of extra) if (!ids.includes(id)) ids.push(id);
    return ids;
  }
}
