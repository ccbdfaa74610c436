// The Kernels interface: every hot numerical operation of the model forward.
// Backends: ref/ (plain TypeScript, the oracle) and wasm/ (AssemblyScript SIMD); a GPU
// backend implements the same interface over device buffers (docs/ARCHITECTURE.md).
// Conventions:
//  - Activations are backend-owned tensors T allocated through `alloc`: the model passes
//    them between kernels and never reads or writes their elements. CPU backends use
//    Float32Array views (T = Float32Array: zero cost; wasm: views into WebAssembly memory);
//    a GPU backend a region of a device buffer. Sub-ranges come from `view`, row moves from
//    `copyRows` / `gatherRows`, host data goes in through `write` and out through
//    `readBack` (the one transfer per step, possibly async).
//  - Host inputs (token ids, positions, page tables) are plain ArrayLike<number>.
//  - Weights are `Weight` values created through `allocWeight` (filled row-major, shape
//    [rows, cols]; a linear layer is [out, in]: y = x · Wᵀ), then, for matmul operands,
//    `packWeight` into the backend's layout.
//  - Row-major activation shapes are given in comments as `// [T, D]`.
//  - Batch invariance: every kernel computes each output row with a fixed reduction
//    order that does not depend on how many rows are processed together.

import type { StartedQuantizer } from './quant/row-quantizer.js';
import type { MtpInputs } from './mtp-inputs.js';
export type { MtpHiddenRun, MtpInputs, MtpTokenIds } from './mtp-inputs.js';

export * from './kernel-operands.js';
import type {
  AttentionDims, AttentionInputs, BatchSeq, ConvSeq, ExpertMats, FillRun, GatedInput, GdnChunkSeq, GdnDims, GdnGating, GdnSeq, GroupConv, GroupMatmul, GroupNorm, KernelLimits, KvLayerView,
  MoeFusion, MoeScratch, PenaltyPicksCall, CandidateDraw, ReadRange, RopeTable, SampleResult, SampleRow, StepBatch, Tensor, Weight, WeightDType,
} from './kernel-operands.js';

/** Ranges `Kernels.stage` copied: their host arrays once the next readBack has resolved. */
export interface StagedRead {
  readonly data: readonly Float32Array[] | null;
}

/** The kernel backend. T: its f32 tensor handle, I: its int32 tensor handle. Backend-
 * neutral code (model/, engine/) holds a Kernels<Tensor, Tensor> (see AnyKernels). */
export interface Kernels<T extends Tensor = Float32Array, I extends Tensor = Int32Array> {
  readonly name: string;
  /** Threads the backend computes on (1 for ref). */
  readonly threads: number;
  /** Memory limits and the device (read when the pools are planned). */
  readonly limits: KernelLimits;
  /** Release workers and memory; the backend is unusable afterwards. */
  dispose(): void;

  /** Allocate a zero-filled float32 tensor of n elements. */
  alloc(n: number): T;
  /** Allocate a zero-filled int32 tensor. */
  allocI32(n: number): I;
  /** Give back a tensor alloc / allocI32 returned (not a view), once no later call uses it:
   * a GPU backend destroys its buffer after the work recorded so far has run; wasm puts its
   * bytes on its arena's free list. Absent (ref): the collector's. */
  free?(t: T | I): void;
  /** Elements [offset, offset + length) of t, sharing its memory. */
  view(t: T, offset: number, length: number): T;

