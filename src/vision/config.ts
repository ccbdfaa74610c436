// The vision side of a Qwen3.5 / Qwen3-VL release config: `vision_config` (the tower), the
// special token ids of the outer config, and preprocessor_config.json (resize bounds, mean,
// std). Every invalid field is a DeltaserveError naming the file and field; absent optional
// fields take the defaults of HF transformers' Qwen3_5VisionConfig / Qwen2VLImageProcessor.
import { DeltaserveError } from '../util/errors.js';

/** Tensor-name prefix of the vision tower in release checkpoints. */
export const VISION_PREFIX = 'model.visual.';

export type VisionAct = 'gelu_pytorch_tanh' | 'gelu';

export interface VisionConfig {
  readonly depth: number;
  readonly hiddenSize: number;
  readonly numHeads: number;
  /** hiddenSize / numHeads; a multiple of 4 (two rotary axes, each rotating pairs). */
  readonly headDim: number;
  readonly intermediateSize: number;
  readonly hiddenAct: VisionAct;
  readonly inChannels: number;
  readonly patchSize: number;
  readonly temporalPatchSize: number;
  readonly spatialMergeSize: number;
  /** Width of the merger's output: the language model's hidden size. */
  readonly outHiddenSize: number;
  /** Entries of the learned position table: a square grid of side sqrt(n). */
  readonly numPositionEmbeddings: number;
  /** Blocks whose output feeds a deepstack merger (Qwen3-VL); empty for Qwen3.5. */
  readonly deepstackVisualIndexes: readonly number[];
  readonly ropeTheta: number;
  /** LayerNorm epsilon of the blocks and mergers (fixed at 1e-6 in the reference code). */
  readonly layerNormEps: number;
}

/** Special token ids of the outer config (null when the config leaves them unset). */
export interface VisionTokens {
  readonly imageTokenId: number | null;
  readonly videoTokenId: number | null;
  readonly visionStartTokenId: number | null;
  readonly visionEndTokenId: number | null;
}

export interface PreprocessConfig {
  readonly minPixels: number;
  readonly maxPixels: number;
  /** Per channel (R, G, B), applied to pixel/255. */
  readonly imageMean: readonly [number, number, number];
  readonly imageStd: readonly [number, number, number];
}

type Json = Record<string, unknown>;

function bad(where: string, key: string, what: string): never {
  throw new DeltaserveError('bad_config', `${where}: field "${key}" ${what}`);
}

function intField(obj: Json, key: string, where: string, fallback?: number, min = 1): number {
  const v = obj[key];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    bad(where, key, 'is missing');
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) bad(where, key, `must be an integer (got ${JSON.stringify(v)})`);
  if (v < min) bad(where, key, `must be ≥ ${min} (got ${v})`);
  return v;
}

function numField(obj: Json, key: string, where: string, fallback: number): number {
  const v = obj[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v)) bad(where, key, `must be a number (got ${JSON.stringify(v)})`);
  return v;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseAct(obj: Json, where: string): VisionAct {
  const v = obj['hidden_act'] ?? 'gelu_pytorch_tanh';
  if (v === 'gelu_pytorch_tanh' || v === 'gelu') return v;
  return bad(where, 'hidden_act', `is ${JSON.stringify(v)}; supported: "gelu_pytorch_tanh", "gelu"`);
}

function parseDeepstack(obj: Json, where: string, depth: number): number[] {
  const v = obj['deepstack_visual_indexes'];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => Number.isInteger(x) && x >= 0 && x < depth)) {
    bad(where, 'deepstack_visual_indexes', `must be a list of block indexes in [0, ${depth})`);
  }
  if (new Set(v).size !== v.length) bad(where, 'deepstack_visual_indexes', 'lists a block twice');
  return v as number[];
}

/** The tower of `outer.vision_config`, or null when the config has none (text-only). */
export function parseVisionConfig(outer: Json, where = 'config.json'): VisionConfig | null {
  const vc = outer['vision_config'];
  if (vc === undefined || vc === null) return null;
  const w = `${where} (vision_config)`;
  if (!isObject(vc)) throw new DeltaserveError('bad_config', `${where}: field "vision_config" must be an object`);
  const depth = intField(vc, 'depth', w);
  const hiddenSize = intField(vc, 'hidden_size', w);
  const numHeads = intField(vc, 'num_heads', w);
  if (hiddenSize % numHeads !== 0) bad(w, 'num_heads', `(${numHeads}) must divide hidden_size (${hiddenSize})`);
  const headDim = hiddenSize / numHeads;
  if (headDim % 4 !== 0) bad(w, 'num_heads', `gives head dim ${headDim}; 2D rotary needs a multiple of 4`);
  const numPositionEmbeddings = intField(vc, 'num_position_embeddings', w, 2304);
  const side = Math.round(Math.sqrt(numPositionEmbeddings));
  if (side * side !== numPositionEmbeddings) bad(w, 'num_position_embeddings', `(${numPositionEmbeddings}) must be a square`);
  const rope = vc['rope_parameters'];
  const cfg: VisionConfig = {
    depth, hiddenSize, numHeads, headDim,
    intermediateSize: intField(vc, 'intermediate_size', w),
    hiddenAct: parseAct(vc, w),
    inChannels: intField(vc, 'in_channels', w, 3),
    patchSize: intField(vc, 'patch_size', w, 16),
    temporalPatchSize: intField(vc, 'temporal_patch_size', w, 2),
    spatialMergeSize: intField(vc, 'spatial_merge_size', w, 2),
    outHiddenSize: intField(vc, 'out_hidden_size', w),
    numPositionEmbeddings,
    deepstackVisualIndexes: parseDeepstack(vc, w, depth),
    ropeTheta: isObject(rope) ? numField(rope, 'rope_theta', `${w} (rope_parameters)`, 10000) : numField(vc, 'rope_theta', w, 10000),
    layerNormEps: 1e-6,
  };
  if (cfg.inChannels !== 3) bad(w, 'in_channels', `must be 3 (RGB) (got ${cfg.inChannels})`);
  return Object.freeze(cfg);
}

