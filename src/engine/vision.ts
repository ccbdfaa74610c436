// Images inside the engine: a request's image facts (positions, prefix-cache keys), the
// tower run once per image (cached by pixel hash), and each forward row's image side.
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
import type { AnyKernels } from '../kernels/types.js';
import type { ImageRow, SeqVision } from '../model/forward.js';
import { DeltaserveError } from '../util/errors.js';
import type { VisionModel } from '../vision/load.js';
import { kernelLinear } from '../vision/kernel-linear.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { imageTokenCount, mropePairAxes, mropePositions, type MropePositions } from '../vision/positions.js';
import { encodeImage, type LinearOp, type VisionOutput } from '../vision/tower.js';

/** A request's images and what the engine derives from them at build time. */
export interface RequestVision {
  readonly images: readonly PreparedImage[];
  /** Prompt positions (length L) and the decode offset. */
  readonly positions: MropePositions;
  /** Per prompt token: the image index it belongs to, or −1 for text. */
  readonly imageOf: Int32Array;
  /** Per prompt token: its row within its image's embeddings. */
  readonly rowOf: Int32Array;
}

/** Radix key of an image token of `image`: −2·(first 48 bits of its pixel hash) − 2. */
export function imageKey(image: PreparedImage): number {
  return -2 * parseInt(image.hash.slice(0, 12), 16) - 2;
}

/** The tower of a loaded vision model on the engine's kernels (the linear layers through
 * Kernels.matmul on CPU backends, plain TS otherwise) with a cache of encoded images. */
export class VisionEngine {
  private readonly linear: LinearOp | undefined;
  private readonly cache = new Map<string, VisionOutput>();
  readonly pairAxes: Uint8Array;
  readonly imageTokenId: number;
  encoded = 0;

  constructor(readonly model: VisionModel, kernels: AnyKernels, rotaryPairs: number, private readonly cacheSize = 16) {
    const id = model.tokens.imageTokenId;
    if (id === null) throw new DeltaserveError('bad_config', 'the model has a vision_config but no image_token_id');
    this.imageTokenId = id;
    this.linear = kernels.name === 'webgpu' ? undefined : kernelLinear(kernels);
    this.pairAxes = mropePairAxes(rotaryPairs, model.mrope.section, model.mrope.interleaved);
  }

  /** The request's image facts; the prompt's pad runs must match the images. */
  requestVision(promptIds: readonly number[], images: readonly PreparedImage[]): RequestVision {
    const m = this.model.cfg.spatialMergeSize;
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
    return { images, positions, imageOf, rowOf };
  }

  /** The tower's output for one image (encoded once per pixel hash while cached). */
  encode(image: PreparedImage): VisionOutput {
    const hit = this.cache.get(image.hash);
    if (hit) return hit;
    const out = encodeImage(this.model.cfg, this.model.weights, image.patches, image.grid, this.linear);
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
      const out = this.encode(v.images[image]!);
      const r = v.rowOf[i]!;
      rows.push({ row: j, values: out.embeds.subarray(r * hidden, (r + 1) * hidden), deepstack: out.deepstack.map((d) => d.subarray(r * hidden, (r + 1) * hidden)) });
    }
    return { mrope: { positions, pairAxes: this.pairAxes }, rows };
  }
}
