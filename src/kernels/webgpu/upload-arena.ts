// The per-step upload arena of the webgpu boundary (kernels.ts): host inputs of one step
// (token ids, positions, page tables, writes) staged at distinct offsets of a GPU buffer,
// from which recorded copies bring them to their destinations in program order.
import type { WebGpuKernels } from './backend.js';
import type { GpuTensor } from './tensor.js';

const UPLOAD_CHUNK = 1 << 16; // elements per upload-arena buffer (grows for larger inputs)
/** Per-step host inputs: appended at distinct offsets, written with queue.writeBuffer
 * (which lands after the submits made so far and before the next: the one holding the copy
 * that reads it, with chunked submits too; distinct offsets, so no submitted op's input is
 * overwritten), reset when the step has completed. A full arena
 * is replaced by one twice as large; the old one is freed at the reset (the step that
 * reads it has finished by then), so the arena settles at a step's largest need. */
export class UploadArena {
  private buf: GpuTensor | null = null;
  private used = 0;
  private retired: GpuTensor[] = [];

  constructor(private readonly g: WebGpuKernels) {}

  put(data: ArrayLike<number>, elem: 'f32' | 'i32'): GpuTensor {
    const n = Math.max(1, data.length);
    if (!this.buf || this.used + n > this.buf.length) {
      if (this.buf) this.retired.push(this.buf);
      this.buf = this.g.alloc.tensor([Math.max(UPLOAD_CHUNK, 2 * (this.buf?.length ?? 0), n)], 'f32', 'upload arena');
      this.used = 0;
    }
    const typed = elem === 'i32' ? Int32Array.from(data) : Float32Array.from(data);
    const t: GpuTensor = { buffer: this.buf.buffer, offset: this.used, length: data.length, shape: [data.length], elem };
    if (data.length > 0) this.g.alloc.write(this.buf, typed, this.used);
    this.used += n;
    return t;
  }

  /** After the step's work has completed. */
  reset(): void {
    for (const t of this.retired) this.g.alloc.free(t.buffer);
    this.retired = [];
    this.used = 0;
  }
}
