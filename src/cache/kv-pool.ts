// Paged KV pool for the full-attention layers (and the MTP layers, which share the page
// tables of the target). Pages are ref-counted so the prefix cache can share them.
// Invariant: page 0 is reserved (never handed out); a page is on the free list iff its
// ref count is 0.
// Memory: a PoolStorage (pool-storage.ts) — host arrays, or the kernel backend's tensors,
// so on a GPU the pages never leave the device.
import { DeltaserveError, assert } from '../util/errors.js';
import { copyRange, hostPoolStorage, type PoolStorage, type PoolTensor } from './pool-storage.js';

/** One layer's K and V arenas: [numPages · pageSize, kvDim] each. */
export interface KvArena<T extends PoolTensor = Float32Array> {
  readonly k: T;
  readonly v: T;
  readonly pageSize: number;
}

export interface KvPoolOptions<T extends PoolTensor = Float32Array> {
  readonly numPages: number; // including reserved page 0
  readonly pageSize: number;
  readonly kvDim: number; // nKV · hd
  readonly numLayers: number; // full-attention layers of the target
  readonly numMtpLayers: number;
  /** The pool's memory (default: host arrays from `alloc`, else plain ones). */
  readonly storage?: PoolStorage<T>;
  readonly alloc?: (n: number) => Float32Array;
}

export class KvPool<T extends PoolTensor = Float32Array> {
  readonly pageSize: number;
  readonly numPages: number;
  readonly kvDim: number;
  readonly storage: PoolStorage<T>;
  readonly layers: readonly KvArena<T>[];
  readonly mtpLayers: readonly KvArena<T>[];
  private readonly refs: Int32Array;
  private readonly freeList: number[] = [];

  constructor(o: KvPoolOptions<T>) {
    if (o.numPages < 2) throw new DeltaserveError('bad_config', `KV pool needs at least 2 pages (got ${o.numPages})`);
    this.pageSize = o.pageSize;
    this.numPages = o.numPages;
    this.kvDim = o.kvDim;
    const storage = o.storage ?? (hostPoolStorage(o.alloc) as unknown as PoolStorage<T>);
    this.storage = storage;
    // K and V of a layer come from ONE allocation, so they always share a wasm memory
    // (attention runs in one memory; a V elsewhere would be copied in whole per call).
    // Layers are separate allocations: the pool spans several memories when it must
    // (the memory plan caps a layer's pages so one layer fits one memory).
    const arena = (): KvArena<T> => {
      const n = o.numPages * o.pageSize * o.kvDim;
      const kv = storage.alloc(2 * n);
      return { k: storage.view(kv, 0, n), v: storage.view(kv, n, n), pageSize: o.pageSize };
    };
    this.layers = Array.from({ length: o.numLayers }, arena);
    this.mtpLayers = Array.from({ length: o.numMtpLayers }, arena);
    this.refs = new Int32Array(o.numPages);
    for (let p = o.numPages - 1; p >= 1; p--) this.freeList.push(p);
  }

  get freePages(): number {
    return this.freeList.length;
  }
  /** Pages that can ever be handed out (all but page 0). */
  get usablePages(): number {
    return this.numPages - 1;
  }

  pagesFor(tokens: number): number {
    return Math.ceil(tokens / this.pageSize);
  }

  /** n fresh pages with ref count 1, or null (nothing taken) when too few are free. */
  alloc(n: number): number[] | null {
    if (n > this.freeList.length) return null;
    const pages = this.freeList.splice(this.freeList.length - n, n).reverse();
    for (const p of pages) this.refs[p] = 1;
    return pages;
  }

  retain(pages: readonly number[]): void {
    for (const p of pages) {
      assert(p > 0 && this.refs[p]! > 0, `retain of page ${p} that is not owned`);
      this.refs[p] = this.refs[p]! + 1;
    }
  }

  release(pages: readonly number[]): void {
    for (const p of pages) {
      assert(p > 0 && this.refs[p]! > 0, `release of page ${p} that is not owned`);
      this.refs[p] = this.refs[p]! - 1;
      if (this.refs[p] === 0) this.freeList.push(p);
    }
  }

  refCount(page: number): number {
    return this.refs[page]!;
  }

  /** Copy the first `rows` token rows of page `src` into page `dst` in every layer
   * (copy-on-write of a partially filled shared page). */
  copyPage(dst: number, src: number, rows: number, kvDim: number): void {
    assert(dst !== src, `copyPage of page ${src} onto itself`);
    for (const l of [...this.layers, ...this.mtpLayers]) {
      const s = src * this.pageSize * kvDim;
      const d = dst * this.pageSize * kvDim;
      copyRange(this.storage, l.k, d, l.k, s, rows * kvDim);
      copyRange(this.storage, l.v, d, l.v, s, rows * kvDim);
    }
  }

  /** `owners` lists every page reference held outside the pool (a page shared by two
   * owners appears twice). Checks: ref counts equal owner counts, free list = pages with
   * ref 0, no duplicates, page 0 never owned or free. */
  checkIntegrity(owners: Iterable<number>): void {
    const counts = new Int32Array(this.numPages);
    for (const p of owners) {
      assert(p > 0 && p < this.numPages, `owned page id ${p} out of range (page 0 is reserved)`);
      counts[p] = counts[p]! + 1;
    }
    const free = new Set(this.freeList);
    assert(free.size === this.freeList.length, 'duplicate page on the KV free list');
    assert(!free.has(0), 'page 0 is on the free list');
    assert(this.refs[0] === 0, 'page 0 has references');
    for (let p = 1; p < this.numPages; p++) {
      assert(this.refs[p] === counts[p], `page ${p}: ref count ${this.refs[p]} but ${counts[p]} owners`);
      assert((this.refs[p] === 0) === free.has(p), `page ${p}: free-list membership disagrees with ref count`);
    }
  }
}
