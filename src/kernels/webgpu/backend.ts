/// <reference types="@webgpu/types" />
// The webgpu kernel backend: every op of the Kernels interface (kernels/types.ts) over GPU
// tensors, recorded into a StepEncoder (nothing runs until the encoder's submit; the only
// host↔device traffic of a step is the parameter upload and the awaited read-back).
// Operands are GpuTensor views (element offsets are passed to the shaders, so views need
// no alignment); weights are GpuWeight (storage type kept, split in row parts).
import type { AttentionDims, GdnDims, Weight } from '../types.js';
import { isQuantType, type QuantType } from '../quant/formats.js';
import { acquireGpu, type AcquireOptions, type GpuAdapterSummary, type GpuContext } from './device.js';
import { type DispatchMemory, type EncoderTiming, StepEncoder } from './encoder.js';
import { BindGroupCache, ParamMemory } from './dispatch-memory.js';
import { ReadbackPacer } from './readback-pacer.js';
import { adapterProfile, launchesOf, type ConvLaunch, type GdnLaunch, type LaunchProfile, type Launches } from './launches.js';
import { defaultSubmitChunks, type SubmitChunks } from './submit-chunks.js';
import { PipelineCache, ScratchBuffers } from './pipelines.js';
import { GpuAllocator, type GpuTensor } from './tensor.js';
import { gpuWeightBytes, uploadVector, uploadWeight, uploadWeightBytes, type GpuWeight, type GpuWeightDType } from './weights.js';
import { grid } from './wgsl/common.js';
import { packParams } from './params.js';
import { quantActsDispatch, quantActsGroupDispatches, quantGroupDispatch } from './qmatmul-group.js';
import { ACTS_FOLD_ROWS, ACTS_TILE } from './wgsl/qmatmul-acts.js';
import { TM, denseMatmulTile, normQuantActsShader, quantActsShader, quantMatmulShader, type QuantLayout } from './wgsl/matmul.js';
import { normQuantActsLanesShader, quantActsLanesShader } from './wgsl/quant-acts-lanes.js';
import { GROUP_SEGMENTS, floatMatmulGroupShader, groupSegmentParams } from './wgsl/matmul-group.js';
import { floatColumnsShader, floatColumnsTile } from './wgsl/matmul-columns.js';
import { quantColumnsTile } from './wgsl/qmatmul-columns.js';
import { floatLoadsFor } from './wgsl/float-chunks.js';
import { ARGMAX, ELEMENTWISE, MOE_ROUTE, NORM, ROPE, embedFloatShader, embedQuantShader } from './wgsl/dense.js';
import { CAUSAL_CONV, GDN_GATES, GDN_RECURRENT } from './wgsl/gdn.js';
import { GDN_CHUNKED, chunkedScratchPer } from './wgsl/gdn-chunked.js';
import { ATTENTION, KV_WRITE, ROW_MAX_HEAD_DIM } from './wgsl/attention.js';
import { ADD_SIGMOID_SCALED, COPY_ROWS, FILL, GATHER_ROWS } from './wgsl/rows.js';

export type { GpuConvFold, GpuGatedInput, GpuGroupNorm, GpuKvLayer, GpuTraffic, MoeGemm, QuantActs } from './backend-types.js';
import type { GpuConvFold, GpuGatedInput, GpuGroupNorm, GpuKvLayer, GpuTraffic, MoeGemm, QuantActs } from './backend-types.js';
import { CONV_FOLD_BINDINGS, CONV_FOLD_STEP_BINDINGS, convFoldKey } from './wgsl/conv-fold.js';
export { ropeTable } from './rope-table.js';

const f32 = (v: number): number => new Uint32Array(new Float32Array([v]).buffer)[0]!;

export class WebGpuKernels implements Launches {
  readonly name = 'webgpu';
  readonly device: GPUDevice;
  readonly adapter: GpuAdapterSummary;
  readonly alloc: GpuAllocator;
  readonly pipelines: PipelineCache;
  private readonly scratch: ScratchBuffers;
  /** The parameter uniform and the bind groups every step's encoder shares. */
  readonly dispatchMemory: DispatchMemory;
  private readonly dummy: GPUBuffer;
  /** A 4-byte buffer bound where a kernel's optional operand is absent. */
  get dummyBuffer(): GPUBuffer {
    return this.dummy;
  }
  private readonly maxBinding: number;
  readonly traffic: GpuTraffic = { weightBytesRead: 0, weightBytesIdeal: 0, kvBytesRead: 0, kvBytesIdeal: 0 };
  /** Weights already counted in the ideal of the current step. */
  private stepWeights = new Set<GpuWeight>();
  /** Subgroup sizes of the adapter all divide 64 (the matmul's workgroup). */
  readonly subgroupSizeDivides64: boolean;
  // The launch choices (launches.ts says each one's variants and why a profile takes it):
  // the adapter's profile unless AcquireOptions say otherwise; tests override single ones.
  gdnLaunch!: GdnLaunch;
  convLaunch!: ConvLaunch;
  convFold!: boolean;
  foldQuantActs!: boolean;
  actsColumns!: number;
  quantLayout!: QuantLayout;
  actsLayout!: QuantLayout;
  floatColumns!: number;
  floatColumnsFromRows!: number;
  floatColumnAccumulators!: number;
  quantColumns!: number;
  /** How each step's dispatches are split into submits (submit-chunks.ts; the same bits):
   * chunked on GPUs, one submit on a CPU adapter, unless AcquireOptions.submitChunks says
   * (DELTASERVE_SUBMIT_CHUNK). Read by each new step's encoder; tests set it. */
  submitChunks: SubmitChunks;

