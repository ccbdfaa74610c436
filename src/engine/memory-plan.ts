// Memory planning: turn a memory budget into pool sizes — KV tokens, state
// slots for running requests and for prefix-cache snapshots, verify scratch rows — and
// the context length those sizes allow. Pure arithmetic over byte counts (planMemory),
// plus the machine probe (availableMemory) and the budget parser (parseMemoryBudget).
//
// Invariants of a plan:
// - running + cached state + scratch + draft passes + model arena + KV bytes ≤ budget (explicit flags that do not fit
//   are an error naming the flag, never a silent overcommit);
// - the default budget is a fraction of the memory available now (after the weights are
//   resident), so defaults never exceed the machine's free memory;
// - one layer's KV (K and V together) stays below `maxAllocBytes`, so each KV layer fits
//   one WebAssembly memory; state slots and scratch rows are separate allocations;
// - maxContext ≤ min(model max, KV tokens);
// - a vision model's tower (its packed weights and one encode of the largest image the
//   limits allow) is taken from the budget before any pool: a budget that cannot hold it is
//   an error naming the tower and --max-image-pixels.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { AnyModel } from '../model/model.js';
import { fmtBytes } from '../util/bytes.js';
import { DeltaserveError } from '../util/errors.js';
import type { TowerMemory } from '../vision/memory.js';
import { draftRowBytes } from './draft-memory.js';
import { arenaBytes } from '../model/arena.js';

/** Largest single pool allocation: one wasm memory (4 GiB − 64 KiB) less its 256 MiB
 * staging headroom, rounded down. */
export const MAX_ALLOC_BYTES = 3.5 * 1024 ** 3;
/** Share of the available memory a default budget takes (the rest: activations, JS heap,
 * other processes' growth). */
export const DEFAULT_BUDGET_FRACTION = 0.8;
/** Default KV capacity floor (tokens) when the model's context is short. */
const DEFAULT_KV_FLOOR = 16 * 1024;
/** Cached snapshot slots may take at most this share of what running state leaves. */
const CACHE_SHARE = 0.25;

/** What the model needs per unit of each pool, in bytes. */
export interface MemoryNeeds {
  readonly weightBytes: number;
  /** K and V of one token over every full-attention and MTP layer (f32). */
  readonly kvBytesPerToken: number;
  /** K and V of one token in ONE layer (the unit of a per-layer allocation). */
  readonly kvLayerBytesPerToken: number;
  /** Conv windows + SSM states of one request over all linear layers. */
  readonly slotBytes: number;
  /** Verify scratch of one batch row (k+1 steps of a slot); 0 without speculation. */
  readonly scratchRowBytes: number;
  /** MTP draft-pass buffers per running request at a max context (draft-memory.ts
   * draftRowBytes: draft logits, candidates, kept hidden rows, penalty values — these bounded
   * by the context; non-decreasing in it); absent where the draft passes do not run on the
   * kernels. The running requests are counted at the context's cap, the plan's bytes at the
   * max context it settles on (no more). */
  readonly draftRowBytes?: (maxContext: number) => number;
  /** The model's scratch arena at its bound (model/arena.ts arenaBytes, affine in the running
   * requests): the part at 0 running (the prefill chunk's rows) and each running request's
   * (its decode / verify rows, logits rows, draft rows); absent: not counted. Distinct from
   * scratchRowBytes (per-step recurrent states, cache/state-pool.ts) and draftRowBytes. */
  readonly arenaFixedBytes?: number;
  readonly arenaRowBytes?: number;
  readonly modelMaxContext: number;
  /** The vision tower (absent: a text-only model). */
  readonly vision?: TowerMemory;
}

/** The user's choices (undefined ⇒ the planner decides). */
export interface MemoryChoices {
  /** Bytes, or a fraction (0, 1] of the available memory. */
  readonly budget?: { readonly bytes: number; readonly from?: string } | { readonly fraction: number };
  readonly maxRunning?: number;
  readonly cacheSlots?: number; // snapshot slots; 0 when the prefix cache is off
  readonly prefixCache: boolean;
  readonly kvCacheTokens?: number;
  readonly maxContext?: number;
  readonly pageSize: number;
  /** Largest single pool allocation (default MAX_ALLOC_BYTES, one wasm memory; a GPU: its
   * storage-binding limit, since one KV layer is one bound buffer). */
  readonly maxAllocBytes?: number;
  /** Where that limit comes from (for the error message). */
  readonly maxAllocFrom?: string;
}

