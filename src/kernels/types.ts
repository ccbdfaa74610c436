// The Kernels interface: every hot numerical operation of the model forward.
// Backends: ref/ (plain TypeScript, the oracle) and wasm/ (AssemblyScript SIMD).
// Conventions:
//  - Activations are Float32Array views allocated through `alloc` (the wasm backend
//    hands out views into WebAssembly memory; the ref backend plain arrays).
//  - Weights are `Weight` values created through `allocWeight` (filled row-major, shape
//    [rows, cols]; a linear layer is [out, in]: y = x · Wᵀ), then, for matmul operands,
//    `packWeight` into the backend's layout.
//  - Row-major activation shapes are given in comments as `// [T, D]`.
//  - Batch invariance: every kernel computes each output row with a fixed reduction
//    order that does not depend on how many rows are processed together.

import type { QuantType } from './quant/formats.js';

/** Tokens per chunk of the chunked Gated DeltaNet form (`gdnChunked`), every backend
 * (assembly/chunked.ts CHUNK must equal it; the conformance suite checks bit-equality).
 * Chunks end at absolute multiples of it and where a call ends, so the state after a
 * prefill is bit-exact only at positions where every run splits: the model publishes it
 * in its state layout (model.ts StateLayout.chunk), which the scheduler and prefix cache read. */
export const GDN_CHUNK = 64;

/** Storage type of a weight: bf16, f32, or a GGML block format (quant/formats.ts). */
export type WeightDType = 'bf16' | 'f32' | QuantType;

/** A 2-D weight matrix [rows, cols] (a 1-D vector has rows = 1). */
export interface Weight {
  readonly dtype: WeightDType;
  readonly rows: number;
  readonly cols: number;
  /** bf16: raw bits (Uint16Array); f32: Float32Array; a QuantType: the raw GGML blocks
   * (Uint8Array), each row cols/blockSize blocks — exactly a GGUF tensor with ne = {cols,
   * rows}. Row-major [rows, cols] unless `layout` says otherwise. */
  readonly data: Uint16Array | Float32Array | Uint8Array;
  /** A backend's matmul layout (set only by that backend's packWeight); 'panel8': the wasm
   * backend's 8-row panels (assembly/matmul.ts), data padded to whole panels; 'q8x4': the
   * wasm backend's Q8_0 regrouped by 4 rows with f32 scales (assembly/q8x4.ts); 'q4kx4':
   * its Q4_K regrouped by 4 rows with unpacked scales (assembly/q4kx4.ts); 'q6kx4': its
   * Q6_K regrouped by 4 rows, group scales per [group][column] (assembly/q6kx4.ts). */
  readonly layout?: 'panel8' | 'q8x4' | 'q4kx4' | 'q6kx4';
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
export interface KvLayerView {
  readonly k: Float32Array; // [numPages * pageSize, nKV, hd]
  readonly v: Float32Array; // [numPages * pageSize, nKV, hd]
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

export interface Kernels {
  readonly name: string;
  /** Threads the backend computes on (1 for ref). */
  readonly threads: number;
  /** Release workers and memory; the backend is unusable afterwards. */
  dispose(): void;

  /** Allocate a zero-filled float32 activation buffer. */
  alloc(n: number): Float32Array;
  /** Allocate an int32 buffer. */
  allocI32(n: number): Int32Array;
  /** Allocate a weight [rows, cols] in backend memory. The caller fills `bytes`
   * (little-endian, rows*cols elements of dtype; for a QuantType exactly
   * rows × quantRowBytes(dtype, cols) bytes of GGML blocks) before first use — e.g. the checkpoint
   * loader reads the tensor straight into it, with no second copy. */
  allocWeight(dtype: WeightDType, rows: number, cols: number): { weight: Weight; bytes: Uint8Array };
  /** Bytes a quantized [rows, cols] weight of `dtype` occupies once packWeight has run
   * (a backend's repacked layout may be larger than the GGML blocks). Absent: the blocks. */
  quantWeightBytes?(dtype: WeightDType, rows: number, cols: number): number;

  /** The weight in this backend's matmul layout, for a weight whose `bytes` are filled.
   * Call it once on every weight used as a matmul operand, and use only the result from
   * then on (it may repack the same memory in place; only matmul and embed read it).
   * The ref backend returns the weight unchanged. */
  packWeight(w: Weight): Weight;

  /** out[m, n] = Σ_k x[m, k] · W[n, k]   x: [M, K], W: [N, K] (packed), out: [M, N].
   * Quantized W: x is quantized per 32-element block to int8 and the block dot products
   * are exact integer sums (kernels/ref/quant.ts defines the arithmetic exactly). */
  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number): void;

  /** out[m, :] = embedding row ids[m] (widened to f32). out: [M, D]. */
  embed(out: Float32Array, table: Weight, ids: ArrayLike<number>): void;