  /** pacing: sleep before read-backs on a CPU adapter (readback-pacer.ts; default on). */
  constructor(ctx: GpuContext, maxBindingOverride?: number, pacing = true, submitChunks?: SubmitChunks, launches?: LaunchProfile, foldQuantActs?: boolean) {
    this.device = ctx.device;
    this.adapter = ctx.adapter;
    this.useLaunches(launches ?? 'adapter');
    if (foldQuantActs !== undefined) this.foldQuantActs = foldQuantActs;
    this.submitChunks = submitChunks ?? defaultSubmitChunks(ctx.adapter.cpuEmulation);
    this.maxBinding = maxBindingOverride ?? ctx.adapter.limits.maxStorageBufferBindingSize;
    const bindGroups = new BindGroupCache(this.device);
    this.dispatchMemory = { bindGroups, params: new ParamMemory(this.device, () => bindGroups.clear()), pacer: pacing && ctx.adapter.cpuEmulation ? new ReadbackPacer() : null };
    // a freed buffer's bind groups go with it (a new buffer is a new key: never a stale group)
    this.alloc = new GpuAllocator(this.device, ctx.adapter.limits.maxStorageBufferBindingSize, (b) => bindGroups.forget(b));
    this.pipelines = new PipelineCache(this.device);
    this.scratch = new ScratchBuffers(this.alloc);
    this.dummy = this.alloc.buffer(4, 'dummy');
    const { subgroupMinSize: lo, subgroupMaxSize: hi } = ctx.adapter;
    this.subgroupSizeDivides64 = lo >= 1 && hi <= 64 && 64 % lo === 0 && 64 % hi === 0;
  }

  static async create(gpu: GPU, opts: AcquireOptions & { maxBindingOverride?: number }): Promise<WebGpuKernels> {
    return new WebGpuKernels(await acquireGpu(gpu, opts), opts.maxBindingOverride, opts.readbackPacing ?? true, opts.submitChunks, opts.launches, opts.foldQuantActs);
  }

  /** Take `profile`'s launch choices ('adapter': this adapter's own profile), then any of
   * `overrides`. Read by each later dispatch; a step already recorded keeps its kernels. */
  useLaunches(profile: LaunchProfile | 'adapter', overrides: Partial<Launches> = {}): void {
    const launches = launchesOf(profile === 'adapter' ? adapterProfile(this.adapter.cpuEmulation) : profile);
    Object.assign(this, launches, overrides);
  }

  /** Output columns a workgroup of a chunked (4-element loads) non-MoE float matmul of `m`
   * rows: the multi-column kernel's from floatColumnsFromRows rows, else 1. */
  floatColumnsAt(m: number): number {
    return this.floatColumns > 1 && m >= this.floatColumnsFromRows ? this.floatColumns : 1;
  }

  /** The tile of rows of a `columns`-column float workgroup whose dense tile is `tm`. */
  floatColumnsTile(tm: number, columns = this.floatColumns): number {
    return floatColumnsTile(tm, columns, this.floatColumnAccumulators);
  }

  dispose(): void {
    this.alloc.destroy();
    this.device.destroy();
  }

  /** A grow-only scratch tensor for `purpose` (contents undefined; shared by every
   * dispatch of that purpose, which run in order). */
  scratchTensor(purpose: string, length: number, elem: 'f32' | 'i32' = 'f32'): GpuTensor {
    return this.scratch.get(purpose, length, elem);
  }

  /** A new encoder for one step (timing: its timestamp queries, encoder.ts; submitted in
   * chunks as `submitChunks` says). */
  encoder(timing: EncoderTiming = 'none'): StepEncoder {
    return new StepEncoder(this.device, this.dispatchMemory, timing, this.submitChunks);
  }

  uploadWeight(w: Weight, label?: string): GpuWeight {
    return uploadWeight(this.alloc, this.device, w, this.maxBinding, label);
  }

  uploadWeightBytes(dtype: GpuWeightDType, rows: number, cols: number, bytes: Uint8Array, label?: string): GpuWeight {
    return uploadWeightBytes(this.alloc, this.device, dtype, rows, cols, bytes, this.maxBinding, label);
  }

  uploadVector(w: Weight, label?: string): GpuTensor {
    return uploadVector(this.alloc, w, label);
  }

  /** A step ends (its work submitted): the next matmuls count toward a new ideal. */
  endStep(): void {
    this.stepWeights = new Set();
  }

  /** out[m, n] = Σ_k x[m, k]·W[n, k]. x: [M, K], out: [M, N]. */
  matmul(enc: StepEncoder, out: GpuTensor, x: GpuTensor, w: GpuWeight, m: number): void {
    this.matmulGroup(enc, x, m, [{ out, w }]);
  }

  /** out += (x or x ⊙ act(gate.b))·Wᵀ in the matmul's own dispatch (the bits of the
   * element-wise product, matmul, then add). Quantized weights: the activation
   * quantization writes the product in place in x (Kernels.matmulAdd allows it) and
   * quantizes it, in one dispatch; at M ≤ ACTS_FOLD_ROWS (one weight part) the matmul quantizes
   * x ⊙ act(gate.b) itself and x is left as it was. */
  matmulAdd(enc: StepEncoder, out: GpuTensor, x: GpuTensor, w: GpuWeight, m: number, gate?: GpuGatedInput): void {
    this.matmulGroup(enc, x, m, [{ out, w }], true, undefined, gate);
  }