  /** Strided row copy: for r < rows, dst[dstOffset + r·dstStride + j] =
   * src[srcOffset + r·srcStride + j], j < width (elements; src and dst do not overlap). */
  copyRows(dst: T, dstOffset: number, dstStride: number, src: T, srcOffset: number, srcStride: number,
    rows: number, width: number): void;
  /** dst[i, :] = src[rows[i], :] for i < rows.length; rows of `width` elements. */
  gatherRows(dst: T, src: T, rows: ArrayLike<number>, width: number): void;
  /** dst[offset + i] = value (rounded to f32) for i < length: zeroing a recurrent-state slot,
   * poisoning pool memory in tests. */
  fill(dst: T, offset: number, length: number, value: number): void;
  /** fill of every run (runs inside dst, not overlapping) in one op: the state pool zeroes
   * all the slots a step admits with one call (one dispatch on a GPU). */
  fillRuns(dst: T, runs: readonly FillRun[], value: number): void;
  /** Host data into a tensor: dst[offset + i] = src[i] (rounded to f32). */
  write(dst: T, offset: number, src: ArrayLike<number>): void;
  /** Host copies of tensor ranges, in one transfer. CPU backends return views of their
   * own memory at once (valid until the tensors are next written); a GPU backend returns a
   * promise that settles when the copies have landed. The engine calls it once per step. */
  readBack(ranges: readonly ReadRange<T>[]): Float32Array[] | Promise<Float32Array[]>;
  /** Host copies of tensor ranges as they are NOW (in order with the work recorded so far, so a
   * later kernel may overwrite them), delivered by the next readBack — no transfer of its own,
   * and no device memory holds them meanwhile: a GPU backend copies each range into read-back
   * staging at once (its bytes count in that readBack's transfer); CPU backends copy to the
   * host at once. `data` (one array a range, like readBack's) is set when that readBack has
   * resolved (CPU: at once). */
  stage(ranges: readonly ReadRange<T>[]): StagedRead;
  /** Allocate a weight [rows, cols] in backend memory. The caller fills `bytes`
   * (little-endian, rows*cols elements of dtype; for a QuantType exactly
   * rows × quantRowBytes(dtype, cols) bytes of GGML blocks) before first use — e.g. the checkpoint
   * loader reads the tensor straight into it, with no second copy. */
  allocWeight(dtype: WeightDType, rows: number, cols: number): { weight: Weight; bytes: Uint8Array };
  /** Bytes a quantized [rows, cols] weight of `dtype` occupies once packWeight has run
   * (a backend's repacked layout may be larger than the GGML blocks). Absent: the blocks. */
  quantWeightBytes?(dtype: WeightDType, rows: number, cols: number): number;
  /** Start the block quantizer of load-time quantization (`--quantize`, checkpoint/
   * quantize-load.ts), whose blocks go into allocWeight's bytes: GGML's bytes, exactly the
   * TypeScript reference's (quant/row-quantizer.ts refQuantizer). ref: that reference;
   * wasm: its SIMD quantizer on the backend's thread count; webgpu: the host's wasm one,
   * loaded only when this is called. The caller disposes it once the weights are loaded. */
  startQuantizer(): Promise<StartedQuantizer>;

  /** The weight in this backend's matmul layout, for a weight whose `bytes` are filled.
   * Call it once on every weight used as a matmul operand, and use only the result from
   * then on (it may repack the same memory in place; only matmul and embed read it).
   * The ref backend returns the weight unchanged. */
  packWeight(w: Weight): Weight;
  /** Called once a model's weights are all packed: a backend may tune itself for the
   * formats it packed (wasm: time the kernel families of those quantized formats only). */
  weightsLoaded?(): void;

  /** Rows [0, n) of a weight (packed or not) as a weight of its own, sharing memory: a
   * matmul against it computes the first n output columns. */
  weightRows(w: Weight, n: number): Weight;

  /** Bytes a matmul streams for this weight as the backend stores it. */
  storedWeightBytes(w: Weight): number;

  /** out[m, n] = Σ_k x[m, k] · W[n, k]   x: [M, K], W: [N, K] (packed), out: [M, N].
   * Quantized W: x is quantized per 32-element block to int8 and the block dot products
   * are exact integer sums (kernels/ref/quant.ts defines the arithmetic exactly). */
  matmul(out: T, x: T, w: Weight, m: number): void;

  /** out[m, n] += Σ_k x[m, k] · W[n, k] (a residual add folded into its matmul): the bits of
   * matmul(tmp, x, w, m) then add(out, out, tmp, m·N). tmp: [M, N] scratch, which a backend
   * that fuses the two (webgpu: one dispatch) leaves untouched; out does not overlap x or tmp.
   * With `gate`, the input is x ⊙ act(gate.b) — the bits of mulSilu / mulSigmoid(x, x,
   * gate.b, M·K) first; x then holds that product, or is left as it was by a backend that
   * folds it into the matmul (webgpu, float weights). */
  matmulAdd(out: T, x: T, w: Weight, m: number, tmp: T, gate?: GatedInput<T>): void;

