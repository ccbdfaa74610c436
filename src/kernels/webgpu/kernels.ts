/// <reference types="@webgpu/types" />
// The webgpu backend in the shape of the typed kernel boundary (docs/ARCHITECTURE.md "Kernel boundary":
// Kernels<T, I> with backend-owned tensors, host inputs as ArrayLike, one
// async readBack per step). Every op is recorded into the current step's encoder; host
// inputs (token ids, positions, page tables, RoPE cos/sin, writes) go into a per-step
// upload arena at distinct offsets, and reach their destination by recorded copies, so
// they keep program order with the ops; `readBack` submits the step and resolves once.
// argmax and sample work on host rows (the boundary reads logits back); the GPU kernels
// for both (WebGpuKernels.argmax, sample.ts) serve a device-side pick later.
import type { BiasAct, AttentionDims, AttentionInputs, BatchSeq, GatedInput, GroupNorm, KernelLimits, StepBatch, ConvSeq, ExpertMats, FillRun, GdnChunkSeq, GdnDims, GdnGating, GdnSeq, GroupConv, Kernels, KvLayerView, MoeFusion, MoeScratch, PenaltyPickRow, PenaltyPicksCall, CandidateDraw, ReadRange, RopeTable, SampleResult, SampleRow,
  GroupMatmul, MtpInputs, StagedRead, Weight, WeightDType } from '../types.js';