/** The image / video / vision start and end token ids of the outer config. */
export function parseVisionTokens(outer: Json, where = 'config.json'): VisionTokens {
  const id = (key: string): number | null => {
    const v = outer[key];
    if (v === undefined || v === null) return null;
    return intField(outer, key, where, undefined, 0);
  };
  return {
    imageTokenId: id('image_token_id'), videoTokenId: id('video_token_id'),
    visionStartTokenId: id('vision_start_token_id'), visionEndTokenId: id('vision_end_token_id'),
  };
}

/** Qwen3-VL / Qwen3.5 processor defaults: 16·16·2·2·… min 65,536 px, max 16,777,216 px, mean
 * and std 0.5 (preprocessor_config.json of the releases). */
export const DEFAULT_PREPROCESS: PreprocessConfig = Object.freeze({
  minPixels: 65536, maxPixels: 16777216, imageMean: [0.5, 0.5, 0.5] as const, imageStd: [0.5, 0.5, 0.5] as const,
});

function triple(obj: Json, key: string, where: string, fallback: readonly [number, number, number]): [number, number, number] {
  const v = obj[key];
  if (v === undefined || v === null) return [...fallback];
  const list = typeof v === 'number' ? [v, v, v] : v;
  if (!Array.isArray(list) || list.length !== 3 || !list.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    bad(where, key, 'must be a number or a list of 3 numbers');
  }
  return list as [number, number, number];
}

/** preprocessor_config.json: `size.shortest_edge` / `size.longest_edge` (or the older
 * min_pixels / max_pixels) as pixel-count bounds, image_mean, image_std. */
export function parsePreprocessConfig(json: unknown, where = 'preprocessor_config.json'): PreprocessConfig {
  if (!isObject(json)) throw new DeltaserveError('bad_config', `${where}: expected a JSON object`);
  const size = isObject(json['size']) ? json['size'] : {};
  const d = DEFAULT_PREPROCESS;
  const minPixels = intField(json, 'min_pixels', where, intField(size, 'shortest_edge', `${where} (size)`, d.minPixels));
  const maxPixels = intField(json, 'max_pixels', where, intField(size, 'longest_edge', `${where} (size)`, d.maxPixels));
  if (maxPixels < minPixels) bad(where, 'max_pixels', `(${maxPixels}) must be ≥ min_pixels (${minPixels})`);
  const imageStd = triple(json, 'image_std', where, d.imageStd);
  if (imageStd.some((s) => s === 0)) bad(where, 'image_std', 'must not be 0');
  return Object.freeze({ minPixels, maxPixels, imageMean: triple(json, 'image_mean', where, d.imageMean), imageStd });
}

export interface MropeConfig {
  /** Rotary pairs per axis (temporal, height, width). */
  readonly section: readonly [number, number, number];
  /** Qwen3-VL / Qwen3.5 interleave the axes over the pairs; Qwen2-VL chunks them. */
  readonly interleaved: boolean;
}

/** The text model's multimodal rotary layout (`rope_parameters` or `rope_scaling` of the
 * text config): mrope_section (default [11, 11, 10]) and mrope_interleaved (default true). */
export function parseMrope(text: Json, where = 'config.json (text_config)'): MropeConfig {
  const src = isObject(text['rope_parameters']) ? text['rope_parameters'] : isObject(text['rope_scaling']) ? text['rope_scaling'] : {};
  const section = src['mrope_section'] ?? [11, 11, 10];
  if (!Array.isArray(section) || section.length !== 3 || !section.every((x) => Number.isInteger(x) && x >= 0)) {
    bad(where, 'mrope_section', 'must be a list of 3 non-negative integers');
  }
  const interleaved = src['mrope_interleaved'] ?? true;
  if (typeof interleaved !== 'boolean') bad(where, 'mrope_interleaved', 'must be true or false');
  return { section: section as [number, number, number], interleaved };
}
