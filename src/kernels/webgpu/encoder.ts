/// <reference types="@webgpu/types" />
// A step's GPU work: many dispatches (and buffer copies) recorded in order, encoded into
// one command buffer on `submit`. Every kernel's parameters go into one slot of a host block
// and reach the persistent parameter uniform with one writeBuffer per submit; each dispatch
// addresses its slot by a dynamic offset, so its bind group depends only on (pipeline,
// buffers) and comes from a cache shared by every step (dispatch-memory.ts). Every read-back
// is resolved by a single await.
// Timing (when the device has timestamp-query): 'step' writes one timestamp where the step's
// first compute pass begins and one where its last ends — the step's GPU time with its passes
// as they are; 'dispatch' puts each dispatch in its own timed pass (per-kernel GPU time, at
// the cost of a pass per dispatch). Without timestamp-query, `doneMs` (submit to the
// read-back mapped, host clock) is the only GPU-side figure.
import type { GpuTensor } from './tensor.js';
import { type EncoderTiming, passTimestamps, timingQueries } from './timing.js';
import { type BindGroupCache, PARAM_SLOT_BYTES, type ParamMemory } from './dispatch-memory.js';
import { type ReadbackPacer, submitShape } from './readback-pacer.js';
export type { EncoderTiming };
export { PARAM_SLOT_BYTES };

const SLOT = PARAM_SLOT_BYTES;
const SLOT_WORDS = SLOT / 4;
const COPY_DST = 0x08;
const COPY_SRC = 0x04;
const MAP_READ = 0x01;
const QUERY_RESOLVE = 0x200;

/** What the encoders of one device share across steps (WebGpuKernels owns it). */
export interface DispatchMemory {
  readonly params: ParamMemory;
  readonly bindGroups: BindGroupCache;
  /** On a CPU adapter: sleeps before each read-back instead of Dawn's busy-poll (readback-pacer.ts); null on a GPU. */
  readonly pacer: ReadbackPacer | null;
}

interface DispatchOp {
  readonly kind: 'dispatch';
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
  readonly slot: number;
  readonly buffers: readonly (GPUBuffer | null)[];
  readonly groups: readonly [number, number, number];
  readonly label: string;
}
interface CopyOp {
  readonly kind: 'copy';
  readonly src: GPUBuffer; readonly srcOffset: number;
  readonly dst: GPUBuffer; readonly dstOffset: number;
  readonly bytes: number;
}

/** Read-back of a tensor; `data` is filled once the submit that carries it resolved. */
export interface Readback<T extends Float32Array | Int32Array> {
  data: T | null;
}

/** Per-dispatch GPU time of one profiled submit (ns), by kernel label. */
export interface DispatchTiming { readonly label: string; readonly ns: number }

export class StepEncoder {
  private ops: (DispatchOp | CopyOp)[] = [];
  /** Host block of this step's parameter slots (from the shared pool at the first dispatch,
   * back to it at submit), and a u32 view of it. */
  private params: ArrayBuffer | null = null;
  private words = new Uint32Array(0);
  private slots = 0;
  /** `copied`: its copy into staging is an op, in order (readNow); else it is made after every op. */
  private reads: { src: GpuTensor; staging: GPUBuffer; out: Readback<Float32Array | Int32Array>; copied: boolean }[] = [];
  /** Dispatches recorded since construction (all submits). */
  dispatchCount = 0;
  private submittedDispatches = 0;
  /** Timings of the last timed submit: one per dispatch ('dispatch'), one 'step' ('step'). */
  timings: DispatchTiming[] = [];
  /** Host time (ms) spent encoding and submitting (bind groups, passes, queue.submit),
   * all submits: with the recording time, the host cost per dispatch. */
  encodeMs = 0;
  /** Of encodeMs: host time getting each dispatch's bind group (a cache lookup, and
   * createBindGroup on a miss). */
  bindGroupMs = 0;
  /** Bind groups set (one per dispatch), all submits. */
  bindGroups = 0;
  /** Of those, bind groups created (cache misses). */
  bindGroupsCreated = 0;
  /** Host clock from the last submit's queue.submit to its read-backs mapped (ms): queue
   * completion, the GPU's time plus the driver's latency (the fallback without timestamps). */
  doneMs = 0;

