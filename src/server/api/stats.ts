// GET /metrics.json: the web dashboard's data. A sampler reads the server's counters and
// engine.stats() once a second into a ring buffer (the last RING_SECONDS seconds), turning
// counters into per-interval values (tokens of the interval, mean TTFT of the interval, MTP
// accept length of the interval); the response carries those samples and a model card
// (architecture, quantization, memory plan, kernels, threads). `?since=T` (a sample's `t`)
// returns only the samples after T.
import type { Engine } from '../../engine/engine.js';
import { formatPlan } from '../../engine/memory-plan.js';
import { ApiError } from '../http/errors.js';
import type { Done } from './choices.js';
import type { Call } from '../http/call.js';
import type { ServerContext } from '../context.js';
import type { ServerMetrics } from './metrics.js';
import { sendJson } from '../http/respond.js';
import { DEFAULT_SERVER_IMAGES } from './images.js';

/** Seconds of samples kept (one per second). */
export const RING_SECONDS = 300;
const INTERVAL_MS = 1000;

/** One second of the server. Rates and means are over the interval since the previous
 * sample; null = nothing to measure in that interval (no requests, no verify rounds). */
export interface StatsSample {
  /** Unix time in ms. */
  readonly t: number;
  /** Generated tokens per second (the engine's ~10 s window). */
  readonly tokens_per_second: number;
  readonly running: number;
  readonly queued: number;
  /** Prompt tokens of the choices finished in the interval, and how many came from the prefix cache. */
  readonly prompt_tokens: number;
  readonly cached_tokens: number;
  /** cached / prompt tokens of the interval. */
  readonly cache_hit_rate: number | null;
  /** Tokens per MTP verify round ((accepted + rounds) / rounds) of the interval. */
  readonly accept_length: number | null;
  /** Accepted / drafted MTP tokens of the interval. */
  readonly acceptance_rate: number | null;
  /** Fractions of KV pages and recurrent-state slots in use. */
  readonly kv_usage: number;
  readonly state_usage: number;
  /** Mean time to first token (s) of the requests that got their first token in the interval. */
  readonly ttft_seconds: number | null;
}

interface Counters {
  prompt: number;
  cached: number;
  rounds: number;
  drafted: number;
  accepted: number;
  ttftSum: number;
  ttftCount: number;
}

function countersOf(m: ServerMetrics): Counters {
  const ttft = m.ttft.total;
  return {
    prompt: m.promptTokens.get(), cached: m.cachedTokens.get(), rounds: m.specRounds.get(),
    drafted: m.specDrafted.get(), accepted: m.specAccepted.get(), ttftSum: ttft.sum, ttftCount: ttft.count,
  };
}

const ratio = (a: number, b: number): number | null => (b > 0 ? a / b : null);

export class StatsSampler {
  private readonly ring: StatsSample[] = [];
  private last: Counters;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly engine: Engine, private readonly metrics: ServerMetrics) {
    this.last = countersOf(metrics);
  }

  /** Sample every second until stop() (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sample(), INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Take one sample now (the timer calls this; tests may too). */
  sample(now = Date.now()): StatsSample {
    const s = this.engine.stats();
    const c = countersOf(this.metrics);
    const prev = this.last;
    const d = (k: keyof Counters): number => c[k] - prev[k];
    this.last = c;
    const rounds = d('rounds');
    const sample: StatsSample = {
      t: now,
      tokens_per_second: s.tokensPerSecond,
      running: s.running,
      queued: s.waiting,
      prompt_tokens: d('prompt'),
      cached_tokens: d('cached'),
      cache_hit_rate: ratio(d('cached'), d('prompt')),
      accept_length: rounds > 0 ? (d('accepted') + rounds) / rounds : null,
      acceptance_rate: ratio(d('accepted'), d('drafted')),
      kv_usage: s.kvPages.total > 0 ? s.kvPages.used / s.kvPages.total : 0,
      state_usage: s.stateSlots.total > 0 ? s.stateSlots.used / s.stateSlots.total : 0,
      ttft_seconds: ratio(d('ttftSum'), d('ttftCount')),
    };
    this.ring.push(sample);
    if (this.ring.length > RING_SECONDS) this.ring.shift();
    return sample;
  }

  /** Samples taken after `since` (ms), oldest first. */
  samples(since = -Infinity): StatsSample[] {
    return this.ring.filter((s) => s.t > since);
  }
}

