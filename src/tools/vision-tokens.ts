// make-model's release layout gives the copied tokenizer the Qwen-VL vision special tokens
// (<|vision_start|>, <|vision_end|>, <|vision_pad|>, <|image_pad|>, <|video_pad|>) when it
// lacks them, so a random-weight release model has the ids its config.json names
// (image_token_id, vision_start_token_id, ...), as the published tokenizers do.
//
// Invariant: ids are only added above every id the tokenizer already uses and below the
// model's vocab size; tokens that do not fit stay absent (their config ids are null).
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VISION_SPECIAL_TOKENS, type VisionTokenIds } from './release-layout.js';

export interface AddedToken { readonly id: number; readonly content: string }

export interface VisionTokenPlan {
  readonly ids: VisionTokenIds;
  /** Tokens to append to the copied tokenizer. */
  readonly add: readonly AddedToken[];
}

/** Ids for the vision tokens: the tokenizer's own, else new ids from `size` upward. */
export function planVisionTokens(existing: readonly AddedToken[], size: number, vocab: number): VisionTokenPlan {
  const have = new Map(existing.map((t) => [t.content, t.id]));
  const add: AddedToken[] = [];
  let next = size;
  const idOf = (content: string): number | null => {
    const id = have.get(content);
    if (id !== undefined) return id;
    if (next >= vocab) return null;
    add.push({ id: next, content });
    return next++;
  };
  // every token gets its id (<|vision_pad|> too: it keeps the releases' consecutive order),
  // though no config field names <|vision_pad|>
  const [start, end, , image, video] = VISION_SPECIAL_TOKENS.map(idOf);
  return { ids: { visionStart: start ?? null, visionEnd: end ?? null, imagePad: image ?? null, videoPad: video ?? null }, add };
}

function rewriteJson(path: string, edit: (json: Record<string, unknown>) => void): void {
  if (!existsSync(path)) return;
  const json = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(json);
  rmSync(path, { force: true }); // the copy may be read-only (copied bytes, not modes, but be safe)
  writeFileSync(path, `${JSON.stringify(json, null, 2)}\n`);
}

/** Append `add` to tokenizer.json's added_tokens and tokenizer_config.json's
 * added_tokens_decoder in `dir` (special, matched whole, never normalized). */
export function writeVisionTokens(dir: string, add: readonly AddedToken[]): void {
  if (add.length === 0) return;
  const flags = { single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  rewriteJson(join(dir, 'tokenizer.json'), (json) => {
    const list = Array.isArray(json['added_tokens']) ? json['added_tokens'] as unknown[] : [];
    json['added_tokens'] = [...list, ...add.map((t) => ({ id: t.id, content: t.content, ...flags }))];
  });
  rewriteJson(join(dir, 'tokenizer_config.json'), (json) => {
    const decoder = (typeof json['added_tokens_decoder'] === 'object' && json['added_tokens_decoder'] !== null)
      ? json['added_tokens_decoder'] as Record<string, unknown> : {};
    for (const t of add) decoder[String(t.id)] = { content: t.content, ...flags };
    json['added_tokens_decoder'] = decoder;
  });
}
