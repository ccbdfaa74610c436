/// <reference types="@webgpu/types" />
// A step's GPU work: many dispatches (and buffer copies) recorded in order, encoded into
// command buffers and submitted: in chunks while recording (submit-chunks.ts: the GPU runs
// one chunk while the host records the next), the rest on `submit`. Every kernel's
// parameters go into one slot of a host block (the step's slots in order) and reach the
// persistent parameter uniform with one writeBuffer of its submit's slots; each dispatch
// addresses its slot by a dynamic offset, so its bind group depends only on (pipeline,
// buffers) and comes from a cache shared by every step (dispatch-memory.ts). Every read-back
// is resolved by a single await after the last submit.
// Invariant: a chunk is submitted only when the next dispatch is recorded, so the last
// submit holds the step's last dispatch, and ops recorded since the previous submit are
// never split from a host write the caller makes before recording the next dispatch.
// Timing (when the device has timestamp-query): 'step' writes one timestamp where each
// submit's first compute pass begins and one where its last ends (timing.ts stepGpuTimes:
// the step's span, first to last, and the GPU's busy time, their sum); 'dispatch' puts each
// dispatch in its own timed pass (per-kernel GPU time, at the cost of a pass per dispatch).
// Without timestamp-query, `doneMs` (the last submit to the read-back mapped, host clock) is
// the only GPU-side figure.
import type { GpuTensor } from './tensor.js';
import { type EncoderTiming, type PassWrites, passTimestamps, stepGpuTimes, timingQueries } from './timing.js';
import { type BindGroupCache, PARAM_SLOT_BYTES, type ParamMemory } from './dispatch-memory.js';
import { type CompilingStep, PROBE_WINDOW_MS, type ReadbackPacer, submitShape } from './readback-pacer.js';
import { chunkLimit, SINGLE_SUBMIT, type SubmitChunks } from './submit-chunks.js';
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

/** A step holding a pipeline's first dispatch, for the pacer: probed through a read-back
 * copied after every op (a readNow copy may precede later work; a chunked step's first
 * timestamps belong to an earlier submit). */
function compilingStep(reads: readonly { staging: GPUBuffer; copied: boolean }[], stamps: readonly PendingTimestamps[],
  staged: readonly GPUBuffer[]): CompilingStep {
  const last = reads.find((r) => !r.copied)?.staging ?? stamps[stamps.length - 1]?.read ?? staged[staged.length - 1];
  return { probe: last ? mapProbe(last) : null };
}

/** The probe of `staging`: its map, given PROBE_WINDOW_MS to complete; one still pending is
 * aborted (unmap: the promise rejects, Dawn stops polling). Either way the buffer is left
 * unmapped for the real map. */
function mapProbe(staging: GPUBuffer): () => Promise<boolean> {
  return async () => {
    let done = false;
    const map = staging.mapAsync(MAP_READ).then(() => { done = true; }, () => {});
    await new Promise((r) => setTimeout(r, PROBE_WINDOW_MS));
    staging.unmap(); // aborts a pending map; undoes a completed one
    await map;
    return done;
  };
}

/** Read-back of a tensor; `data` is filled once the submit that carries it resolved. */
export interface Readback<T extends Float32Array | Int32Array> {
  data: T | null;
}

/** Per-dispatch GPU time of one profiled step (ns), by kernel label. */
export interface DispatchTiming { readonly label: string; readonly ns: number }

/** A submitted command buffer's timestamps, resolved into `read` (mapped with the read-backs). */
interface PendingTimestamps {
  readonly read: GPUBuffer;
  readonly resolve: GPUBuffer;
  readonly querySet: GPUQuerySet;
  readonly labels: readonly string[];
}

export class StepEncoder {
  /** Ops recorded since the last submit. */
  private ops: (DispatchOp | CopyOp)[] = [];
  /** Host block of this step's parameter slots (from the shared pool at the first dispatch,
   * back to it after the last submit), and a u32 view of it. Slots [0, slotsSubmitted) are
   * uploaded; a dispatch's slot is its index in the step. */
  private params: ArrayBuffer | null = null;
  private words = new Uint32Array(0);
  private slots = 0;
  private slotsSubmitted = 0;
  /** `copied`: its copy into staging is an op, in order (readNow); else it is made after every op. */
  private reads: { src: GpuTensor; staging: GPUBuffer; out: Readback<Float32Array | Int32Array>; copied: boolean }[] = [];
  /** Dispatches recorded since construction (all submits). */
  dispatchCount = 0;
  private submittedDispatches = 0;
  /** Submits since construction (all steps), and those of the step being recorded with their
   * dispatches and total workgroups (the chunk policy's count, the pacer's shape). */
  submits = 0;
  private stepSubmits = 0;
  private stepDispatches = 0;
  private stepWorkgroups = 0;
  /** The step being recorded holds a pipeline's first dispatch (the pacer learns nothing from it). */
  private stepCompiles = false;
  private stamps: PendingTimestamps[] = [];
  /** Timings of the last timed step: one per dispatch ('dispatch'), one 'step' ('step': its
   * span from the first submit's first pass to the last submit's last pass). */
  timings: DispatchTiming[] = [];
  /** GPU busy time of the last timed step (ns): the sum of its submits' own spans (= the
   * span with one submit; less by the GPU's idle gaps between submits). */
  gpuBusyNs = 0;
  /** Host time (ms) spent encoding and submitting (bind groups, passes, queue.submit),
   * all submits: with the recording time, the host cost per dispatch. */
  encodeMs = 0;
  /** Of encodeMs: the submits made while recording (chunks), which a caller timing its
   * recording counts there too. */
  chunkEncodeMs = 0;
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