import { groupConvByCall, groupInnerSize } from '../matmul-group.js';
import { attentionInputsByCalls } from '../batch-by-calls.js';
import { rowMajorPrefix, weightBytes } from '../weight-view.js';
import { isQuantType, quantRowBytes } from '../quant/formats.js';
import { argmax as refArgmax } from '../ref/dense.js';
import { sample as refSample } from '../ref/sampling.js';
import { ropeTable, WebGpuKernels } from './backend.js';
import { UploadArena } from './upload-arena.js';
import type { AcquireOptions } from './device.js';
import type { EncoderTiming, StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { gpuWeightBytes, planSplitEmbed, type GpuWeight } from './weights.js';
import { embedDeviceIds } from './embed-ids.js';
import { mtpInputsDispatch, mtpInputsFits } from './mtp-inputs.js';
import { mtpInputsByCalls } from '../mtp-inputs-by-calls.js';
import { argmaxRowsMaskedOn, gatherPickedOn } from './argmax-masked.js';
import { topCandidatesOn } from './top-candidates.js';
import { packPenaltyTable, penaltyPicksOn } from './penalty-picks.js';
import { candidateDrawsOn, packDrawTable } from './candidate-draws.js';
import { fillRunsDispatch } from './fill-runs.js';
import { convFoldPlan } from './conv-launch.js';
import { convSeqsDispatch, gdnChunkedSeqsDispatch, gdnGatedFits, gdnGatedSeqsDispatch, gdnSeqsDispatch } from './seqs.js';
import { gdnGatedSeqsByCalls } from '../seqs-by-calls.js';
import { groupedMoeExperts, moeTallyBytes, MoeTally } from './moe.js';
import { MoeStacks } from './moe-stack.js';
import { attentionBatch, attentionInputsDispatch, kvWriteBatch, makeGpuStepBatch, ropeBatch, type GpuStepBatch } from './batch.js';
import { biasActOn, layerNormOn } from './tower-ops.js';
import { gatedRmsNormPermuted, headNormFolds, identityOrder, normQuantFolds, outProjHeadNorm, outProjHeadNormQuant, outProjNormQuant, quantHeadNormFolds } from './gated-norm.js';
import type { StartedQuantizer } from '../quant/row-quantizer.js';

type GpuKvLayerView = KvLayerView<GpuTensor>;

/** Host writes of at least this many elements go straight to the queue (after flushing
 * what is recorded), never through the upload arena. */
const DIRECT_WRITE = 1 << 16;

/** Kernels<GpuTensor, GpuTensor>: f32 and int32 tensors are both GpuTensor views. */
export class WebGpuBoundaryKernels implements Kernels<GpuTensor, GpuTensor> {
  readonly name = 'webgpu';
  readonly threads = 1;

  /** The adapter's limits; device memory = the bytes of every buffer held now. */
  get limits(): KernelLimits {
    const l = this.g.adapter.limits;
    return { deviceMemoryBytes: this.g.alloc.bytes, maxBufferBytes: l.maxBufferSize, maxBindingBytes: l.maxStorageBufferBindingSize, adapter: this.g.adapter };
  }
  private enc: StepEncoder | null = null;
  /** Submits of flush() not awaited yet (the next readBack awaits them). */
  private flushed: Promise<void>[] = [];
  private readonly uploads: UploadArena;
  private readonly packed = new WeakMap<Weight, GpuWeight>();
  private readonly vectors = new WeakMap<Weight, GpuTensor>();

  constructor(readonly g: WebGpuKernels) {
    this.uploads = new UploadArena(g);
    this.moeTally = new MoeTally(g);
    this.moeStacks = new MoeStacks(g);
  }

  static async create(gpu: GPU, opts: AcquireOptions): Promise<WebGpuBoundaryKernels> {
    return new WebGpuBoundaryKernels(await WebGpuKernels.create(gpu, opts));
  }

  dispose(): void {
    this.g.dispose();
  }

  private get step(): StepEncoder {
    return (this.enc ??= this.g.encoder(this.timing));
  }

  /** Timestamp queries when the device has timestamp-query (encoder.ts): 'step' brackets
   * each step's passes, 'dispatch' gives each dispatch a timed pass; GPU time per step for
   * `bench`. Off by default. */
  timing: EncoderTiming = 'none';
  /** Expert weight bytes read vs the routed-only ideal, tallied on the device (moe.ts). */
  readonly moeTally: MoeTally;
  /** Each MoE layer's experts stacked for one dispatch per GEMM kind (moe-stack.ts). */
  readonly moeStacks: MoeStacks;
  /** Since construction: read-backs (steps: each readBack is one), the bytes they carried,
   * dispatches, submits (encoder.ts: a step's chunks), GPU ns of profiled steps (span and busy). */
  readonly counters = { steps: 0, readBackBytes: 0, dispatches: 0, gpuNs: 0, timedSteps: 0, encodeMs: 0, bindGroups: 0, bindGroupsCreated: 0, bindGroupMs: 0, doneMs: 0,
    submits: 0, chunkEncodeMs: 0, gpuBusyNs: 0 };

  /** Dispatches recorded since construction, the current step's included (a census can
   * read it between any two kernel calls). */
  get recordedDispatches(): number {
    return this.counters.dispatches + (this.enc?.dispatchCount ?? 0);
  }

  alloc(n: number): GpuTensor {
    return this.g.alloc.tensor([n], 'f32');
  }
  allocI32(n: number): GpuTensor {
    return this.g.alloc.tensor([n], 'i32');
  }
  /** Destroyed once the step recorded so far has run (the next readBack): commands already
   * recorded may still read it. */
  free(t: GpuTensor): void {
    if (t.offset !== 0) throw new RangeError('free: a view, not a tensor alloc returned');
    this.freed.push(t.buffer);
  }
  /** Buffers free() gave back, destroyed after the next readBack. */
  private freed: GPUBuffer[] = [];
  view(t: GpuTensor, offset: number, length: number): GpuTensor {
    if (!(offset >= 0 && length >= 0 && offset + length <= t.length)) throw new RangeError(`view [${offset}, ${offset + length}) of ${t.length}`);
    return { ...t, offset: t.offset + offset, length, shape: [length] };
  }
  copyRows(dst: GpuTensor, dstOffset: number, dstStride: number, src: GpuTensor, srcOffset: number, srcStride: number, rows: number, width: number): void {
    this.g.copyRows(this.step, dst, dstOffset, dstStride, src, srcOffset, srcStride, rows, width);
  }
  gatherRows(dst: GpuTensor, src: GpuTensor, rows: ArrayLike<number>, width: number): void {
    for (let i = 0; i < rows.length; i++) {
      if (!(rows[i]! >= 0 && (rows[i]! + 1) * width <= src.length)) throw new RangeError(`gatherRows: row ${rows[i]} out of range`);
    }
    this.g.gatherRows(this.step, dst, src, this.uploads.put(rows, 'i32'), rows.length, width);
  }
  fill(dst: GpuTensor, offset: number, length: number, value: number): void {
    this.g.fill(this.step, dst, offset, length, value);
  }
  /** One dispatch for every run (wgsl/fill-runs.ts). */
  fillRuns(dst: GpuTensor, runs: readonly FillRun[], value: number): void {
    fillRunsDispatch(this.g, this.step, (d) => this.uploads.put(d, 'i32'), dst, runs, value);
  }
  write(dst: GpuTensor, offset: number, src: ArrayLike<number>): void {
    if (offset + src.length > dst.length) throw new RangeError(`write: ${src.length} elements at ${offset} past ${dst.length}`);
    if (src.length === 0) return;
    if (this.enc && this.enc.pending > 0 && src.length >= DIRECT_WRITE) this.flush();
    if (!this.enc || this.enc.pending === 0) {
      // nothing recorded yet: a direct queue write lands after every earlier submit and
      // before the next one, which is program order (and needs no upload-arena room: a
      // prefix-cache load writes whole pools this way)
      const typed = dst.elem === 'i32' ? Int32Array.from(src) : src instanceof Float32Array ? src : Float32Array.from(src);
      this.g.alloc.write(dst, typed, offset);
      return;
    }
    const staged = this.uploads.put(src, dst.elem === 'i32' ? 'i32' : 'f32');
    this.step.copy(staged, { ...dst, offset: dst.offset + offset, length: src.length }, src.length);
  }
  /** Submit what is recorded so far without waiting (a large host write follows). */
  private flush(): void {
    const enc = this.enc;
    this.enc = null;
    if (!enc) return;
    this.counters.dispatches += enc.dispatchCount;
    const done = enc.submit();
    this.countEncode(enc); // submit's synchronous part has run
    done.catch(() => {}); // reported by the next readBack, which awaits it
    this.flushed.push(done);
  }

  private countEncode(enc: StepEncoder): void {
    this.counters.encodeMs += enc.encodeMs;
    this.counters.bindGroups += enc.bindGroups;
    this.counters.bindGroupsCreated += enc.bindGroupsCreated;
    this.counters.bindGroupMs += enc.bindGroupMs;
    this.counters.submits += enc.submits;
    this.counters.chunkEncodeMs += enc.chunkEncodeMs;
  }

  /** MoE expert weight bytes read since the tally's last restart vs the routed-only ideal
   * (a read-back of the device tally: submits the current step). */
  async moeWeightBytes(): Promise<{ read: number; ideal: number }> {
    const layers = this.moeTally.all();
    if (layers.length === 0) return { read: 0, ideal: 0 };
    return moeTallyBytes(layers, await this.readBack(layers.map((l) => ({ t: l.tally, offset: 0, length: l.tally.length }))));
  }

  /** Submit the step; resolves with host copies of the ranges (the step's one await). */
  /** Copies into read-back staging recorded now (StepEncoder.readNow), mapped by the next
   * readBack's submit (or an earlier flush's, which that readBack awaits). */
  stage(ranges: readonly ReadRange<GpuTensor>[]): StagedRead {
    const enc = this.step;
    const reads = ranges.map((r) => {
      if (!(r.offset >= 0 && r.length >= 0 && r.offset + r.length <= r.t.length)) throw new RangeError(`stage [${r.offset}, ${r.offset + r.length}) of ${r.t.length}`);
      this.stagedBytes += 4 * r.length;
      return enc.readNow<Float32Array>({ ...r.t, elem: 'f32', offset: r.t.offset + r.offset, length: r.length });
    });
    return { get data() { return reads.every((r) => r.data) ? reads.map((r) => r.data!) : null; } };
  }
  /** Bytes staged since the last readBack (counted in its transfer). */
  private stagedBytes = 0;

  async readBack(ranges: readonly ReadRange<GpuTensor>[]): Promise<Float32Array[]> {
    const enc = this.step;
    this.enc = null;
    const stagedBytes = this.stagedBytes; // the stage() copies this submit maps
    this.stagedBytes = 0;
    const reads = ranges.map((r) => enc.read<Float32Array>({ ...r.t, elem: 'f32', offset: r.t.offset + r.offset, length: r.length }));
    const flushed = this.flushed;
    this.flushed = [];
    const freed = this.freed;
    this.freed = [];
    const submitted = enc.submit();
    this.countEncode(enc); // submit's synchronous part has run
    await Promise.all([...flushed, submitted]);
    for (const b of freed) this.g.alloc.free(b);
    this.counters.doneMs += enc.doneMs;
    this.uploads.reset();
    this.g.endStep();
    this.counters.steps++;
    this.counters.readBackBytes += 4 * ranges.reduce((a, r) => a + r.length, 0) + stagedBytes;
    this.counters.dispatches += enc.dispatchCount;
    if (enc.timings.length > 0) {
      this.counters.timedSteps++;
      this.counters.gpuNs += enc.timings.reduce((s, d) => s + d.ns, 0);
      this.counters.gpuBusyNs += enc.gpuBusyNs;
    }
    return reads.map((r) => r.data!);
  }

  allocWeight(dtype: WeightDType, rows: number, cols: number): { weight: Weight; bytes: Uint8Array } {
    if (isQuantType(dtype)) {
      const data = new Uint8Array(rows * quantRowBytes(dtype, cols));
      return { weight: { dtype, rows, cols, data }, bytes: data };
    }
    const data = dtype === 'f32' ? new Float32Array(rows * cols) : new Uint16Array(rows * cols);
    return { weight: { dtype, rows, cols, data }, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
  }
  /** No GPU quantize kernel: the host quantizes before the upload, with the wasm SIMD
   * quantizer on every core when it is built (else the TypeScript reference), its module
   * loaded only now, for --quantize. */
  async startQuantizer(): Promise<StartedQuantizer> {
    const { startQuantizer } = await import('../wasm/quantizer.js');
    return startQuantizer();
  }

  /** Upload once; the returned weight is a handle (its host bytes are released). */
  packWeight(w: Weight): Weight {
    if (this.packed.has(w)) return w;
    const gw = this.g.uploadWeight(w);
    const handle: Weight = { dtype: w.dtype, rows: w.rows, cols: w.cols, data: new Uint8Array(0), layout: 'webgpu' };
    this.packed.set(handle, gw);
    return handle;
  }
  /** Rows [0, n): a packed weight's handle over the first parts (same GPU memory). */
  weightRows(w: Weight, n: number): Weight {
    const gw = this.packed.get(w);
    if (!gw) return rowMajorPrefix(w, n);
    if (!Number.isInteger(n) || n < 1 || n > w.rows) throw new RangeError(`weightRows: ${n} rows of a [${w.rows}, ${w.cols}] weight`);
    const parts = gw.parts.filter((p) => p.row0 < n).map((p) => ({ ...p, rows: Math.min(p.rows, n - p.row0) }));
    const handle: Weight = { ...w, rows: n };
    this.packed.set(handle, { ...gw, rows: n, parts });
    return handle;
  }
  storedWeightBytes(w: Weight): number {
    const gw = this.packed.get(w);
    return gw ? gpuWeightBytes(gw) : weightBytes(w);
  }
  private gpuWeight(w: Weight): GpuWeight {
    const gw = this.packedOf(w);
    if (this.moeStacks.isMoved(gw)) throw new Error(`webgpu kernels: expert weight [${w.rows}, ${w.cols}] was stacked with its layer's experts; only moeExperts reads it`);
    return gw;
  }
  private packedOf(w: Weight): GpuWeight {
    const gw = this.packed.get(w);
    if (!gw) throw new Error(`webgpu kernels: weight [${w.rows}, ${w.cols}] was not packed (packWeight) for this backend`);
    return gw;
  }
  /** An embedding table on the GPU: packed already when it is also the (tied) LM head,
   * else uploaded on first use (the model keeps unpacked tables as loaded). */
  private tableOf(w: Weight): GpuWeight {
    let gw = this.packed.get(w);
    if (!gw) this.packed.set(w, (gw = this.g.uploadWeight(w, 'embedding')));
    return gw;
  }
  /** A small weight (norm, conv taps, gates) widened to f32 on the GPU, once. */
  private vector(w: Weight): GpuTensor {
    let v = this.vectors.get(w);
    if (!v) this.vectors.set(w, (v = this.g.uploadVector(w)));
    return v;
  }

  matmul(out: GpuTensor, x: GpuTensor, w: Weight, m: number): void {
    this.g.matmul(this.step, out, x, this.gpuWeight(w), m);
  }
  /** The add folded into the matmul's dispatch (tmp is not needed). */
  matmulAdd(out: GpuTensor, x: GpuTensor, w: Weight, m: number, _tmp: GpuTensor, gate?: GatedInput<GpuTensor>): void {
    this.g.matmulAdd(this.step, out, x, this.gpuWeight(w), m, gate);
  }
  /** One dispatch for the group's float weights (WebGpuKernels.matmulGroup); the conv folded
   * into it where convFoldPlan allows, else its own dispatch after. */
  matmulGroup(x: GpuTensor, m: number, group: readonly GroupMatmul<GpuTensor>[], norm?: GroupNorm<GpuTensor>, conv?: GroupConv<GpuTensor>): void {
    groupInnerSize(group, m);
    const gws = group.map((e) => ({ out: e.out, w: this.gpuWeight(e.w) }));
    const fold = conv && gws[0] && m > 0 ? convFoldPlan(this.g, this.put, m, gws[0].out, gws[0].w, { out: conv.out, wc: this.vector(conv.w), seqs: conv.seqs }) : null;
    this.g.matmulGroup(this.step, x, m, gws, false,
      norm ? { wv: this.vector(norm.w), eps: norm.eps, zeroCentered: norm.zeroCentered, out: norm.out } : undefined, undefined, fold ?? undefined);
    if (!fold) groupConvByCall(this, group, conv);
  }
  embed(out: GpuTensor, table: Weight, ids: ArrayLike<number>): void {
    for (let i = 0; i < ids.length; i++) {
      if (!(ids[i]! >= 0 && ids[i]! < table.rows)) throw new RangeError(`embed: token id ${ids[i]} out of range [0, ${table.rows})`);
    }
    const gw = this.tableOf(table);
    if (gw.parts.length === 1) {
      this.g.embed(this.step, out, gw, this.uploads.put(ids, 'i32'), ids.length);
      return;
    }
    // a table past the binding limit: each part embeds its tokens, one gather reorders them
    const plan = planSplitEmbed(gw, ids);
    const stacked = this.g.scratchTensor('embed_split', ids.length * gw.cols);
    for (const p of plan.parts) {
      const dst = this.view(stacked, p.first * gw.cols, p.localIds.length * gw.cols);
      this.g.embed(this.step, dst, p.weight, this.uploads.put(p.localIds, 'i32'), p.localIds.length);
    }
    this.g.gatherRows(this.step, out, stacked, this.uploads.put(plan.order, 'i32'), ids.length, gw.cols);
  }
  /** Ids on the device (embed-ids.ts): no read-back between an argmaxRows and this gather. */
  embedIds(out: GpuTensor, table: Weight, ids: GpuTensor, idsOffset: number, m: number): void {
    if (m > 0) embedDeviceIds(this.g, this.step, out, this.tableOf(table), this.view(ids, idsOffset, m), m);
  }
  /** One dispatch (mtp-inputs.ts) where it fits, else the separate calls. */
  mtpInputs(a: MtpInputs<GpuTensor, GpuTensor>): void {
    const table = this.tableOf(a.table);
    if (!mtpInputsFits(this.g, a, table)) return mtpInputsByCalls(this, a);
    mtpInputsDispatch(this.g, this.step, a, { table, normEmbedding: this.vector(a.normEmbedding), normHidden: this.vector(a.normHidden),
      put: (d, elem) => this.uploads.put(d, elem) });
  }
  rmsNorm(out: GpuTensor, x: GpuTensor, w: Weight, m: number, eps: number, zeroCentered: boolean): void {
    this.g.rmsNorm(this.step, out, x, this.vector(w), m, eps, zeroCentered);
  }
  gatedRmsNorm(out: GpuTensor, o: GpuTensor, z: GpuTensor, w: Weight, m: number, eps: number, headOrder?: Int32Array): void {
    if (headOrder) gatedRmsNormPermuted(this.g, this.step, out, o, z, this.vector(w), m, eps, this.uploads.put(headOrder, 'i32'), headOrder.length);
    else this.g.gatedRmsNorm(this.step, out, o, z, this.vector(w), m, eps);
  }
  rope(x: GpuTensor, positions: ArrayLike<number>, t: number, heads: number, headDim: number, table: RopeTable, stride: number): void {
    const rot = 2 * table.invFreq.length;
    const cs = this.uploads.put(ropeTable(positions, t, rot, 0, table.invFreq, table.scale), 'f32');
    this.g.rope(this.step, x, cs, t, heads, headDim, rot, stride);
  }
  causalConv(out: GpuTensor, x: GpuTensor, window: GpuTensor, w: Weight, t: number, scratch?: GpuTensor): void {
    this.g.causalConv(this.step, out, x, window, this.vector(w), w.rows, t, scratch);
  }
  /** One dispatch per group of sequences whose windows share a buffer (seqs.ts). */
  causalConvSeqs(out: GpuTensor, x: GpuTensor, w: Weight, seqs: readonly ConvSeq<GpuTensor>[]): void {
    convSeqsDispatch(this.g, this.step, this.put, out, x, this.vector(w), w.rows, seqs, this.g.dummyBuffer);
  }
  gdnGates(g: GpuTensor, beta: GpuTensor, a: GpuTensor, b: GpuTensor, aLog: Weight, dtBias: Weight, t: number): void {
    this.g.gdnGates(this.step, g, beta, a, b, this.vector(aLog), this.vector(dtBias), t);
  }
  gdnRecurrent(out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, state: GpuTensor, dims: GdnDims, t: number, scratch?: GpuTensor): void {
    this.g.gdnRecurrent(this.step, out, qkv, g, beta, state, dims, t, scratch);
  }
  gdnRecurrentSeqs(out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, dims: GdnDims, seqs: readonly GdnSeq<GpuTensor>[]): void {
    gdnSeqsDispatch(this.g, this.step, this.put, out, qkv, g, beta, dims, seqs, this.g.dummyBuffer);
  }
  /** One dispatch per state-buffer group: gates, recurrence and gated norm fused
   * (seqs.ts gdnGatedSeqsDispatch) where the adapter allows, else the three plain calls. */
  gdnRecurrentGatedSeqs(out: GpuTensor, qkv: GpuTensor, gating: GdnGating<GpuTensor>, dims: GdnDims, seqs: readonly GdnSeq<GpuTensor>[]): void {
    if (!gdnGatedFits(this.g, dims)) {
      gdnGatedSeqsByCalls(this, out, qkv, gating, dims, seqs);
      return;
    }
    const gpu = { a: gating.a, b: gating.b, z: gating.z, aLog: this.vector(gating.aLog), dtBias: this.vector(gating.dtBias), norm: this.vector(gating.norm), eps: gating.eps,
      ...(gating.perm ? { perm: gating.perm } : {}) };
    const p = gating.project;
    const gw = p ? this.gpuWeight(p.w) : null;
    const rows = seqs.reduce((n, s) => n + s.t, 0);
    const fold = p && gw ? (headNormFolds(this.g, gw, p.m, dims) ? 'float' : quantHeadNormFolds(this.g, gw, p.m, dims) ? 'quant'
      : normQuantFolds(this.g, gw, p.m, rows, dims) ? 'pass' : null) : null;
    // 'pass': the norm pass quantizes out_proj's input (gated-norm.ts normQuantFolds)
    const acts = p && fold === 'pass' ? this.g.actScratch(p.m, gw!.cols) : null;
    gdnGatedSeqsDispatch(this.g, this.step, this.put, out, qkv, gpu, dims, seqs, this.g.dummyBuffer, acts ?? fold !== null);
    if (p && gw && acts) outProjNormQuant(this.g, this.step, p.x, gw, p.m, acts);
    else if (p && gw && fold) {
      const order = this.uploads.put(gating.perm?.order ?? identityOrder(dims.numValueHeads), 'i32');
      const gn = { z: gating.z, norm: gpu.norm, eps: gating.eps, order, hv: dims.numValueHeads };
      (fold === 'float' ? outProjHeadNorm : outProjHeadNormQuant)(this.g, this.step, p.x, out, gw, p.m, gn);
    } else if (p) this.matmulAdd(p.x, gating.perm?.out ?? out, p.w, p.m, p.tmp);
  }
  gdnChunked(out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, state: GpuTensor, dims: GdnDims, t: number, pos0?: number): void {
    this.g.gdnChunked(this.step, out, qkv, g, beta, state, dims, t, pos0);
  }
  /** Every chunked prefill of the batch in one dispatch per state buffer (seqs.ts). */
  gdnChunkedSeqs(out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, dims: GdnDims, seqs: readonly GdnChunkSeq<GpuTensor>[]): void {
    gdnChunkedSeqsDispatch(this.g, this.step, this.put, out, qkv, g, beta, dims, seqs);
  }
  kvWrite(kv: GpuKvLayerView, pageTable: ArrayLike<number>, start: number, k: GpuTensor, v: GpuTensor, t: number, kvDim: number): void {
    this.g.kvWrite(this.step, kv, this.uploads.put(pageTable, 'i32'), start, k, v, t, kvDim);
  }
  attention(out: GpuTensor, q: GpuTensor, qStride: number, kv: GpuKvLayerView, pageTable: ArrayLike<number>, start: number, t: number, dims: AttentionDims): void {
    this.g.attention(this.step, out, q, qStride, kv, this.uploads.put(pageTable, 'i32'), start, t, dims);
  }
  /** Host data into the step's upload arena (valid until the step's readBack). */
  private readonly put = (data: ArrayLike<number>, elem: 'f32' | 'i32'): GpuTensor => this.uploads.put(data, elem);

  /** The table and RoPE angles of the step's rows, uploaded once (batch.ts). */
  stepBatch(seqs: readonly BatchSeq[], rope: RopeTable | null): StepBatch {
    return makeGpuStepBatch(this.put, seqs, rope);
  }
  ropeBatch(x: GpuTensor, batch: StepBatch, heads: number, headDim: number, stride: number): void {
    ropeBatch(this.g, this.step, x, gpuBatch(batch), heads, headDim, stride);
  }
  kvWriteBatch(kv: readonly GpuKvLayerView[], batch: StepBatch, k: GpuTensor, v: GpuTensor, kvDim: number): void {
    kvWriteBatch(this.g, this.step, kv, gpuBatch(batch), k, v, kvDim);
  }
  /** With `inputs`: folded into the decode / verify attention dispatch where it can (batch.ts). */
  attentionBatch(out: GpuTensor, q: GpuTensor, qStride: number, kv: readonly GpuKvLayerView[], batch: StepBatch, dims: AttentionDims,
    inputs?: AttentionInputs<GpuTensor>): void {
    attentionBatch(this.g, this.step, this.put, out, q, qStride, kv, gpuBatch(batch), dims,
      inputs ? { a: inputs, qw: this.vector(inputs.qNorm), kw: this.vector(inputs.kNorm), byCalls: () => attentionInputsByCalls(this, inputs, batch, dims) } : undefined);
  }
  /** One dispatch (batch.ts attentionInputsDispatch), else the separate calls. */
  attentionInputs(a: AttentionInputs<GpuTensor>, batch: StepBatch, dims: AttentionDims): void {
    const qw = this.vector(a.qNorm);
    const kw = this.vector(a.kNorm);
    if (!attentionInputsDispatch(this.g, this.step, a, gpuBatch(batch), dims, qw, kw)) attentionInputsByCalls(this, a, batch, dims);
  }
  moeRoute(ids: GpuTensor, weights: GpuTensor, logits: GpuTensor, m: number, e: number, topK: number, renormalize: boolean): void {
    this.g.moeRoute(this.step, ids, weights, logits, m, e, topK, renormalize);
  }
  /** The boundary's moeExperts: grouped, routed experts only (moe.ts). */
  moeExperts(out: GpuTensor, x: GpuTensor, ids: GpuTensor, weights: GpuTensor, m: number, topK: number,
    experts: readonly ExpertMats[], scratch: MoeScratch<GpuTensor>, fused?: MoeFusion<GpuTensor>): void {
    const gpu = experts.map((e) => ({ gate: this.packedOf(e.gate), up: this.packedOf(e.up), down: this.packedOf(e.down) }));
    const shared = fused?.tail?.shared;
    // the shared expert's down over up ⊙ silu(gate), the product folded into its dispatch
    if (shared?.down && m > 0) this.g.matmulGroup(this.step, shared.down.up, m, [{ out: shared.y, w: this.gpuWeight(shared.down.w) }], false, undefined, { b: shared.down.gate, act: 'silu' });
    groupedMoeExperts(this.g, this.step, this.moeTally, this.moeStacks, out, x, ids, weights, m, topK, gpu, scratch.slot, fused);
  }
  addSigmoidScaled(out: GpuTensor, y: GpuTensor, g: GpuTensor, m: number, d: number): void {
    this.g.addSigmoidScaled(this.step, out, y, g, m, d);
  }
  mulSilu(out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.g.mulSilu(this.step, out, a, b, n);
  }
  mulSigmoid(out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.g.mulSigmoid(this.step, out, a, b, n);
  }
  add(out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.g.add(this.step, out, a, b, n);
  }
  layerNorm(out: GpuTensor, x: GpuTensor, w: GpuTensor, b: GpuTensor, m: number, d: number, eps: number): void {
    layerNormOn(this.g, this.step, out, x, w, b, m, d, eps);
  }
  biasAct(out: GpuTensor, x: GpuTensor, bias: GpuTensor, m: number, d: number, act: BiasAct): void {
    biasActOn(this.g, this.step, out, x, bias, m, d, act);
  }
  /** Host rows (read back): the reference pick. */
  argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride?: number): void {
    refArgmax(out, x, m, n, stride);
  }
  /** On the device (wgsl ARGMAX, the ref's ids: webgpu-conformance): a greedy step reads back ids. */
  argmaxRows(out: GpuTensor, outOffset: number, x: GpuTensor, m: number, n: number, stride: number): void {
    if (m <= 0) return;
    if (outOffset + m > out.length || (m - 1) * stride + n > x.length) throw new RangeError(`argmaxRows: ${m} rows past the tensors`);
    this.g.argmax(this.step, this.view(out, outOffset, m), x, m, n, stride);
  }
  /** On the device (argmax-masked.ts): the masks go up with the step. */
  argmaxRowsMasked(out: GpuTensor, outOffset: number, x: GpuTensor, m: number, n: number, stride: number, masks: readonly (Uint32Array | null)[]): void {
    argmaxRowsMaskedOn(this.g, this.step, { out, outOffset, x, m, n, stride }, masks, (words) => this.uploads.put(words, 'i32'));
  }
  gatherPicked(out: GpuTensor, outOffset: number, x: GpuTensor, ids: GpuTensor, m: number, stride: number): void {
    gatherPickedOn(this.g, this.step, { out, outOffset, x, ids, m, stride });
  }
  /** On the device (top-candidates.ts): a sampled step reads back c pairs per row. */
  topCandidates(ids: GpuTensor, vals: GpuTensor, outOffset: number, x: GpuTensor, m: number, n: number, stride: number, c: number): void {
    topCandidatesOn(this.g, this.step, { ids, vals, outOffset, x, m, n, stride, c });
  }
  /** On the device (penalty-picks.ts): the penalty table goes up once for the calls of a step
   * over the same rows (a chain's draft steps; the rows' arrays stay as they are meanwhile). */
  penaltyPicks(ids: GpuTensor, x: GpuTensor, vals: GpuTensor, call: PenaltyPicksCall): void {
    if (call.m <= 0) return;
    const kept = this.penaltyTable;
    const reuse = kept !== null && kept.step === this.counters.steps && kept.n === call.n && call.m <= kept.rows.length && call.rows.every((r, i) => r === kept.rows[i]);
    if (!reuse) {
      const words = packPenaltyTable(call.rows, call.n);
      this.penaltyTable = { step: this.counters.steps, rows: call.rows, n: call.n, t: this.uploads.put(new Int32Array(words.buffer, words.byteOffset, words.length), 'i32') };
    }
    penaltyPicksOn(this.g, this.step, ids, x, vals, call, this.penaltyTable!.t);
  }
  /** On the device (candidate-draws.ts): the rows' cuts and uniforms go up with the step. */
  candidateDraws(out: GpuTensor, outOffset: number, ids: GpuTensor, vals: GpuTensor, candOffset: number, c: number, rows: readonly (CandidateDraw | null)[]): void {
    if (rows.length === 0) return;
    const table = this.uploads.put(packDrawTable(rows), 'i32');
    candidateDrawsOn(this.g, this.step, { out, outOffset, ids, vals, candOffset, c, m: rows.length }, table);
  }
  /** The penalty table uploaded this step (valid until the step's read-back resets the uploads). */
  private penaltyTable: { step: number; rows: readonly PenaltyPickRow[]; n: number; t: GpuTensor } | null = null;
  sample(rows: readonly SampleRow[], results: readonly SampleResult[]): void {
    refSample(rows, results);
  }
}

function gpuBatch(b: StepBatch): GpuStepBatch {
  if (!('table' in b)) throw new Error('webgpu kernels: a step batch of another backend (Kernels.stepBatch)');
  return b as GpuStepBatch;
}
