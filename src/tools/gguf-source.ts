// A GGUF file (or split GGUF) as the source of `deltaserve quantize`: its tensors are already in
// llama.cpp's layout, so they pass through by name, widened to f32 a band of rows at a time;
// its metadata is copied as stored, with general.file_type (and quantization_version) set for
// the new file. This is llama-quantize's re-typing of a float GGUF: quantized sources are
// refused, as llama-quantize refuses them without --allow-requantize (quantizing twice
// compounds the error).
import type { GgufFile } from '../checkpoint/gguf-file.js';
import { type GgufParts, type Located, readFully } from '../checkpoint/gguf.js';
import { bf16ToF32, f16ToF32 } from '../checkpoint/safetensors.js';
import { DeltaserveError } from '../util/errors.js';
import type { ConvertedTensor } from './hf-to-gguf.js';
import { GV, type GgufScalarType, type MetaEntry } from './gguf-writer.js';

/** Keys that describe the source file, not the model: rewritten or dropped. */
const SOURCE_ONLY = /^(general\.file_type|general\.quantization_version|general\.alignment|split\..*)$/;

const TYPE_NAMES = new Map<number, GgufScalarType>(
  (Object.entries(GV) as [keyof typeof GV, number][]).filter(([n]) => n !== 'array').map(([n, id]) => [id, n as GgufScalarType]));

/** The source's metadata, in its order and with its stored types, minus SOURCE_ONLY keys. */
export function ggufSourceMetadata(f: GgufFile): MetaEntry[] {
  const out: MetaEntry[] = [];
  for (const [key, value] of f.metadata) {
    if (SOURCE_ONLY.test(key)) continue;
    const type = TYPE_NAMES.get(f.metadataTypes.get(key) ?? -1);
    if (!type) throw new DeltaserveError('bad_checkpoint', `quantize: ${f.path}: metadata ${key} holds nested arrays, which cannot be copied`);
    if (Array.isArray(value)) {
      if (value.some((v) => Array.isArray(v))) throw new DeltaserveError('bad_checkpoint', `quantize: ${f.path}: metadata ${key} holds nested arrays, which cannot be copied`);
      out.push({ key, type, array: value as (number | bigint | boolean | string)[] });
    } else out.push({ key, type, value: value as number | bigint | boolean | string });
  }
  return out;
}

/** Tensors llama-quantize never quantizes: vectors, the conv kernel and the MoE router. */
function keepsF32(name: string, shape: readonly number[]): boolean {
  return shape.length === 1 || name.endsWith('.ssm_conv1d.weight') || name.endsWith('.ffn_gate_inp.weight');
}

/** Every tensor of the source, in file order, read as f32 rows. */
export function ggufSourceTensors(g: GgufParts): ConvertedTensor[] {
  const out: ConvertedTensor[] = [];
  for (const f of g.parts) {
    for (const t of f.tensors) {
      const src = g.tensors.get(t.name)!;
      if (t.type !== 'F32' && t.type !== 'F16' && t.type !== 'BF16') {
        throw new DeltaserveError('bad_checkpoint', `quantize: tensor ${t.name} of ${src.file} is ${t.type}: quantize starts from a ` +
          'float GGUF (F32, F16 or BF16); quantizing quantized weights again compounds the error');
      }
      out.push(floatTensor(src));
    }
  }
  return out;
}

function floatTensor(src: Located): ConvertedTensor {
  const { t } = src;
  const cols = t.shape[t.shape.length - 1]!;
  const rows = t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
  const item = t.type === 'F32' ? 4 : 2;
  return {
    name: t.name, shape: t.shape, rows, cols, keepF32: t.type === 'F32' && keepsF32(t.name, t.shape), source: `${src.file}: ${t.name}`,
    readRows(r0, n, dest) {
      const bytes = new Uint8Array(n * cols * item);
      readFully(src, t.offset + r0 * cols * item, bytes);
      if (item === 4) {
        dest.set(new Float32Array(bytes.buffer, 0, n * cols));
        return;
      }
      const bits = new Uint16Array(bytes.buffer, 0, n * cols);
      const widen = t.type === 'BF16' ? bf16ToF32 : f16ToF32;
      for (let i = 0; i < bits.length; i++) dest[i] = widen(bits[i]!);
    },
  };
}