  /** Several matmuls of one input x [M, K]: float weights' parts as segments of one
   * dispatch (wgsl/matmul-group.ts; as many segments as the device's storage bindings
   * allow, by dtype), quantized ones after one activation quantization shared by all.
   * Every output element has the bits of its own matmul. `conv`: the entry whose out is
   * conv.x (a float weight, or a quantized one on the activation-quantizing kernels) stores
   * the causal conv of its values instead (conv-launch.ts convFoldPlan). */
  matmulGroup(enc: StepEncoder, input: GpuTensor, m: number, group: readonly { out: GpuTensor; w: GpuWeight }[], accumulate = false,
    norm?: GpuGroupNorm, gate?: GpuGatedInput, conv?: GpuConvFold): void {
    const quantized = group.some((g) => isQuantType(g.w.dtype));
    // a quantized group's gate overwrites x with the product: no float weight may then read x
    if (gate && (norm || (quantized && group.some((g) => !isQuantType(g.w.dtype))))) throw new Error('matmulGroup: a gated input is for one weight kind without a norm');
    if (group.length === 0 || m <= 0) return;
    const k = group[0]!.w.cols;
    // a norm folds into float matmuls; quantized ones quantize the normed rows
    // few rows: the quantized matmuls quantize (and norm) their own input (qmatmul-group.ts)
    const foldActs = this.foldQuantActs && quantized && m <= ACTS_FOLD_ROWS;
    const x = norm && quantized && !foldActs ? norm.out : input;
    const fused = norm && (!quantized || foldActs) ? norm : undefined;
    if (fused) vectorAtStart(fused.wv, 'matmulGroup norm weight');
    need(x, m * k, 'matmul x');
    const floatTm = this.matmulTile(m, fused !== undefined);
    const quant = group.filter((g) => isQuantType(g.w.dtype));
    // the conv folded into a quantized entry: only the activation-quantizing group kernels fold it
    const quantConv = conv && quant.some((g) => g.out === conv.x) ? conv : undefined;
    if (quantConv && !foldActs) throw new Error('matmulGroup: the conv fold of a quantized weight needs the activation-quantizing matmuls (convFoldPlan)');
    // rows a workgroup of those kernels: the conv's steps fold may take one tile of every row (its weight type's dispatch)
    const convType = quantConv ? quant.find((g) => g.out === quantConv.x)!.w.dtype : null;
    const actsTile = (w: GpuWeight): number => (w.dtype === convType ? quantConv?.tile ?? ACTS_TILE : ACTS_TILE);
    for (const { out, w } of group) {
      if (w.cols !== k) throw new RangeError(`matmulGroup: weights of ${k} and ${w.cols} columns share one input`);
      need(out, m * w.rows, 'matmul out');
      this.countWeightReads(w, Math.ceil(m / (!isQuantType(w.dtype) ? floatTm : foldActs ? actsTile(w) : this.quantTile(m, w.dtype as QuantType).tm)));
    }
    // few rows into one unnormed quantized weight part: the matmul quantizes its own input
    const lone = foldActs && !norm && !quantConv && quant.length === 1 && quant[0]!.w.parts.length === 1 ? quant[0]! : null;
    if (lone) this.quantMatmulActs(enc, x, lone.out, lone.w, m, k, accumulate, gate);
    else if (foldActs) {
      const actsConv = quantConv ? { fold: quantConv, segments: this.convFoldSegments(quantConv.steps === true), dummy: this.dummy } : undefined;
      for (const d of quantActsGroupDispatches({ x, norm, gate }, m, k, quant, accumulate, this.adapter.features.dot4I8, this.groupSegments, this.actsColumns,
        this.device.limits.maxComputeWorkgroupStorageSize, actsConv)) {
        this.run(enc, d.key, d.source, d.params, null, d.buffers, d.groups, d.label);
      }
    } else if (quant.length > 0) {
      // the normed rows (norm.out, float weights read them too) and their quantization: one dispatch
      const acts = norm ? this.normQuantActs(enc, norm, input, m, k) : this.quantActs(enc, x, m, k, gate);
      this.quantMatmuls(enc, acts, m, k, quant, accumulate);
    }
    for (const dtype of ['f32', 'bf16', 'f16'] as const) {
      const segs = group.filter((g) => g.w.dtype === dtype).flatMap((g) => g.w.parts.map((part) => ({ out: g.out, n: g.w.rows, part, conv: g.out === conv?.x })));
      // a dispatch holding conv segments binds the fold's buffers too
      const per = segs.some((s) => s.conv) ? this.convFoldSegments(conv?.steps === true) : this.groupSegments;
      for (let i = 0; i < segs.length; i += per) this.floatSegments(enc, x, m, k, Math.ceil(m / floatTm), dtype, segs.slice(i, i + per), accumulate, fused, gate, undefined, floatTm, conv);
    }
  }

  /** Weight traffic of a matmul reading w once per row tile (`tiles` times). */
  countWeightReads(w: GpuWeight, tiles: number): void {
    const bytes = gpuWeightBytes(w);
    this.traffic.weightBytesRead += bytes * tiles;
    if (!this.stepWeights.has(w)) {
      this.stepWeights.add(w);
      this.traffic.weightBytesIdeal += bytes;
    }
  }

  /** Rows per tile of a dense matmul of M rows (wgsl/matmul.ts matmulTile): float (with or
   * without the folded norm) or a quantized type, within the device's workgroup memory. */
  matmulTile(m: number, kind: boolean | QuantType): number {
    return denseMatmulTile(m, kind, this.device.limits.maxComputeWorkgroupStorageSize);
  }

  /** The tile and output columns a workgroup of a tiled quantized matmul of M rows: C =
   * quantColumns at M ≥ 2 (its tile: quantColumnsTile), else one column (matmulTile). */
  quantTile(m: number, type: QuantType): { tm: number; columns: number } {
    const tm = this.quantColumns > 1 && m >= 2 ? quantColumnsTile(m, type, this.quantColumns, this.device.limits.maxComputeWorkgroupStorageSize) : null;
    return tm === null ? { tm: this.matmulTile(m, type), columns: 1 } : { tm, columns: this.quantColumns };
  }

