// Engine counters and the stats() snapshot.
import type { Tensor } from '../kernels/types.js';
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import type { Batch } from './batch.js';
import type { RequestView } from './request.js';
import type { Scheduler } from './scheduler.js';
import type { RadixStats } from '../cache/radix-cache.js';
import type { DiskStats } from './prefix-persist.js';

export interface EngineStats {
  readonly running: number;
  readonly waiting: number;
  /** `cached`: held by the prefix cache (a page may also be used by a request). */
  readonly kvPages: { readonly used: number; readonly cached: number; readonly total: number };
  readonly stateSlots: { readonly used: number; readonly cached: number; readonly total: number };
  /** Generated tokens per second of wall time over the last 10 s (RATE_WINDOW_MS): 0 once
   * the engine has been idle that long (EngineMetrics.tokensPerSecond). */
  readonly tokensPerSecond: number;
  readonly requests: { readonly started: number; readonly finished: number };
  readonly tokens: { readonly prompt: number; readonly generated: number };
  /** Steps by kind; `overlapped`: decode steps recorded before the step before them was
   * read back (overlap.ts; counted among `decode` too). */
  readonly steps: { readonly prefill: number; readonly decode: number; readonly verify: number; readonly overlapped: number;
    /** Chained sampled rows whose device draw the host's exact draw overruled (their requests
     * recomputed: overlap.ts). */
    readonly mispredicted: number; };
  readonly preemptions: number;
  readonly spec: SpecMetrics;
  /** Prefix cache (null when off). */
  readonly prefixCache: (PrefixCacheStats & { readonly hitRate: number }) | null;
}

export interface SpecMetrics {
  readonly rounds: number;
  /** Rounds whose drafts stayed on the kernels and came back with their verify's picks (one
   * read-back a round: speculative/pending-drafts.ts). */
  readonly deferredRounds: number;
  readonly drafted: number;
  readonly accepted: number;
  /** Mean tokens emitted per verify round (accepted drafts + 1). */
  readonly acceptLenMean: number;
  /** acceptLenHistogram[n] = rounds that emitted n tokens (n = 1..k+1). */
  readonly acceptLenHistogram: readonly number[];
  /** Per draft position i (0-based): accepted / drafted at that position. */
  readonly acceptRateByPosition: readonly number[];
}

/** The radix tree's counters plus the engine's view of the cache. */
export interface PrefixCacheStats extends RadixStats {
  /** Snapshots inserted (duplicates of existing ones not counted). */
  readonly inserted: number;
  /** Memory of the cached snapshots (state slots + hidden rows; their KV pages are in kvPages.cached). */
  readonly snapshotBytes: number;
  /** --prefix-cache-dir persistence (null when off). */
  readonly disk: DiskStats | null;
  /** Finished requests whose prompt hit the cache, and the prompt tokens they still
   * prefilled (prompt − cached, summed); per hit = their ratio. */
  readonly hitRequests: number;
  readonly reprefillTokens: number;
  readonly reprefillTokensPerHit: number;
}

/** Prompt reuse of finished requests (EngineMetrics.prefixReuse). */
export interface PrefixReuse {
  readonly hitRequests: number;
  readonly reprefillTokens: number;
  readonly reprefillTokensPerHit: number;
}

/** The window of the rates (tokens/s, seconds per step). */
export const RATE_WINDOW_MS = 10_000;
/** Finished requests whose output lengths make the typical output length. */
const OUTPUT_HISTORY = 64;

/** Milliseconds on a monotonic clock (performance.now; tests inject their own). */
export type Clock = () => number;

export class EngineMetrics {
  private started = 0;
  private finished = 0;
  private promptTokens = 0;
  private generated = 0;
  private readonly steps = { prefill: 0, decode: 0, verify: 0, overlapped: 0, mispredicted: 0 };
  /** Steps that ended in the last RATE_WINDOW_MS (`at`: end time), oldest first; trimmed
   * on every write and read, so an idle engine's rates fall to 0. */
  private readonly recent: { at: number; tokens: number; ms: number }[] = [];
  /** When the first step ever started (null: none yet). */
  private firstStepStart: number | null = null;
  private readonly outputs: number[] = [];
  private specRounds = 0;
  private deferredRounds = 0;
  private specDrafted = 0;
  private specAccepted = 0;
  private readonly acceptHist: number[] = [];
  private readonly draftedAt: number[] = [];
  private readonly acceptedAt: number[] = [];
  private hitRequests = 0;
  private reprefillTokens = 0;

  constructor(private readonly now: Clock = () => performance.now()) {}

  /** A verify round drafted k tokens and accepted j of them. */
  /** A chained row's device draw was overruled by the host's exact draw. */
  chainMispredicted(): void {
    this.steps.mispredicted++;
  }

  /** A round's drafts were read back with the step that verified them. */
  draftsReadWithVerify(): void {
    this.deferredRounds++;
  }

