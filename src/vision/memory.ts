// What the vision tower adds to the memory plan (engine/memory-plan.ts): its weights (the f32
// set on the host and the copy packed on the kernels) and the peak of one encode for the
// largest image the limits let through.
import type { PreprocessConfig, VisionConfig } from './config.js';
import { towerActivationBytes, towerPackedBytes } from './kernel-tower.js';
import type { VisionWeights } from './weights.js';

export interface TowerMemory {
  /** The f32 weights on the host (vision/weights.ts). */
  readonly hostWeightBytes: number;
  /** The linear layers packed on the kernels (vision/kernel-tower.ts). */
  readonly packedWeightBytes: number;
  /** Peak scratch and activations of one encode of `maxTokens` patches. */
  readonly activationBytes: number;
  /** Patches of the largest image after the processor's resize (an upper bound). */
  readonly maxTokens: number;
  /** The decoded-pixel limit the bound was computed for. */
  readonly maxImagePixels: number;
}

const MAX_ASPECT = 200; // smart_resize refuses longer sides (preprocess.ts)

/** An upper bound of the pixels smart_resize gives an image of at most `maxImagePixels`
 * decoded pixels: at most the processor's max_pixels; below it, rounding each side to the
 * nearest multiple of the factor f adds < f·(h + w) + f² with h + w ≤ √P·(√200 + 1/√200), and
 * an image under min_pixels grows to about min_pixels, each side rounded up. */
export function maxResizedPixels(pre: PreprocessConfig, factor: number, maxImagePixels: number): number {
  const sides = (p: number): number => Math.sqrt(p) * (Math.sqrt(MAX_ASPECT) + 1 / Math.sqrt(MAX_ASPECT));
  const within = maxImagePixels + factor * sides(maxImagePixels) + factor * factor;
  const grown = pre.minPixels + factor * sides(pre.minPixels) + factor * factor;
  return Math.min(pre.maxPixels, Math.max(within, grown));
}

function floatBytes(w: VisionWeights): number {
  let n = w.posEmbed.byteLength;
  const visit = (o: object): void => {
    for (const v of Object.values(o)) {
      if (v instanceof Float32Array) n += v.byteLength;
      else if (typeof v === 'object' && v !== null) visit(v);
    }
  };
  visit({ patchEmbed: w.patchEmbed, blocks: w.blocks, merger: w.merger, deepstack: w.deepstack });
  return n;
}

/** The tower's memory for images of at most `maxImagePixels` decoded pixels. */
export function towerMemory(cfg: VisionConfig, pre: PreprocessConfig, w: VisionWeights, maxImagePixels: number): TowerMemory {
  const factor = cfg.patchSize * cfg.spatialMergeSize;
  const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
  // whole merge units of patches (both sides are multiples of the factor)
  const maxTokens = Math.floor(maxResizedPixels(pre, factor, maxImagePixels) / (factor * factor)) * unit;
  return {
    hostWeightBytes: floatBytes(w), packedWeightBytes: towerPackedBytes(w),
    activationBytes: towerActivationBytes(cfg, maxTokens), maxTokens, maxImagePixels,
  };
}