  constructor(private readonly device: GPUDevice, private readonly memory: DispatchMemory, private readonly timing: EncoderTiming = 'none',
    private readonly chunks: SubmitChunks = SINGLE_SUBMIT) {}

  /** Ops recorded and not submitted yet. */
  get pending(): number {
    return this.ops.length;
  }

  /** Record a dispatch: params (≤ 64 words, u32 bits) go to the uniform at binding 0,
   * `buffers` to bindings 1.. in order (null: a binding folded into an earlier one).
   * A full chunk of earlier dispatches is submitted first (submit-chunks.ts). */
  dispatch(pipeline: GPUComputePipeline, layout: GPUBindGroupLayout, params: ArrayLike<number>,
    buffers: readonly (GPUBuffer | null)[], groups: readonly [number, number, number], label: string): void {
    if (params.length > SLOT_WORDS) throw new RangeError(`${label}: ${params.length} parameter words > ${SLOT_WORDS}`);
    if (this.dispatchCount - this.submittedDispatches >= chunkLimit(this.chunks, this.stepSubmits)) {
      const t0 = performance.now();
      this.encodeAndSubmit(false);
      this.chunkEncodeMs += performance.now() - t0;
    }
    if ((this.slots + 1) * SLOT > this.words.byteLength) this.growBlock();
    const slot = this.slots++;
    const base = slot * SLOT_WORDS;
    const words = this.words;
    for (let i = 0; i < params.length; i++) words[base + i] = params[i]! >>> 0;
    this.ops.push({ kind: 'dispatch', pipeline, layout, slot, buffers, groups, label });
    this.dispatchCount++;
    if (this.memory.pacer?.firstDispatch(pipeline)) this.stepCompiles = true;
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

  /** Submit everything recorded (the last submit of the step); resolves when every
   * read-back is mapped (and the step's work has completed). */
  async submit(): Promise<void> {
    if (this.ops.length === 0 && this.reads.length === 0 && this.stepSubmits === 0) return;
    const t1 = this.encodeAndSubmit(true);
    const reads = this.reads;
    this.reads = [];
    const memory = this.memory;
    const replacementMark = memory.params.replacements; // after this submit's upload
    const block = this.params;
    this.params = null;
    this.words = new Uint32Array(0);
    this.slots = 0;
    this.slotsSubmitted = 0;
    if (block) memory.params.giveHost(block); // every slot uploaded (writeBuffer copied them)
    const stamps = this.stamps;
    this.stamps = [];
    const shape = submitShape(this.stepDispatches, this.stepWorkgroups, this.stepSubmits);
    this.stepSubmits = 0;
    this.stepDispatches = 0;
    this.stepWorkgroups = 0;
    const staged = [...reads.map((r) => r.staging), ...stamps.map((s) => s.read)];
    const compiling = this.stepCompiles ? compilingStep(reads, stamps, staged) : null;
    this.stepCompiles = false;
    const paced = (done: () => Promise<unknown>): Promise<unknown> => memory.pacer?.wait(shape, done, compiling) ?? done();
    if (staged.length > 0) await paced(() => Promise.all(staged.map((b) => b.mapAsync(MAP_READ))));
    this.doneMs = performance.now() - t1;
    for (const r of reads) {
      const bytes = r.staging.getMappedRange().slice(0);
      r.out.data = r.src.elem === 'f32' ? new Float32Array(bytes) : new Int32Array(bytes);
      r.staging.unmap();
      r.staging.destroy();
    }
    if (stamps.length > 0) this.readTimestamps(stamps);
    // Resolved = the step's work completed (callers free what it read after this).
    if (staged.length === 0) await paced(() => this.device.queue.onSubmittedWorkDone());
    // A replaced parameter buffer is destroyed once the GPU is done with it: now, as the
    // last submit began after every replacement up to the mark.
    memory.params.release(replacementMark);
  }

  /** Encode the ops recorded since the last submit into one command buffer and submit it
   * (`last`: the step's read-back copies and timestamp resolves too). Its parameter slots
   * are uploaded first (a queue.writeBuffer: ordered after the earlier submits, before this
   * one). Returns the host clock right after queue.submit. */
  private encodeAndSubmit(last: boolean): number {
    const t0 = performance.now();
    const ops = this.ops;
    this.ops = [];
    const memory = this.memory;
    const from = this.slotsSubmitted * SLOT;
    const to = this.slots * SLOT;
    this.slotsSubmitted = this.slots;
    const paramBuffer = this.params && to > from ? memory.params.upload(this.params, from, to) : null;
    const dispatches = this.dispatchCount - this.submittedDispatches;
    this.submittedDispatches = this.dispatchCount;
    this.stepDispatches += dispatches;
    const mode = this.device.features.has('timestamp-query') && dispatches > 0 ? this.timing : 'none';
    const queries = timingQueries(mode, dispatches);
    const querySet = queries > 0 ? this.device.createQuerySet({ type: 'timestamp', count: queries }) : null;
    const writes = mode === 'none' ? null : passTimestamps(mode, ops.map((o) => o.kind === 'dispatch'));
    const enc = this.device.createCommandEncoder();
    const labels = this.encodeOps(enc, ops, paramBuffer, querySet, writes, mode === 'dispatch');
    if (querySet) {
      const resolve = this.device.createBuffer({ size: 8 * queries, usage: QUERY_RESOLVE | COPY_SRC });
      const read = this.device.createBuffer({ size: 8 * queries, usage: MAP_READ | COPY_DST });
      enc.resolveQuerySet(querySet, 0, queries, resolve, 0);
      enc.copyBufferToBuffer(resolve, 0, read, 0, 8 * queries);
      this.stamps.push({ read, resolve, querySet, labels });
    }
    if (last) for (const r of this.reads) if (!r.copied) enc.copyBufferToBuffer(r.src.buffer, r.src.offset * 4, r.staging, 0, r.src.length * 4);
    this.device.queue.submit([enc.finish()]);
    this.submits++;
    this.stepSubmits++;
    const t1 = performance.now();
    this.encodeMs += t1 - t0;
    return t1;
  }

  /** Record `ops` into `enc`: consecutive dispatches share a compute pass (one each when
   * `passEach`), a copy ends the open pass. Returns the labels of the timed dispatches
   * ('dispatch' timing). */
  private encodeOps(enc: GPUCommandEncoder, ops: readonly (DispatchOp | CopyOp)[], paramBuffer: GPUBuffer | null, querySet: GPUQuerySet | null,
    writes: readonly (PassWrites | undefined)[] | null, passEach: boolean): string[] {
    const memory = this.memory;
    let pass: GPUComputePassEncoder | null = null;
    let lastPipeline: GPUComputePipeline | null = null;
    const labels: string[] = [];
    const offsets = new Uint32Array(1); // the dynamic offset of binding 0 (the typed-array overload)
    const createdBefore = memory.bindGroups.created; // this loop runs to its end without yielding
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
      if (passEach) labels.push(op.label);
      const b0 = performance.now();
      const bg = memory.bindGroups.get(op.pipeline, op.layout, paramBuffer!, op.buffers);
      this.bindGroupMs += performance.now() - b0;
      this.bindGroups++;
      if (op.pipeline !== lastPipeline) pass.setPipeline(op.pipeline);
      lastPipeline = op.pipeline;
      offsets[0] = op.slot * SLOT;
      pass.setBindGroup(0, bg, offsets, 0, 1);
      pass.dispatchWorkgroups(op.groups[0], op.groups[1], op.groups[2]);
      this.stepWorkgroups += op.groups[0] * op.groups[1] * op.groups[2];
      if (passEach) {
        pass.end();
        pass = null;
      }
    }
    pass?.end();
    this.bindGroupsCreated += memory.bindGroups.created - createdBefore;
    return labels;
  }

  /** The step's timings from its submits' mapped timestamps (then freed). */
  private readTimestamps(stamps: readonly PendingTimestamps[]): void {
    const submits = stamps.map((s) => ({ ts: new BigInt64Array(s.read.getMappedRange().slice(0)), labels: s.labels }));
    for (const s of stamps) {
      s.read.unmap();
      s.read.destroy();
      s.resolve.destroy();
      s.querySet.destroy();
    }
    const times = stepGpuTimes(this.timing, submits);
    this.timings = this.timing === 'step' ? [{ label: 'step', ns: times.spanNs }] : [...times.dispatches];
    this.gpuBusyNs = times.busyNs;
  }
}
