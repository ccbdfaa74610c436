// Load a model directory into a Model: config + weights on a kernel backend, and the
// model's state layout (what the pools allocate per request).
import { existsSync } from 'node:fs';
import { GDN_CHUNK, type Kernels, type KvLayerView, type Tensor } from '../kernels/types.js';
import { type ModelConfig, VISION_PREFIX, convDim, loadModelConfig } from './config.js';
import { loadModelWeights } from './loader.js';
import type { QuantizeMode } from '../checkpoint/quantize-load.js';
import type { RowQuantizer } from '../kernels/quant/row-quantizer.js';
import { type Checkpoint, openCheckpoint } from '../checkpoint/safetensors.js';
import { resolveModelSource } from '../checkpoint/source.js';
import { openGgufModel } from './gguf-map.js';
import type { ModelWeights } from './weights.js';
import type { LinearStateView } from './layers.js';
import { progressBar } from '../util/progress.js';
import { withFp8Dequant } from '../checkpoint/fp8.js';
import { DeltaserveError } from '../util/errors.js';
import { checkWeightsFit } from './weights-fit.js';

/** Per-request memory the model needs, in float32 elements. */
export interface StateLayout {
  readonly linearLayers: readonly number[]; // decoder-layer indices of Gated DeltaNet layers
  readonly fullLayers: readonly number[]; // decoder-layer indices of full-attention layers
  readonly convDim: number;
  readonly convHist: number; // K − 1
  readonly convSize: number; // (K−1)·convDim per linear layer
  readonly ssmSize: number; // HV·dk·dv per linear layer
  readonly kvDim: number; // nKV·hd per token per full-attention layer (K and V each)
  readonly mtpLayers: number; // MTP full-attention layers (each with its own KV)
  /** Chunk of the Gated DeltaNet prefill (GDN_CHUNK): every absolute multiple of it is a
   * chunk boundary of every prefill, so it is the alignment of scheduler chunks and of
   * prefix-cache snapshots that any request can share (other split points are per request:
   * message ends and the prompt end, see engine/prefix.ts). */
  readonly chunk: number;
}

/** A loaded model on a kernel backend (T, I: the backend's tensor handles; backend-
 * neutral code holds a Model<Tensor, Tensor>, see AnyModel). */
export interface Model<T extends Tensor = Float32Array, I extends Tensor = Int32Array> {
  readonly dir: string;
  readonly config: ModelConfig;
  readonly weights: ModelWeights;
  readonly kernels: Kernels<T, I>;
  readonly layout: StateLayout;
}

export type AnyModel = Model<Tensor, Tensor>;

export function stateLayout(cfg: ModelConfig): StateLayout {
  const linearLayers: number[] = [];
  const fullLayers: number[] = [];
  cfg.layerKinds.forEach((kind, i) => (kind === 'linear' ? linearLayers : fullLayers).push(i));
  const cd = convDim(cfg);
  return {
    linearLayers, fullLayers, convDim: cd, convHist: cfg.convKernel - 1,
    convSize: (cfg.convKernel - 1) * cd,
    ssmSize: cfg.linNumValueHeads * cfg.linKeyDim * cfg.linValueDim,
    kvDim: cfg.numKvHeads * cfg.headDim,
    mtpLayers: cfg.mtpLayers,
    chunk: GDN_CHUNK,
  };
}

/** Config and checkpoint of a model directory or GGUF file (see checkpoint/source.ts). */
export function openModelFiles(path: string): { config: ModelConfig; ckpt: Checkpoint } {
  if (!existsSync(path)) throw new DeltaserveError('bad_config', `model directory not found: ${path}`);
  const src = resolveModelSource(path);
  if (src.kind === 'gguf') return openGgufModel(src.file);
  const config = loadModelConfig(src.dir);
  // FP8 weights are dequantized to BF16 tensor by tensor as they are read
  const ckpt = withFp8Dequant(openCheckpoint(src.dir), config.fp8Block ?? [128, 128]);
  noteSkippedVision(ckpt);
  return { config, ckpt };
}

export interface LoadOptions {
  /** Quantize matmul weights to GGML blocks as they load (see checkpoint/quantize-load.ts); tensors
   * already quantized in a GGUF stay as they are. */
  readonly quantize?: QuantizeMode;
  /** The block quantizer of `quantize` (default: the single-threaded TypeScript reference):
   * the backend's Kernels.startQuantizer, through checkpoint/quantize-load.ts
   * withLoadQuantizer (all give the reference's bytes). */
  readonly quantizer?: RowQuantizer;
  /** Memory available for the weights (bytes): a clear error before loading when they
   * would not fit (see weights-fit.ts). Unset: no check. */
  readonly available?: number;
}

export function loadModel<T extends Tensor, I extends Tensor>(dir: string, kernels: Kernels<T, I>, opts: LoadOptions = {}): Model<T, I> {
  const { config, ckpt } = openModelFiles(dir);
  try {
    if (opts.available !== undefined) {
      const sized = kernels.quantWeightBytes?.bind(kernels);
      checkWeightsFit([...ckpt.tensors.values()], opts.quantize, opts.available, sized);
    }
    const bar = progressBar(`loading ${dir}`, ckpt.totalBytes);
    const weights = loadModelWeights(ckpt, config, kernels, (n) => bar.tick(n), opts.quantize, opts.quantizer);
    bar.done();
    kernels.weightsLoaded?.();
    return { dir, config, weights, kernels, layout: stateLayout(config) };
  } finally {
    ckpt.close();
  }
}

