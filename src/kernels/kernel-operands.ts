// The operand and descriptor types of the Kernels interface (kernels/types.ts): tensors,
// weights, per-sequence descriptors of batched calls, the step's inputs, sampling rows,
// limits. Re-exported by types.ts, which every importer uses.
import type { QuantType } from './quant/formats.js';
import type { GpuAdapterSummary } from './webgpu/adapter-summary.js';

/** What the memory plan sizes the pools against (Kernels.limits). */
export interface KernelLimits {
  /** Bytes of device memory the backend holds now (weights once loaded, pools once
   * allocated); null: the backend computes in host memory. */
  readonly deviceMemoryBytes: number | null;
  /** Largest single buffer the device allocates (bytes); null: no limit but the host's. */
  readonly maxBufferBytes: number | null;
  /** Largest tensor a kernel can bind (bytes): every pool tensor stays below it; null: none. */
  readonly maxBindingBytes: number | null;
  /** The GPU adapter the backend runs on (null on the CPU backends). */
  readonly adapter: GpuAdapterSummary | null;
}

/** The limits of a backend that computes in host memory. */
export const HOST_LIMITS: KernelLimits = { deviceMemoryBytes: null, maxBufferBytes: null, maxBindingBytes: null, adapter: null };

/** Tokens per chunk of the chunked Gated DeltaNet form (`gdnChunked`), every backend
 * (assembly/chunked.ts CHUNK must equal it; the conformance suite checks bit-equality).
 * Chunks end at absolute multiples of it and where a call ends, so the state after a
 * prefill is bit-exact only at positions where every run splits: the model publishes it
 * in its state layout (model.ts StateLayout.chunk), which the scheduler and prefix cache read. */
export const GDN_CHUNK = 64;

/** One sequence of a causalConvSeqs call: its rows [row, row + t) of the batch's x / out
 * ([rows, C]), its window [K−1, C] and, for a speculative step, its scratch [t, K−1, C]. */
export interface ConvSeq<T> {
  readonly row: number;
  readonly t: number;
  readonly window: T;
  readonly scratch?: T;
}

/** One sequence of a gdnRecurrentSeqs call: its rows [row, row + t) of the batch's qkv,
 * g, beta and out, its state [HV, dk, dv] and, for a speculative step, its scratch
 * [t, HV, dk, dv]. */
export interface GdnSeq<T> {
  readonly row: number;
  readonly t: number;
  readonly state: T;
  readonly scratch?: T;
}

/** A range [offset, offset + length) of a fillRuns call. */
export interface FillRun {
  readonly offset: number;
  readonly length: number;
}

/** One sequence of a gdnChunkedSeqs call: its rows [row, row + t) of the batch's qkv, g,
 * beta and out, token 0 at position pos0, its state [HV, dk, dv] (advanced in place), and
 * the positions in (pos0, pos0 + t) where a chunk also ends besides the multiples of
 * GDN_CHUNK (ascending: the request's split points, engine/prefix.ts). */
export interface GdnChunkSeq<T> {
  readonly row: number;
  readonly t: number;
  readonly state: T;
  readonly pos0: number;
  readonly splits: readonly number[];
}

/** The gates and the output norm around a batch's recurrent Gated DeltaNet
 * (gdnRecurrentGatedSeqs): rows as the call's qkv and out. */
export interface GdnGating<T> {
  readonly a: T; // [rows, HV] gate projections (a → g, b → beta, as gdnGates)
  readonly b: T;
  readonly aLog: Weight; // [HV]
  readonly dtBias: Weight; // [HV]
  readonly g: T; // [rows, HV] scratch the gates may pass through (contents after: unspecified)
  readonly beta: T;
  readonly z: T; // [rows, HV·dv] the output gate of gatedRmsNorm
  readonly norm: Weight; // [dv]
  readonly eps: number;
  /** The normed rows to `out` [rows, HV·dv] with head block j = head order[j] ([HV]). */
  readonly perm?: { readonly order: Int32Array; readonly out: T };
  /** Then x += normed · wᵀ (Kernels.matmulAdd; x, tmp: [m, H]; w: [H, HV·dv]). */
  readonly project?: { readonly x: T; readonly w: Weight; readonly m: number; readonly tmp: T };
}

