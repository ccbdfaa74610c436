// A release checkpoint's vision side, from its directory: the tower config and weights
// (model.visual.* in the same safetensors as the text model; BF16, F16, F32, or block-wise
// FP8 read through the FP8 view), the vision token ids, the preprocessing constants
// (preprocessor_config.json, else the Qwen3-VL defaults) and the text model's mrope layout.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openCheckpoint, bf16ToF32, f16ToF32, type Checkpoint } from '../checkpoint/safetensors.js';
import { fp8BlockSize, withFp8Dequant } from '../checkpoint/fp8.js';
import { DeltaserveError } from '../util/errors.js';
import {
  DEFAULT_PREPROCESS, type MropeConfig, type PreprocessConfig, type VisionConfig, type VisionTokens,
  parseMrope, parsePreprocessConfig, parseVisionConfig, parseVisionTokens,
} from './config.js';
import { type TensorReader, type VisionWeights, loadVisionWeights } from './weights.js';

export interface VisionModel {
  readonly cfg: VisionConfig;
  readonly tokens: VisionTokens;
  readonly pre: PreprocessConfig;
  readonly mrope: MropeConfig;
  readonly weights: VisionWeights;
}

type Json = Record<string, unknown>;

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new DeltaserveError('bad_config', `${path}: not valid JSON (${(e as Error).message})`);
  }
}

/** f32 values of a checkpoint tensor whose shape must equal `shape`. */
export function checkpointReader(ck: Checkpoint): TensorReader {
  return (name, shape) => {
    const info = ck.info(name);
    if (info.shape.join() !== shape.join()) {
      throw new DeltaserveError('bad_checkpoint', `tensor ${name} in ${info.file} has shape [${info.shape.join(', ')}]; the vision_config implies [${shape.join(', ')}]`);
    }
    const bytes = ck.read(name);
    if (info.dtype === 'F32') return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4).slice();
    if (info.dtype === 'BF16' || info.dtype === 'F16') {
      const u16 = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      return Float32Array.from(u16, info.dtype === 'BF16' ? bf16ToF32 : f16ToF32);
    }
    throw new DeltaserveError('bad_checkpoint', `vision tensor ${name} in ${info.file} is ${info.dtype}; expected F32, F16, BF16 or block-wise FP8`);
  };
}

/** The vision side of the model in `dir`, or null when its config has no vision_config. */
export function loadVisionModel(dir: string): VisionModel | null {
  const where = join(dir, 'config.json');
  if (!existsSync(where)) throw new DeltaserveError('bad_config', `no config.json in model directory ${dir}`);
  const outer = readJson(where) as Json;
  const cfg = parseVisionConfig(outer, where);
  if (!cfg) return null;
  const prePath = join(dir, 'preprocessor_config.json');
  const pre = existsSync(prePath) ? parsePreprocessConfig(readJson(prePath), prePath) : DEFAULT_PREPROCESS;
  const text = (typeof outer['text_config'] === 'object' && outer['text_config'] !== null ? outer['text_config'] : outer) as Json;
  const block = fp8BlockSize(outer['quantization_config'] !== undefined ? outer : text, where);
  const raw = openCheckpoint(dir);
  const ck = block ? withFp8Dequant(raw, block) : raw;
  try {
    return {
      cfg, pre, tokens: parseVisionTokens(outer, where), mrope: parseMrope(text, `${where} (text_config)`),
      weights: loadVisionWeights(cfg, checkpointReader(ck)),
    };
  } finally {
    ck.close();
  }
}