  /** Several matmuls of one input: for every entry, matmul(out, x, w, m) — the same bits
   * as those separate calls, in any order (every w has K = w.cols columns; x: [M, K]; the
   * outs do not overlap each other or x). A backend may run them as one dispatch (wasm:
   * one pool run, x quantized once); others loop (kernels/matmul-group.ts).
   * With `norm`: the entries read rmsNorm(x) — the bits of rmsNorm(norm.out, x, norm.w, m,
   * norm.eps, norm.zeroCentered) and then the group on norm.out; a backend that folds the
   * norm into the matmuls (webgpu, float weights) may leave norm.out unwritten.
   * With `conv`: then causalConvSeqs(conv.out, group[0].out, conv.w, conv.seqs) — its bits
   * (post-conv rows, windows, scratch); a backend that folds the conv into the matmul's
   * stores (webgpu: one row per sequence, no scratch) may leave group[0].out unwritten. */
  matmulGroup(x: T, m: number, group: readonly GroupMatmul<T>[], norm?: GroupNorm<T>, conv?: GroupConv<T>): void;

  /** out[m, :] = embedding row ids[m] (widened to f32). out: [M, D]. */
  embed(out: T, table: Weight, ids: ArrayLike<number>): void;

  /** embed with the ids in kernel memory: out[i, :] = embedding row ids[idsOffset + i] for
   * i < m — the bits of embed over those ids read back. Each id must lie in [0, table.rows)
   * (CPU backends throw; the callers' ids are argmaxRows picks of the table's own rows). A
   * GPU backend gathers without a read-back, so MTP drafts chain on the device. */
  embedIds(out: T, table: Weight, ids: I, idsOffset: number, m: number): void;

  /** The MTP head's input rows: per row i, cat[i] = [rmsNorm(embedding row of id i,
   * normEmbedding) | rmsNorm(hidden row i, normHidden)] — the bits of the separate calls of
   * kernels/mtp-inputs-by-calls.ts (CPU backends run them); webgpu: one dispatch. */
  mtpInputs(a: MtpInputs<T, I>): void;

  /** RMSNorm over rows of length d: y = x·rsqrt(mean(x²)+eps)·(1+w) if `zeroCentered`,
   * else ·w. x, out: [M, d] (may alias), w: [1, d]. */
  rmsNorm(out: T, x: T, w: Weight, m: number, eps: number, zeroCentered: boolean): void;

  /** Gated RMSNorm of Gated DeltaNet: out = o·rsqrt(mean(o²)+eps)·w·silu(z), per row of dv.
   * o, z, out: [M, dv] (M = tokens·HV; out may alias o).
   * With `headOrder` ([HV], a permutation; M a multiple of HV): row i·HV + j of out gets the
   * normed row i·HV + headOrder[j] — the same values, moved (out_proj's stored head order of
   * a GGUF, model/weights.ts outProjHeadOrder); out then overlaps neither o nor z. */
  gatedRmsNorm(out: T, o: T, z: T, w: Weight, m: number, eps: number, headOrder?: Int32Array): void;

  /** Partial NeoX RoPE in place on the first 2·table.invFreq.length dims of every head
   * (plain, linear-scaled and YaRN alike: see RopeTable). x: [T, heads, headDim] with row
   * stride `stride` floats between tokens; positions [T]. */
  rope(x: T, positions: ArrayLike<number>, t: number, heads: number, headDim: number,
    table: RopeTable, stride: number): void;

  /** Causal depthwise conv with SiLU, one sequence. x: [T, C] pre-conv inputs;
   * window: [K-1, C] previous inputs (oldest first); w: [C, K]; out: [T, C].
   * Without scratch: window is updated in place to the last K-1 inputs.
   * With scratch ([T, K-1, C]): window is read only and the window after step t is
   * written to scratch[t]. */
  causalConv(out: T, x: T, window: T, w: Weight, t: number,
    scratch?: T): void;

  /** causalConv for several sequences of one batch in one call (one dispatch per layer,
   * not one per sequence): sequence i reads x rows [row, row + t) and writes the same rows
   * of out, with its own window and optional scratch (each as in causalConv). Same bits
   * as one causalConv per sequence. */
  causalConvSeqs(out: T, x: T, w: Weight, seqs: readonly ConvSeq<T>[]): void;

