// Resolving the operands of one kernel call to pointers in one arena. An operand that
// lives in that arena is used in place (pointer = byteOffset); any other (a plain JS array,
// or a view into another arena when a model spans several memories) is copied into the
// arena's per-call staging area — inputs before the kernel, outputs back after it.
import type { Weight } from '../types.js';
import { isQuantType } from '../quant/formats.js';
import { storedQuantBytes } from './layouts.js';
import type { Arena, MemorySet } from './memory.js';

type OutView = Float32Array | Int32Array;

export class Operands {
  arena!: Arena;
  /** Per-thread scratch of the current call: thread i uses base + i·stride. */
  tmp = { base: 0, stride: 0 };
  private readonly outs: { view: OutView; ptr: number; n: number }[] = [];
  private nOut = 0;

  constructor(private readonly mem: MemorySet) {}

  /** The arena of the first operand that lives in wasm memory (else arena 0). */
  target(...views: (ArrayBufferView | undefined)[]): Arena {
    for (const v of views) {
      const a = v && this.mem.locate(v);
      if (a) return a;
    }
    return this.mem.arenas[0]!;
  }

  /** Start a call in `arena`, with `tmpPerThread` bytes of per-thread scratch for
   * `threads` threads (set up first: staging is placed above it). */
  begin(arena: Arena, tmpPerThread = 0, threads = 1): this {
    this.arena = arena;
    this.nOut = 0;
    this.tmp = arena.beginCall(tmpPerThread, threads);
    return this;
  }

  private local(v: ArrayBufferView): boolean {
    return this.mem.locate(v) === this.arena;
  }

  /** Read-only f32 operand of n elements. */
  in(view: Float32Array, n: number): number {
    need(view, n);
    if (this.local(view)) return view.byteOffset;
    const p = this.arena.stage(n * 4);
    this.arena.f32(p, n).set(view.subarray(0, n));
    return p;
  }

  /** Write-only operand of n elements (fully written by the kernel). */
  out(view: OutView, n: number): number {
    need(view, n);
    if (this.local(view)) return view.byteOffset;
    const p = this.arena.stage(n * 4);
    this.register(view, p, n);
    return p;
  }

  /** Read-write operand. */
  inout(view: Float32Array, n: number): number {
    const p = this.in(view, n);
    if (!this.local(view)) this.register(view, p, n);
    return p;
  }

  /** Read-only i32 operand (ids, positions, page tables) from any ArrayLike. */
  ints(a: ArrayLike<number>, n: number): number {
    if (a.length < n) throw new RangeError(`wasm kernels: int operand has ${a.length} < ${n} elements`);
    if (a instanceof Int32Array && this.local(a)) return a.byteOffset;
    const p = this.arena.stage(n * 4);
    const dst = this.arena.i32(p, n);
    if (a instanceof Int32Array) dst.set(a.subarray(0, n));
    else for (let i = 0; i < n; i++) dst[i] = a[i]!;
    return p;
  }

  /** Read-only f64 operand (small tables), always staged. */
  f64(a: Float64Array): number {
    const p = this.arena.stage(a.length * 8);
    new Float64Array(this.arena.buffer(), p, a.length).set(a);
    return p;
  }

  /** A weight's data (bf16 bits, f32, or GGML blocks). */
  weight(w: Weight): number {
    if (isQuantType(w.dtype)) {
      const bytes = storedQuantBytes(w);
      if (w.data.byteLength < bytes) throw new RangeError(`wasm kernels: ${w.dtype} weight has ${w.data.byteLength} < ${bytes} bytes`);
      if (this.local(w.data)) return w.data.byteOffset;
      const p = this.arena.stage(bytes);
      this.arena.u8(p, bytes).set(new Uint8Array(w.data.buffer, w.data.byteOffset, bytes));
      return p;
    }
    const n = (w.layout === 'panel8' ? Math.ceil(w.rows / 8) * 8 : w.rows) * w.cols;
    need(w.data, n);
    if (this.local(w.data)) return w.data.byteOffset;
    const bytes = n * w.data.BYTES_PER_ELEMENT;
    const p = this.arena.stage(bytes);
    this.arena.u8(p, bytes).set(new Uint8Array(w.data.buffer, w.data.byteOffset, bytes));
    return p;
  }

  /** Copy staged outputs back to their views. */
  end(): void {
    for (let i = 0; i < this.nOut; i++) {
      const o = this.outs[i]!;
      o.view.set(o.view instanceof Int32Array ? this.arena.i32(o.ptr, o.n) : this.arena.f32(o.ptr, o.n));
    }
    this.nOut = 0;
  }

  private register(view: OutView, ptr: number, n: number): void {
    const slot = this.outs[this.nOut];
    if (slot) {
      slot.view = view;
      slot.ptr = ptr;
      slot.n = n;
    } else this.outs.push({ view, ptr, n });
    this.nOut++;
  }
}

function need(view: { length: number }, n: number): void {
  if (view.length < n) throw new RangeError(`wasm kernels: operand has ${view.length} < ${n} elements`);
}
