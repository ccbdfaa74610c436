// Images in a chat prompt. A client's image part becomes, in the message text, a random
// sentinel (letters and digits with a per-request nonce: no client text can forge it, and
// the added-token protection of safe-chat.ts leaves it alone); after protection the
// sentinel is replaced by the template's placeholder <|vision_start|><|image_pad|><|vision_end|>
// (server text, so its added tokens are matched), and after tokenizing each <|image_pad|> is
// repeated as many times as its image has merged tokens (vision/positions.ts). Message ends
// (prefix-cache split points) move with the expansion.
//
// Invariants: the i-th pad run of the prompt belongs to the i-th image given; a prompt whose
// template dropped or duplicated an image part is refused (the pad count must equal the
// image count); every refusal names the part at fault (its label).
import { randomBytes } from 'node:crypto';
import type { PreprocessConfig, VisionConfig, VisionTokens } from '../vision/config.js';
import { DEFAULT_MAX_DECODE_PIXELS } from '../vision/decode.js';
import { type PreparedImage, prepareImage } from '../vision/pipeline.js';
import { expandImagePads, IMAGE_PLACEHOLDER } from '../vision/positions.js';
import { DeltaserveError } from '../util/errors.js';
import type { ChatInput } from './safe-chat.js';

/** What the frontend needs of a vision model: the tower shape, preprocessing, token ids. */
export interface FrontendVision {
  readonly cfg: VisionConfig;
  readonly pre: PreprocessConfig;
  readonly tokens: VisionTokens;
}

/** One image of a request, with the label its errors carry (e.g. `messages[1].content[2]`). */
export interface ImageInput {
  readonly bytes: Uint8Array;
  readonly label: string;
}

export interface ImageLimits {
  /** Most images in one request. */
  readonly maxImages: number;
  /** Most pixels of one image (decoded size, before resizing). */
  readonly maxImagePixels: number;
}

export const DEFAULT_IMAGE_LIMITS: ImageLimits = Object.freeze({ maxImages: 16, maxImagePixels: DEFAULT_MAX_DECODE_PIXELS });

/** The images of one chat request, in prompt order, and the sentinel that stands for each
 * in the message texts. Build the messages with `add` (it returns the text to put where
 * the image goes). */
export class ImageParts {
  readonly sentinel = `qimg${randomBytes(12).toString('hex')}i`;
  readonly inputs: ImageInput[] = [];

  add(bytes: Uint8Array, label: string): string {
    this.inputs.push({ bytes, label });
    return this.sentinel;
  }
}

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** The refusal of a request with more than `max` images (`label`: the first image over),
 * naming both ways out: fewer images (a chat client resending its history can leave out
 * the oldest) or a server started with a larger --max-images. */
export function tooManyImages(label: string, max: number, count: number): string {
  return `${label}: a request takes at most ${max} images (the server's --max-images); this one has ${count}. `
    + `Send fewer (leave out images of earlier turns), or start the server with a larger --max-images`;
}

/** The image token id of `vision`, or a refusal naming the first image. */
export function imageTokenOf(vision: FrontendVision | null, inputs: readonly ImageInput[]): number {
  const first = inputs[0]?.label ?? 'the request';
  if (!vision) bad(`${first}: this model is text-only (no vision tower: its config.json has no vision_config, or a GGUF was loaded without --mmproj); images are not accepted`);
  const id = vision.tokens.imageTokenId;
  if (id === null) bad(`${first}: the model's config.json names no image_token_id; images are not accepted`);
  return id;
}

/** Decode and preprocess every image of a request (in order), within the limits. */
export async function prepareImages(vision: FrontendVision | null, inputs: readonly ImageInput[], limits: ImageLimits = DEFAULT_IMAGE_LIMITS): Promise<PreparedImage[]> {
  if (inputs.length === 0) return [];
  imageTokenOf(vision, inputs);
  if (inputs.length > limits.maxImages) bad(tooManyImages(inputs[limits.maxImages]!.label, limits.maxImages, inputs.length));
  const out: PreparedImage[] = [];
  for (const input of inputs) out.push(await prepareImage(input.bytes, vision!.cfg, vision!.pre, { label: input.label, maxPixels: limits.maxImagePixels }));
  return out;
}

/** A chat input with every sentinel in message contents replaced by the image placeholder
 * (a `place` step: runs after protection). */
export function placeImages(input: ChatInput, sentinel: string): ChatInput {
  const messages = input.messages.map((m) => (m.content.includes(sentinel) ? { ...m, content: m.content.split(sentinel).join(IMAGE_PLACEHOLDER) } : m));
  return { messages, opts: input.opts };
}

/** Ids with each image's single pad expanded to its token count, and the split points
 * moved by the tokens inserted before them. */
export function expandPrompt(ids: readonly number[], boundaries: readonly number[], images: readonly PreparedImage[], imageTokenId: number,
  mergeSize: number): { ids: number[]; boundaries: number[] } {
  const expanded = expandImagePads(ids, imageTokenId, images.map((im) => im.grid), mergeSize);
  // shift[i]: tokens inserted before original position i
  const shift = new Int32Array(ids.length + 1);
  let image = 0;
  for (let i = 0; i < ids.length; i++) {
    shift[i + 1] = shift[i]! + (ids[i] === imageTokenId ? images[image++]!.tokens - 1 : 0);
  }
  const moved = boundaries.map((b) => (b >= 0 && b <= ids.length ? b + shift[b]! : b));
  return { ids: expanded, boundaries: moved };
}