  /** Gates: g = −exp(A_log)·softplus(a + dt_bias), beta = sigmoid(b). a, b, g, beta: [T, HV]. */
  gdnGates(g: T, beta: T, a: T, b: T,
    aLog: Weight, dtBias: Weight, t: number): void;

  /** Gated DeltaNet, token-by-token recurrence for one sequence.
   * qkv: [T, 2·HK·dk + HV·dv] post-conv (q all heads | k all | v all), not normalised;
   * g, beta: [T, HV]; state: [HV, dk, dv]; out: [T, HV, dv].
   * Without scratch: state is updated in place. With scratch ([T, HV, dk, dv]): state is
   * read only and the state after step t is written to scratch[t]. */
  gdnRecurrent(out: T, qkv: T, g: T, beta: T,
    state: T, dims: GdnDims, t: number, scratch?: T): void;

  /** gdnRecurrent for several sequences of one batch in one call: sequence i's rows
   * [row, row + t) of qkv, g, beta and out, its own state and optional scratch (each as in
   * gdnRecurrent). Same bits as one gdnRecurrent per sequence. */
  gdnRecurrentSeqs(out: T, qkv: T, g: T, beta: T, dims: GdnDims, seqs: readonly GdnSeq<T>[]): void;

  /** For a batch's recurrent sequences: gdnGates, gdnRecurrentSeqs, then gatedRmsNorm of
   * out in place, on the sequences' rows, as one op (plain form: seqs-by-calls.ts
   * gdnGatedSeqsByCalls). A backend may fuse it into one dispatch whose last bits differ
   * from the plain form's; it then runs every recurrent row through the fused form, so a
   * row's bits still do not depend on its batch, and decode equals verify.
   * gating.perm: the normed rows go to perm.out, head blocks in perm.order (gatedRmsNorm's
   * headOrder), and out's rows are left unspecified. gating.project: then also
   * matmulAdd(project.x, the normed rows, project.w, project.m, project.tmp) — the caller
   * passes it only when the sequences' rows are all of [0, project.m); the normed rows are
   * then left unspecified (a backend may fold the norm into the matmul's input). */
  gdnRecurrentGatedSeqs(out: T, qkv: T, gating: GdnGating<T>, dims: GdnDims, seqs: readonly GdnSeq<T>[]): void;

  /** Same contract as gdnRecurrent (no scratch), computed in chunks of GDN_CHUNK tokens whose
   * boundaries are at absolute positions multiple of GDN_CHUNK (`pos0` = position of token 0,
   * so the first chunk may be shorter). Invariant: bit-identical whether the tokens come
   * in one call or in several calls split anywhere the other run also splits (the state
   * is rounded to f32 at every chunk boundary). */
  gdnChunked(out: T, qkv: T, g: T, beta: T,
    state: T, dims: GdnDims, t: number, pos0?: number): void;

  /** The chunked prefills of a batch in one call: for each sequence, gdnChunked on its rows
   * once per segment between its split points (a split ends a chunk), in order
   * (seqs-by-calls.ts gdnChunkedSeqsByCalls defines the bits). A sequence's output and
   * state do not depend on the other sequences of the call. */
  gdnChunkedSeqs(out: T, qkv: T, g: T, beta: T, dims: GdnDims, seqs: readonly GdnChunkSeq<T>[]): void;

  /** Write k, v ([T, nKV·hd]) of one sequence at positions start..start+T−1. */
  kvWrite(kv: KvLayerView<T>, pageTable: ArrayLike<number>, start: number, k: T,
    v: T, t: number, kvDim: number): void;

  /** Causal GQA attention for one sequence: query i (position start+i) attends to
   * positions 0..start+i of the cache. q: [T, nH, hd] (row stride qStride floats);
   * out: [T, nH, hd]. softmax in fp32 with scale 1/√hd. */
  attention(out: T, q: T, qStride: number, kv: KvLayerView<T>,
    pageTable: ArrayLike<number>, start: number, t: number, dims: AttentionDims): void;

  /** The step's batch for the batched calls below (see StepBatch). `rope`: the table of
   * ropeBatch (null: ropeBatch is not called). Sequences are stacked in order (row_i =
   * Σ_{j<i} t_j). */
  stepBatch(seqs: readonly BatchSeq[], rope: RopeTable | null): StepBatch;