export interface MemoryPlan {
  readonly budgetBytes: number;
  readonly budgetFrom: string; // how the budget was chosen (for the plan line)
  /** The budget as a fraction of the available memory, and that memory in bytes (null when
   * the budget was given in bytes): numbers a display formats in its own units. */
  readonly budgetFraction: number | null;
  readonly availableBytes: number | null;
  readonly weightBytes: number;
  readonly kvTokens: number; // usable tokens (page 0 excluded)
  readonly kvPages: number; // including reserved page 0
  readonly kvBytes: number;
  readonly maxContext: number;
  readonly maxRunning: number;
  readonly runningStateBytes: number; // running slots (+ the reserved slot 0)
  readonly cacheSlots: number;
  readonly cacheStateBytes: number;
  readonly scratchRows: number;
  readonly scratchBytes: number;
  /** MTP draft-pass buffers for maxRunning chains (allocated once at engine start). */
  readonly draftBytes: number;
  /** The model's scratch arena at maxRunning (reserved once at engine start). */
  readonly arenaBytes: number;
  /** The vision tower (null: a text-only model): its weights (host f32 + packed), the peak
   * of one encode of `visionMaxTokens` patches, and what the budget reserves for it (packed
   * weights + that peak; the host weights are resident before the budget is measured). */
  readonly visionWeightBytes: number | null;
  readonly visionActivationBytes: number | null;
  readonly visionMaxTokens: number | null;
  readonly visionReservedBytes: number;
}

function bad(message: string): never {
  throw new DeltaserveError('bad_config', message);
}

/** Bytes of memory this process can use now: MemAvailable (Linux) or os.freemem(),
 * lowered to the cgroup's remaining limit when there is one. */
export function availableMemory(): number {
  let avail = os.freemem();
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) avail = Number(m[1]) * 1024;
  } catch { /* not Linux: os.freemem() */ }
  try {
    const max = readFileSync('/sys/fs/cgroup/memory.max', 'utf8').trim();
    if (max !== 'max') {
      const used = Number(readFileSync('/sys/fs/cgroup/memory.current', 'utf8').trim());
      const room = Number(max) - used;
      if (Number.isFinite(room) && room > 0) avail = Math.min(avail, room);
    }
  } catch { /* no cgroup v2 limit */ }
  return avail;
}

const UNITS: Readonly<Record<string, number>> = {
  '': 1, b: 1, k: 1e3, kb: 1e3, m: 1e6, mb: 1e6, g: 1e9, gb: 1e9, t: 1e12, tb: 1e12,
  kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, tib: 1024 ** 4,
};

/** `--memory-budget`: BYTES with an optional unit (8G, 8GiB, 8000000000) or PCT (60%)
 * of the available memory. */
export function parseMemoryBudget(text: string): { bytes: number } | { fraction: number } {
  const s = text.trim().toLowerCase();
  const pct = /^(\d+(?:\.\d+)?)\s*%$/.exec(s);
  if (pct) {
    const p = Number(pct[1]);
    if (!(p > 0 && p <= 100)) bad(`--memory-budget ${text}: a percentage must be in (0, 100]`);
    return { fraction: p / 100 };
  }
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/.exec(s);
  const unit = m ? UNITS[m[2]!] : undefined;
  if (!m || unit === undefined) {
    bad(`--memory-budget must be bytes (e.g. 8000000000, 8G, 6GiB) or a percentage of available memory (e.g. 60%); got "${text}"`);
  }
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!(bytes > 0)) bad(`--memory-budget must be positive (got "${text}")`);
  return { bytes };
}

/** Human-readable bytes (GB = 1e9). */
interface Budget { bytes: number; from: string; fraction: number | null; available: number | null }

function budgetOf(choices: MemoryChoices, available: number): Budget {
  const b = choices.budget;
  if (b && 'bytes' in b) return { bytes: b.bytes, from: b.from ?? '--memory-budget', fraction: null, available: null };
  const fraction = b ? b.fraction : DEFAULT_BUDGET_FRACTION;
  const pct = Math.round(fraction * 100);
  return { bytes: Math.floor(available * fraction), from: `${pct}% of ${fmtBytes(available)} available`, fraction, available };
}