/** Release checkpoints carry a vision tower (model.visual.*): the text model never reads it
 * (the engine loads it separately, vision/load.ts); say so once per load. */
function noteSkippedVision(ckpt: { readonly tensors: ReadonlyMap<string, { readonly nbytes: number }> }): void {
  let n = 0;
  let bytes = 0;
  for (const [name, t] of ckpt.tensors) {
    if (!name.startsWith(VISION_PREFIX)) continue;
    n++;
    bytes += t.nbytes;
  }
  if (n > 0) process.stderr.write(`deltaserve: the text model skips the vision tower (${n} ${VISION_PREFIX}* tensors, ${(bytes / 1e6).toFixed(1)} MB; read separately for images)\n`);
}

/** A single request's own KV cache and recurrent state (contiguous pages). The engine
 * replaces this with pooled, paged memory. */
export interface SequenceMemory<T extends Tensor = Float32Array> {
  readonly capacity: number; // max tokens
  readonly pageTable: Int32Array;
  readonly kv: KvLayerView<T>[]; // per full-attention layer
  readonly mtpKv: KvLayerView<T>[]; // per MTP layer
  readonly state: LinearStateView<T>[]; // per linear layer
}

export function allocSequenceMemory<T extends Tensor, I extends Tensor>(model: Model<T, I>, capacity: number, pageSize?: number): SequenceMemory<T>;
/** (Listed last: ReturnType<typeof allocSequenceMemory> is the CPU form.) */
export function allocSequenceMemory(model: Model, capacity: number, pageSize?: number): SequenceMemory;
export function allocSequenceMemory<T extends Tensor, I extends Tensor>(model: Model<T, I>, capacity: number, pageSize = 16): SequenceMemory<T> {
  return allocBatchMemory(model, 1, capacity, pageSize)[0]!;
}

/** Sequences per shared allocation: as many as keep every allocation within the backend's
 * largest bindable buffer (at least one); all of them where there is no limit. */
function sequencesPerAllocation(model: Model<Tensor, Tensor>, pages: number, pageSize: number): number {
  const { limits } = model.kernels;
  const caps = [limits.maxBindingBytes, limits.maxBufferBytes].filter((x): x is number => x !== null);
  if (caps.length === 0) return Infinity;
  const { kvDim, convSize, ssmSize } = model.layout;
  const bytesPerSequence = 4 * Math.max(2 * pages * pageSize * kvDim, convSize, ssmSize);
  return Math.max(1, Math.floor(Math.min(...caps) / bytesPerSequence));
}

/** `count` sequences' memory laid out as the engine's pools lay out a batch: per layer, ONE
 * K+V allocation holds the pages of every sequence (sequence i's page table names its own
 * pages) and ONE allocation each the conv windows and the SSM states (sequence i's view at
 * offset i·size). Invariant: sequences of one group share each layer's buffers, so a GPU
 * backend runs a decode step's kvWrite, attention, conv and recurrence over them in one
 * dispatch per layer (kernels/webgpu/batch.ts kvRuns, seqs.ts), as it does for a serve batch.
 * Groups are cut only where an allocation would pass the backend's binding limit. */
export function allocBatchMemory<T extends Tensor, I extends Tensor>(model: Model<T, I>, count: number, capacity: number, pageSize?: number): SequenceMemory<T>[];
export function allocBatchMemory(model: Model, count: number, capacity: number, pageSize?: number): SequenceMemory[];
export function allocBatchMemory<T extends Tensor, I extends Tensor>(model: Model<T, I>, count: number, capacity: number, pageSize = 16): SequenceMemory<T>[] {
  const { kernels: k, layout } = model;
  const pages = Math.ceil(capacity / pageSize);
  const per = sequencesPerAllocation(model as unknown as Model<Tensor, Tensor>, pages, pageSize);
  const out: SequenceMemory<T>[] = [];
  for (let first = 0; first < count; first += per) {
    const n = Math.min(per, count - first);
    const kvLayer = (): KvLayerView<T> => { // K and V in one allocation: one wasm memory
      const len = n * pages * pageSize * layout.kvDim;
      const kv = k.alloc(2 * len);
      return { k: k.view(kv, 0, len), v: k.view(kv, len, len), pageSize };
    };
    const shared = (size: number): T[] => {
      const all = k.alloc(n * size);
      return Array.from({ length: n }, (_, i) => (n === 1 ? all : k.view(all, i * size, size)));
    };
    const kv = layout.fullLayers.map(kvLayer);
    const mtpKv = Array.from({ length: layout.mtpLayers }, kvLayer);
    const state = layout.linearLayers.map(() => ({ conv: shared(layout.convSize), ssm: shared(layout.ssmSize) }));
    for (let i = 0; i < n; i++) {
      out.push({
        capacity: pages * pageSize,
        pageTable: new Int32Array(pages).map((_, j) => i * pages + j),
        kv,
        mtpKv,
        state: state.map((s) => ({ conv: s.conv[i]!, ssm: s.ssm[i]! })),
      });
    }
  }
  return out;
}