  /** Segments one float dispatch may bind: X, the norm weight, an output and a weight each. */
  get groupSegments(): number {
    return Math.max(1, Math.min(GROUP_SEGMENTS, Math.floor((this.adapter.limits.maxStorageBuffersPerShaderStage - 2) / 2)));
  }

  /** Segments a float dispatch with the conv fold may bind (its CONV_FOLD_BINDINGS besides; 0: none). */
  get convGroupSegments(): number {
    return this.convFoldSegments(false);
  }
  /** The same for the fold's steps variant (`steps`: CONV_FOLD_STEP_BINDINGS). */
  convFoldSegments(steps: boolean): number {
    return Math.min(GROUP_SEGMENTS, Math.floor((this.adapter.limits.maxStorageBuffersPerShaderStage - 2 - (steps ? CONV_FOLD_STEP_BINDINGS : CONV_FOLD_BINDINGS)) / 2));
  }

  /** One float dispatch of up to groupSegments segments (moe: a grouped MoE expert's rows,
   * moe.ts; conv: the segments marked conv store through the fold). */
  floatSegments(enc: StepEncoder, x: GpuTensor, m: number, k: number, tiles: number, dtype: 'f32' | 'bf16' | 'f16',
    segs: readonly { out: GpuTensor; n: number; part: GpuWeight['parts'][number]; conv?: boolean }[], accumulate: boolean, norm: GpuGroupNorm | undefined,
    gate: GpuGatedInput | undefined, moe?: MoeGemm, tm = TM, convFold?: GpuConvFold): void {
    const mask = segs.reduce((a, s, i) => (s.conv ? a | (1 << i) : a), 0);
    const conv = convFold && mask !== 0 ? convFold : undefined;
    const shape = conv ? { taps: conv.taps, mask, steps: conv.steps === true } : null;
    if (conv && (accumulate || moe)) throw new Error('matmulGroup: the conv fold is for a plain (not accumulating, not MoE) group');
    // subgroupAdd needs the subgroup to be the whole SIMD group of 64 invocations' slices:
    // sizes that divide 64 (every adapter reports 4..64 or 128)
    const sg = this.adapter.features.subgroups && this.subgroupSizeDivides64;
    const n = segs.length;
    if (gate) need(gate.b, m * k, 'matmulAdd gate');
    // 4-element weight units where K allows (float-chunks.ts; from K and offsets only, not M)
    const aliased = segs.some((s) => s.out.buffer === x.buffer || s.out.buffer === gate?.b.buffer);
    const loads = floatLoadsFor(dtype, k, x.offset, gate ? gate.b.offset : null, aliased);
    // several output columns a workgroup: chunked non-MoE matmuls (matmul-columns.ts)
    const columns = !moe && loads !== 'element' ? this.floatColumnsAt(m) : 1;
    // its tile keeps columns × rows accumulators within the budget (matmul-columns.ts floatColumnsTile)
    if (columns > 1) { tm = this.floatColumnsTile(tm, columns); tiles = Math.ceil(m / tm); }
    if (conv?.steps && (columns === 1 || tiles !== 1)) throw new Error('matmulGroup: the conv fold\'s steps need the multi-column launch and one tile (convFoldPlan)');
    const cols = segs.reduce((a, s) => a + Math.ceil(s.part.rows / columns), 0);
    const segments = groupSegmentParams(segs.map((s) => ({ rows: s.part.rows, outOff: s.out.offset, outStride: s.n, col0: s.part.row0 })), columns);
    const params = packParams('matmul_group', { k, m, xOff: x.offset, segments: n, ...segments, eps: norm?.eps ?? 0,
      zeroCentered: norm?.zeroCentered ? 1 : 0, gateOff: gate?.b.offset ?? 0, expert: moe?.expert ?? 0, experts: moe?.experts ?? 0, tiles,
      convOutOff: conv?.out.offset ?? 0, convTable: conv?.table.offset ?? 0 });
    const base = `matmul_group_${dtype}_${n}_tm${tm}${sg ? '_sg' : ''}${accumulate ? '_acc' : ''}`;
    const key = `${base}${convFoldKey(shape)}${norm ? '_norm' : ''}${gate ? `_${gate.act}` : ''}${moe ? `_moe_${moe.rows}${moe.whole ? '_whole' : ''}` : ''}_${loads}${columns > 1 ? `_cols${columns}` : ''}`;
    const shader = (): string => columns > 1 ? floatColumnsShader(dtype, n, sg, accumulate, tm, loads === 'vec4', columns, norm !== undefined, gate?.act ?? null, shape)
      : floatMatmulGroupShader(dtype, n, sg, accumulate, norm !== undefined, gate?.act ?? null, moe?.rows ?? null, moe?.whole, tm, loads, 0, shape);
    this.run(enc, key, shader, params, null,
      [x.buffer, ...segs.map((s) => s.out.buffer), ...segs.map((s) => s.part.buffer), ...(norm ? [norm.wv.buffer] : []), ...(gate ? [gate.b.buffer] : []),
        ...(moe ? [moe.plan.buffer] : []), ...(conv ? [conv.wc.buffer, conv.window, conv.table.buffer, conv.out.buffer, ...(conv.steps ? [conv.scratch ?? this.dummy] : [])] : [])],
      grid(cols, tiles * (moe?.span ?? 1)), `matmul_${dtype}`);
  }

