// Load a vision tower from llama.cpp's mmproj GGUF (clip, projector "qwen3vl_merger"): the
// config from its metadata, the preprocessing constants, and the weights as f32 (F32, F16,
// BF16, and the GGML block formats dequantized as GGML does, e.g. a Q8_0 mmproj).
import { closeSync, openSync, readSync } from 'node:fs';
import { readGgufHeader, type GgufFile, type GgufTensorInfo, type GgufValue } from '../checkpoint/gguf-file.js';
import { bf16ToF32, f16ToF32 } from '../checkpoint/safetensors.js';
import { DeltaserveError } from '../util/errors.js';
import { dequantizeRow } from '../kernels/quant/dequant.js';
import { isQuantType } from '../kernels/quant/formats.js';
import { DEFAULT_PREPROCESS, VISION_PREFIX, type PreprocessConfig, type VisionConfig, parseVisionConfig } from './config.js';
import { MMPROJ_KEYS as K, MMPROJ_PROJECTOR, PATCH_EMBED_NAMES, mmprojName } from './mmproj-names.js';
import { type VisionWeights, loadVisionWeights } from './weights.js';

export interface MmprojVision {
  readonly cfg: VisionConfig;
  readonly pre: PreprocessConfig;
  readonly weights: VisionWeights;
}

function bad(path: string, message: string): never {
  throw new DeltaserveError('bad_checkpoint', `mmproj ${path}: ${message}`);
}

function num(f: GgufFile, key: string, fallback?: number): number {
  const v = f.metadata.get(key);
  if (v === undefined && fallback !== undefined) return fallback;
  if (typeof v !== 'number' && typeof v !== 'bigint') bad(f.path, `metadata "${key}" is missing or not a number`);
  return Number(v);
}

function list(f: GgufFile, key: string): readonly GgufValue[] | undefined {
  const v = f.metadata.get(key);
  return Array.isArray(v) ? v : undefined;
}

function triple(f: GgufFile, key: string, fallback: readonly [number, number, number]): [number, number, number] {
  const v = list(f, key);
  if (v === undefined) return [...fallback];
  if (v.length !== 3 || !v.every((x) => typeof x === 'number')) bad(f.path, `metadata "${key}" must be 3 numbers`);
  return v as [number, number, number];
}

/** The tower's config as parseVisionConfig sees it, from the clip metadata. */
function configOf(f: GgufFile, tensors: ReadonlyMap<string, GgufTensorInfo>): VisionConfig {
  const projector = f.metadata.get(K.projector) ?? f.metadata.get('clip.vision.projector_type');
  if (f.metadata.get(K.architecture) !== 'clip') bad(f.path, `general.architecture is ${JSON.stringify(f.metadata.get(K.architecture))}, expected "clip"`);
  if (projector !== MMPROJ_PROJECTOR) bad(f.path, `projector type ${JSON.stringify(projector)} is not supported (expected "${MMPROJ_PROJECTOR}", Qwen3-VL / Qwen3.5)`);
  const pos = tensors.get('v.position_embd.weight') ?? bad(f.path, 'tensor v.position_embd.weight is missing');
  const flags = list(f, K.deepstack) ?? [];
  const deepstack = flags.flatMap((x, l) => (x === true ? [l] : []));
  const cfg = parseVisionConfig({
    vision_config: {
      depth: num(f, K.blocks), hidden_size: num(f, K.embedding), num_heads: num(f, K.heads),
      intermediate_size: num(f, K.feedForward), out_hidden_size: num(f, K.projectionDim),
      patch_size: num(f, K.patchSize), spatial_merge_size: num(f, K.mergeSize, 2), temporal_patch_size: 2,
      num_position_embeddings: pos.shape[0], deepstack_visual_indexes: deepstack, hidden_act: 'gelu_pytorch_tanh',
    },
  }, f.path);
  return cfg!;
}

function readF32(fd: number, path: string, t: GgufTensorInfo): Float32Array {
  const bytes = new Uint8Array(t.nbytes);
  let done = 0;
  while (done < t.nbytes) {
    const n = readSync(fd, bytes, done, t.nbytes - done, t.offset + done);
    if (n <= 0) bad(path, `tensor ${t.name}: file ends before its data`);
    done += n;
  }
  if (t.type === 'F32') return new Float32Array(bytes.buffer);
  if (t.type === 'F16' || t.type === 'BF16') return Float32Array.from(new Uint16Array(bytes.buffer), t.type === 'BF16' ? bf16ToF32 : f16ToF32);
  if (!isQuantType(t.type)) bad(path, `tensor ${t.name} has the unsupported type ${String(t.type)}`);
  // rows of the innermost dimension, each a run of GGML blocks
  const cols = t.shape[t.shape.length - 1]!;
  const rows = t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) dequantizeRow(t.type, bytes, cols, r, out.subarray(r * cols, (r + 1) * cols));
  return out;
}

/** Interleave the two [D, C, P, P] temporal slices into the Conv3d kernel [D, C, 2, P, P]. */
function joinSlices(slices: readonly Float32Array[], shape: readonly number[]): Float32Array {
  const [d, c, t, p, q] = shape as [number, number, number, number, number];
  const plane = p * q;
  const out = new Float32Array(d * c * t * plane);
  for (let i = 0; i < d * c; i++) {
    for (let s = 0; s < t; s++) out.set(slices[s]!.subarray(i * plane, (i + 1) * plane), (i * t + s) * plane);
  }
  return out;
}

/** Config, preprocessing constants and f32 weights of an mmproj file. */
export function loadMmproj(path: string): MmprojVision {
  const f = readGgufHeader(path);
  const tensors = new Map(f.tensors.map((t) => [t.name, t]));
  const cfg = configOf(f, tensors);
  const pre: PreprocessConfig = {
    minPixels: num(f, K.minPixels, DEFAULT_PREPROCESS.minPixels), maxPixels: num(f, K.maxPixels, DEFAULT_PREPROCESS.maxPixels),
    imageMean: triple(f, K.imageMean, DEFAULT_PREPROCESS.imageMean), imageStd: triple(f, K.imageStd, DEFAULT_PREPROCESS.imageStd),
  };
  const fd = openSync(path, 'r');
  try {
    const tensor = (name: string, shape: readonly number[]): Float32Array => {
      const t = tensors.get(name) ?? bad(path, `tensor ${name} is missing`);
      if (t.shape.join() !== shape.join()) bad(path, `tensor ${name} has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`);
      return readF32(fd, path, t);
    };
    const weights = loadVisionWeights(cfg, (full, shape) => {
      const gguf = mmprojName(cfg, full.slice(VISION_PREFIX.length));
      if (gguf !== null) return tensor(gguf, shape);
      const slice = [shape[0]!, shape[1]!, shape[3]!, shape[4]!];
      return joinSlices(PATCH_EMBED_NAMES.map((n) => tensor(n, slice)), shape);
    });
    return { cfg, pre, weights };
  } finally {
    closeSync(fd);
  }
}
