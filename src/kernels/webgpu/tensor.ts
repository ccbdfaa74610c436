/// <reference types="@webgpu/types" />
// GPU tensors: a typed view {buffer, offset, length, shape} of a storage buffer, and the
// allocator that owns the buffers. Element offsets (not bytes) are passed to the kernels,
// so views inside one buffer (a head slice, a row block) need no aligned binding offset.

export type GpuElem = 'f32' | 'i32' | 'u32';

export interface GpuTensor {
  readonly buffer: GPUBuffer;
  /** First element of the view in the buffer (elements of 4 bytes). */
  readonly offset: number;
  /** Elements in the view. */
  readonly length: number;
  readonly shape: readonly number[];
  readonly elem: GpuElem;
}

const STORAGE = 0x80; // GPUBufferUsage.STORAGE
const COPY_SRC = 0x04;
const COPY_DST = 0x08;

/** A view of `length` elements starting `start` elements into `t`, with a new shape. */
export function view(t: GpuTensor, start: number, length: number, shape: readonly number[] = [length]): GpuTensor {
  if (!(start >= 0 && length >= 0 && start + length <= t.length)) {
    throw new RangeError(`gpu view [${start}, ${start + length}) outside a tensor of ${t.length} elements`);
  }
  return { buffer: t.buffer, offset: t.offset + start, length, shape, elem: t.elem };
}

/** Owns every storage buffer it hands out; `destroy` frees them all. Counts bytes so the
 * memory plan can size pools from what the device really holds. */
export class GpuAllocator {
  private readonly buffers = new Set<GPUBuffer>();
  private liveBytes = 0;

  /** onFree: told of each buffer `free` is about to destroy (the bind-group cache drops it). */
  constructor(private readonly device: GPUDevice, private readonly maxBinding: number, private readonly onFree: (b: GPUBuffer) => void = () => {}) {}

  get bytes(): number {
    return this.liveBytes;
  }

  /** A raw storage buffer of `bytes` (rounded up to 4; ≥ 4). */
  buffer(bytes: number, label: string): GPUBuffer {
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    if (size > this.maxBinding) throw new RangeError(`${label}: ${size} bytes exceed the device's storage binding limit ${this.maxBinding}; split it`);
    const b = this.device.createBuffer({ size, usage: STORAGE | COPY_SRC | COPY_DST, label });
    this.buffers.add(b);
    this.liveBytes += size;
    return b;
  }

  /** A zero-filled tensor (WebGPU zero-initialises new buffers). */
  tensor(shape: readonly number[], elem: GpuElem = 'f32', label = 'tensor'): GpuTensor {
    const length = shape.reduce((a, b) => a * b, 1);
    return { buffer: this.buffer(length * 4, label), offset: 0, length, shape, elem };
  }

  /** A tensor holding `data` (uploaded with queue.writeBuffer). */
  upload(data: Float32Array | Int32Array | Uint32Array, shape: readonly number[] = [data.length], label = 'upload'): GpuTensor {
    const elem: GpuElem = data instanceof Float32Array ? 'f32' : data instanceof Int32Array ? 'i32' : 'u32';
    const t = this.tensor(shape, elem, label);
    this.device.queue.writeBuffer(t.buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    return t;
  }

  /** Overwrite a tensor's elements from the host (ordered before later submits). */
  write(t: GpuTensor, data: Float32Array | Int32Array | Uint32Array, at = 0): void {
    if (at + data.length > t.length) throw new RangeError(`gpu write of ${data.length} elements at ${at} into ${t.length}`);
    this.device.queue.writeBuffer(t.buffer, (t.offset + at) * 4, data.buffer, data.byteOffset, data.byteLength);
  }

  free(b: GPUBuffer): void {
    if (!this.buffers.delete(b)) return;
    this.onFree(b);
    this.liveBytes -= b.size;
    b.destroy();
  }

  destroy(): void {
    for (const b of this.buffers) b.destroy();
    this.buffers.clear();
    this.liveBytes = 0;
  }
}