/** One sequence of a step's batch: rows [row, row + t) of the stacked activations, at
 * positions start..start+t−1, its KV pages through `pageTable` (KvLayerView). */
export interface BatchSeq {
  readonly row: number;
  readonly t: number;
  readonly start: number;
  readonly pageTable: ArrayLike<number>;
  /** Multimodal RoPE (a request with images): the rows' rotary positions per axis instead
   * of start..start+t−1 (the cache position stays start + j). Absent: plain RoPE. */
  readonly mrope?: BatchMrope;
}

/** Multimodal RoPE of one sequence's rows: rotary pair f of row j turns by
 * positions[axis_f·t + j]·invFreq[f], axis_f = pairAxes[f] (0 temporal, 1 height, 2 width;
 * vision/positions.ts). */
export interface BatchMrope {
  /** [3 × t]: temporal, height, width positions of the rows. */
  readonly positions: Int32Array;
  /** [rotary pairs]: the axis of each pair. */
  readonly pairAxes: Uint8Array;
}

/** The per-step inputs of one forward (row offsets, positions, page tables, the RoPE
 * angles of every row), made once by `Kernels.stepBatch` and read by every layer's batched
 * calls (ropeBatch, kvWriteBatch, attentionBatch): a GPU backend uploads it once per
 * forward, not once per layer and sequence. Backends may extend it with their own handles;
 * `seqs` (host) is what the plain per-sequence forms read. Valid until the step's readBack. */
export interface StepBatch {
  readonly seqs: readonly BatchSeq[];
  /** Σ t: rows of the batch. */
  readonly rows: number;
  readonly rope: RopeTable | null;
}

/** Storage type of a weight: bf16, f16, f32, or a GGML block format (quant/formats.ts).
 * f16 weights hold finite values only (the loader refuses inf / NaN). */
export type WeightDType = 'bf16' | 'f16' | 'f32' | QuantType;

/** A 2-D weight matrix [rows, cols] (a 1-D vector has rows = 1). */
export interface Weight {
  readonly dtype: WeightDType;
  readonly rows: number;
  readonly cols: number;
  /** bf16, f16: raw bits (Uint16Array); f32: Float32Array; a QuantType: the raw GGML blocks
   * (Uint8Array), each row cols/blockSize blocks — exactly a GGUF tensor with ne = {cols,
   * rows}. Row-major [rows, cols] unless `layout` says otherwise. */
  readonly data: Uint16Array | Float32Array | Uint8Array;
  /** A backend's packed layout, an opaque tag set only by that backend's packWeight (the
   * backend defines the names, e.g. kernels/wasm/layouts.ts); undefined: as loaded. Code
   * outside the backend never interprets it: views and sizes go through Kernels.weightRows
   * and Kernels.storedWeightBytes. */
  readonly layout?: string;
}

/** Rotation of partial NeoX RoPE: pair (f, f + R/2) of the first R = 2·invFreq.length dims
 * of a head at position p rotates by the angle p·invFreq[f] (f64), with cos and sin
 * multiplied by `scale` (YaRN's attention factor; 1 otherwise). Built once per model
 * (kernels/rope-table.ts, model/rope-scaling.ts). */
export interface RopeTable {
  readonly invFreq: Float64Array; // [R/2]
  readonly scale: number;
}

/** A backend-owned tensor handle (f32 or int32 elements). Backend-neutral code may read
 * only `length` (elements); CPU backends' handles are typed-array views. */
export interface Tensor {
  readonly length: number;
}

/** Gated DeltaNet shape of one layer. */
export interface GdnDims {
  readonly numKeyHeads: number; // HK
  readonly numValueHeads: number; // HV (multiple of HK)
  readonly keyDim: number; // dk
  readonly valueDim: number; // dv
}

/** Paged KV cache of one full-attention layer. Token at position p of a sequence lives
 * at row `pageTable[p / pageSize] * pageSize + p % pageSize` of k/v ([rows, nKV, hd]). */
export interface KvLayerView<T extends Tensor = Float32Array> {
  readonly k: T; // [numPages * pageSize, nKV, hd]
  readonly v: T; // [numPages * pageSize, nKV, hd]
  readonly pageSize: number;
}

export interface AttentionDims {
  readonly numHeads: number; // nH
  readonly numKvHeads: number; // nKV
  readonly headDim: number; // hd
}