/** Size every pool from the budget. `available` is the free memory now (weights loaded). */
export function planMemory(needs: MemoryNeeds, choices: MemoryChoices, available: number): MemoryPlan {
  const { bytes: whole, from, fraction, available: availableBytes } = budgetOf(choices, available);
  const vision = needs.vision;
  const visionReserved = vision ? vision.packedWeightBytes + vision.activationBytes : 0;
  if (vision && visionReserved >= whole) {
    bad(`memory budget ${fmtBytes(whole)} (${from}) cannot hold the vision tower: ${fmtBytes(vision.packedWeightBytes)} of packed weights ` +
      `and ${fmtBytes(vision.activationBytes)} to encode the largest image (${vision.maxTokens} patches, --max-image-pixels ${vision.maxImagePixels}); ` +
      'raise --memory-budget or lower --max-image-pixels');
  }
  const budget = whole - visionReserved; // what the pools may take
  const poolsFrom = vision ? `${from}, less ${fmtBytes(visionReserved)} kept for the vision tower` : from;
  const page = choices.pageSize;
  const ctxCap = Math.min(choices.maxContext ?? needs.modelMaxContext, needs.modelMaxContext);
  const draftRowAt = (context: number): number => needs.draftRowBytes?.(context) ?? 0;
  const draftRow = draftRowAt(ctxCap);
  const arenaFixed = needs.arenaFixedBytes ?? 0;
  const arenaRow = needs.arenaRowBytes ?? 0;
  const perRunning = needs.slotBytes + needs.scratchRowBytes + draftRow + arenaRow;
  // running requests first: each needs a working slot, its verify scratch row, its draft-pass
  // rows and its rows of the model's arena (whose prefill rows are there at any count)
  let maxRunning = choices.maxRunning ?? 16;
  const runningCost = (n: number): number => arenaFixed + (n + 1) * needs.slotBytes + n * (needs.scratchRowBytes + draftRow + arenaRow);
  const kvMin = page * 2 * needs.kvBytesPerToken; // at least a page beside page 0
  if (choices.maxRunning === undefined) {
    while (maxRunning > 1 && runningCost(maxRunning) > (budget - kvMin) / 2) maxRunning--;
  }
  if (runningCost(maxRunning) + kvMin > budget) {
    bad(`memory budget ${fmtBytes(budget)} (${poolsFrom}) cannot hold ${maxRunning} running request(s): ` +
      `each needs ${fmtBytes(perRunning)} of recurrent state${needs.scratchRowBytes > 0 ? ' and verify scratch' : ''}${draftRow > 0 ? ' and MTP draft buffers' : ''}` +
      `${arenaRow > 0 ? ' and model scratch arena rows' : ''}${arenaFixed > 0 ? `, beside ${fmtBytes(arenaFixed)} of model scratch arena for --max-prefill-tokens` : ''} ` +
      `(raise --memory-budget${choices.maxRunning !== undefined ? ' or lower --max-running' : ''})`);
  }
  let left = budget - runningCost(maxRunning);
  // snapshot slots for the prefix cache: the requested count, else up to a share of the rest
  let cacheSlots = 0;
  if (choices.prefixCache) {
    const wanted = choices.cacheSlots ?? 4 * maxRunning;
    if (choices.cacheSlots !== undefined) {
      if (wanted * needs.slotBytes > left - kvMin) {
        bad(`--cache-state-slots ${wanted} needs ${fmtBytes(wanted * needs.slotBytes)} but the memory budget ${fmtBytes(budget)} (${poolsFrom}) ` +
          `leaves ${fmtBytes(Math.max(0, left - kvMin))} after the running requests`);
      }
      cacheSlots = wanted;
    } else {
      cacheSlots = Math.min(wanted, needs.slotBytes > 0 ? Math.floor((left * CACHE_SHARE) / needs.slotBytes) : wanted);
    }
    left -= cacheSlots * needs.slotBytes;
  }
  // KV: what is left, capped by one memory per layer and by what the context can use
  const maxAlloc = choices.maxAllocBytes ?? MAX_ALLOC_BYTES;
  const kvCap = needs.kvLayerBytesPerToken > 0 ? Math.floor(maxAlloc / needs.kvLayerBytesPerToken / page) * page - page : Infinity;
  const affordable = needs.kvBytesPerToken > 0 ? Math.floor(left / needs.kvBytesPerToken / page) * page - page : Infinity;
  let kvTokens: number;
  if (choices.kvCacheTokens !== undefined) {
    kvTokens = Math.ceil(choices.kvCacheTokens / page) * page;
    if (kvTokens > kvCap) bad(`--kv-cache-tokens ${choices.kvCacheTokens} exceeds ${kvCap}: one layer's KV must fit ${choices.maxAllocFrom ?? 'one WebAssembly memory'}`);
    if (kvTokens > affordable) {
      bad(`--kv-cache-tokens ${choices.kvCacheTokens} needs ${fmtBytes(kvTokens * needs.kvBytesPerToken)} but the memory budget ` +
        `${fmtBytes(budget)} (${poolsFrom}) leaves ${fmtBytes(Math.max(0, left))} after the state slots`);
    }
  } else {
    kvTokens = Math.min(affordable, kvCap, Math.ceil(Math.max(ctxCap, DEFAULT_KV_FLOOR) / page) * page);
  }
  if (kvTokens < page) bad(`memory budget ${fmtBytes(budget)} (${poolsFrom}) leaves no room for the KV cache`);
  const maxContext = Math.min(ctxCap, kvTokens);
  if (choices.maxContext !== undefined && Math.min(choices.maxContext, needs.modelMaxContext) > maxContext) {
    bad(`--max-context ${choices.maxContext} does not fit: the memory budget ` +
      `${fmtBytes(budget)} (${poolsFrom}) leaves room for ${kvTokens} KV tokens`);
  }
  const kvPages = kvTokens / page + 1;
  return {
    budgetBytes: whole, budgetFrom: from, budgetFraction: fraction, availableBytes, weightBytes: needs.weightBytes,
    kvTokens, kvPages, kvBytes: kvPages * page * needs.kvBytesPerToken, maxContext,
    maxRunning, runningStateBytes: (maxRunning + 1) * needs.slotBytes,
    cacheSlots, cacheStateBytes: cacheSlots * needs.slotBytes,
    scratchRows: needs.scratchRowBytes > 0 ? maxRunning : 0, scratchBytes: needs.scratchRowBytes > 0 ? maxRunning * needs.scratchRowBytes : 0,
    draftBytes: maxRunning * draftRowAt(maxContext),
    arenaBytes: arenaFixed + maxRunning * arenaRow,
    visionWeightBytes: vision ? vision.hostWeightBytes + vision.packedWeightBytes : null,
    visionActivationBytes: vision ? vision.activationBytes : null,
    visionMaxTokens: vision ? vision.maxTokens : null,
    visionReservedBytes: visionReserved,
  };
}

