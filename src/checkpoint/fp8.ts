// Block-wise FP8 checkpoints: weights stored as float8 e4m3 (`F8_E4M3`, the
// "fn" variant: bias 7, no infinities, ±448 max, S.1111.111 = NaN) with one f32 multiplier
// per block of 128×128 in `<name>_scale_inv` (shape [⌈R/128⌉, ⌈C/128⌉] over the last two
// dims), and `quantization_config: {quant_method: "fp8", weight_block_size: [128, 128]}`.
//
// Reading: `withFp8Dequant` wraps a Checkpoint so every F8 weight appears as a BF16 tensor
// (w = e4m3 · scale_inv, rounded to nearest-even bf16) and the scale tensors disappear;
// dequantization happens inside each read, tensor by tensor (no whole-model copy), so
// everything above — loaders, regrouping, a later --quantize — sees BF16.
// Writing (make-model --dtype fp8) is in tools/fp8-write.ts.
import { DeltaserveError, assert } from '../util/errors.js';
import { bf16ToF32, type Checkpoint, type TensorInfo } from './safetensors.js';

export const FP8_MAX = 448;
export const SCALE_SUFFIX = '_scale_inv';

/** e4m3fn code → value (index = byte). */
export const E4M3_VALUES: Float32Array = (() => {
  const t = new Float32Array(256);
  for (let b = 0; b < 256; b++) {
    const sign = b & 0x80 ? -1 : 1;
    const exp = (b >> 3) & 0xf;
    const man = b & 7;
    if (exp === 15 && man === 7) t[b] = NaN;
    else if (exp === 0) t[b] = sign * (man / 8) * 2 ** -6;
    else t[b] = sign * (1 + man / 8) * 2 ** (exp - 7);
  }
  return t;
})();

/** Nearest e4m3fn code to v (ties to even code), saturating at ±448; NaN → NaN code. */
export function encodeE4M3(v: number): number {
  if (Number.isNaN(v)) return 0x7f;
  const sign = v < 0 || Object.is(v, -0) ? 0x80 : 0;
  const a = Math.min(Math.abs(v), FP8_MAX);
  // positive codes 0..126 are increasing in value: binary search the first ≥ a
  let lo = 0;
  let hi = 126;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (E4M3_VALUES[mid]! < a) lo = mid + 1;
    else hi = mid;
  }
  let code = lo;
  if (lo > 0) {
    const below = E4M3_VALUES[lo - 1]!;
    const above = E4M3_VALUES[lo]!;
    if (a - below < above - a || (a - below === above - a && (lo - 1) % 2 === 0)) code = lo - 1;
  }
  return sign | code;
}

const cvtF32 = new Float32Array(1);
const cvtU32 = new Uint32Array(cvtF32.buffer);