  /** RMSNorm over rows of length d: y = x·rsqrt(mean(x²)+eps)·(1+w) if `zeroCentered`,
   * else ·w. x, out: [M, d] (may alias), w: [1, d]. */
  rmsNorm(out: Float32Array, x: Float32Array, w: Weight, m: number, eps: number, zeroCentered: boolean): void;

  /** Gated RMSNorm of Gated DeltaNet: out = o·rsqrt(mean(o²)+eps)·w·silu(z), per row of dv.
   * o, z, out: [M, dv] (M = tokens·HV; out may alias o). */
  gatedRmsNorm(out: Float32Array, o: Float32Array, z: Float32Array, w: Weight, m: number, eps: number): void;

  /** Partial NeoX RoPE in place on the first rotaryDim dims of every head.
   * x: [T, heads, headDim] with row stride `stride` floats between tokens. */
  rope(x: Float32Array, positions: ArrayLike<number>, t: number, heads: number, headDim: number,
    rotaryDim: number, theta: number, stride: number): void;

  /** Causal depthwise conv with SiLU, one sequence. x: [T, C] pre-conv inputs;
   * window: [K-1, C] previous inputs (oldest first); w: [C, K]; out: [T, C].
   * Without scratch: window is updated in place to the last K-1 inputs.
   * With scratch ([T, K-1, C]): window is read only and the window after step t is
   * written to scratch[t]. */
  causalConv(out: Float32Array, x: Float32Array, window: Float32Array, w: Weight, t: number,
    scratch?: Float32Array): void;

  /** Gates: g = −exp(A_log)·softplus(a + dt_bias), beta = sigmoid(b). a, b, g, beta: [T, HV]. */
  gdnGates(g: Float32Array, beta: Float32Array, a: Float32Array, b: Float32Array,
    aLog: Weight, dtBias: Weight, t: number): void;

  /** Gated DeltaNet, token-by-token recurrence for one sequence.
   * qkv: [T, 2·HK·dk + HV·dv] post-conv (q all heads | k all | v all), not normalised;
   * g, beta: [T, HV]; state: [HV, dk, dv]; out: [T, HV, dv].
   * Without scratch: state is updated in place. With scratch ([T, HV, dk, dv]): state is
   * read only and the state after step t is written to scratch[t]. */
  gdnRecurrent(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array,
    state: Float32Array, dims: GdnDims, t: number, scratch?: Float32Array): void;

  /** Same contract as gdnRecurrent (no scratch), computed in chunks of GDN_CHUNK tokens whose
   * boundaries are at absolute positions multiple of GDN_CHUNK (`pos0` = position of token 0,
   * so the first chunk may be shorter). Invariant: bit-identical whether the tokens come
   * in one call or in several calls split anywhere the other run also splits (the state
   * is rounded to f32 at every chunk boundary). */
  gdnChunked(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array,
    state: Float32Array, dims: GdnDims, t: number, pos0?: number): void;

  /** Write k, v ([T, nKV·hd]) of one sequence at positions start..start+T−1. */
  kvWrite(kv: KvLayerView, pageTable: ArrayLike<number>, start: number, k: Float32Array,
    v: Float32Array, t: number, kvDim: number): void;

  /** Causal GQA attention for one sequence: query i (position start+i) attends to
   * positions 0..start+i of the cache. q: [T, nH, hd] (row stride qStride floats);
   * out: [T, nH, hd]. softmax in fp32 with scale 1/√hd. */
  attention(out: Float32Array, q: Float32Array, qStride: number, kv: KvLayerView,
    pageTable: ArrayLike<number>, start: number, t: number, dims: AttentionDims): void;

  /** MoE router: per row, softmax over E logits (fp32), top-k (ties → lower expert id),
   * optionally renormalised to sum 1. logits: [M, E]; ids, weights: [M, topK]. */
  /** Greedy pick over logits rows: out[i] = the lowest index holding the maximum of row i
   * (x[i·stride .. i·stride + n)); NaN never wins (an all-NaN row gives 0). */
  argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride?: number): void;

  /** Sampling over logits rows (temperature, penalties as patches, min-p / top-k / top-p,
   * the draw, the logprob normaliser): results[i] for rows[i]. Rows are independent. */
  sample(rows: readonly SampleRow[], results: readonly SampleResult[]): void;

  moeRoute(ids: Int32Array, weights: Float32Array, logits: Float32Array, m: number, e: number,
    topK: number, renormalize: boolean): void;

  /** out[i] = a[i] · silu(b[i]) for i < n (out may alias). */
  mulSilu(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  /** out[i] = a[i] · sigmoid(b[i]) for i < n (out may alias a). */
  mulSigmoid(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
  /** out[i] = a[i] + b[i] for i < n (out may alias). */
  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;
}
