// The vision tower's tensors: their names and shapes in the HF release layout (one
// definition, used by make-model to write them and by loaders to read them), and the f32
// weight set the ref tower computes with.
import { DeltaserveError } from '../util/errors.js';
import { VISION_PREFIX, type VisionConfig } from './config.js';

/** A linear layer y = x·Wᵀ + b; w is [outDim, inDim] row-major. */
export interface Linear {
  readonly w: Float32Array;
  readonly b: Float32Array;
  readonly outDim: number;
  readonly inDim: number;
}

export interface LayerNormWeights {
  readonly w: Float32Array;
  readonly b: Float32Array;
}

export interface MergerWeights {
  /** Over hiddenSize before the 2×2 shuffle (final merger) or over 4·hiddenSize after it
   * (deepstack mergers: use_postshuffle_norm). */
  readonly norm: LayerNormWeights;
  readonly postShuffleNorm: boolean;
  readonly fc1: Linear;
  readonly fc2: Linear;
}

export interface VisionBlockWeights {
  readonly norm1: LayerNormWeights;
  readonly qkv: Linear;
  readonly proj: Linear;
  readonly norm2: LayerNormWeights;
  readonly fc1: Linear;
  readonly fc2: Linear;
}

export interface VisionWeights {
  /** The Conv3d kernel flattened to [hidden, C·T·P·P] (stride = kernel: a matmul). */
  readonly patchEmbed: Linear;
  /** [numPositionEmbeddings, hidden]. */
  readonly posEmbed: Float32Array;
  readonly blocks: readonly VisionBlockWeights[];
  readonly merger: MergerWeights;
  /** Merger k serves block deepstackVisualIndexes[k]. */
  readonly deepstack: readonly MergerWeights[];
}

/** Input width of the patch embedding: C · T · P · P. */
export function patchDim(cfg: VisionConfig): number {
  return cfg.inChannels * cfg.temporalPatchSize * cfg.patchSize * cfg.patchSize;
}

function mergerShapes(prefix: string, cfg: VisionConfig, postShuffle: boolean): [string, number[]][] {
  const merged = cfg.hiddenSize * cfg.spatialMergeSize * cfg.spatialMergeSize;
  const normDim = postShuffle ? merged : cfg.hiddenSize;
  return [
    [`${prefix}norm.weight`, [normDim]], [`${prefix}norm.bias`, [normDim]],
    [`${prefix}linear_fc1.weight`, [merged, merged]], [`${prefix}linear_fc1.bias`, [merged]],
    [`${prefix}linear_fc2.weight`, [cfg.outHiddenSize, merged]], [`${prefix}linear_fc2.bias`, [cfg.outHiddenSize]],
  ];
}

/** [name, shape] of every tower tensor, as Qwen3.5 / Qwen3-VL releases name them. */
export function visionTensorShapes(cfg: VisionConfig): [string, number[]][] {
  const p = VISION_PREFIX;
  const d = cfg.hiddenSize;
  const out: [string, number[]][] = [
    [`${p}patch_embed.proj.weight`, [d, cfg.inChannels, cfg.temporalPatchSize, cfg.patchSize, cfg.patchSize]],
    [`${p}patch_embed.proj.bias`, [d]],
    [`${p}pos_embed.weight`, [cfg.numPositionEmbeddings, d]],
    ...mergerShapes(`${p}merger.`, cfg, false),
  ];
  cfg.deepstackVisualIndexes.forEach((_, i) => out.push(...mergerShapes(`${p}deepstack_merger_list.${i}.`, cfg, true)));
  for (let b = 0; b < cfg.depth; b++) {
    const q = `${p}blocks.${b}.`;
    out.push(
      [`${q}norm1.weight`, [d]], [`${q}norm1.bias`, [d]],
      [`${q}attn.qkv.weight`, [3 * d, d]], [`${q}attn.qkv.bias`, [3 * d]],
      [`${q}attn.proj.weight`, [d, d]], [`${q}attn.proj.bias`, [d]],
      [`${q}norm2.weight`, [d]], [`${q}norm2.bias`, [d]],
      [`${q}mlp.linear_fc1.weight`, [cfg.intermediateSize, d]], [`${q}mlp.linear_fc1.bias`, [cfg.intermediateSize]],
      [`${q}mlp.linear_fc2.weight`, [d, cfg.intermediateSize]], [`${q}mlp.linear_fc2.bias`, [d]],
    );
  }
  return out;
}

/** Reads one tensor as f32 (any stored float type converted); `shape` is what the config
 * implies, which the reader checks against the file. */
export type TensorReader = (name: string, shape: readonly number[]) => Float32Array;

/** The tower's weights through `read`, every shape checked against the config. */
export function loadVisionWeights(cfg: VisionConfig, read: TensorReader): VisionWeights {
  const shapes = new Map(visionTensorShapes(cfg));
  const get = (name: string): Float32Array => {
    const full = `${VISION_PREFIX}${name}`;
    const shape = shapes.get(full);
    if (!shape) throw new DeltaserveError('internal', `vision tensor ${full} is not in the tower's tensor list`);
    const data = read(full, shape);
    const n = shape.reduce((a, b) => a * b, 1);
    if (data.length !== n) {
      throw new DeltaserveError('bad_checkpoint', `vision tensor ${full}: ${data.length} values, expected ${n} (shape [${shape.join(', ')}])`);
    }
    return data;
  };
  const linear = (name: string): Linear => {
    const shape = shapes.get(`${VISION_PREFIX}${name}.weight`);
    const outDim = shape?.[0] ?? 0;
    const w = get(`${name}.weight`);
    return { w, b: get(`${name}.bias`), outDim, inDim: w.length / outDim };
  };
  const norm = (name: string): LayerNormWeights => ({ w: get(`${name}.weight`), b: get(`${name}.bias`) });
  const merger = (q: string, postShuffleNorm: boolean): MergerWeights => ({
    norm: norm(`${q}norm`), postShuffleNorm, fc1: linear(`${q}linear_fc1`), fc2: linear(`${q}linear_fc2`),
  });
  const blocks = Array.from({ length: cfg.depth }, (_, b): VisionBlockWeights => {
    const q = `blocks.${b}.`;
    return {
      norm1: norm(`${q}norm1`), qkv: linear(`${q}attn.qkv`), proj: linear(`${q}attn.proj`),
      norm2: norm(`${q}norm2`), fc1: linear(`${q}mlp.linear_fc1`), fc2: linear(`${q}mlp.linear_fc2`),
    };
  });
  return {
    patchEmbed: linear('patch_embed.proj'),
    posEmbed: get('pos_embed.weight'),
    blocks,
    merger: merger('merger.', false),
    deepstack: cfg.deepstackVisualIndexes.map((_, i) => merger(`deepstack_merger_list.${i}.`, true)),
  };
}