/** f32 → bf16 bits, round to nearest even (finite values). */
function toBf16(x: number): number {
  cvtF32[0] = x;
  const u = cvtU32[0]!;
  return (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
}

/** [L, R, C] view of a shape (leading dims folded into L; 1-D is [1, 1, n]). */
export function dims3(shape: readonly number[]): [number, number, number] {
  if (shape.length === 0) return [1, 1, 1];
  if (shape.length === 1) return [1, 1, shape[0]!];
  const c = shape[shape.length - 1]!;
  const r = shape[shape.length - 2]!;
  return [shape.slice(0, -2).reduce((a, b) => a * b, 1), r, c];
}

// ---------------------------------------------------------------------------------------
// Reading

interface Fp8Tensor {
  readonly fp8: TensorInfo;
  readonly scale: TensorInfo;
  readonly dims: [number, number, number];
  readonly block: readonly [number, number];
  readonly scaleDims: [number, number]; // scale rows, cols per leading index
}

/** The weight_block_size of a config's quantization_config (null: not FP8). Other quant
 * methods are a clear error. */
export function fp8BlockSize(config: Record<string, unknown>, where: string): [number, number] | null {
  const q = config['quantization_config'];
  if (q === undefined || q === null) return null;
  const qc = q as Record<string, unknown>;
  const method = qc['quant_method'];
  if (method !== 'fp8') {
    throw new DeltaserveError('bad_config', `${where}: quantization_config.quant_method ${JSON.stringify(method)} is not supported (supported: "fp8" block-wise e4m3)`);
  }
  const fmt = qc['fmt'];
  if (fmt !== undefined && fmt !== 'e4m3') throw new DeltaserveError('bad_config', `${where}: quantization_config.fmt ${JSON.stringify(fmt)} is not supported (only "e4m3")`);
  const b = qc['weight_block_size'] ?? [128, 128];
  if (!Array.isArray(b) || b.length !== 2 || !b.every((x) => Number.isInteger(x) && x > 0)) {
    throw new DeltaserveError('bad_config', `${where}: quantization_config.weight_block_size must be [rows, cols] (got ${JSON.stringify(b)})`);
  }
  return [b[0] as number, b[1] as number];
}

/** A view of `ck` where F8_E4M3 weights read as BF16 (see the file comment). Returns `ck`
 * itself when it holds no F8 tensor. `block` is the quantization_config block size. */
export function withFp8Dequant(ck: Checkpoint, block: readonly [number, number] = [128, 128]): Checkpoint {
  const fp8 = new Map<string, Fp8Tensor>();
  for (const t of ck.tensors.values()) {
    if ((t.dtype as string) !== 'F8_E4M3') continue;
    const scaleName = `${t.name}${SCALE_SUFFIX}`;
    if (!ck.has(scaleName)) {
      throw new DeltaserveError('bad_checkpoint', `FP8 tensor ${t.name} in ${t.file} has no ${scaleName} (block-wise scales are required)`);
    }
    const scale = ck.info(scaleName);
    const dims = dims3(t.shape);
    const sd = dims3(scale.shape);
    const want: [number, number, number] = [dims[0], Math.ceil(dims[1] / block[0]), Math.ceil(dims[2] / block[1])];
    if (sd[0] !== want[0] || sd[1] !== want[1] || sd[2] !== want[2] || (scale.dtype !== 'F32' && scale.dtype !== 'BF16')) {
      throw new DeltaserveError('bad_checkpoint',
        `${scaleName} in ${scale.file} has shape [${scale.shape.join(',')}] ${scale.dtype}; expected F32/BF16 blocks of ${block[0]}×${block[1]} over [${t.shape.join(',')}]`);
    }
    fp8.set(t.name, { fp8: t, scale, dims, block, scaleDims: [want[1], want[2]] });
  }
  if (fp8.size === 0) return ck;
  const tensors = new Map<string, TensorInfo>();
  for (const [name, t] of ck.tensors) {
    if (name.endsWith(SCALE_SUFFIX) && fp8.has(name.slice(0, -SCALE_SUFFIX.length))) continue;
    const f = fp8.get(name);
    tensors.set(name, f ? { ...t, dtype: 'BF16', nbytes: t.nbytes * 2 } : t);
  }
  return new Fp8Checkpoint(ck, tensors, fp8);
}

class Fp8Checkpoint implements Checkpoint {
  readonly totalBytes: number;
  constructor(private readonly inner: Checkpoint, readonly tensors: ReadonlyMap<string, TensorInfo>,
    private readonly fp8: ReadonlyMap<string, Fp8Tensor>) {
    let n = 0;
    for (const t of tensors.values()) n += t.nbytes;
    this.totalBytes = n;
  }
  get dir(): string {
    return this.inner.dir;
  }
  has(name: string): boolean {
    return this.tensors.has(name);
  }
  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    return t ?? this.inner.info(name); // the inner error names the files searched
  }
  readInto(name: string, dest: Uint8Array, onBytes?: (n: number) => void): void {
    const f = this.fp8.get(name);
    if (!f) return this.inner.readInto(name, dest, onBytes);
    assert(dest.byteLength === f.fp8.nbytes * 2, `readInto(${name}): dest has ${dest.byteLength} bytes, tensor has ${f.fp8.nbytes * 2}`);
    this.readRangeInto(name, 0, dest, onBytes);
  }
  readRangeInto(name: string, byteOffset: number, dest: Uint8Array, onBytes?: (n: number) => void): void {
    const f = this.fp8.get(name);
    if (!f) return this.inner.readRangeInto(name, byteOffset, dest, onBytes);
    assert(byteOffset % 2 === 0 && dest.byteLength % 2 === 0 && byteOffset + dest.byteLength <= f.fp8.nbytes * 2,
      `readRangeInto(${name}): bytes [${byteOffset}, ${byteOffset + dest.byteLength}) outside the tensor or not whole bf16 elements`);
    const first = byteOffset / 2;
    const n = dest.byteLength / 2;
    const codes = new Uint8Array(n);
    this.inner.readRangeInto(name, first, codes);
    const scales = readScales(this.inner, f.scale);
    const out = new Uint16Array(dest.buffer, dest.byteOffset, n);
    dequantRange(out, codes, first, scales, f);
    onBytes?.(n);
  }
  read(name: string): Uint8Array {
    const out = new Uint8Array(this.info(name).nbytes);
    this.readInto(name, out);
    return out;
  }
  close(): void {
    this.inner.close();
  }
}

function readScales(ck: Checkpoint, info: TensorInfo): Float32Array {
  const raw = ck.read(info.name);
  if (info.dtype === 'F32') return new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const bits = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
  return Float32Array.from(bits, bf16ToF32);
}

/** out[i] = bf16(e4m3(codes[i]) · scale of element first + i's block). */
function dequantRange(out: Uint16Array, codes: Uint8Array, first: number, scales: Float32Array, f: Fp8Tensor): void {
  const [, r, c] = f.dims;
  const [sr, sc] = f.scaleDims;
  const [br, bc] = f.block;
  for (let i = 0; i < codes.length; i++) {
    const idx = first + i;
    const col = idx % c;
    const row = Math.floor(idx / c);
    const l = Math.floor(row / r);
    const s = scales[l * sr * sc + Math.floor((row % r) / br) * sc + Math.floor(col / bc)]!;
    out[i] = toBf16(E4M3_VALUES[codes[i]!]! * s);
  }
}