/** Bytes of the model's weights by storage type (bf16, f32, q8_0, q4_k, …); each buffer once. */
export function weightBytesByType(weights: object): Record<string, number> {
  const seen = new Set<ArrayBufferView>();
  const out: Record<string, number> = {};
  const visit = (v: unknown): void => {
    if (typeof v !== 'object' || v === null || ArrayBuffer.isView(v)) return;
    const w = v as { dtype?: unknown; data?: unknown };
    if (typeof w.dtype === 'string' && ArrayBuffer.isView(w.data)) {
      if (!seen.has(w.data)) out[w.dtype] = (out[w.dtype] ?? 0) + w.data.byteLength;
      seen.add(w.data);
      return;
    }
    for (const x of Array.isArray(v) ? v : Object.values(v)) visit(x);
  };
  visit(weights);
  return out;
}

/** What the dashboard's model card shows (no local paths). */
export function modelCardOf(ctx: ServerContext): Record<string, unknown> {
  const { engine } = ctx;
  const cfg = engine.info.config;
  const layout = engine.info.layout;
  const mlp = cfg.layerMlp[0];
  return {
    id: ctx.modelName,
    model_type: cfg.modelType,
    layers: cfg.numLayers,
    linear_attention_layers: layout.linearLayers.length,
    full_attention_layers: layout.fullLayers.length,
    mtp_layers: cfg.mtpLayers,
    hidden_size: cfg.hiddenSize,
    vocab_size: cfg.vocabSize,
    attention_heads: cfg.numHeads,
    kv_heads: cfg.numKvHeads,
    head_dim: cfg.headDim,
    mlp: mlp?.kind === 'moe' ? `MoE ${mlp.numExperts} experts, top-${mlp.topK}` : 'dense',
    context: engine.maxContext,
    weights_by_type: weightBytesByType(engine.info.weights),
    memory_plan: engine.memoryPlan ? { ...engine.memoryPlan, summary: formatPlan(engine.memoryPlan) } : null,
    kernels: engine.info.kernels.name,
    threads: engine.info.kernels.threads,
    spec_tokens: engine.specTokens,
    prefix_cache: engine.stats().prefixCache !== null,
    images: imagesCardOf(ctx),
  };
}

/** What the chat page needs to offer image attachments: null for a text-only model. */
function imagesCardOf(ctx: ServerContext): { max_images: number; max_image_pixels: number } | null {
  if (ctx.engine.vision === null) return null;
  const opts = ctx.images ?? DEFAULT_SERVER_IMAGES;
  return { max_images: opts.maxImages, max_image_pixels: opts.maxImagePixels };
}

export function statsJson(ctx: ServerContext, sampler: StatsSampler, call: Call): void {
  const url = new URL(call.req.url ?? '/', 'http://localhost');
  const raw = url.searchParams.get('since');
  if (raw !== null && (raw.trim() === '' || !Number.isFinite(Number(raw)))) {
    throw new ApiError(400, `since must be a sample time in ms (got ${JSON.stringify(raw)})`, 'since');
  }
  const since = raw !== null ? Number(raw) : -Infinity;
  sendJson(call.res, 200, {
    now: Date.now(), interval_ms: INTERVAL_MS, ring_seconds: RING_SECONDS,
    model: modelCardOf(ctx), samples: sampler.samples(since),
  }, { 'cache-control': 'no-store' });
}

/** The `speculative` field of a chat completion (and of its streamed usage chunk): MTP
 * verify rounds over the request's choices, draft tokens proposed and accepted, and the
 * accept length (tokens emitted per round: (accepted + rounds) / rounds). Null when no
 * verify round ran (speculation off, sampled choices without drafts, or a one-token answer). */
export function speculativeOf(dones: readonly Done[]): Record<string, number> | null {
  let rounds = 0;
  let drafted = 0;
  let accepted = 0;
  for (const d of dones) {
    rounds += d.spec?.rounds ?? 0;
    drafted += d.spec?.drafted ?? 0;
    accepted += d.spec?.accepted ?? 0;
  }
  if (rounds === 0) return null;
  return { rounds, draft_tokens: drafted, accepted_tokens: accepted, accept_length: (accepted + rounds) / rounds };
}