  /** out (+)= quantActs(x or x ⊙ act(gate.b)) · Wᵀ for M ≤ ACTS_FOLD_ROWS in one dispatch
   * (wgsl/qmatmul-acts.ts: the bits of quantActs then the qmatmul; x is left as it was). */
  private quantMatmulActs(enc: StepEncoder, x: GpuTensor, out: GpuTensor, w: GpuWeight, m: number, k: number, accumulate: boolean,
    gate?: GpuGatedInput): void {
    if (gate) need(gate.b, m * k, 'matmulAdd gate');
    const d = quantActsDispatch(x, gate, out, w, m, k, accumulate, this.adapter.features.dot4I8, this.actsColumns, this.device.limits.maxComputeWorkgroupStorageSize);
    this.run(enc, d.key, d.source, d.params, null, d.buffers, d.groups, `matmul_${w.dtype}`);
  }

  /** Each quantized weight part's matmul over the group's one activation quantization
   * (also over the gated norm pass's quantized rows: gated-norm.ts outProjNormQuant). */
  quantMatmuls(enc: StepEncoder, acts: QuantActs, m: number, k: number, group: readonly { out: GpuTensor; w: GpuWeight }[],
    accumulate: boolean): void {
    // the parts of one quant type as segments of one dispatch; a lone part: the single-weight kernel
    for (const dtype of new Set(group.map((g) => g.w.dtype as QuantType))) {
      const ws = group.filter((g) => g.w.dtype === dtype);
      const { tm, columns } = this.quantTile(m, dtype);
      const segs = ws.flatMap(({ out, w }) => w.parts.map((part) => ({ out, w, part })));
      // C columns a workgroup: a lone part too runs as a one-segment group
      if (segs.length === 1 && columns === 1) {
        this.quantWeightMatmul(enc, acts, ws[0]!.out, ws[0]!.w, m, k, Math.ceil(m / tm), accumulate, undefined, tm);
        continue;
      }
      for (let i = 0; i < segs.length; i += this.quantGroupSegments) {
        const d = quantGroupDispatch(acts, m, k, dtype, segs.slice(i, i + this.quantGroupSegments), accumulate, tm, this.adapter.features.dot4I8, this.quantLayout, columns);
        this.run(enc, d.key, d.source, d.params, null, d.buffers, d.groups, `matmul_${dtype}`);
      }
    }
  }

  /** Segments one quantized dispatch may bind: QX, DX, SX, an output and a weight each. */
  get quantGroupSegments(): number {
    return Math.max(1, Math.min(GROUP_SEGMENTS, Math.floor((this.adapter.limits.maxStorageBuffersPerShaderStage - 3) / 2)));
  }

  /** x [M, K] quantized per 32-block (QUANT_ACTS) into the shared qx/dx/sx scratch. */
  /** gate: x ⊙ act(gate.b) is written to x first, in the same dispatch (matmulAdd). */
  quantActs(enc: StepEncoder, x: GpuTensor, m: number, k: number, gate?: GpuGatedInput): QuantActs {
    const nb = k / 32;
    const dot4 = this.adapter.features.dot4I8;
    const { qx, dx, sx } = this.actScratch(m, k);
    if (gate) need(gate.b, m * k, 'matmulAdd gate');
    const params = packParams('quant_acts', { m, k, xOff: x.offset, gateOff: gate?.b.offset ?? 0 });
    const lanes = this.actsLayout === 'lanes';
    this.run(enc, `quant_acts${dot4 ? '' : '_nodot4'}${gate ? `_${gate.act}` : ''}${lanes ? '' : '_block'}`,
      () => (lanes ? quantActsLanesShader : quantActsShader)(dot4, gate?.act ?? null), params, null,
      [qx.buffer, dx.buffer, sx.buffer, x.buffer, ...(gate ? [gate.b.buffer] : [])], grid(Math.ceil((m * nb) / (lanes ? 8 : 64))), 'quant_acts');
    return { qx, dx, sx };
  }

  /** norm.out = rmsNorm(x) (rmsNorm's bits) and its quantization (quantActs' bits) in one
   * dispatch: 'lanes' a workgroup per (8 blocks, row), else one per row (actsLayout). */
  normQuantActs(enc: StepEncoder, norm: GpuGroupNorm, x: GpuTensor, m: number, k: number): QuantActs {
    vectorAtStart(norm.wv, 'matmulGroup norm weight');
    if (norm.wv.length !== k) throw new RangeError(`matmulGroup: a norm weight of ${norm.wv.length} for an input of ${k} columns`);
    need(x, m * k, 'matmul x');
    need(norm.out, m * k, 'matmulGroup norm out');
    const dot4 = this.adapter.features.dot4I8;
    const { qx, dx, sx } = this.actScratch(m, k);
    const params = packParams('norm_quant_acts', { m, k, xOff: x.offset, outOff: norm.out.offset, zeroCentered: norm.zeroCentered ? 1 : 0, eps: norm.eps });
    const lanes = this.actsLayout === 'lanes';
    this.run(enc, `norm_quant_acts${dot4 ? '' : '_nodot4'}${lanes ? '' : '_block'}`, () => (lanes ? normQuantActsLanesShader : normQuantActsShader)(dot4), params, null,
      [qx.buffer, dx.buffer, sx.buffer, x.buffer, norm.out.buffer, norm.wv.buffer], lanes ? grid(Math.ceil(k / 256), m) : grid(m), 'norm_quant_acts');
    return { qx, dx, sx };
  }

  /** The shared quantized-activation scratch for x [M, K] (also filled by moe.ts's fused plan). */
  actScratch(m: number, k: number): QuantActs {
    const nb = k / 32;
    return { qx: this.scratch.get('qx', (m * k) / 4, 'i32'), dx: this.scratch.get('dx', m * nb), sx: this.scratch.get('sx', m * nb, 'i32') };
  }

