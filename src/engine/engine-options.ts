// The engine's options and what is resolved from them before the engine starts: the
// speculative settings checked against the model, the memory plan, the kernels' argmax.
import { gpuAdapterOf, gpuMemoryBytes, type KernelsChoice } from '../kernels/index.js';
import type { AnyKernels } from '../kernels/types.js';
import type { AnyModel } from '../model/model.js';
import type { QuantizeMode } from '../checkpoint/quantize-load.js';
import { DeltaserveError } from '../util/errors.js';
import type { TowerMemory } from '../vision/memory.js';
import type { Argmax } from './sampler.js';
import { availableMemory, DEFAULT_BUDGET_FRACTION, type MemoryPlan, memoryNeeds, parseMemoryBudget, planMemory } from './memory-plan.js';
import { isSpecSampling, type SpecSampling } from './speculative/accept.js';

export interface EngineOptions {
  /** Model directory (HF layout), a .gguf file, or a hub reference `org/name[@revision]`
   * or `org/name:QUANT` (HF cache, else downloaded from HF_ENDPOINT). An existing path is
   * always a path; default: the built-in model (BUILTIN_MODEL). */
  readonly model?: string;
  readonly kernels?: KernelsChoice;
  /** The vision tower from llama.cpp's mmproj GGUF at this path (`--mmproj FILE`), beside a
   * text GGUF or a model directory; false: no tower (`--no-mmproj`). Default: a hub
   * `:QUANT` reference's recorded projector, else a release checkpoint's own tower. */
  readonly mmproj?: string | false;
  readonly threads?: number;
  /** Quantize matmul weights as they load (`--quantize q8_0|q4_k`). */
  readonly quantize?: QuantizeMode;
  readonly maxRunning?: number;
  readonly maxPrefillTokens?: number;
  readonly pageSize?: number;
  /** KV pool capacity in tokens (default: max(context, 16·1024)). */
  readonly kvCacheTokens?: number;
  /** Context length cap (default: the model's max_position_embeddings). */
  readonly maxContext?: number;
  /** MTP draft tokens per round (default 3 when the checkpoint has an MTP head; 0 = off). */
  readonly specTokens?: number;
  /** Adapt k to measured throughput (default true). */
  readonly specAdaptive?: boolean;
  /** MTP draft passes on a GPU after a round's first (speculative/draft-device.ts): a chain the
   * host's exact replay overrules (a constrained pick its grammar refuses, an f32 near tie)
   * redrafts from there in one more pass, one more read-back; past them it ends there. Default
   * 0: a round reads back at most twice (drafts, verify). A seeded request verified by rejection
   * sampling redrafts whatever this says (its seed gives the same tokens on every backend). */
  readonly specRedrafts?: number;
  /** How sampled requests' drafts are verified (speculative/accept.ts SpecSampling; default
   * 'auto': a request that names its seed gets MTP off's tokens at any k, one that does not
   * gets rejection sampling's higher acceptance; either way k adapts, except for a seeded
   * request under 'rejection', whose tokens depend on k). */
  readonly specSampling?: SpecSampling;
  /** Prefix cache with recurrent-state snapshots (default true). */
  readonly prefixCache?: boolean;
  /** Snapshot interval in tokens (default 256; a multiple of 64 and of the page size, ≥ k+1). */
  readonly stateTrackInterval?: number;
  /** State slots reserved for cached snapshots (default 4 × max-running). */
  readonly cacheStateSlots?: number;
  /** Persist the prefix cache in this directory: loaded at start, saved when idle (at most
   * every prefixCacheSaveMs) and at close. */
  readonly prefixCacheDir?: string;
  /** Bound on the saved file (least recently used snapshots are left out; default 2 GiB). */
  readonly prefixCacheDiskBytes?: number;
  /** Minimum time between periodic saves (default 60000; 0 = only at close). */
  readonly prefixCacheSaveMs?: number;
  /** At the end of a generation, snapshot the conversation (prompt + output) so the next
   * turn that includes the answer hits: an internal prefill of the generated tokens in
   * the chunked form (default true; see prefix.ts queueGenerationSnapshot). */
  readonly prefixCacheGenerationSnapshots?: boolean;
  /** Overlapped decode (engine/overlap.ts; default true): on a GPU backend, greedy and sampled
   * (top-k) decode steps are recorded and submitted while the step before them runs,
   * its picks and draws feeding their embedding on the device. With it, a greedy or matched sampled MTP round's drafts stay on the device
   * until the verify that reads them back with its picks: one read-back a round
   * (speculative/pending-drafts.ts). The same outputs either way; CPU backends never overlap
   * (overlapsSteps). */
  readonly overlapSteps?: boolean;
  /** Operational messages (default: stderr, prefixed "deltaserve: "). */
  readonly log?: (msg: string) => void;
  /** MTP drafts are chosen among token ids [0, draftVocab) only: the draft lm_head reads
   * that many rows instead of the whole vocabulary (BPE ids are roughly in frequency order,
   * so the first ids carry most of the mass). Lossless for any value: verification uses the
   * full vocabulary; a smaller draft vocabulary can only lower acceptance. Default 32768
   * (the whole vocabulary when it is smaller). */
  readonly draftVocab?: number;
  /** Memory for the pools: bytes, or "60%" / "8G" style text (default: 80% of the memory
   * available after the weights). Pool sizes and the default context follow from it. */
  readonly memoryBudget?: number | string;
  /** Decoded pixels of one image at most (--max-image-pixels; default the decoder's limit):
   * the memory plan reserves the vision tower's encode of the largest such image. */
  readonly maxImagePixels?: number;
}

