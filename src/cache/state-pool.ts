// Recurrent-state pool (docs/ARCHITECTURE.md "Recurrent state"): per slot and Gated DeltaNet layer a conv window
// and an fp32 SSM state; plus verify scratch indexed by BATCH ROW (never by slot), with
// a private region for every row of the batch capacity.
// Invariants: slot 0 is never allocated (it is the sink for dummy writes); the free
// list starts at 1; a slot is free iff it is on the free list; alloc hands out the lowest
// free slot (so running sequences pack into the first chunk). A slot from alloc reads as
// zeros through every accessor: its zeroing waits for the pool's next access to any slot
// (view, slotTensor, copy), which zeroes every waiting slot with one fillRuns per chunk —
// the requests a step admits cost one fill, not one each.
// Memory: never one arena, and never one allocation per slot. Slots live in chunks: a
// chunk is ONE allocation of consecutive slots, each slot [layer][conv | ssm]; scratch rows
// likewise ([row][layer][step][conv] + [layer][step][ssm]). A chunk holds as many slots
// (rows) as fit in `maxChunkFloats` (a GPU's binding limit, a WebAssembly memory), at
// least one. Slots of one chunk share a buffer, so a GPU backend runs a batch's conv and
// recurrence over them in one dispatch (kernels/webgpu/seqs.ts groups by buffer); the pool
// may still span several WebAssembly memories while each view a kernel reads stays inside
// one memory.
// Every copy, zeroing and poisoning goes through the PoolStorage (pool-storage.ts): on a
// GPU backend these are recorded device ops, in program order with the model's work.
import { DeltaserveError, assert } from '../util/errors.js';
import { copyRange, hostPoolStorage, type PoolStorage, type PoolTensor } from './pool-storage.js';

export interface StateView<T extends PoolTensor = Float32Array> {
  readonly conv: T; // [K−1, convDim]
  readonly ssm: T; // [HV, dk, dv]
}

export interface ScratchView<T extends PoolTensor = Float32Array> {
  readonly conv: T; // [steps, K−1, convDim]
  readonly ssm: T; // [steps, HV, dk, dv]
}

export interface StatePoolOptions<T extends PoolTensor = Float32Array> {
  readonly slots: number; // allocatable slots (the arena holds slots + 1)
  readonly numLinear: number; // Gated DeltaNet layers
  readonly convSize: number; // floats per layer: (K−1)·convDim
  readonly ssmSize: number; // floats per layer: HV·dk·dv
  readonly batchCapacity: number; // rows of a verify batch (0 ⇒ no scratch)
  readonly maxSteps: number; // tokens per verify row (k + 1)
  /** The pool's memory (default: host arrays from `alloc`, else plain ones). */
  readonly storage?: PoolStorage<T>;
  readonly alloc?: (n: number) => Float32Array;
  /** Largest allocation, in floats (default DEFAULT_CHUNK_FLOATS): a chunk of slots or
   * scratch rows stays within it (one slot or row may exceed it alone). */
  readonly maxChunkFloats?: number;
}

/** 64 MiB of floats: well inside one WebAssembly memory. */
export const DEFAULT_CHUNK_FLOATS = 1 << 24;

/** A region of a chunk: its view, the chunk and where in it the region starts. */
interface Region<T> {
  readonly view: T;
  readonly chunk: T;
  readonly offset: number;
}

/** `count` regions of `size` floats, in chunks of as many regions as fit in `max` floats
 * (at least one): each region a view of its chunk. */
function chunkedRegions<T extends PoolTensor>(storage: PoolStorage<T>, count: number, size: number, max: number): Region<T>[] {
  const per = Math.max(1, Math.floor(max / Math.max(1, size)));
  const regions: Region<T>[] = [];
  for (let first = 0; first < count; first += per) {
    const n = Math.min(per, count - first);
    const chunk = storage.alloc(n * size);
    for (let i = 0; i < n; i++) regions.push({ view: n === 1 ? chunk : storage.view(chunk, i * size, size), chunk, offset: i * size });
  }
  return regions;
}

export class StatePool<T extends PoolTensor = Float32Array> {
  readonly slots: number;
  readonly numLinear: number;
  readonly batchCapacity: number;
  readonly maxSteps: number;
  readonly storage: PoolStorage<T>;
  private readonly o: StatePoolOptions<T>;
  /** slotMem[slot] = [layer][convSize + ssmSize] (conv window, then SSM state), a view of its chunk */
  private readonly slotMem: T[];
  /** Where each slot lies in its chunk (for zeroing several slots in one op). */
  private readonly slotRegion: Region<T>[];
  /** Allocated slots not zeroed yet (flushZeros). */
  private readonly pendingZero = new Set<number>();
  /** scratchMem[row] = [layer][step][convSize] followed by [layer][step][ssmSize] */
  private readonly scratchMem: T[];
  private readonly views: StateView<T>[][];
  private readonly allocated: Uint8Array;
  private readonly freeList: number[] = [];