  /** Each part of one quantized weight over quantized activations (moe: moe.ts's rows). */
  quantWeightMatmul(enc: StepEncoder, acts: QuantActs, out: GpuTensor, w: GpuWeight, m: number, k: number, tiles: number, accumulate: boolean,
    moe?: MoeGemm, tm = TM): void {
    const dot4 = this.adapter.features.dot4I8;
    const layout = this.quantLayout;
    const src = () => quantMatmulShader(w.dtype as QuantType, dot4, accumulate, moe?.rows ?? null, moe?.whole, tm, layout);
    const key = `qmatmul_${w.dtype}_tm${tm}${dot4 ? '' : '_nodot4'}${accumulate ? '_acc' : ''}${moe ? `_moe_${moe.rows}${moe.whole ? '_whole' : ''}` : ''}${layout === 'block' && !moe?.whole ? '_block' : ''}`;
    for (const part of w.parts) {
      const params = packParams('qmatmul', { rows: part.rows, k, m, outOff: out.offset, outStride: w.rows, col0: part.row0, rowBytes: w.rowBytes,
        expert: moe?.expert ?? 0, experts: moe?.experts ?? 0, tiles });
      this.run(enc, key, src, params, null,
        [out.buffer, acts.qx.buffer, acts.dx.buffer, acts.sx.buffer, part.buffer, ...(moe ? [moe.plan.buffer] : [])], grid(part.rows, tiles * (moe?.span ?? 1)), `matmul_${w.dtype}`);
    }
  }

  /** out[i, :] = table row ids[i] (widened; quantized: GGML's dequantisation). ids: i32 [T]. */
  embed(enc: StepEncoder, out: GpuTensor, table: GpuWeight, ids: GpuTensor, t: number): void {
    if (table.parts.length !== 1) throw new RangeError(`embed: a table split in ${table.parts.length} parts is not supported yet`);
    const d = table.cols;
    need(out, t * d, 'embed out');
    const buf = table.parts[0]!.buffer;
    if (isQuantType(table.dtype)) {
      const params = packParams('embed_quant', { t, d, outOff: out.offset, rowBytes: table.rowBytes, idsOff: ids.offset });
      this.run(enc, `embed_${table.dtype}`, () => embedQuantShader(table.dtype as QuantType), params, null, [out.buffer, ids.buffer, buf],
        grid(Math.ceil((t * d) / 32 / 64)), 'embed');
      return;
    }
    const dtype = table.dtype as 'f32' | 'bf16' | 'f16';
    const params = packParams('embed_float', { t, d, outOff: out.offset, idsOff: ids.offset });
    this.run(enc, `embed_${dtype}`, () => embedFloatShader(dtype), params, null, [out.buffer, ids.buffer, buf], grid(Math.ceil((t * d) / 64)), 'embed');
  }

  /** RMSNorm per row of d = wv.length. x, out: [M, d]; wv: f32 [d]. */
  rmsNorm(enc: StepEncoder, out: GpuTensor, x: GpuTensor, wv: GpuTensor, m: number, eps: number, zeroCentered: boolean): void {
    const d = wv.length;
    vectorAtStart(wv, 'rmsNorm weight');
    this.run(enc, 'norm', () => NORM, packParams('norm', { d, rows: m, outOff: out.offset, xOff: x.offset, zOff: 0, zeroCentered: zeroCentered ? 1 : 0, gated: 0, eps }), null,
      [out.buffer, x.buffer, this.dummy, wv.buffer], grid(m), 'rms_norm');
  }

  /** out = o·rsqrt(mean(o²)+eps)·w·silu(z) per row of dv = wv.length. */
  gatedRmsNorm(enc: StepEncoder, out: GpuTensor, o: GpuTensor, z: GpuTensor, wv: GpuTensor, m: number, eps: number): void {
    const d = wv.length;
    vectorAtStart(wv, 'gatedRmsNorm weight');
    this.run(enc, 'norm', () => NORM, packParams('norm', { d, rows: m, outOff: out.offset, xOff: o.offset, zOff: z.offset, zeroCentered: 0, gated: 1, eps }), null,
      [out.buffer, o.buffer, z.buffer, wv.buffer], grid(m), 'gated_rms_norm');
  }

  /** Partial NeoX RoPE in place; cs = ropeTable(...) for the same T tokens. */
  rope(enc: StepEncoder, x: GpuTensor, cs: GpuTensor, t: number, heads: number, headDim: number, rotaryDim: number, stride: number): void {
    const half = rotaryDim / 2;
    need(cs, t * half * 2, 'rope table');
    this.run(enc, 'rope', () => ROPE, packParams('rope', { t, heads, headDim, half, stride, xOff: x.offset, csOff: cs.offset }), null,
      [x.buffer, cs.buffer], grid(Math.ceil((t * heads * half) / 64)), 'rope');
  }

  /** Causal conv + SiLU; window [K−1, C] updated in place unless scratch [T, K−1, C] is given. */
  causalConv(enc: StepEncoder, out: GpuTensor, x: GpuTensor, window: GpuTensor, wc: GpuTensor, c: number, t: number, scratch?: GpuTensor): void {
    const k = wc.length / c;
    vectorAtStart(wc, 'causalConv weight');
    this.run(enc, 'causal_conv', () => CAUSAL_CONV,
      packParams('causal_conv', { t, c, taps: k, outOff: out.offset, xOff: x.offset, windowOff: window.offset, scratchOff: scratch?.offset ?? 0,
        useScratch: scratch ? 1 : 0 }), null,
      [out.buffer, x.buffer, window.buffer, wc.buffer, scratch?.buffer ?? this.dummy], grid(Math.ceil(c / 64)), 'causal_conv');
  }

