// Memory of the wasm backend: one or more Arenas, each a shared WebAssembly memory (at
// most 4 GiB − 64 KiB: 65535 pages) with a bump allocator and a free list. Allocations never
// move; Kernels.free gives one back (`Arena.free`): its bytes are zeroed and join the free
// list (adjacent blocks merge; a block ending at the top lowers it), and a later allocation
// takes the first free block that holds it before bumping. Invariant: every byte above the
// top and in a free block is zero (fresh pages are zero), so alloc() is zeroed.
//
// Locating a view: a view's `buffer` is one of the SharedArrayBuffers its memory has
// returned (growing a shared memory keeps old views valid but `memory.buffer` changes
// identity), so every buffer an arena hands out is recorded in `byBuffer`; the pointer is
// the view's byteOffset. Models larger than one memory spill into further arenas
// (allocation is first-fit over arenas); a kernel runs in ONE arena and operands that live
// elsewhere (or in the JS heap) are copied through that arena's staging area.
// Layout of an arena: [static data | allocations … softLimit | thread scratch | staging
// … hardLimit]; the headroom above softLimit (¼ of the memory, at most 256 MiB) is
// committed (grown into) only when a call needs it.
import { instantiate, WA, type KernelExports, type WasmMemory, type WasmModule } from './module.js';

export const PAGE = 65536;
/** 65535 pages: a 4 GiB − 64 KiB memory, so byte lengths stay below 2³². */
export const MAX_PAGES = 65535;
const GROW_MIN = 16 << 20;

