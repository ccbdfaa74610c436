// Images inside the engine: a request's image facts (positions, prefix-cache keys), the
// tower run once per image (cached by pixel hash) on the engine's kernels, and each forward
// row's image side.
//
// Invariants:
// - Rotary positions: prompt token i < L has the multimodal positions of the prompt
//   (vision/positions.ts mropePositions); any later token i (generated, or a prompt that
//   extends this one, e.g. the end-of-generation snapshot) is at i + delta on all axes.
// - Prefix-cache key: an image token's key is derived from its image's pixel hash (negative,
//   so it never equals a text token's key id·2 or id·2 + 1): equal pixels at the same place
//   share cached state, a different image with the same pad count does not.
// - Embeddings depend only on the pixels (the patches are a function of them), so the tower
//   output is cached by hash and reused bit for bit.
// - A request's images are encoded (async: a GPU backend reads back through promises) by
//   `encodeRows` before any of its rows is in a forward; `rows` only reads them.
import type { AnyKernels } from '../kernels/types.js';
import type { ImageRow, SeqVision } from '../model/forward.js';
import { DeltaserveError } from '../util/errors.js';
import type { VisionModel } from '../vision/load.js';
import type { VisionConfig } from '../vision/config.js';
import { KernelTower } from '../vision/kernel-tower.js';
import { DEFAULT_MAX_DECODE_PIXELS } from '../vision/decode.js';
import { maxResizedPixels } from '../vision/memory.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { imageTokenCount, mropePairAxes, mropePositions, type MropePositions } from '../vision/positions.js';
import type { VisionOutput } from '../vision/tower.js';

/** A request's images and what the engine derives from them at build time. */
export interface RequestVision {
  readonly images: readonly PreparedImage[];
  /** Prompt positions (length L) and the decode offset. */
  readonly positions: MropePositions;
  /** Per prompt token: the image index it belongs to, or −1 for text. */
  readonly imageOf: Int32Array;
  /** Per prompt token: its row within its image's embeddings. */
  readonly rowOf: Int32Array;
  /** The tower's output per image, filled by VisionEngine.encodeRows. */
  readonly encoded: (VisionOutput | undefined)[];
}

/** Radix key of an image token of `image`: −2·(first 48 bits of its pixel hash) − 2. */
export function imageKey(image: PreparedImage): number {
  return -2 * parseInt(image.hash.slice(0, 12), 16) - 2;
}

/** The tower of a loaded vision model on the engine's kernels (vision/kernel-tower.ts) with
 * a cache of encoded images. */
export class VisionEngine {
  private readonly tower: KernelTower;
  private readonly cache = new Map<string, VisionOutput>();
  readonly pairAxes: Uint8Array;
  readonly imageTokenId: number;
  encoded = 0;

  /** Patches of the largest image the memory plan reserved an encode for. */
  readonly maxTokens: number;

  /** The tower's config (the weights live packed in the tower: the f32 set is not kept). */
  readonly cfg: VisionConfig;

  constructor(model: VisionModel, kernels: AnyKernels, rotaryPairs: number, maxImagePixels = DEFAULT_MAX_DECODE_PIXELS,
    private readonly cacheSize = 16) {
    const id = model.tokens.imageTokenId;
    if (id === null) throw new DeltaserveError('bad_config', 'the model has a vision_config but no image_token_id');
    this.imageTokenId = id;
    this.cfg = model.cfg;
    this.tower = new KernelTower(kernels, model.cfg, model.weights); // packs at load
    const factor = model.cfg.patchSize * model.cfg.spatialMergeSize;
    this.maxTokens = Math.floor(maxResizedPixels(model.pre, factor, maxImagePixels) / (factor * factor)) * model.cfg.spatialMergeSize ** 2;
    this.pairAxes = mropePairAxes(rotaryPairs, model.mrope.section, model.mrope.interleaved);
  }

  /** The request's image facts; the prompt's pad runs must match the images. */
  requestVision(promptIds: readonly number[], images: readonly PreparedImage[]): RequestVision {
    images.forEach((im, i) => {
      const tokens = im.grid.t * im.grid.h * im.grid.w;
      if (tokens > this.maxTokens) {
        throw new DeltaserveError('bad_request', `image ${i + 1} (${im.width}×${im.height}) is ${tokens} patches; the memory plan holds the tower's encode of at most ${this.maxTokens} (raise --max-image-pixels)`);
      }
    });
    const m = this.cfg.spatialMergeSize;
    const positions = mropePositions(promptIds, this.imageTokenId, images.map((im) => im.grid), m);
    const imageOf = new Int32Array(promptIds.length).fill(-1);
    const rowOf = new Int32Array(promptIds.length);
    let image = 0;
    let row = 0;
    promptIds.forEach((id, i) => {
      if (id !== this.imageTokenId) return;
      imageOf[i] = image;
      rowOf[i] = row++;
      if (row === imageTokenCount(images[image]!.grid, m)) [image, row] = [image + 1, 0];
    });
    return { images, positions, imageOf, rowOf, encoded: images.map(() => undefined) };
  }

  /** Encode the images with rows among prompt tokens [start, start + n) not encoded yet
   * (before those rows enter a forward; an image whose rows all come from the prefix cache
   * is never encoded). */
  async encodeRows(v: RequestVision, start: number, n: number): Promise<void> {
    const end = Math.min(start + n, v.imageOf.length);
    for (let i = start; i < end; i++) {
      const image = v.imageOf[i]!;
      if (image >= 0 && !v.encoded[image]) v.encoded[image] = await this.encode(v.images[image]!);
    }
  }

  /** The tower's output for one image (encoded once per pixel hash while cached). */
  async encode(image: PreparedImage): Promise<VisionOutput> {
    const hit = this.cache.get(image.hash);
    if (hit) return hit;

    const out = await this.tower.encode(image.patches, image.grid);
    this.encoded++;
    if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(image.hash, out);
    return out;
  }

  /** The image side of tokens [start, start + n) of a request. */
  rows(v: RequestVision, start: number, n: number, hidden: number): SeqVision {
    const L = v.positions.length;
    const positions = new Int32Array(3 * n);
    const rows: ImageRow[] = [];
    for (let j = 0; j < n; j++) {
      const i = start + j;
      for (let a = 0; a < 3; a++) positions[a * n + j] = i < L ? v.positions.positions[a * L + i]! : i + v.positions.delta;
      const image = i < L ? v.imageOf[i]! : -1;
      if (image < 0) continue;
      const out = v.encoded[image];
      if (!out) throw new DeltaserveError('internal', `image ${image} of the request was not encoded before its rows (VisionEngine.encodeRows)`);
      const r = v.rowOf[i]!;
      rows.push({ row: j, values: out.embeds.subarray(r * hidden, (r + 1) * hidden), deepstack: out.deepstack.map((d) => d.subarray(r * hidden, (r + 1) * hidden)) });
    }
    return { mrope: { positions, pairAxes: this.pairAxes }, rows };
  }
}