  constructor(o: StatePoolOptions<T>) {
    if (o.slots < 1) throw new DeltaserveError('bad_config', `state pool needs at least 1 slot (got ${o.slots})`);
    this.o = o;
    const storage = o.storage ?? (hostPoolStorage(o.alloc) as unknown as PoolStorage<T>);
    this.storage = storage;
    this.slots = o.slots;
    this.numLinear = o.numLinear;
    this.batchCapacity = o.batchCapacity;
    this.maxSteps = o.maxSteps;
    const n = o.slots + 1;
    const perSlot = o.numLinear * (o.convSize + o.ssmSize);
    const max = o.maxChunkFloats ?? DEFAULT_CHUNK_FLOATS;
    this.slotRegion = chunkedRegions(storage, n, perSlot, max);
    this.slotMem = this.slotRegion.map((r) => r.view);
    this.scratchMem = chunkedRegions(storage, o.batchCapacity, o.maxSteps * perSlot, max).map((r) => r.view);
    this.views = Array.from({ length: n }, (_, s) => this.makeViews(s));
    this.allocated = new Uint8Array(n);
    for (let s = o.slots; s >= 1; s--) this.freeList.push(s);
  }

  private makeViews(slot: number): StateView<T>[] {
    const { numLinear: L, convSize: cs, ssmSize: ss } = this.o;
    const mem = this.slotMem[slot]!;
    return Array.from({ length: L }, (_, l) => ({
      conv: this.storage.view(mem, l * (cs + ss), cs),
      ssm: this.storage.view(mem, l * (cs + ss) + cs, ss),
    }));
  }

  get freeSlots(): number {
    return this.freeList.length;
  }

  /** The lowest free slot, zeroed (before the pool's next access, see the file head), or
   * null when none is free. */
  alloc(): number | null {
    const s = this.freeList.pop(); // the free list is kept in descending order
    if (s === undefined) return null;
    this.allocated[s] = 1;
    this.pendingZero.add(s);
    return s;
  }

  /** Zero every slot alloc handed out since the last flush: one fillRuns per chunk, slots
   * adjacent in their chunk as one run. Every accessor calls it first. */
  flushZeros(): void {
    if (this.pendingZero.size === 0) return;
    const byChunk = new Map<T, { offset: number; length: number }[]>();
    for (const s of [...this.pendingZero].sort((a, b) => a - b)) {
      const r = this.slotRegion[s]!;
      const runs = byChunk.get(r.chunk) ?? [];
      const last = runs[runs.length - 1];
      if (last && last.offset + last.length === r.offset) last.length += r.view.length;
      else runs.push({ offset: r.offset, length: r.view.length });
      byChunk.set(r.chunk, runs);
    }
    this.pendingZero.clear();
    for (const [chunk, runs] of byChunk) this.storage.fillRuns(chunk, runs, 0);
  }

  free(slot: number): void {
    assert(slot > 0 && this.allocated[slot] === 1, `free of slot ${slot} that is not allocated`);
    this.allocated[slot] = 0;
    this.pendingZero.delete(slot);
    // keep the list descending: the lowest slot pops first
    let at = this.freeList.length;
    while (at > 0 && this.freeList[at - 1]! < slot) at--;
    this.freeList.splice(at, 0, slot);
  }

  /** Per-layer views of a slot (slot 0 is the dummy sink). */
  view(slot: number): readonly StateView<T>[] {
    const v = this.views[slot];
    assert(v !== undefined, `state slot ${slot} out of range`);
    this.flushZeros();
    return v;
  }

  zero(slot: number): void {
    const mem = this.slotMem[slot];
    assert(mem !== undefined, `state slot ${slot} out of range`);
    this.pendingZero.delete(slot);
    this.flushZeros();
    this.storage.fill(mem, 0, mem.length, 0);
  }

  /** The whole memory of a slot ([layer][conv | ssm], every layer): for persistence. */
  slotTensor(slot: number): T {
    const mem = this.slotMem[slot];
    assert(mem !== undefined, `state slot ${slot} out of range`);
    this.flushZeros();
    return mem;
  }

