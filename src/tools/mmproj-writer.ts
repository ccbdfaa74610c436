// Write a vision tower as llama.cpp's mmproj GGUF (clip, projector "qwen3vl_merger"), as
// llama.cpp's converter lays it out (names and keys: src/vision/mmproj-names.ts): matrices
// (2-D and up) in F16 or F32 except the position table, always F32; 1-D tensors (norms,
// biases) in F32; the Conv3d patch kernel split into its two temporal slices.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openCheckpoint } from '../checkpoint/safetensors.js';
import { fp8BlockSize, withFp8Dequant } from '../checkpoint/fp8.js';
import { f32ToF16 } from '../kernels/quant/dequant.js';
import {
  DEFAULT_PREPROCESS, VISION_PREFIX, type PreprocessConfig, type VisionConfig, parsePreprocessConfig, parseVisionConfig,
} from '../vision/config.js';
import { checkpointReader } from '../vision/load.js';
import { MMPROJ_KEYS as K, MMPROJ_PROJECTOR, PATCH_EMBED_NAMES, mmprojName } from '../vision/mmproj-names.js';
import { type TensorReader, visionTensorShapes } from '../vision/weights.js';
import { type MetaEntry, type TensorOut, writeGgufFile } from './gguf-writer.js';

export interface MmprojOptions {
  readonly cfg: VisionConfig;
  readonly pre: PreprocessConfig;
  /** general.name */
  readonly name: string;
  /** Storage of tensors with 2 or more dimensions (llama.cpp's default is F16). */
  readonly matrixType: 'F32' | 'F16';
}

export function mmprojMetadata(o: MmprojOptions): MetaEntry[] {
  const c = o.cfg;
  const side = Math.round(Math.sqrt(c.numPositionEmbeddings));
  const deepstack = Array.from({ length: c.depth }, (_, l) => c.deepstackVisualIndexes.includes(l));
  return [
    { key: K.architecture, type: 'string', value: 'clip' },
    { key: K.type, type: 'string', value: 'mmproj' },
    { key: K.name, type: 'string', value: o.name },
    { key: K.fileType, type: 'u32', value: o.matrixType === 'F16' ? 1 : 0 },
    { key: K.hasVision, type: 'bool', value: true },
    { key: K.projector, type: 'string', value: MMPROJ_PROJECTOR },
    { key: K.projectionDim, type: 'u32', value: c.outHiddenSize },
    { key: K.imageSize, type: 'u32', value: side * c.patchSize },
    { key: K.patchSize, type: 'u32', value: c.patchSize },
    { key: K.embedding, type: 'u32', value: c.hiddenSize },
    { key: K.feedForward, type: 'u32', value: c.intermediateSize },
    { key: K.blocks, type: 'u32', value: c.depth },
    { key: K.heads, type: 'u32', value: c.numHeads },
    { key: K.imageMean, type: 'f32', array: [...o.pre.imageMean] },
    { key: K.imageStd, type: 'f32', array: [...o.pre.imageStd] },
    { key: K.useGelu, type: 'bool', value: true },
    { key: K.mergeSize, type: 'u32', value: c.spatialMergeSize },
    { key: K.layerNormEps, type: 'f32', value: c.layerNormEps },
    { key: K.deepstack, type: 'bool', array: deepstack },
  ];
}

function encode(values: Float32Array, type: 'F32' | 'F16'): Uint8Array {
  if (type === 'F32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const h = Uint16Array.from(values, f32ToF16);
  return new Uint8Array(h.buffer);
}

const POSITION_TABLE = 'v.position_embd.weight';

/** [D, C, T, P, P] → the T slices [D, C, P, P]. */
function temporalSlices(w: Float32Array, shape: readonly number[]): Float32Array[] {
  const [d, c, t, p, q] = shape as [number, number, number, number, number];
  const plane = p * q;
  return Array.from({ length: t }, (_, s) => {
    const out = new Float32Array(d * c * plane);
    for (let i = 0; i < d * c; i++) out.set(w.subarray((i * t + s) * plane, (i * t + s + 1) * plane), i * plane);
    return out;
  });
}

/** The tensors of the mmproj file, each read (through `read`) when written. */
export function mmprojTensors(o: MmprojOptions, read: TensorReader): TensorOut[] {
  const out: TensorOut[] = [];
  for (const [full, shape] of visionTensorShapes(o.cfg)) {
    const name = full.slice(VISION_PREFIX.length);
    const gguf = mmprojName(o.cfg, name);
    // llama.cpp's converter keeps the position table F32 whatever the file type (its
    // V_ENC_EMBD_POS rule), and clip.cpp's ggml_interpolate of it asserts F32
    const type = shape.length >= 2 && gguf !== POSITION_TABLE ? o.matrixType : 'F32';
    if (gguf === null) {
      const sliceShape = [shape[0]!, shape[1]!, shape[3]!, shape[4]!];
      PATCH_EMBED_NAMES.forEach((n, s) => out.push({
        name: n, shape: sliceShape, type,
        produce: (emit) => emit(encode(temporalSlices(read(full, shape), shape)[s]!, type)),
      }));
      continue;
    }
    out.push({ name: gguf, shape, type, produce: (emit) => emit(encode(read(full, shape), type)) });
  }
  return out;
}

export async function writeMmproj(path: string, o: MmprojOptions, read: TensorReader): Promise<void> {
  if (o.cfg.temporalPatchSize !== 2) throw new Error(`mmproj: llama.cpp's qwen3vl_merger needs temporal_patch_size 2 (got ${o.cfg.temporalPatchSize})`);
  await writeGgufFile(path, mmprojMetadata(o), mmprojTensors(o, read));
}

/** File name llama.cpp's converter gives a projector: mmproj-<name>-<TYPE>.gguf. */
export function mmprojFileName(name: string, type: 'F16' | 'F32'): string {
  return `mmproj-${name}-${type}.gguf`;
}

/** The vision tower of a release checkpoint directory (config.json with a vision_config,
 * model.visual.* in its safetensors; BF16 / F16 / F32 or block-wise FP8) written as an
 * mmproj into `outDir`; returns its path, or null for a text-only checkpoint. F16 is
 * llama.cpp's default for projectors and holds every BF16 value of magnitude in
 * [2^-14, 65504] exactly (10 mantissa bits against BF16's 7). */
export async function writeCheckpointMmproj(dir: string, outDir: string, name: string, matrixType: 'F16' | 'F32' = 'F16'): Promise<string | null> {
  const where = join(dir, 'config.json');
  const outer = JSON.parse(readFileSync(where, 'utf8')) as Record<string, unknown>;
  const cfg = parseVisionConfig(outer, where);
  if (!cfg) return null;
  const prePath = join(dir, 'preprocessor_config.json');
  const pre = existsSync(prePath) ? parsePreprocessConfig(JSON.parse(readFileSync(prePath, 'utf8')), prePath) : DEFAULT_PREPROCESS;
  const text = (typeof outer['text_config'] === 'object' && outer['text_config'] !== null ? outer['text_config'] : outer) as Record<string, unknown>;
  const block = fp8BlockSize(outer['quantization_config'] !== undefined ? outer : text, where);
  const raw = openCheckpoint(dir);
  const ck = block ? withFp8Dequant(raw, block) : raw;
  const out = join(outDir, mmprojFileName(name, matrixType));
  try {
    await writeMmproj(out, { cfg, pre, name, matrixType }, checkpointReader(ck));
  } finally {
    ck.close();
  }
  return out;
}
