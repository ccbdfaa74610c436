/// <reference types="@webgpu/types" />
// A step's GPU work: many dispatches (and buffer copies) recorded in order, encoded into
// one command buffer on `submit`, with every kernel's parameters packed into one uniform
// arena uploaded once, and every read-back resolved by a single await.
// Timing (when the device has timestamp-query): 'step' writes one timestamp where the step's
// first compute pass begins and one where its last ends — the step's GPU time with its passes
// as they are; 'dispatch' puts each dispatch in its own timed pass (per-kernel GPU time, at
// the cost of a pass per dispatch). Without timestamp-query, `doneMs` (submit to the
// read-back mapped, host clock) is the only GPU-side figure.
import type { GpuTensor } from './tensor.js';
import { type EncoderTiming, passTimestamps, timingQueries } from './timing.js';
export type { EncoderTiming };

/** Bytes of parameters per dispatch (= the usual uniform offset alignment; the WGSL
 * Params struct of wgsl/common.ts HEADER is exactly this size). */
export const PARAM_SLOT_BYTES = 256;
const SLOT = PARAM_SLOT_BYTES;
const ARENA_SLOTS = 512;
const UNIFORM = 0x40; // GPUBufferUsage.UNIFORM
const COPY_DST = 0x08;
const COPY_SRC = 0x04;
const MAP_READ = 0x01;
const QUERY_RESOLVE = 0x200;

interface DispatchOp {
  readonly kind: 'dispatch';
  readonly pipeline: GPUComputePipeline;
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
  private params = new ArrayBuffer(SLOT * ARENA_SLOTS);
  private slots = 0;
  private reads: { src: GpuTensor; staging: GPUBuffer; out: Readback<Float32Array | Int32Array> }[] = [];
  private arenas: GPUBuffer[] = [];
  /** Dispatches recorded since construction (all submits). */
  dispatchCount = 0;
  /** Timings of the last timed submit: one per dispatch ('dispatch'), one 'step' ('step'). */
  timings: DispatchTiming[] = [];
  /** Host time (ms) spent encoding and submitting (bind groups, passes, queue.submit),
   * all submits: with the recording time, the host cost per dispatch. */
  encodeMs = 0;
  /** Of encodeMs: host time in createBindGroup (one bind group per dispatch). */
  bindGroupMs = 0;
  /** Bind groups created and set (setBindGroup calls), all submits. */
  bindGroups = 0;
  /** Host clock from the last submit's queue.submit to its read-backs mapped (ms): queue
   * completion, the GPU's time plus the driver's latency (the fallback without timestamps). */
  doneMs = 0;

  constructor(private readonly device: GPUDevice, private readonly timing: EncoderTiming = 'none') {}

  get pending(): number {
    return this.ops.length;
  }

  /** Record a dispatch: params (≤ 64 words) go to the uniform at binding 0, `buffers` to
   * bindings 1.. in order. */
  dispatch(pipeline: GPUComputePipeline, params: ArrayLike<number> | Uint32Array, paramsF32: ArrayLike<number> | null,
    buffers: readonly (GPUBuffer | null)[], groups: readonly [number, number, number], label: string): void {
    if ((this.slots + 1) * SLOT > this.params.byteLength) this.growArena();
    const slot = this.slots++;
    const u = new Uint32Array(this.params, slot * SLOT, SLOT / 4);
    const p = params as ArrayLike<number>;
    for (let i = 0; i < p.length; i++) u[i] = p[i]! >>> 0;
    if (paramsF32) new Float32Array(this.params, slot * SLOT + p.length * 4, paramsF32.length).set(paramsF32);
    this.ops.push({ kind: 'dispatch', pipeline, slot, buffers, groups, label });
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
    this.reads.push({ src: t, staging, out: out as Readback<Float32Array | Int32Array> });
    return out;
  }

  // More dispatches than the host-side parameter block holds: double it.
  private growArena(): void {
    const grown = new ArrayBuffer(this.params.byteLength * 2);
    new Uint8Array(grown).set(new Uint8Array(this.params));
    this.params = grown;
  }

  /** Encode and submit everything recorded; resolves when every read-back is mapped. */
  async submit(): Promise<void> {
    const ops = this.ops;
    const reads = this.reads;
    const slots = this.slots;
    this.ops = [];
    this.reads = [];
    this.slots = 0;
    if (ops.length === 0 && reads.length === 0) return;
    const t0 = performance.now();
    const arena = this.device.createBuffer({ size: Math.max(SLOT, slots * SLOT), usage: UNIFORM | COPY_DST, label: 'params' });
    this.arenas.push(arena);
    if (slots > 0) this.device.queue.writeBuffer(arena, 0, this.params, 0, slots * SLOT);
    const dispatches = ops.filter((o) => o.kind === 'dispatch').length;
    const mode = this.device.features.has('timestamp-query') && dispatches > 0 ? this.timing : 'none';
    const queries = timingQueries(mode, dispatches);
    const querySet = queries > 0 ? this.device.createQuerySet({ type: 'timestamp', count: queries }) : null;
    const writes = passTimestamps(mode, ops.map((o) => o.kind === 'dispatch'));
    const enc = this.device.createCommandEncoder();
    let pass: GPUComputePassEncoder | null = null;
    const labels: string[] = [];
    for (const [i, op] of ops.entries()) {
      if (op.kind === 'copy') {
        pass?.end();
        pass = null;
        enc.copyBufferToBuffer(op.src, op.srcOffset, op.dst, op.dstOffset, op.bytes);
        continue;
      }
      if (!pass) {
        const w = writes[i];
        pass = enc.beginComputePass(querySet && w ? { timestampWrites: { querySet, ...w } } : {});
      }
      labels.push(op.label);
      const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: arena, offset: op.slot * SLOT, size: SLOT } }];
      op.buffers.forEach((buffer, b) => { if (buffer) entries.push({ binding: b + 1, resource: { buffer } }); });
      const b0 = performance.now();
      const bg = this.device.createBindGroup({ layout: op.pipeline.getBindGroupLayout(0), entries });
      this.bindGroupMs += performance.now() - b0;
      this.bindGroups++;
      pass.setPipeline(op.pipeline);
      pass.setBindGroup(0, bg);
      pass.dispatchWorkgroups(op.groups[0], op.groups[1], op.groups[2]);
      if (mode === 'dispatch') {
        pass.end();
        pass = null;
      }
    }
    pass?.end();
    let tsRead: GPUBuffer | null = null;
    let resolve: GPUBuffer | null = null;
    if (querySet) {
      resolve = this.device.createBuffer({ size: 8 * queries, usage: QUERY_RESOLVE | COPY_SRC });
      tsRead = this.device.createBuffer({ size: 8 * queries, usage: MAP_READ | COPY_DST });
      enc.resolveQuerySet(querySet, 0, queries, resolve, 0);
      enc.copyBufferToBuffer(resolve, 0, tsRead, 0, 8 * queries);
    }
    for (const r of reads) enc.copyBufferToBuffer(r.src.buffer, r.src.offset * 4, r.staging, 0, r.src.length * 4);
    this.device.queue.submit([enc.finish()]);
    const t1 = performance.now();
    this.encodeMs += t1 - t0;
    await Promise.all([...reads.map((r) => r.staging.mapAsync(MAP_READ)), tsRead?.mapAsync(MAP_READ)]);
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
    // The parameter arena is freed only once the GPU is done with it.
    if (reads.length === 0) await this.device.queue.onSubmittedWorkDone();
    for (const a of this.arenas) a.destroy();
    this.arenas = [];
  }
}
