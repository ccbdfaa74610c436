/// <reference types="@webgpu/types" />
// Weights on the GPU. Matmul / embedding operands stay in their storage type: f32, bf16,
// f16 (2 per u32 word, low half first) and the GGML block formats (the raw blocks, bytes
// read out of u32 words by the shaders: kernels/quant/dequant.ts gives the layouts). A
// weight larger than the device's storage binding limit is split by rows into parts, each
// a whole number of rows in its own buffer; a matmul dispatches once per part.
// Small vectors (norm weights, gates, conv taps) are widened once to f32 tensors.
import type { Weight, WeightDType } from '../types.js';
import { isQuantType, quantRowBytes, type QuantType } from '../quant/formats.js';
import { weightRow } from '../ref/dense.js';
import type { GpuAllocator, GpuTensor } from './tensor.js';

export type GpuWeightDType = WeightDType | 'f16';

export interface GpuWeightPart {
  readonly buffer: GPUBuffer;
  /** First row of the weight held by this part. */
  readonly row0: number;
  readonly rows: number;
}

export interface GpuWeight {
  readonly dtype: GpuWeightDType;
  readonly rows: number;
  readonly cols: number;
  /** Bytes of one stored row. */
  readonly rowBytes: number;
  readonly parts: readonly GpuWeightPart[];
}

export function gpuRowBytes(dtype: GpuWeightDType, cols: number): number {
  if (isQuantType(dtype)) return quantRowBytes(dtype, cols);
  return cols * (dtype === 'f32' ? 4 : 2);
}

/** Bytes the weight occupies on the GPU (what a matmul streams once). */
export function gpuWeightBytes(w: GpuWeight): number {
  return w.rows * w.rowBytes;
}

/** Rows per part so that no part exceeds `maxBinding` bytes. */
export function rowsPerPart(rowBytes: number, maxBinding: number): number {
  const n = Math.floor(maxBinding / rowBytes);
  if (n < 1) throw new RangeError(`one weight row of ${rowBytes} bytes exceeds the storage binding limit ${maxBinding}`);
  return n;
}

/** Upload a weight's bytes (row-major, storage type `dtype`, exactly rows × rowBytes). */
export function uploadWeightBytes(alloc: GpuAllocator, device: GPUDevice, dtype: GpuWeightDType, rows: number, cols: number,
  bytes: Uint8Array, maxBinding: number, label = 'weight'): GpuWeight {
  const rb = gpuRowBytes(dtype, cols);
  if (bytes.byteLength !== rows * rb) throw new RangeError(`${label}: ${bytes.byteLength} bytes for a ${dtype} [${rows}, ${cols}] weight (want ${rows * rb})`);
  // Parts start on whole rows; bf16/f16 parts also on an even element so a u32 word never
  // straddles two parts.
  let per = rowsPerPart(rb, maxBinding);
  if ((dtype === 'bf16' || dtype === 'f16') && cols % 2 === 1 && per > 1) per -= per % 2;
  const parts: GpuWeightPart[] = [];
  for (let row0 = 0; row0 < rows; row0 += per) {
    const n = Math.min(per, rows - row0);
    const size = n * rb;
    const buffer = alloc.buffer(size, `${label}[${row0}..${row0 + n})`);
    const src = bytes.subarray(row0 * rb, row0 * rb + size);
    const whole = size & ~3;
    if (whole > 0) device.queue.writeBuffer(buffer, 0, src.buffer, src.byteOffset, whole);
    if (whole < size) {
      const tail = new Uint8Array(4);
      tail.set(src.subarray(whole));
      device.queue.writeBuffer(buffer, whole, tail);
    }
    parts.push({ buffer, row0, rows: n });
  }
  return { dtype, rows, cols, rowBytes: rb, parts };
}

/** Upload a host `Weight` (ref layout) as a matmul / embedding operand, storage type kept. */
export function uploadWeight(alloc: GpuAllocator, device: GPUDevice, w: Weight, maxBinding: number, label = 'weight'): GpuWeight {
  if (w.layout) throw new Error(`${label}: weight is packed for another backend (${w.layout}); upload the row-major blocks`);
  const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
  return uploadWeightBytes(alloc, device, w.dtype, w.rows, w.cols, bytes, maxBinding, label);
}

/** A small weight widened to f32 ([rows·cols], row-major), exactly as the ref widens it. */
export function uploadVector(alloc: GpuAllocator, w: Weight, label = 'vector'): GpuTensor {
  const out = new Float32Array(w.rows * w.cols);
  const row = new Float32Array(w.cols);
  for (let r = 0; r < w.rows; r++) out.set(weightRow(w, r, row), r * w.cols);
  return alloc.upload(out, [w.rows, w.cols], label);
}

export function isQuantWeight(w: GpuWeight): w is GpuWeight & { dtype: QuantType } {
  return isQuantType(w.dtype);
}

/** One part's share of an embedding lookup over a split table. */
export interface EmbedPartGather {
  /** The part as a one-part weight (rows [0, part.rows) = table rows [row0, row0 + rows)). */
  readonly weight: GpuWeight;
  /** Token ids of this part, relative to its first row. */
  readonly localIds: Int32Array;
  /** First row of the stacked scratch these tokens are embedded into. */
  readonly first: number;
}

/** How to embed `ids` from a table split in row parts: each part that holds some of the
 * ids embeds them into consecutive rows of a stacked scratch (part by part, in token
 * order within a part), then `order[i]` (the scratch row of token i) gathers them back.
 * Every table row lives in exactly one part, so the result is the unsplit lookup's. */
export function planSplitEmbed(w: GpuWeight, ids: ArrayLike<number>): { parts: EmbedPartGather[]; order: Int32Array } {
  const order = new Int32Array(ids.length);
  const parts: EmbedPartGather[] = [];
  let first = 0;
  for (const part of w.parts) {
    const local: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (id < part.row0 || id >= part.row0 + part.rows) continue;
      order[i] = first + local.length;
      local.push(id - part.row0);
    }
    if (local.length === 0) continue;
    parts.push({ weight: { ...w, rows: part.rows, parts: [{ ...part, row0: 0 }] }, localIds: Int32Array.from(local), first });
    first += local.length;
  }
  if (first !== ids.length) throw new RangeError(`embed: ${ids.length - first} token ids fall outside the table's ${w.rows} rows`);
  return { parts, order };
}