  constructor(private readonly device: GPUDevice, private readonly memory: DispatchMemory, private readonly timing: EncoderTiming = 'none') {}

  get pending(): number {
    return this.ops.length;
  }

  /** Record a dispatch: params (≤ 64 words, u32 bits) go to the uniform at binding 0,
   * `buffers` to bindings 1.. in order (null: a binding folded into an earlier one). */
  dispatch(pipeline: GPUComputePipeline, layout: GPUBindGroupLayout, params: ArrayLike<number>,
    buffers: readonly (GPUBuffer | null)[], groups: readonly [number, number, number], label: string): void {
    if (params.length > SLOT_WORDS) throw new RangeError(`${label}: ${params.length} parameter words > ${SLOT_WORDS}`);
    if ((this.slots + 1) * SLOT > this.words.byteLength) this.growBlock();
    const slot = this.slots++;
    const base = slot * SLOT_WORDS;
    const words = this.words;
    for (let i = 0; i < params.length; i++) words[base + i] = params[i]! >>> 0;
    this.ops.push({ kind: 'dispatch', pipeline, layout, slot, buffers, groups, label });
    this.dispatchCount++;
  }

  /** Record a buffer-to-buffer copy of `elems` 4-byte elements between tensors. */
  copy(src: GpuTensor, dst: GpuTensor, elems = src.length): void {
    if (elems > src.length || elems > dst.length) throw new RangeError(`gpu copy of ${elems} elements between tensors of ${src.length} and ${dst.length}`);
    if (elems === 0) return;
    this.ops.push({ kind: 'copy', src: src.buffer, srcOffset: src.offset * 4, dst: dst.buffer, dstOffset: dst.offset * 4, bytes: elems * 4 });
  }

  /** Queue a read-back of `t` at the end of this step's work. */
  read<T extends Float32Array | Int32Array>(t: GpuTensor): Readback<T> {
    const staging = this.device.createBuffer({ size: Math.max(4, t.length * 4), usage: MAP_READ | COPY_DST, label: 'readback' });
    const out: Readback<T> = { data: null };
    this.reads.push({ src: t, staging, out: out as Readback<Float32Array | Int32Array>, copied: false });
    return out;
  }

  /** Queue a read-back of `t` as it is now: its copy into staging is recorded here, in order
   * with the ops (later ops may overwrite `t`); mapped with this step's other reads. */
  readNow<T extends Float32Array | Int32Array>(t: GpuTensor): Readback<T> {
    const staging = this.device.createBuffer({ size: Math.max(4, t.length * 4), usage: MAP_READ | COPY_DST, label: 'readback' });
    if (t.length > 0) this.ops.push({ kind: 'copy', src: t.buffer, srcOffset: t.offset * 4, dst: staging, dstOffset: 0, bytes: t.length * 4 });
    const out: Readback<T> = { data: null };
    this.reads.push({ src: t, staging, out: out as Readback<Float32Array | Int32Array>, copied: true });
    return out;
  }

  // The first dispatch takes a block from the pool; more dispatches than it holds double it.
  private growBlock(): void {
    const had = this.params;
    if (had) {
      const grown = new ArrayBuffer(2 * had.byteLength);
      new Uint8Array(grown).set(new Uint8Array(had));
      this.params = grown;
    } else this.params = this.memory.params.takeHost();
    this.words = new Uint32Array(this.params);
    if ((this.slots + 1) * SLOT > this.params.byteLength) this.growBlock();
  }