  /** g = −exp(A_log)·softplus(a + dt_bias), beta = sigmoid(b); all [T, HV]. */
  gdnGates(enc: StepEncoder, g: GpuTensor, beta: GpuTensor, a: GpuTensor, b: GpuTensor, aLog: GpuTensor, dtBias: GpuTensor, t: number): void {
    if (aLog.offset !== 0 || dtBias.offset !== 0) throw new RangeError('gdnGates: A_log and dt_bias must start their buffers');
    const hv = aLog.length;
    this.run(enc, 'gdn_gates', () => GDN_GATES, packParams('gdn_gates', { n: t * hv, hv, gOff: g.offset, betaOff: beta.offset, aOff: a.offset, bOff: b.offset }), null,
      [g.buffer, beta.buffer, a.buffer, b.buffer, aLog.buffer, dtBias.buffer], grid(Math.ceil((t * hv) / 64)), 'gdn_gates');
  }

  /** The Gated DeltaNet recurrence (kernels/types.ts gdnRecurrent). */
  gdnRecurrent(enc: StepEncoder, out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, state: GpuTensor,
    dims: GdnDims, t: number, scratch?: GpuTensor): void {
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    if (dk > 256) throw new RangeError(`gdnRecurrent: key dim ${dk} > 256`);
    this.run(enc, 'gdn_recurrent', () => GDN_RECURRENT,
      packParams('gdn_recurrent', { t, hk, hv, dk, dv, qkvOff: qkv.offset, gOff: g.offset, outOff: out.offset, stateOff: state.offset,
        scratchOff: scratch?.offset ?? 0, mode: scratch ? 1 : 0, betaOff: beta.offset }), null,
      [out.buffer, qkv.buffer, g.buffer, beta.buffer, state.buffer, scratch?.buffer ?? this.dummy], [hv, Math.ceil(dv / 64), 1], 'gdn_recurrent');
  }

  /** gdnChunked (prefill): chunks of 64 at absolute multiples of 64 (pos0 = position of
   * token 0), the chunked algebra of ref/gdn.ts on the GPU (wgsl/gdn-chunked.ts GDN_CHUNKED). */
  gdnChunked(enc: StepEncoder, out: GpuTensor, qkv: GpuTensor, g: GpuTensor, beta: GpuTensor, state: GpuTensor, dims: GdnDims, t: number, pos0 = 0): void {
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const blocks = Math.ceil(dv / 64);
    const per = chunkedScratchPer(dk);
    const sc = this.scratch.get('gdn_chunked', per * hv * blocks);
    this.run(enc, 'gdn_chunked', () => GDN_CHUNKED, packParams('gdn_chunked', { t, hk, hv, dk, dv, qkvOff: qkv.offset, gOff: g.offset, betaOff: beta.offset, outOff: out.offset,
      stateOff: state.offset, pos0, per }), null,
      [out.buffer, qkv.buffer, g.buffer, beta.buffer, state.buffer, sc.buffer], [hv, blocks, 1], 'gdn_chunked');
  }

  /** Write k, v ([T, kvDim]) at positions start..start+T−1 through the page table (i32). */
  kvWrite(enc: StepEncoder, kv: GpuKvLayer, pageTable: GpuTensor, start: number, k: GpuTensor, v: GpuTensor, t: number, kvDim: number): void {
    this.run(enc, 'kv_write', () => KV_WRITE, packParams('kv_write', { t, kvDim, start, pageSize: kv.pageSize, kOff: k.offset, vOff: v.offset,
      ptOff: pageTable.offset, kcOff: kv.k.offset, vcOff: kv.v.offset }), null,
      [kv.k.buffer, kv.v.buffer, k.buffer, v.buffer, pageTable.buffer], grid(Math.ceil((t * kvDim) / 64)), 'kv_write');
  }

  /** Causal GQA attention of one sequence over the paged cache. */
  attention(enc: StepEncoder, out: GpuTensor, q: GpuTensor, qStride: number, kv: GpuKvLayer, pageTable: GpuTensor,
    start: number, t: number, dims: AttentionDims): void {
    const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
    if (hd > ROW_MAX_HEAD_DIM) throw new RangeError(`attention: head dim ${hd} > ${ROW_MAX_HEAD_DIM}`);
    // query i reads positions 0..start+i, K and V, hd floats per head
    this.traffic.kvBytesRead += 2 * 4 * nh * hd * (t * (start + 1) + (t * (t - 1)) / 2);
    this.traffic.kvBytesIdeal += 2 * 4 * nkv * hd * (start + t);
    this.run(enc, 'attention', () => ATTENTION,
      packParams('attention', { nH: nh, nKV: nkv, hd, start, pageSize: kv.pageSize, qOff: q.offset, qStride, outOff: out.offset,
        ptOff: pageTable.offset, scale: 1 / Math.sqrt(hd), kcOff: kv.k.offset, vcOff: kv.v.offset }), null,
      [out.buffer, q.buffer, kv.k.buffer, kv.v.buffer, pageTable.buffer], [nh, t, 1], 'attention');
  }

  /** MoE router: ids i32 [M, topK], weights [M, topK], logits [M, E]. */
  moeRoute(enc: StepEncoder, ids: GpuTensor, weights: GpuTensor, logits: GpuTensor, m: number, e: number, topK: number, renormalize: boolean): void {
    if (e > 1024) throw new RangeError(`moeRoute: ${e} experts > 1024`);
    this.run(enc, 'moe_route', () => MOE_ROUTE, packParams('moe_route', { m, e, topK, renormalize: renormalize ? 1 : 0, idsOff: ids.offset, wOff: weights.offset,
      logitsOff: logits.offset }), null,
      [ids.buffer, weights.buffer, logits.buffer], grid(Math.ceil(m / 64)), 'moe_route');
  }

