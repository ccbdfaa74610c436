// make-model --mmproj: the planned vision tower of a release-layout model written as
// llama.cpp's mmproj GGUF beside it, from the same generated values as the safetensors.
import { join } from 'node:path';
import { bf16ToF32 } from '../checkpoint/safetensors.js';
import { DEFAULT_PREPROCESS, parseVisionConfig } from '../vision/config.js';
import { DeltaserveError } from '../util/errors.js';
import { type TensorSource, tensorBytes } from './safetensors-writer.js';
import { mmprojFileName, writeMmproj } from './mmproj-writer.js';

/** A tensor's values as f32 (BF16 widened exactly). */
function valuesOf(src: TensorSource): Float32Array {
  const bytes = new Uint8Array(tensorBytes(src));
  src.fill(bytes, 0);
  if (src.dtype === 'F32') return new Float32Array(bytes.buffer);
  if (src.dtype !== 'BF16') throw new DeltaserveError('internal', `make-model mmproj: tensor ${src.name} is ${src.dtype}`);
  return Float32Array.from(new Uint16Array(bytes.buffer), bf16ToF32);
}

/** Write the mmproj of a planned release model into `dir`; returns the file name. */
export async function writePlannedMmproj(dir: string, name: string, config: Record<string, unknown>,
  tensors: readonly TensorSource[], type: 'F16' | 'F32'): Promise<string> {
  const cfg = parseVisionConfig(config, 'make-model');
  if (!cfg) throw new DeltaserveError('bad_request', 'make-model --mmproj needs the release layout (a model with a vision tower)');
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const file = mmprojFileName(name, type);
  await writeMmproj(join(dir, file), { cfg, pre: DEFAULT_PREPROCESS, name, matrixType: type }, (full) => {
    const src = byName.get(full);
    if (!src) throw new DeltaserveError('internal', `make-model mmproj: no planned tensor ${full}`);
    return valuesOf(src);
  });
  return file;
}
