// The release layout of Qwen3.5 checkpoints, as `make-model` writes it by default:
// `Qwen3_5ForConditionalGeneration` / `Qwen3_5MoeForConditionalGeneration`, the text model's
// config nested under `text_config`, a `vision_config`, a (here tiny, random) vision tower
// under `model.visual.*` that deltaserve skips at load, and the chat template in its own
// `chat_template.jinja` file. Qwen3-Next has no wrapper: its release layout is flat.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { parseVisionConfig, type VisionConfig } from '../vision/config.js';
import { visionTensorShapes as towerTensorShapes } from '../vision/weights.js';

export type ReleaseWrapper = 'qwen3_5' | 'qwen3_5_moe';

/** The wrapper model_type of a text model_type, or null when it has none (flat). */
export function releaseWrapper(textModelType: string): ReleaseWrapper | null {
  if (textModelType === 'qwen3_5_text') return 'qwen3_5';
  if (textModelType === 'qwen3_5_moe_text') return 'qwen3_5_moe';
  return null;
}

/** The free dimensions of a vision tower (patch 16, temporal 2, merge 2, RGB are fixed). */
export interface VisionTowerSpec {
  readonly depth: number;
  readonly hidden: number;
  readonly heads: number;
  readonly intermediate: number;
  /** Learned position table entries (a square). */
  readonly numPositions: number;
  /** Qwen3-VL deepstack blocks; Qwen3.5 releases have none. */
  readonly deepstack: readonly number[];
}

/** A deliberately small stand-in tower (depth 1, width 32): real tensor names and ranks, so
 * loaders meet `model.visual.*` tensors as in released files, without their size. */
export const STAND_IN_TOWER: VisionTowerSpec = { depth: 1, hidden: 32, heads: 2, intermediate: 64, numPositions: 16, deepstack: [] };

/** Special tokens of the Qwen-VL family, in the order of their ids in the releases
 * (vision_start, vision_end, vision_pad, image_pad, video_pad are consecutive). */
export const VISION_SPECIAL_TOKENS = ['<|vision_start|>', '<|vision_end|>', '<|vision_pad|>', '<|image_pad|>', '<|video_pad|>'] as const;

/** Ids of the vision special tokens (null where the tokenizer has none). */
export interface VisionTokenIds {
  readonly visionStart: number | null;
  readonly visionEnd: number | null;
  readonly imagePad: number | null;
  readonly videoPad: number | null;
}

/** config.json's vision_config for a tower spec feeding a text model of width textHidden. */
export function visionConfigJson(wrapper: ReleaseWrapper, tower: VisionTowerSpec, textHidden: number): Record<string, unknown> {
  return {
    model_type: wrapper, depth: tower.depth, hidden_size: tower.hidden, num_heads: tower.heads,
    intermediate_size: tower.intermediate, in_channels: 3, patch_size: 16, temporal_patch_size: 2, spatial_merge_size: 2,
    out_hidden_size: textHidden, num_position_embeddings: tower.numPositions, hidden_act: 'gelu_pytorch_tanh',
    deepstack_visual_indexes: [...tower.deepstack], initializer_range: 0.02,
  };
}

/** The parsed config of a tower spec (what a loader will read back). */
export function towerConfig(tower: VisionTowerSpec, textHidden: number): VisionConfig {
  const cfg = parseVisionConfig({ vision_config: visionConfigJson('qwen3_5', tower, textHidden) }, 'make-model');
  if (!cfg) throw new Error('unreachable: vision_config written above');
  return cfg;
}

/** [name, shape] of the vision tower's tensors; `textHidden` is the merger's output width. */
export function visionTensorShapes(tower: VisionTowerSpec, textHidden: number): [string, number[]][] {
  return towerTensorShapes(towerConfig(tower, textHidden));
}

/** The release config.json around a text config (which keeps its own model_type). */
export function releaseConfig(wrapper: ReleaseWrapper, text: Record<string, unknown>, tower: VisionTowerSpec,
  ids: VisionTokenIds): Record<string, unknown> {
  const moe = wrapper === 'qwen3_5_moe';
  return {
    architectures: [moe ? 'Qwen3_5MoeForConditionalGeneration' : 'Qwen3_5ForConditionalGeneration'],
    model_type: wrapper,
    image_token_id: ids.imagePad, video_token_id: ids.videoPad,
    vision_start_token_id: ids.visionStart, vision_end_token_id: ids.visionEnd,
    tie_word_embeddings: text['tie_word_embeddings'],
    text_config: { ...text, architectures: undefined },
    vision_config: visionConfigJson(wrapper, tower, Number(text['hidden_size'])),
  };
}

/** preprocessor_config.json of the releases (Qwen3-VL processor: patch 16, merge 2, pixel
 * bounds 65,536 … 16,777,216, mean = std = 0.5). */
export function preprocessorConfigJson(): Record<string, unknown> {
  return {
    size: { longest_edge: 16777216, shortest_edge: 65536 }, patch_size: 16, temporal_patch_size: 2, merge_size: 2,
    image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5],
    processor_class: 'Qwen3VLProcessor', image_processor_type: 'Qwen2VLImageProcessorFast',
  };
}

/** Move a `chat_template` string out of tokenizer_config.json into chat_template.jinja
 * (as the Qwen3.5 releases ship it). No-op when there is no inline template. */
export function splitChatTemplate(dir: string): void {
  const path = join(dir, 'tokenizer_config.json');
  if (!existsSync(path)) return;
  const cfg = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  const t = cfg['chat_template'];
  if (typeof t !== 'string') return;
  delete cfg['chat_template'];
  rmSync(path, { force: true });
  writeFileSync(path, `${JSON.stringify(cfg, null, 2)}\n`);
  writeFileSync(join(dir, 'chat_template.jinja'), t);
}