/** One logits row of a `sample` call. The exact definition (every rounding, the order of
 * every sum) is stated in kernels/ref/sampling.ts; every backend computes the same bits. */
export interface SampleRow {
  /** The raw logits row [n] (read only; backend memory avoids a copy). */
  readonly logits: Float32Array;
  readonly n: number;
  /** 1/temperature (rounded to f32). */
  readonly invTemperature: number;
  /** 0 = off. */
  readonly topK: number;
  /** ≥ 1 = off. */
  readonly topP: number;
  /** 0 = off. */
  readonly minP: number;
  /** The uniform in [0, 1) of the draw. */
  readonly u: number;
  /** Penalised logits written over the row before the cuts: ids [patchCount], values. */
  readonly patchIds: Int32Array | null;
  readonly patchVals: Float32Array | null;
  readonly patchCount: number;
  /** Draw a token (result.token). */
  readonly draw: boolean;
  /** Raw log-softmax normaliser (result.rawMax, rawSumExp) and the top-N raw logits. */
  readonly logprobs: boolean;
  readonly topN: number;
  /** Out [n]: the kept weights (0 elsewhere; Σ = result.keptMass), or null. */
  readonly dist: Float32Array | null;
}

export interface SampleResult {
  token: number;
  rawMax: number;
  rawSumExp: number;
  /** Σ of the kept weights (the draw's normaliser). */
  keptMass: number;
  /** Out [≥ topN]: top raw logits' ids (−1 past the row) and values. */
  readonly topIds: Int32Array;
  readonly topVals: Float32Array;
}

/** One expert MLP of a MoE layer: down(up(x) ⊙ silu(gate(x))). */
export interface ExpertMats {
  readonly gate: Weight; // [Ie, H]
  readonly up: Weight; // [Ie, H]
  readonly down: Weight; // [H, Ie]
}

/** The shared expert's output y [M, H] and gate logit [M]; with `down`, y is computed first
 * as (up ⊙ silu(gate))·downᵀ — the bits of mulSilu(up, up, gate) then matmul(y, up, down)
 * (up then holds the product, or is left as it was by a backend that folds it). */
export interface MoeShared<T extends Tensor = Float32Array> {
  readonly y: T;
  readonly logit: T;
  readonly down?: { readonly w: Weight; readonly gate: T; readonly up: T };
}

/** The rest of a MoE layer after its routed sum (MoeFusion.tail): with `shared`,
 * out[i, :] += σ(shared.logit[i])·shared.y[i, :] (addSigmoidScaled), then residual += out
 * (add): the bits of those two calls after moeExperts, in one pass where a backend can. */
export interface MoeTail<T extends Tensor = Float32Array> {
  readonly shared: MoeShared<T> | null;
  readonly residual: T;
}

/** What a moeExperts call also does, fused where a backend can, with the bits of the
 * separate calls: `route` first (ids and weights = moeRoute(ids, weights, route.logits, m,
 * E = the experts, topK, route.renormalize)), `tail` last. */
export interface MoeFusion<T extends Tensor = Float32Array> {
  readonly route?: { readonly logits: T; readonly renormalize: boolean };
  readonly tail?: MoeTail<T>;
}

/** Scratch of one moeExperts call (from the caller's step arena; no two alias). */
export interface MoeScratch<T extends Tensor = Float32Array> {
  readonly slot: T; // [M·topK, H] each (row, slot)'s expert output
  readonly rowsIn: T; // [M, H] the rows routed to one expert
  readonly rowsOut: T; // [M, H]
  readonly gate: T; // [M, Ie]
  readonly up: T; // [M, Ie]
}

/** The causal conv a matmulGroup call runs on its first entry's output (Kernels.matmulGroup's
 * `conv`): causalConvSeqs(out, group[0].out, w, seqs) after the group. */
export interface GroupConv<T extends Tensor = Float32Array> {
  readonly out: T; // [M, C] post-conv rows; C = group[0].w.rows
  readonly w: Weight; // [C, K]
  readonly seqs: readonly ConvSeq<T>[];
}

/** One matmul of a `matmulGroup` call: out [M, w.rows] = x · wᵀ. */
export interface GroupMatmul<T extends Tensor = Float32Array> {
  readonly out: T;
  readonly w: Weight;
}