  specRound(k: number, j: number): void {
    this.specRounds++;
    this.specDrafted += k;
    this.specAccepted += j;
    this.acceptHist[j + 1] = (this.acceptHist[j + 1] ?? 0) + 1;
    for (let i = 0; i < k; i++) {
      this.draftedAt[i] = (this.draftedAt[i] ?? 0) + 1;
      if (i < j) this.acceptedAt[i] = (this.acceptedAt[i] ?? 0) + 1;
    }
  }

  requestStarted(promptTokens: number): void {
    this.started++;
    this.promptTokens += promptTokens;
  }

  requestFinished(req: RequestView): void {
    this.finished++;
    if (req.cachedTokens > 0) {
      this.hitRequests++;
      this.reprefillTokens += req.promptIds.length - req.cachedTokens;
    }
    // output lengths of requests that ended on their own (aborts say nothing about length)
    if (req.finishReason === 'stop' || req.finishReason === 'length') {
      this.outputs.push(req.numGenerated);
      if (this.outputs.length > OUTPUT_HISTORY) this.outputs.shift();
    }
  }

  prefixReuse(): PrefixReuse {
    return {
      hitRequests: this.hitRequests, reprefillTokens: this.reprefillTokens,
      reprefillTokensPerHit: this.hitRequests > 0 ? this.reprefillTokens / this.hitRequests : 0,
    };
  }

  /** Mean generated tokens of the last finished requests (null: none yet). */
  typicalOutputTokens(): number | null {
    return this.outputs.length > 0 ? Math.ceil(this.outputs.reduce((a, n) => a + n, 0) / this.outputs.length) : null;
  }

  stepDone(batch: Batch, generated: number, ms: number, overlapped = false): void {
    if (batch.kind === 'prefill' || batch.kind === 'decode' || batch.kind === 'verify') this.steps[batch.kind]++;
    if (overlapped) this.steps.overlapped++;
    this.generated += generated;
    const now = this.now();
    this.firstStepStart ??= now - ms;
    this.recent.push({ at: now, tokens: generated, ms });
    this.trim(now);
  }

  /** Drop the steps that ended before the window. */
  private trim(now: number): void {
    while (this.recent.length > 0 && this.recent[0]!.at <= now - RATE_WINDOW_MS) this.recent.shift();
  }

  /** Mean duration of the steps of the last RATE_WINDOW_MS, in seconds (null: none). */
  secondsPerStep(): number | null {
    this.trim(this.now());
    const recent = this.recent;
    return recent.length > 0 ? recent.reduce((a, r) => a + r.ms, 0) / recent.length / 1000 : null;
  }

  /** Tokens generated by the steps that ended in the last RATE_WINDOW_MS, per second of that
   * window (of the time since the first step started, while that is shorter): what the
   * engine delivered, idle time included, so it reaches 0 one window after the last step.
   * The dashboard and the Prometheus gauge deltaserve_engine_tokens_per_second read this. */
  tokensPerSecond(): number {
    const now = this.now();
    this.trim(now);
    if (this.firstStepStart === null) return 0;
    const spanMs = Math.min(RATE_WINDOW_MS, now - this.firstStepStart);
    const tokens = this.recent.reduce((a, r) => a + r.tokens, 0);
    return tokens > 0 && spanMs > 0 ? (tokens * 1000) / spanMs : 0;
  }

  snapshot(s: Scheduler, kv: KvPool<Tensor>, state: StatePool<Tensor>, cache: PrefixCacheStats | null,
    cachedOwners: { pages: number[]; slots: number[] } | null): EngineStats {
    return {
      running: s.running.length,
      waiting: s.waiting.length,
      kvPages: { used: kv.usablePages - kv.freePages, cached: new Set(cachedOwners?.pages ?? []).size, total: kv.usablePages },
      stateSlots: { used: state.slots - state.freeSlots, cached: cachedOwners?.slots.length ?? 0, total: state.slots },
      tokensPerSecond: this.tokensPerSecond(),
      requests: { started: this.started, finished: this.finished },
      tokens: { prompt: this.promptTokens, generated: this.generated },
      steps: { ...this.steps },
      preemptions: s.preemptions,
      prefixCache: cache ? { ...cache, hitRate: cache.lookups > 0 ? cache.hits / cache.lookups : 0 } : null,
      spec: {
        rounds: this.specRounds,
        deferredRounds: this.deferredRounds,
        drafted: this.specDrafted,
        accepted: this.specAccepted,
        acceptLenMean: this.specRounds > 0 ? (this.specAccepted + this.specRounds) / this.specRounds : 0,
        acceptLenHistogram: Array.from({ length: this.acceptHist.length }, (_, n) => this.acceptHist[n] ?? 0),
        acceptRateByPosition: this.draftedAt.map((d, i) => (this.acceptedAt[i] ?? 0) / d),
      },
    };
  }
}