  /** out[i] = the lowest index of the maximum of row i (NaN never wins). out: i32 [M]. */
  argmax(enc: StepEncoder, out: GpuTensor, x: GpuTensor, m: number, n: number, stride = n): void {
    this.run(enc, 'argmax', () => ARGMAX, packParams('argmax', { m, n, stride, xOff: x.offset, outOff: out.offset }), null, [out.buffer, x.buffer], grid(m), 'argmax');
  }

  /** Strided row copy (elements): dst[dstOffset + r·dstStride + j] = src[srcOffset + r·srcStride + j]. */
  copyRows(enc: StepEncoder, dst: GpuTensor, dstOffset: number, dstStride: number, src: GpuTensor, srcOffset: number, srcStride: number,
    rows: number, width: number): void {
    if (rows <= 0 || width <= 0) return;
    if (srcOffset + (rows - 1) * srcStride + width > src.length || dstOffset + (rows - 1) * dstStride + width > dst.length) {
      throw new RangeError(`copyRows: ${rows} rows of ${width} past a tensor's end`);
    }
    if (srcStride === width && dstStride === width && src.buffer !== dst.buffer) {
      enc.copy({ ...src, offset: src.offset + srcOffset, length: rows * width }, { ...dst, offset: dst.offset + dstOffset, length: rows * width });
      return;
    }
    this.run(enc, 'copy_rows', () => COPY_ROWS, packParams('copy_rows', { rows, width, dstOff: dst.offset + dstOffset, dstStride,
      srcOff: src.offset + srcOffset, srcStride }), null,
      [dst.buffer, src.buffer], grid(Math.ceil((rows * width) / 64)), 'copy_rows');
  }

  /** dst[offset + i] = value for i < length (f32). */
  fill(enc: StepEncoder, dst: GpuTensor, offset: number, length: number, value: number): void {
    if (length <= 0) return;
    if (offset < 0 || offset + length > dst.length) throw new RangeError(`fill: ${length} elements at ${offset} past ${dst.length}`);
    this.run(enc, 'fill', () => FILL, packParams('fill', { n: length, dstOff: dst.offset + offset, value }), null, [dst.buffer], grid(Math.ceil(length / 64)), 'fill');
  }

  /** dst[i, :] = src[rows[i], :]; rows: i32 [n] on the GPU. */
  gatherRows(enc: StepEncoder, dst: GpuTensor, src: GpuTensor, rows: GpuTensor, n: number, width: number): void {
    this.run(enc, 'gather_rows', () => GATHER_ROWS, packParams('gather_rows', { rows: n, width, dstOff: dst.offset, srcOff: src.offset, rowsOff: rows.offset }), null,
      [dst.buffer, src.buffer, rows.buffer], grid(Math.ceil((n * width) / 64)), 'gather_rows');
  }

  /** out[i, :] += sigmoid(g[i])·y[i, :] for i < m; out, y: [M, d]; g: [M]. */
  addSigmoidScaled(enc: StepEncoder, out: GpuTensor, y: GpuTensor, g: GpuTensor, m: number, d: number): void {
    this.run(enc, 'add_sigmoid_scaled', () => ADD_SIGMOID_SCALED, packParams('add_sigmoid_scaled', { m, d, outOff: out.offset, yOff: y.offset, gOff: g.offset }), null,
      [out.buffer, y.buffer, g.buffer], grid(Math.ceil((m * d) / 64)), 'add_sigmoid_scaled');
  }

  add(enc: StepEncoder, out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.elementwise(enc, 0, out, a, b, n, 'add');
  }
  mulSilu(enc: StepEncoder, out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.elementwise(enc, 1, out, a, b, n, 'mul_silu');
  }
  mulSigmoid(enc: StepEncoder, out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number): void {
    this.elementwise(enc, 2, out, a, b, n, 'mul_sigmoid');
  }

  /** Record one dispatch of the pipeline `key` (alias-folded for shared buffers); paramsF32
   * (if any) follow the u32 words as their f32 bits. */
  run(enc: StepEncoder, key: string, source: () => string, params: readonly number[], paramsF32: readonly number[] | null,
    buffers: readonly GPUBuffer[], groups: readonly [number, number, number], label: string): void {
    const bound = this.pipelines.bind(key, source, buffers);
    const words = paramsF32 ? [...params, ...new Uint32Array(Float32Array.from(paramsF32).buffer)] : params;
    enc.dispatch(bound.pipeline, bound.layout, words, bound.buffers, groups, label);
  }

  elementwise(enc: StepEncoder, op: number, out: GpuTensor, a: GpuTensor, b: GpuTensor, n: number, label: string): void {
    this.run(enc, 'elementwise', () => ELEMENTWISE, packParams('elementwise', { n, op, outOff: out.offset, aOff: a.offset, bOff: b.offset }), null,
      [out.buffer, a.buffer, b.buffer], grid(Math.ceil(n / 64)), label);
  }
}

/** Small weight vectors are bound whole (uploadVector gives each its own buffer). */
function vectorAtStart(t: GpuTensor, what: string): void {
  if (t.offset !== 0) throw new RangeError(`${what}: a weight vector must start its buffer (uploadVector)`);
}

function need(t: GpuTensor, n: number, what: string): void {
  if (t.length < n) throw new RangeError(`${what}: tensor of ${t.length} elements, need ${n}`);
}