/** Speculative-decoding settings resolved against the model. */
export function draftVocabFor(opts: EngineOptions): number {
  const n = opts.draftVocab ?? 32768;
  if (!Number.isInteger(n) || n < 1) throw new DeltaserveError('bad_config', `--draft-vocab must be a positive integer (got ${n})`);
  return n;
}

/** The draft head's ids: --draft-vocab capped at the model's vocabulary and the tokenizer's
 * (`tokenizerSize`; absent: the model's bound, which the engine's head may undercut). */
export function engineDraftVocab(opts: EngineOptions, model: AnyModel, tokenizerSize = Infinity): number {
  return Math.min(draftVocabFor(opts), model.config.vocabSize, tokenizerSize);
}

export function specTokensFor(opts: EngineOptions, mtpLayers: number): number {
  const k = opts.specTokens ?? (mtpLayers > 0 ? 3 : 0);
  if (!Number.isInteger(k) || k < 0 || k > 16) throw new DeltaserveError('bad_config', `--spec-tokens must be an integer in 0..16 (got ${k})`);
  if (k > 0 && mtpLayers === 0) throw new DeltaserveError('bad_config', '--spec-tokens > 0 needs a checkpoint with an MTP head (this one has none)');
  return k;
}

/** --spec-sampling (default 'auto'; speculative/accept.ts). */
export function specSamplingOf(opts: EngineOptions): SpecSampling {
  const s = opts.specSampling ?? 'auto';
  if (!isSpecSampling(s)) throw new DeltaserveError('bad_config', `--spec-sampling must be auto, match or rejection (got ${JSON.stringify(s)})`);
  return s;
}

/** --max-prefill-tokens (default 512): prompt tokens a step processes at most. */
export function maxPrefillTokensOf(opts: EngineOptions): number {
  return opts.maxPrefillTokens ?? 512;
}

/** Pool sizes for the options (memory-plan.ts), from the memory available now; `draftPasses`:
 * the MTP draft passes run on the kernels (their buffers are reserved per running request);
 * `tokenizerSize`: the tokenizer's ids (the draft head's width is capped there too). */
export function planEngineMemory(opts: EngineOptions, model: AnyModel, k: number, pageSize: number, vision?: TowerMemory, draftPasses = false,
  tokenizerSize = Infinity): MemoryPlan {
  const b = opts.memoryBudget;
  const gpu = gpuAdapterOf(model.kernels);
  const available = availableMemory();
  // WebGPU reports no device memory: by default the pools take what the host could hold,
  // at most one maximal buffer of the adapter (--memory-budget sets it exactly)
  const budget = b === undefined
    ? gpu ? { bytes: Math.floor(Math.min(available * DEFAULT_BUDGET_FRACTION, gpu.limits.maxBufferSize)),
      from: `WebGPU: ${Math.round(DEFAULT_BUDGET_FRACTION * 100)}% of host memory, at most the adapter's max buffer size` } : undefined
    : typeof b === 'number' ? { bytes: b } : parseMemoryBudget(b);
  const draftVocab = engineDraftVocab(opts, model, tokenizerSize);
  // MTP drafts stay on the kernels until their verify where overlapped decode runs (engine.ts)
  const deferredDrafts = overlapsSteps(opts, model.kernels);
  const arena = { maxPrefillTokens: maxPrefillTokensOf(opts), prefixCache: opts.prefixCache !== false, draftVocab, deferredDrafts };
  const needs = { ...memoryNeeds(model, k, draftPasses ? draftVocab : null, arena), ...(vision ? { vision } : {}) };
  // on a GPU the weights are device buffers (the host keeps only handles)
  const gpuBytes = gpuMemoryBytes(model.kernels);
  return planMemory(gpuBytes !== null ? { ...needs, weightBytes: gpuBytes } : needs, {
    ...(gpu ? { maxAllocBytes: gpu.limits.maxStorageBufferBindingSize, maxAllocFrom: 'the GPU\'s storage-binding limit' } : {}),
    ...(budget ? { budget } : {}),
    ...(opts.maxRunning !== undefined ? { maxRunning: opts.maxRunning } : {}),
    ...(opts.cacheStateSlots !== undefined ? { cacheSlots: opts.cacheStateSlots } : {}),
    ...(opts.kvCacheTokens !== undefined ? { kvCacheTokens: opts.kvCacheTokens } : {}),
    ...(opts.maxContext !== undefined ? { maxContext: opts.maxContext } : {}),
    prefixCache: opts.prefixCache !== false, pageSize,
  }, available);
}

/** Does the engine record a step ahead (overlap.ts) and read MTP drafts back with their verify
 * (pending-drafts.ts)? --overlap, by default on any WebGPU adapter; never on a CPU backend,
 * which computes while it records. A CPU-emulated adapter (lavapipe) overlaps too since its
 * read-backs are paced (readback-pacer.ts) and its float matmuls take 8 columns a workgroup:
 * there overlap measured 1.15 × the plain loop at 1 stream, 1.07 × at 4 (greedy; sampled 1.14
 * / 1.03; MTP k = 3 with the drafts read back with their verify 1.01 / 1.08), the same outputs
 * (scripts/ab-overlap.mjs, tiny-think, 2-core EPYC, Node 24, 2026-12-07; it was 0.95–0.98 ×
 * before the pacer). */
export function overlapsSteps(opts: EngineOptions, kernels: AnyKernels): boolean {
  if (kernels.limits.deviceMemoryBytes === null) return false;
  return opts.overlapSteps ?? true;
}

/** The kernels' argmax as the sampler's Argmax (one reusable output slot). */
export function kernelArgmax(kernels: AnyKernels): Argmax {
  const slot = new Int32Array(1); // host: argmax reads and writes host rows
  return (logits, n) => {
    kernels.argmax(slot, logits, 1, n);
    return slot[0]!;
  };
}