  /** Encode and submit everything recorded; resolves when every read-back is mapped. */
  async submit(): Promise<void> {
    const ops = this.ops;
    const reads = this.reads;
    const slots = this.slots;
    const block = this.params;
    this.ops = [];
    this.reads = [];
    this.slots = 0;
    this.params = null;
    this.words = new Uint32Array(0);
    if (ops.length === 0 && reads.length === 0) return;
    const t0 = performance.now();
    const memory = this.memory;
    // one writeBuffer of every slot; the copy is taken now, so the block goes back at once
    const paramBuffer = block ? memory.params.upload(block, slots * SLOT) : null;
    if (block) memory.params.giveHost(block);
    const replacementMark = memory.params.replacements;
    const dispatches = this.dispatchCount - this.submittedDispatches;
    this.submittedDispatches = this.dispatchCount;
    const mode = this.device.features.has('timestamp-query') && dispatches > 0 ? this.timing : 'none';
    const queries = timingQueries(mode, dispatches);
    const querySet = queries > 0 ? this.device.createQuerySet({ type: 'timestamp', count: queries }) : null;
    const writes = mode === 'none' ? null : passTimestamps(mode, ops.map((o) => o.kind === 'dispatch'));
    const enc = this.device.createCommandEncoder();
    let pass: GPUComputePassEncoder | null = null;
    let lastPipeline: GPUComputePipeline | null = null;
    const labels: string[] = [];
    const offsets = new Uint32Array(1); // the dynamic offset of binding 0 (the typed-array overload)
    const createdBefore = memory.bindGroups.created; // this loop runs to its end without yielding
    let workgroups = 0;
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      if (op.kind === 'copy') {
        pass?.end();
        pass = null;
        enc.copyBufferToBuffer(op.src, op.srcOffset, op.dst, op.dstOffset, op.bytes);
        continue;
      }
      if (!pass) {
        const w = writes?.[i];
        pass = enc.beginComputePass(querySet && w ? { timestampWrites: { querySet, ...w } } : {});
        lastPipeline = null;
      }
      if (mode === 'dispatch') labels.push(op.label);
      const b0 = performance.now();
      const bg = memory.bindGroups.get(op.pipeline, op.layout, paramBuffer!, op.buffers);
      this.bindGroupMs += performance.now() - b0;
      this.bindGroups++;
      if (op.pipeline !== lastPipeline) pass.setPipeline(op.pipeline);
      lastPipeline = op.pipeline;
      offsets[0] = op.slot * SLOT;
      pass.setBindGroup(0, bg, offsets, 0, 1);
      pass.dispatchWorkgroups(op.groups[0], op.groups[1], op.groups[2]);
      workgroups += op.groups[0] * op.groups[1] * op.groups[2];
      if (mode === 'dispatch') {
        pass.end();
        pass = null;
      }
    }
    pass?.end();
    this.bindGroupsCreated += memory.bindGroups.created - createdBefore;
    let tsRead: GPUBuffer | null = null;
    let resolve: GPUBuffer | null = null;
    if (querySet) {
      resolve = this.device.createBuffer({ size: 8 * queries, usage: QUERY_RESOLVE | COPY_SRC });
      tsRead = this.device.createBuffer({ size: 8 * queries, usage: MAP_READ | COPY_DST });
      enc.resolveQuerySet(querySet, 0, queries, resolve, 0);
      enc.copyBufferToBuffer(resolve, 0, tsRead, 0, 8 * queries);
    }
    for (const r of reads) if (!r.copied) enc.copyBufferToBuffer(r.src.buffer, r.src.offset * 4, r.staging, 0, r.src.length * 4);
    this.device.queue.submit([enc.finish()]);
    const t1 = performance.now();
    this.encodeMs += t1 - t0;
    const shape = submitShape(dispatches, workgroups);
    const paced = (done: () => Promise<unknown>): Promise<unknown> => memory.pacer?.wait(shape, done) ?? done();
    const staged = [...reads.map((r) => r.staging), ...(tsRead ? [tsRead] : [])];
    if (staged.length > 0) await paced(() => Promise.all(staged.map((b) => b.mapAsync(MAP_READ))));
    this.doneMs = performance.now() - t1;
    for (const r of reads) {
      const bytes = r.staging.getMappedRange().slice(0);
      r.out.data = r.src.elem === 'f32' ? new Float32Array(bytes) : new Int32Array(bytes);
      r.staging.unmap();
      r.staging.destroy();
    }
    if (tsRead) {
      const ts = new BigInt64Array(tsRead.getMappedRange().slice(0));
      this.timings = mode === 'step' ? [{ label: 'step', ns: Number(ts[1]! - ts[0]!) }]
        : labels.map((label, i) => ({ label, ns: Number(ts[2 * i + 1]! - ts[2 * i]!) }));
      tsRead.unmap();
      tsRead.destroy();
      resolve?.destroy();
      querySet?.destroy();
    }
    // Resolved = the submit's work completed (callers free what it read after this).
    if (staged.length === 0) await paced(() => this.device.queue.onSubmittedWorkDone());
    // A replaced parameter buffer is destroyed once the GPU is done with it: now, as this
    // submit began after its replacement.
    memory.params.release(replacementMark);
  }
}