function align(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

export class Arena {
  readonly memory: WasmMemory;
  /** The main thread's instance on this memory. */
  readonly exports: KernelExports;
  private top: number;
  /** Bytes regular allocations may use; the rest is headroom for staging and scratch. */
  private readonly softLimit: number;
  private readonly hardLimit: number;
  private current: SharedArrayBuffer;
  private stageTop = 0;
  private tmpBytes = 0;
  /** Live allocations: pointer → bytes (64-byte multiples), what `free` accepts. */
  private readonly live = new Map<number, number>();
  /** Freed blocks below the top, by address, none adjacent to another (merged). */
  private readonly freeBlocks: { ptr: number; bytes: number }[] = [];

  constructor(readonly index: number, module: WasmModule, maxBytes: number,
    private readonly onBuffer: (b: SharedArrayBuffer, a: Arena) => void) {
    const maxPages = Math.max(2, Math.min(MAX_PAGES, Math.floor(maxBytes / PAGE)));
    this.memory = new WA.Memory({ initial: 1, maximum: maxPages, shared: true });
    this.exports = instantiate(module, this.memory);
    this.hardLimit = maxPages * PAGE;
    this.softLimit = this.hardLimit - Math.min(256 << 20, Math.floor(this.hardLimit / 4 / PAGE) * PAGE);
    this.top = align(this.exports.heapBase(), 64);
    this.current = this.memory.buffer as unknown as SharedArrayBuffer;
    onBuffer(this.current, this);
  }

  /** The memory's current buffer (registered, so views over it can be located). */
  buffer(): SharedArrayBuffer {
    const b = this.memory.buffer as unknown as SharedArrayBuffer;
    if (b !== this.current) {
      this.current = b;
      this.onBuffer(b, this);
    }
    return b;
  }

  get usedBytes(): number {
    return this.top;
  }

  /** Bytes in free blocks below the top (what later allocations take first). */
  get freeBytes(): number {
    return this.freeBlocks.reduce((n, b) => n + b.bytes, 0);
  }

  /** Allocate `bytes` (64-byte aligned): the first free block that holds them, else bumped
   * below the soft limit; -1 if it does not fit. Grows the memory as needed. */
  reserve(bytes: number): number {
    const size = align(Math.max(bytes, 1), 64);
    const i = this.freeBlocks.findIndex((b) => b.bytes >= size);
    if (i >= 0) {
      const b = this.freeBlocks[i]!;
      const ptr = b.ptr;
      if (b.bytes === size) this.freeBlocks.splice(i, 1);
      else this.freeBlocks[i] = { ptr: ptr + size, bytes: b.bytes - size };
      this.live.set(ptr, size);
      return ptr;
    }
    const ptr = this.top;
    const end = ptr + size;
    if (end > this.softLimit) return -1;
    this.commit(end);
    this.top = end;
    this.live.set(ptr, size);
    return ptr;
  }

  /** Give back the whole allocation starting at `ptr`, whatever view of it the caller holds
   * (calibration's operands, the bandwidth probe's block); no-op if none starts there. */
  release(ptr: number): void {
    const size = this.live.get(ptr);
    if (size !== undefined) this.free(ptr, size);
  }

  /** Give back the live allocation at `ptr` of `bytes` (as reserved): zeroed, into the free
   * list. A pointer inside or a length short of an allocation (a view), or one already freed,
   * is refused. */
  free(ptr: number, bytes: number): void {
    const size = this.live.get(ptr);
    if (size === undefined) throw new RangeError(`free: byte ${ptr} of wasm memory ${this.index} starts no live allocation (a view, or freed twice)`);
    if (align(Math.max(bytes, 1), 64) !== size) throw new RangeError(`free: ${bytes} bytes at ${ptr} are a view of a ${size}-byte allocation`);
    this.live.delete(ptr);
    this.u8(ptr, size).fill(0);
    const blocks = this.freeBlocks;
    let i = 0;
    while (i < blocks.length && blocks[i]!.ptr < ptr) i++;
    const before = blocks[i - 1];
    const after = blocks[i];
    let block = { ptr, bytes: size };
    if (before && before.ptr + before.bytes === ptr) {
      block = { ptr: before.ptr, bytes: before.bytes + size };
      blocks.splice(--i, 1);
    }
    if (after && block.ptr + block.bytes === after.ptr) {
      block = { ptr: block.ptr, bytes: block.bytes + after.bytes };
      blocks.splice(i, 1);
    }
    blocks.splice(i, 0, block);
    this.absorbTop();
  }

  /** A free block that ends at the top lowers it. */
  private absorbTop(): void {
    const last = this.freeBlocks[this.freeBlocks.length - 1];
    if (last && last.ptr + last.bytes === this.top) {
      this.top = last.ptr;
      this.freeBlocks.pop();
    }
  }

  /** Make [0, end) addressable. */
  private commit(end: number): void {
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      const want = Math.min(this.hardLimit, Math.max(end, have + Math.max(GROW_MIN, have >> 2)));
      this.memory.grow(Math.ceil((want - have) / PAGE));
      this.buffer();
    }
  }

  /** Start a kernel call: per-thread scratch of `tmpPerThread` bytes × `threads` at the
   * bottom of the headroom [softLimit, hardLimit), the call's staging area above it
   * (reset every call). Returns the scratch base and per-thread stride. */
  beginCall(tmpPerThread: number, threads: number): { base: number; stride: number } {
    const stride = align(Math.max(tmpPerThread, 64), 64);
    this.tmpBytes = Math.max(this.tmpBytes, stride * threads);
    this.stageTop = this.softLimit + this.tmpBytes;
    if (tmpPerThread > 0) this.commit(this.stageTop);
    return { base: this.softLimit, stride };
  }

  /** Staging for operands copied in from elsewhere; valid until the next beginCall. */
  stage(bytes: number): number {
    const p = this.stageTop;
    const end = p + align(Math.max(bytes, 1), 64);
    if (end > this.hardLimit) {
      throw new Error(`wasm memory ${this.index}: kernel operands need more than the ${this.hardLimit - this.softLimit} bytes of staging headroom`);
    }
    this.commit(end);
    this.stageTop = end;
    return p;
  }

  f32(ptr: number, n: number): Float32Array {
    return new Float32Array(this.buffer(), ptr, n);
  }
  i32(ptr: number, n: number): Int32Array {
    return new Int32Array(this.buffer(), ptr, n);
  }
  u8(ptr: number, n: number): Uint8Array {
    return new Uint8Array(this.buffer(), ptr, n);
  }
}

/** All arenas of one backend. `onArena` runs after an arena is created (the pool gives
 * it to the workers). */
export class MemorySet {
  readonly arenas: Arena[] = [];
  private readonly byBuffer = new WeakMap<ArrayBufferLike, Arena>();

  constructor(private readonly module: WasmModule, private readonly maxBytes: number,
    private readonly onArena: (a: Arena) => void = () => {}) {
    this.addArena();
  }

  private addArena(): Arena {
    const a = new Arena(this.arenas.length, this.module, this.maxBytes, (b, arena) => this.byBuffer.set(b, arena));
    this.arenas.push(a);
    this.onArena(a);
    return a;
  }

  /** First-fit allocation over arenas; a new arena when none has room. */
  alloc(bytes: number): { arena: Arena; ptr: number } {
    for (const arena of this.arenas) {
      const ptr = arena.reserve(bytes);
      if (ptr >= 0) return { arena, ptr };
    }
    const arena = this.addArena();
    const ptr = arena.reserve(bytes);
    if (ptr < 0) throw new Error(`wasm backend: an allocation of ${bytes} bytes exceeds one memory (${this.maxBytes} bytes)`);
    return { arena, ptr };
  }

  /** The arena whose memory holds `view`, or undefined (JS heap / foreign memory). */
  locate(view: ArrayBufferView): Arena | undefined {
    return this.byBuffer.get(view.buffer);
  }
}