  /** rope on every sequence's rows of x ([rows, heads, headDim], row stride `stride`) at its
   * positions, with the batch's table: one call per layer and tensor. Same bits as rope per
   * sequence (kernels/batch-by-calls.ts). */
  ropeBatch(x: T, batch: StepBatch, heads: number, headDim: number, stride: number): void;

  /** kvWrite of every sequence of the batch (its rows of k, v: [rows, kvDim]) into its
   * cache `kv[i]` (sequence i's view; one call per layer). Same bits as kvWrite per sequence. */
  kvWriteBatch(kv: readonly KvLayerView<T>[], batch: StepBatch, k: T, v: T, kvDim: number): void;

  /** attention of every sequence of the batch over its cache `kv[i]` (q, out: [rows, nH, hd],
   * q row stride qStride): one call per layer. Same bits as attention per sequence. `inputs`:
   * attentionInputs(inputs) first (its q is `q`, its kv `kv`), the same bits; webgpu folds it
   * into the decode / verify attention dispatch (kernels/webgpu/attention-fold.ts). */
  attentionBatch(out: T, q: T, qStride: number, kv: readonly KvLayerView<T>[], batch: StepBatch, dims: AttentionDims, inputs?: AttentionInputs<T>): void;

  /** Everything between the q/k/v projections and attention, for the whole batch: the query
   * and gate halves split (gated), the per-head q and k norms, RoPE, and the KV write — the
   * bits of copyRows, rmsNorm, ropeBatch and kvWriteBatch in that order
   * (kernels/batch-by-calls.ts attentionInputsByCalls); webgpu: one dispatch. */
  attentionInputs(a: AttentionInputs<T>, batch: StepBatch, dims: AttentionDims): void;

  // argmax and sample work on host rows: the logits the engine has read back (on CPU
  // backends those are views of the kernels' own memory, so nothing is copied).

