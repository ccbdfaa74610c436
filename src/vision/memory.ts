// What the vision tower adds to the memory plan (engine/memory-plan.ts): its weights (the
// linear layers packed on the kernels, the small rest on the host) and the peak of one encode
// for the largest image the limits let through.
import type { PreprocessConfig, VisionConfig } from './config.js';
import { towerActivationBytes, towerPackedBytes } from './kernel-tower.js';
import type { VisionWeights } from './weights.js';

export interface TowerMemory {
  /** The f32 weights the tower keeps on the host: norms, biases, the position table (the
   * linear matrices live packed on the kernels; their f32 load copies are freed after load). */
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

function keptHostBytes(w: VisionWeights): number {
  const norms = [...w.blocks.flatMap((b) => [b.norm1, b.norm2]), w.merger.norm, ...w.deepstack.map((m) => m.norm)];
  const linears = [w.patchEmbed, ...w.blocks.flatMap((b) => [b.qkv, b.proj, b.fc1, b.fc2]), ...[w.merger, ...w.deepstack].flatMap((m) => [m.fc1, m.fc2])];
  return w.posEmbed.byteLength + norms.reduce((n, x) => n + x.w.byteLength + x.b.byteLength, 0) + linears.reduce((n, l) => n + l.b.byteLength, 0);
}

/** The tower's memory for images of at most `maxImagePixels` decoded pixels. */
export function towerMemory(cfg: VisionConfig, pre: PreprocessConfig, w: VisionWeights, maxImagePixels: number): TowerMemory {
  const factor = cfg.patchSize * cfg.spatialMergeSize;
  const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
  // whole merge units of patches (both sides are multiples of the factor)
  const maxTokens = Math.floor(maxResizedPixels(pre, factor, maxImagePixels) / (factor * factor)) * unit;
  return {
    hostWeightBytes: keptHostBytes(w), packedWeightBytes: towerPackedBytes(w),
    activationBytes: towerActivationBytes(cfg, maxTokens), maxTokens, maxImagePixels,
  };
}
