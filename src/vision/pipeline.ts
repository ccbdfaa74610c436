// From image bytes to what the language model consumes: decode → preprocess (patches and
// grid), the number of image tokens, and a content hash of the decoded pixels (the key that
// makes an image's tokens reusable in the prefix cache: equal pixels ⇒ equal patches ⇒ equal
// embeddings, whatever file format carried them). Then, after the tower: the image
// embeddings spliced over the <|image_pad|> rows of the prompt's token embeddings.
import { createHash } from 'node:crypto';
import { DeltaserveError } from '../util/errors.js';
import type { PreprocessConfig, VisionConfig } from './config.js';
import { type DecodeOptions, type RgbImage, decodeImage } from './decode.js';
import type { ImageGrid } from './grid.js';
import { imageTokenCount } from './positions.js';
import { preprocessImage } from './preprocess.js';

export interface PreparedImage {
  /** [t·h·w × C·T·P·P] tower input. */
  readonly patches: Float32Array;
  readonly grid: ImageGrid;
  /** <|image_pad|> tokens this image takes in the prompt. */
  readonly tokens: number;
  /** sha256 (hex) of the decoded size and RGB pixels. */
  readonly hash: string;
  readonly width: number;
  readonly height: number;
}

/** sha256 over "width×height:" and the RGB bytes. */
export function pixelHash(img: RgbImage): string {
  return createHash('sha256').update(`${img.width}x${img.height}:`).update(img.data).digest('hex');
}

/** Decode and preprocess one image for a tower. */
export async function prepareImage(bytes: Uint8Array, cfg: VisionConfig, pre: PreprocessConfig, opts: DecodeOptions = {}): Promise<PreparedImage> {
  const img = await decodeImage(bytes, opts);
  const out = preprocessImage(img, cfg, pre);
  return {
    patches: out.patches, grid: out.grid, tokens: imageTokenCount(out.grid, cfg.spatialMergeSize),
    hash: pixelHash(img), width: img.width, height: img.height,
  };
}

/** Overwrite the rows of `embeds` ([ids.length × hidden]) at image-token positions with the
 * images' embeddings, in order (image i fills the i-th run of its token count). */
export function spliceImageEmbeddings(embeds: Float32Array, hidden: number, ids: readonly number[], imageTokenId: number,
  images: readonly Float32Array[]): void {
  if (embeds.length !== ids.length * hidden) throw new DeltaserveError('internal', `embeddings: ${embeds.length} values for ${ids.length} tokens × ${hidden}`);
  let image = 0;
  let row = 0;
  for (let i = 0; i < ids.length; i++) {
    if (ids[i] !== imageTokenId) continue;
    const src = images[image];
    if (!src) throw new DeltaserveError('bad_request', `image token at position ${i} has no image embedding (${images.length} images)`);
    embeds.set(src.subarray(row * hidden, (row + 1) * hidden), i * hidden);
    row++;
    if (row * hidden === src.length) {
      image++;
      row = 0;
    }
  }
  if (image !== images.length || row !== 0) {
    throw new DeltaserveError('bad_request', `the prompt's image tokens do not match the ${images.length} image embeddings (${image} filled${row ? `, one partly: ${row} rows` : ''})`);
  }
}