  /** Greedy pick over logits rows: out[i] = the lowest index holding the maximum of row i
   * (x[i·stride .. i·stride + n)); NaN never wins (an all-NaN row gives 0). */
  argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride?: number): void;

  /** argmax over logits rows in kernel memory, ids into a kernel int32 tensor: out[outOffset + i]
   * = the lowest index holding the maximum of x[i·stride .. i·stride + n) (NaN never wins; an
   * all-NaN row gives 0) — the same ids as `argmax` on those rows read back. A GPU backend picks
   * on the device, so a greedy step reads back ids instead of logits rows (engine/runner.ts). */
  argmaxRows(out: I, outOffset: number, x: T, m: number, n: number, stride: number): void;

  /** argmaxRows where row i's ids whose bit is clear in masks[i] (bit id & 31 of word id >> 5;
   * words past the array: clear) count as −∞ — the ids of `argmax` over the rows with those ids
   * set to −∞ on the host (a grammar mask, engine/logits-adjust.ts); masks[i] null: row i as
   * it is. masks.length = m. */
  argmaxRowsMasked(out: I, outOffset: number, x: T, m: number, n: number, stride: number, masks: readonly (Uint32Array | null)[]): void;

  /** out[outOffset + i] = x[i·stride + ids[i]] for i < m (0 ≤ ids[i] < stride): each row's
   * logit at the id argmaxRows* picked, so a greedy pick the host finishes (penalties, bias:
   * engine/greedy-finish.ts) reads back that value, not the row. Exact (a copy). */
  gatherPicked(out: T, outOffset: number, x: T, ids: I, m: number, stride: number): void;

  /** The candidates of sampled rows (engine/sampled-candidates.ts): per row i of x
   * (x[i·stride .. i·stride + n)), the set of its first min(c, #non-NaN) ids in the order
   * (value desc, id asc; −0 just below +0; NaN never in it), written in ascending id order
   * at [outOffset + i·c, + c) of ids (int32) and vals (the values' bits, copied); the slots
   * after the set hold id −1 and −∞. Every id outside the set is NaN or holds a value ≤ the
   * set's smallest. Exact (compares and copies: kernels/top-candidates.ts is the definition).
   * A GPU backend selects on the device, so a sampled step reads back c pairs per row. */
  topCandidates(ids: I, vals: T, outOffset: number, x: T, m: number, n: number, stride: number, c: number): void;

  /** One draft step of penalised greedy MTP chains on the kernels (engine/speculative/
   * draft-device.ts): per row, the argmax of the logits penalised in f32 (the drafts before
   * it, read from `ids`, counted as outputs) into `ids`, with its untouched best and the raw
   * logits the host needs to replay the exact f64 pick gathered into `vals`. The definition:
   * kernels/penalty-picks.ts. A GPU backend picks on the device, so a chain of draft steps
   * needs no read-back between them. */
  penaltyPicks(ids: I, x: T, vals: T, call: PenaltyPicksCall): void;

  /** One draft step of sampled MTP chains on the kernels (engine/speculative/draft-device.ts):
   * per row i < rows.length with rows[i] non-null, an f32 draw from its top candidates
   * (topCandidates' set at [candOffset + i·c, + c) of ids / vals) under its temperature, top-k,
   * top-p and min-p with its uniform, into out[outOffset + i]. A proposal: the host replays the
   * exact draw. The definition: kernels/candidate-draws.ts. A GPU backend draws on the device,
   * so a sampled chain of draft steps needs no read-back between them. */
  candidateDraws(out: I, outOffset: number, ids: I, vals: T, candOffset: number, c: number, rows: readonly (CandidateDraw | null)[]): void;

  /** Sampling over logits rows (temperature, penalties as patches, min-p / top-k / top-p,
   * the draw, the logprob normaliser): results[i] for rows[i]. Rows are independent. */
  sample(rows: readonly SampleRow[], results: readonly SampleResult[]): void;

  /** MoE router: per row, softmax over E logits (fp32), top-k (ties → lower expert id),
   * optionally renormalised to sum 1. logits: [M, E]; ids, weights: [M, topK]. */
  moeRoute(ids: I, weights: T, logits: T, m: number, e: number, topK: number, renormalize: boolean): void;

  /** The routed experts of a MoE layer: out[i] = Σ_s weights[i, s] · expert_{ids[i, s]}(x[i]),
   * summed in slot order s = 0..topK−1 (f64 products, f32 accumulator: kernels/cpu-ops.ts
   * states the exact arithmetic). Each expert runs once over the rows routed to it, in
   * ascending (row, slot) order. x, out: [M, H]; ids, weights: [M, topK]. `fused`: the
   * routing first and the shared expert's gated add and the residual add last (MoeFusion),
   * as those calls would. */
  moeExperts(out: T, x: T, ids: I, weights: T, m: number, topK: number, experts: readonly ExpertMats[],
    scratch: MoeScratch<T>, fused?: MoeFusion<T>): void;

  /** out[i, :] += sigmoid(g[i]) · y[i, :] for i < m (sigmoid and product in f64, one
   * rounding per element). out, y: [M, d]; g: [M]. */
  addSigmoidScaled(out: T, y: T, g: T, m: number, d: number): void;

  /** out[i] = a[i] · silu(b[i]) for i < n (out may alias). */
  mulSilu(out: T, a: T, b: T, n: number): void;
  /** out[i] = a[i] · sigmoid(b[i]) for i < n (out may alias a). */
  mulSigmoid(out: T, a: T, b: T, n: number): void;
  /** out[i] = a[i] + b[i] for i < n (out may alias). */
  add(out: T, a: T, b: T, n: number): void;

  /** LayerNorm over rows of length d (the vision tower's): out = (x − μ)·(σ² + eps)^−½·w + b
   * with μ and the biased σ² of the row (reductions in f64 on CPU backends, f32 on a GPU).
   * x, out: [M, d] (may alias); w, b: [d]. */
  layerNorm(out: T, x: T, w: T, b: T, m: number, d: number, eps: number): void;
  /** out[r, c] = act(x[r, c] + bias[c]) for r < m, c < d: a linear layer's bias with the
   * activation after it folded in (BiasAct). x, out: [M, d] (may alias); bias: [d]. */
  biasAct(out: T, x: T, bias: T, m: number, d: number, act: BiasAct): void;
}

/** The activation of Kernels.biasAct: none; GELU's tanh form (gelu_pytorch_tanh:
 * x/2·(1 + tanh(√(2/π)(x + 0.044715x³)))); the exact GELU x/2·(1 + erf(x/√2)). */
export type BiasAct = 'none' | 'geluTanh' | 'geluErf';

/** The kernels as backend-neutral code sees them: opaque tensors. */
export type AnyKernels = Kernels<Tensor, Tensor>;
