// The prompt half of a request: a raw text, chat messages (the template rendered and
// tokenized, with each message's end as a split point) or token ids, turned into the ids
// and split points the engine takes (engine/request-builder.ts builds the rest).
import { type ChatMessage, type RenderOptions, validateMessages } from './chat-template.js';
import { encodeChat, type Place } from './safe-chat.js';
import { messageEnds } from './message-ends.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { placeImages, type ImageInput } from './images.js';

/** A request's prompt: exactly one of prompt (raw text, no template), messages (chat) or
 * promptIds. */
export interface PromptInput {
  readonly prompt?: string;
  readonly messages?: readonly ChatMessage[];
  readonly promptIds?: readonly number[];
  /** Token counts at which a message of the prompt ends (prefix-cache snapshot points;
   * chat requests get them from the template, callers passing promptIds may give them). */
  readonly messageBoundaries?: readonly number[];
  /** Chat only: enable_thinking for the template (default true). */
  readonly think?: boolean;
  readonly chatTemplateKwargs?: Record<string, unknown>;
  /** Chat only: the request's images (frontend/images.ts ImageParts): each stands in the
   * message texts as `sentinel`. */
  readonly images?: PromptImages;
}

/** Images of a chat prompt and the sentinel standing for each in the message texts. */
export interface PromptImages {
  readonly sentinel: string;
  readonly inputs: readonly ImageInput[];
}

/** A prompt as the engine takes it: token ids and the split points among them. */
export interface PreparedPrompt {
  readonly ids: number[];
  readonly boundaries: number[];
  /** Decoded, preprocessed images, one per pad run of `ids`, in order (absent: none). */
  readonly images?: readonly PreparedImage[];
}

/** What a prompt is built against: the tokenizer and the model's vocabulary size. */
export interface PromptTarget {
  readonly tokenizer: TextTokenizer;
  readonly vocabSize: number;
}

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** Token ids of the request's prompt, and where each message of a chat prompt ends
 * (prefix-cache split points the next turn of the conversation shares; message-ends.ts).
 * `place` adds the server's own text to a chat prompt (safe-chat.ts). */
export function promptOf(target: PromptTarget, req: PromptInput, place?: Place): PreparedPrompt {
  const ids = promptIdsOf(target, req, place);
  const given = req.messageBoundaries ?? [];
  if (!Array.isArray(given) || !given.every((b) => Number.isInteger(b))) bad('messageBoundaries must be a list of integers');
  if (req.messages === undefined) return { ids, boundaries: [...given] };
  return { ids, boundaries: [...new Set([...given, ...messageEnds(target.tokenizer, ids)])].sort((x, y) => x - y) };
}

function renderOptions(req: PromptInput, addGenerationPrompt: boolean): RenderOptions {
  return { addGenerationPrompt, enableThinking: req.think ?? true, ...(req.chatTemplateKwargs ? { extra: req.chatTemplateKwargs } : {}) };
}

/** Token ids of the request's prompt. */
export function promptIdsOf(target: PromptTarget, req: PromptInput, place?: Place): number[] {
  const given = [req.prompt !== undefined, req.messages !== undefined, req.promptIds !== undefined].filter(Boolean).length;
  if (given !== 1) bad('give exactly one of prompt, messages or prompt_ids');
  if (req.images && req.images.inputs.length > 0 && req.messages === undefined) bad('images go with chat messages (not a raw prompt or prompt_ids)');
  if (req.promptIds !== undefined) {
    checkPromptIds(req.promptIds, target.vocabSize);
    return [...req.promptIds];
  }
  if (req.prompt !== undefined) {
    if (typeof req.prompt !== 'string') bad('prompt must be a string');
    return target.tokenizer.encode(req.prompt);
  }
  const messages = validateMessages(req.messages);
  const template = target.tokenizer.chatTemplate;
  if (!template) bad('this model has no chat template; send a raw prompt instead of messages');
  const sentinel = req.images ? req.images.sentinel : null;
  const placed: Place | undefined = sentinel === null ? place
    : (input, protect) => placeImages(place ? place(input, protect) : input, sentinel);
  return encodeChat(target.tokenizer, template, messages, renderOptions(req, true), placed);
}

/** Throws unless `ids` is an array of token ids in [0, vocabSize). */
export function checkPromptIds(ids: unknown, vocabSize: number): asserts ids is readonly number[] {
  if (!Array.isArray(ids)) bad('prompt_ids must be an array of token ids');
  ids.forEach((id: unknown, i) => {
    if (!Number.isInteger(id) || (id as number) < 0 || (id as number) >= vocabSize) bad(`prompt_ids[${i}] = ${String(id)} is not a token id in [0, ${vocabSize})`);
  });
}