  /** dst ← src (every layer, conv window and SSM state). dst is an allocated slot, never
   * slot 0. */
  copy(dst: number, src: number): void {
    assert(dst > 0 && this.allocated[dst] === 1, `copy into state slot ${dst} that is not allocated`);
    this.pendingZero.delete(dst); // overwritten whole
    const to = this.slotTensor(dst);
    copyRange(this.storage, to, 0, this.slotTensor(src), 0, to.length);
  }

  /** Per-layer scratch of batch row `row` for `steps` verify steps. */
  scratch(row: number, steps: number): readonly ScratchView<T>[] {
    assert(row >= 0 && row < this.batchCapacity, `scratch row ${row} outside batch capacity ${this.batchCapacity}`);
    assert(steps <= this.maxSteps, `verify of ${steps} steps exceeds scratch depth ${this.maxSteps}`);
    const { numLinear: L, convSize: cs, ssmSize: ss, maxSteps: S } = this.o;
    const mem = this.scratchMem[row]!;
    const ssmBase = L * S * cs;
    return Array.from({ length: L }, (_, l) => ({
      conv: this.storage.view(mem, l * S * cs, steps * cs),
      ssm: this.storage.view(mem, ssmBase + l * S * ss, steps * ss),
    }));
  }

  /** slot ← the state after verify step `step` of batch row `row` (conv window and SSM
   * state of every layer). */
  copyFromScratch(slot: number, row: number, step: number): void {
    assert(slot > 0 && this.allocated[slot] === 1, `copy into slot ${slot} that is not allocated`);
    assert(step >= 0 && step < this.maxSteps, `scratch step ${step} outside depth ${this.maxSteps}`);
    assert(row >= 0 && row < this.batchCapacity, `scratch row ${row} outside batch capacity ${this.batchCapacity}`);
    const { numLinear: L, convSize: cs, ssmSize: ss, maxSteps: S } = this.o;
    const mem = this.scratchMem[row]!;
    const to = this.slotTensor(slot);
    // per layer: the slot's [conv | ssm] ← scratch conv[l][step], ssm[l][step] — as two
    // strided copies over the layers
    this.storage.copyRows(to, 0, cs + ss, mem, step * cs, S * cs, L, cs);
    this.storage.copyRows(to, cs, cs + ss, mem, L * S * cs + step * ss, S * ss, L, ss);
  }

  /** Fill slot 0 and the scratch of rows ≥ fromRow with NaN, and for a row r < fromRow
   * its steps ≥ stepsOfRow[r] (default: none), which this step does not write (tests:
   * padding and stale scratch must never reach a real request). */
  poison(fromRow: number, stepsOfRow: readonly number[] = []): void {
    const st = this.storage;
    const sink = this.slotTensor(0);
    st.fill(sink, 0, sink.length, NaN);
    const { numLinear: L, convSize: cs, ssmSize: ss, maxSteps: S } = this.o;
    for (let row = Math.max(0, fromRow); row < this.batchCapacity; row++) st.fill(this.scratchMem[row]!, 0, this.scratchMem[row]!.length, NaN);
    const ssmBase = L * S * cs;
    for (let row = 0; row < Math.min(fromRow, this.batchCapacity); row++) {
      const from = stepsOfRow[row] ?? S;
      const mem = this.scratchMem[row]!;
      for (let l = 0; l < L; l++) {
        st.fill(mem, (l * S + from) * cs, (S - from) * cs, NaN);
        st.fill(mem, ssmBase + (l * S + from) * ss, (S - from) * ss, NaN);
      }
    }
  }

  /** `owners` lists every slot held outside the pool (requests, prefix-cache nodes). */
  checkIntegrity(owners: Iterable<number>): void {
    const owned = new Set<number>();
    for (const s of owners) {
      assert(s > 0 && s <= this.slots, `owned state slot ${s} out of range (slot 0 is reserved)`);
      assert(!owned.has(s), `state slot ${s} owned twice`);
      owned.add(s);
    }
    const free = new Set(this.freeList);
    assert(free.size === this.freeList.length, 'duplicate slot on the state free list');
    assert(!free.has(0) && this.allocated[0] === 0, 'slot 0 was handed out');
    assert(free.size + owned.size === this.slots, `state slots: ${free.size} free + ${owned.size} owned != ${this.slots}`);
    for (let s = 1; s <= this.slots; s++) {
      assert((this.allocated[s] === 1) === owned.has(s), `slot ${s}: allocation flag disagrees with owners`);
    }
  }
}
