// Checkpoint tensors into kernel weights: a stored tensor (safetensors or GGUF, any
// Checkpoint) becomes a backend Weight, read straight into the bytes allocWeight gives
// (F16 widened to f32 where a kernel reads f32), with its shape checked against the one
// the model asks for.
import type { Kernels, Weight, WeightDType } from '../kernels/types.js';
import { DeltaserveError, assert } from '../util/errors.js';
import { isQuantType } from '../kernels/quant/formats.js';
import { f16ToF32 } from '../kernels/quant/dequant.js';
import { quantWeightDType } from './quant-weights.js';
import type { Checkpoint, StDType, TensorInfo } from './safetensors.js';

function bad(message: string): never {
  throw new DeltaserveError('bad_checkpoint', message);
}

/** Check the stored shape equals `shape` element-wise; returns the tensor's info. */
function checkShape(ckpt: Checkpoint, name: string, shape: readonly number[]): TensorInfo {
  const t = ckpt.info(name);
  if (t.dtype === 'F8_E4M3') bad(`tensor ${name} in ${t.file} is F8_E4M3 without block scales (${name}_scale_inv) or quantization_config`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    bad(`tensor ${name} in ${t.file} has shape [${t.shape.join(',')}], expected [${shape.join(',')}]`);
  }
  return t;
}

/** [rows, cols] of the weight matrix for a tensor shape: 1-D [n] → [1, n]; else [s0, Π rest]. */
function matrixDims(shape: readonly number[]): [number, number] {
  if (shape.length === 0) return [1, 1];
  if (shape.length === 1) return [1, shape[0]!];
  return [shape[0]!, shape.slice(1).reduce((a, b) => a * b, 1)];
}

/** A Float32Array over `bytes` (which the caller of allocWeight must fill). */
function f32View(bytes: Uint8Array): Float32Array {
  assert(bytes.byteOffset % 4 === 0, 'f32 weight bytes must be 4-byte aligned');
  return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

/** Widen raw BF16/F16/F32 bytes (from read(), so 0-offset and aligned) into out. */
function widenInto(out: Float32Array, raw: Uint8Array, dtype: StDType): void {
  if (dtype === 'F32') {
    out.set(new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4));
    return;
  }
  const src = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
  const u32 = new Uint32Array(out.buffer, out.byteOffset, out.length);
  if (dtype === 'BF16') {
    for (let i = 0; i < src.length; i++) u32[i] = src[i]! << 16;
  } else {
    for (let i = 0; i < src.length; i++) out[i] = f16ToF32(src[i]!);
  }
}

/** Load a tensor as a kernel weight of shape `shape` (BF16 → bf16; F32 → f32; F16 → f16
 * when `keepF16` (matmul and embedding operands), else f32; a GGML block format stays
 * quantized). Every type but widened F16 is read straight into the backend's bytes with no
 * intermediate copy. */
export function loadWeight(ckpt: Checkpoint, kernels: Pick<Kernels, 'allocWeight'>, name: string,
  shape: readonly number[], onBytes?: (n: number) => void, keepF16 = false): Weight {
  const t = checkShape(ckpt, name, shape);
  const [rows, cols] = matrixDims(shape);
  const dtype: WeightDType = keepF16 ? matrixDTypeOf(t) : weightDTypeOf(t);
  const { weight, bytes } = kernels.allocWeight(dtype, rows, cols);
  if (t.dtype === 'F16' && dtype === 'f32') {
    widenInto(f32View(bytes), ckpt.read(name), 'F16');
    onBytes?.(t.nbytes);
  } else {
    assert(bytes.byteLength === t.nbytes, `allocWeight(${dtype}, ${rows}, ${cols}) returned ${bytes.byteLength} bytes for ${name} (${t.nbytes})`);
    ckpt.readInto(name, bytes, onBytes);
    if (dtype === 'f16') assertFiniteF16(bytes, name, t.file);
  }
  return weight;
}

/** The backend dtype a stored tensor loads as (BF16 → bf16, F32/F16 → f32, quantized as is). */
export function weightDTypeOf(t: TensorInfo): WeightDType {
  if (isQuantType(t.dtype)) return quantWeightDType(t.dtype, t.name, t.file);
  return t.dtype === 'BF16' ? 'bf16' : 'f32';
}

/** The backend dtype a matmul / embedding operand loads as: F16 stays f16 (16-bit in
 * memory, widened inside the kernels), everything else as weightDTypeOf. */
export function matrixDTypeOf(t: TensorInfo): WeightDType {
  return t.dtype === 'F16' ? 'f16' : weightDTypeOf(t);
}

/** Refuse F16 bits that are inf or NaN (exponent all ones): the f16 kernels widen only
 * finite values exactly, and a weight holding them is broken anyway. */
export function assertFiniteF16(bytes: Uint8Array, name: string, file: string): void {
  const n = bytes.byteLength >> 1;
  const aligned = bytes.byteOffset % 4 === 0;
  const words = aligned ? new Uint32Array(bytes.buffer, bytes.byteOffset, n >> 1) : null;
  let at = -1;
  if (words) {
    for (let i = 0; i < words.length; i++) {
      const v = words[i]!;
      if ((v & 0x7c00) === 0x7c00 || (v & 0x7c000000) === 0x7c000000) {
        at = 2 * i + ((v & 0x7c00) === 0x7c00 ? 0 : 1);
        break;
      }
    }
  }
  for (let i = words ? 2 * words.length : 0; at < 0 && i < n; i++) {
    if (((bytes[2 * i]! | (bytes[2 * i + 1]! << 8)) & 0x7c00) === 0x7c00) at = i;
  }
  if (at >= 0) bad(`tensor ${name} in ${file} holds an F16 inf or NaN at element ${at}; F16 weights must be finite`);
}


/** Load a tensor as an f32 weight whatever its stored dtype (for small vectors: norms,
 * A_log, dt_bias). */
export function loadWeightF32(ckpt: Checkpoint, kernels: Pick<Kernels, 'allocWeight'>, name: string,
  shape: readonly number[], onBytes?: (n: number) => void): Weight {
  const t = checkShape(ckpt, name, shape);
  if (isQuantType(t.dtype)) bad(`tensor ${name} in ${t.file} is quantized (${t.dtype}); it must be stored as F32, F16 or BF16`);
  const [rows, cols] = matrixDims(shape);
  const { weight, bytes } = kernels.allocWeight('f32', rows, cols);
  if (t.dtype === 'F32') {
    ckpt.readInto(name, bytes, onBytes);
  } else {
    widenInto(f32View(bytes), ckpt.read(name), t.dtype);
    onBytes?.(t.nbytes);
  }
  return weight;
}