/** The plan on one line (printed by serve and generate at start). */
export function formatPlan(p: MemoryPlan): string {
  const pools = p.kvBytes + p.runningStateBytes + p.cacheStateBytes + p.scratchBytes + p.draftBytes + p.arenaBytes;
  return `memory plan: weights ${fmtBytes(p.weightBytes)}; budget ${fmtBytes(p.budgetBytes)} (${p.budgetFrom}), pools ${fmtBytes(pools)}: ` +
    `KV ${p.kvTokens} tokens ${fmtBytes(p.kvBytes)} (context ${p.maxContext}), ` +
    `state ${p.maxRunning} running ${fmtBytes(p.runningStateBytes)} + ${p.cacheSlots} cached ${fmtBytes(p.cacheStateBytes)}, ` +
    `verify scratch ${p.scratchRows} rows ${fmtBytes(p.scratchBytes)}` +
    (p.draftBytes > 0 ? `, MTP draft buffers ${fmtBytes(p.draftBytes)}` : '') +
    (p.arenaBytes > 0 ? `, model scratch arena ${fmtBytes(p.arenaBytes)}` : '') +
    (p.visionMaxTokens !== null ? `; vision tower: weights ${fmtBytes(p.visionWeightBytes ?? 0)}, ` +
      `encode of the largest image (${p.visionMaxTokens} patches) ${fmtBytes(p.visionActivationBytes ?? 0)}` : '');
}

/** Bytes of every distinct weight buffer reachable from `weights` (tied tables once). */
export function weightBytes(weights: object): number {
  const seen = new Set<ArrayBufferView>();
  const visit = (v: unknown): void => {
    if (typeof v !== 'object' || v === null) return;
    if (ArrayBuffer.isView(v)) {
      seen.add(v);
      return;
    }
    for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x);
  };
  visit(weights);
  let n = 0;
  for (const v of seen) n += v.byteLength;
  return n;
}

/** Per-unit pool sizes of a model (f32 KV and state) with `specTokens` drafts per round;
 * `draftVocab`: the draft head's ids when its draft passes run on the kernels (their buffers
 * reserved per running request), null when they do not; `arena`: the engine's limits its
 * scratch arena is reserved at (absent: the arena is not counted; its draft logits rows are
 * `arena.draftVocab` wide, default the whole vocabulary). */
export function memoryNeeds(model: AnyModel, specTokens: number, draftVocab: number | null = null,
  arena?: { readonly maxPrefillTokens: number; readonly prefixCache: boolean; readonly draftVocab?: number; readonly deferredDrafts?: boolean }): MemoryNeeds {
  const l = model.layout;
  const kvLayer = 2 * l.kvDim * 4;
  const slotBytes = l.linearLayers.length * (l.convSize + l.ssmSize) * 4;
  const arenaAt = (maxRunning: number): number => (arena ? arenaBytes(model, { ...arena, maxRunning, specTokens }) : 0);
  return {
    weightBytes: weightBytes(model.weights),
    kvBytesPerToken: kvLayer * (l.fullLayers.length + l.mtpLayers),
    kvLayerBytesPerToken: kvLayer,
    slotBytes,
    scratchRowBytes: specTokens > 0 ? (specTokens + 1) * slotBytes : 0,
    ...(draftVocab !== null && specTokens > 0 ? { draftRowBytes: (context: number) => draftRowBytes(specTokens, draftVocab, model.config.hiddenSize, context) } : {}),
    ...(arena ? { arenaFixedBytes: arenaAt(0), arenaRowBytes: arenaAt(1) - arenaAt(0) } : {}),
    modelMaxContext: model.config.maxPositionEmbeddings,
  };
}