/** The operands of Kernels.attentionInputs (one full-attention layer, the whole batch). */
export interface AttentionInputs<T extends Tensor = Float32Array> {
  /** [rows, nH, 2·hd] query then gate per head when `gated`, else [rows, nH, hd] (then q is qg). */
  readonly qg: T;
  readonly gated: boolean;
  readonly q: T; // out [rows, nH, hd]: normed, roped
  readonly gate: T | null; // out [rows, nH, hd] (gated)
  readonly k: T; // [rows, nKV, hd] in place: normed, roped
  readonly v: T; // [rows, nKV, hd]
  readonly qNorm: Weight; // [1, hd], zero-centred
  readonly kNorm: Weight;
  readonly eps: number;
  /** Sequence i's cache (kvWriteBatch). */
  readonly kv: readonly KvLayerView<T>[];
}

/** An input computed element-wise: x ⊙ act(b), b: [M, K] (Kernels.matmulAdd). */
export interface GatedInput<T extends Tensor = Float32Array> {
  readonly b: T;
  readonly act: 'silu' | 'sigmoid';
}

/** The RMSNorm a matmulGroup applies to its input first (rmsNorm's arguments; `out`
 * [M, K] receives the normed rows where a backend computes them apart). */
export interface GroupNorm<T extends Tensor = Float32Array> {
  readonly w: Weight;
  readonly eps: number;
  readonly zeroCentered: boolean;
  readonly out: T;
}

/** One range of a read-back: `length` elements of `t` from element `offset`. */
export interface ReadRange<T extends Tensor = Float32Array> {
  readonly t: T;
  readonly offset: number;
  readonly length: number;
}

/** Row i of a `penaltyPicks` call: a greedy request's penalties and logit bias, as they stand
 * before the call's drafts (kernels/penalty-picks.ts states the arithmetic). */
export interface PenaltyPickRow {
  /** Repetition, presence and frequency penalty (f32 on the kernels). */
  readonly repetition: number;
  readonly presence: number;
  readonly frequency: number;
  /** Do the call's drafts count as outputs of this row (a penalised request)? */
  readonly countsDrafts: boolean;
  /** The ids a penalty or the bias touches before the drafts (ascending, distinct, < n), and
   * per id its logit bias (0: none), whether the prompt holds it (1/0) and its output count. */
  readonly ids: Int32Array;
  readonly bias: Float32Array;
  readonly prompt: Uint8Array;
  readonly counts: Int32Array;
  /** Bit id & 31 of word id >> 5 set ⟺ id is not in `ids` (words ≥ ceil(n / 32)). */
  readonly untouched: Uint32Array;
}

/** A `penaltyPicks` call over logits rows x[i·stride .. + n), i < m. `ids` holds the drafts
 * before this call's picks, ids[t·idsStride + i] for t < steps, and receives row i's pick at
 * ids[steps·idsStride + i] and its untouched best at ids[bestOffset + i]. Row i's gathered
 * values (1 + ids.length + steps of them) start at valsOffset + Σ_{i' < i} (1 +
 * rows[i'].ids.length + steps) (penaltyValsAt). The rows' arrays are not modified while a
 * step is recorded: a GPU backend may upload a table once for the calls of a step that pass
 * the same rows (a chain's draft steps, each over a prefix of them). */
export interface PenaltyPicksCall {
  readonly m: number;
  readonly n: number;
  readonly stride: number;
  readonly steps: number;
  readonly idsStride: number;
  readonly bestOffset: number;
  readonly valsOffset: number;
  readonly rows: readonly PenaltyPickRow[];
  /** Also write each touched id's penalised f32 value into x, after every read of the row
   * (a sampled draft's candidates are then selected and drawn from the adjusted row; the
   * gathered raw values let the host restore the raw row). Default false: x is unchanged. */
  readonly apply?: boolean;
}

/** Row i of a `candidateDraws` call: a sampled request's cut and the draft step's uniform
 * (kernels/candidate-draws.ts states the f32 arithmetic). */
export interface CandidateDraw {
  readonly invTemperature: number;
  /** 0: off. */
  readonly topK: number;
  /** ≥ 1: off. */
  readonly topP: number;
  readonly minP: number;
  /** The uniform in [0, 1) the exact draw of this draft uses. */
  readonly u: number;
}
