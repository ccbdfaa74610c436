// The serving engine: owns the model, the pools and the scheduler, and runs the step
// loop (yielding to the event loop between steps). Public API: Engine.load, generate,
// complete, stats, close.
import { KvPool } from '../cache/kv-pool.js';
import { StatePool } from '../cache/state-pool.js';
import { createKernels, type KernelsChoice } from '../kernels/index.js';
import type { Kernels } from '../kernels/types.js';
import { loadModel, type Model } from '../model/model.js';
import type { QuantizeMode } from '../model/quantize-load.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { Runner } from './runner.js';
import { Scheduler } from './scheduler.js';
import { type GenerateEvent, Request } from './request.js';
import { buildRequest, type GenerateRequest } from './request-builder.js';
import { type Argmax, isGreedy, sampleToken } from './sampler.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import type { FinishReason } from './output.js';
import type { BatchRow } from './batch.js';
import { acceptDrafts } from './spec/accept.js';
import { commit } from './spec/commit.js';
import { type ExtendInput, MtpDrafter } from './spec/draft.js';
import { AdaptiveK } from './spec/policy.js';
import { RadixCache } from '../cache/radix-cache.js';
import { isSnapshotPoint, type PrefixContext, snapshotSlot, snapshotWorking } from './prefix.js';

export interface EngineOptions {
  /** Model directory (HF layout). */
  readonly model: string;
  readonly kernels?: KernelsChoice;
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
  /** Prefix cache with recurrent-state snapshots (default true). */
  readonly prefixCache?: boolean;
  /** Snapshot interval in tokens (default 256; a multiple of 64 and of the page size, ≥ k+1). */
  readonly stateTrackInterval?: number;
  /** State slots reserved for cached snapshots (default 4 × max-running). */
  readonly cacheStateSlots?: number;
  /** Test hook: poison slot 0 and padding scratch with NaN before every step. */
  readonly poisonPadding?: boolean;
  /** MTP drafts are chosen among token ids [0, draftVocab) only: the draft lm_head reads
   * that many rows instead of the whole vocabulary (BPE ids are roughly in frequency order,
   * so the first ids carry most of the mass). Lossless for any value: verification uses the
   * full vocabulary; a smaller draft vocabulary can only lower acceptance. Default 32768
   * (the whole vocabulary when it is smaller). */
  readonly draftVocab?: number;
  /** Test hook: replace a request's MTP drafts (same length or shorter). */
  readonly draftOverride?: (req: { readonly promptIds: readonly number[]; readonly tokens: readonly number[] }, drafts: number[]) => number[];
}

/** Speculative-decoding settings resolved against the model. */
function draftVocabFor(opts: EngineOptions): number {
  const n = opts.draftVocab ?? 32768;
  if (!Number.isInteger(n) || n < 1) throw new DeltaserveError('bad_config', `--draft-vocab must be a positive integer (got ${n})`);
  return n;
}

function specTokensFor(opts: EngineOptions, mtpLayers: number): number {
  const k = opts.specTokens ?? (mtpLayers > 0 ? 3 : 0);
  if (!Number.isInteger(k) || k < 0 || k > 16) throw new DeltaserveError('bad_config', `--spec-tokens must be an integer in 0..16 (got ${k})`);
  if (k > 0 && mtpLayers === 0) throw new DeltaserveError('bad_config', '--spec-tokens > 0 needs a checkpoint with an MTP head (this one has none)');
  return k;
}

export class Engine {
  private readonly scheduler: Scheduler;
  private readonly runner: Runner;
  private readonly drafter: MtpDrafter | null;
  private readonly prefix: PrefixContext | null;
  private readonly policy: AdaptiveK;
  /** k drafted for the step about to run (for the policy's measurement). */
  private draftedK = 0;
  private readonly metrics = new EngineMetrics();
  private nextId = 1;
  private wake: (() => void) | null = null;
  private closed = false;
  private loopDone: Promise<void>;
  readonly maxContext: number;
  /** Ids the sampler may produce (padded vocabulary rows excluded). */
  readonly sampleVocab: number;
  /** Greedy picks on the kernels (SIMD over the vocabulary, logits read in place). */
  private readonly argmax: Argmax;

  private constructor(
    readonly model: Model,
    readonly tokenizer: TextTokenizer,
    readonly kv: KvPool,
    readonly state: StatePool,
    private readonly opts: EngineOptions,
  ) {
    const cfg = model.config;
    this.maxContext = Math.min(opts.maxContext ?? cfg.maxPositionEmbeddings, cfg.maxPositionEmbeddings, kv.usablePages * kv.pageSize);
    this.sampleVocab = Math.min(cfg.vocabSize, tokenizer.size);
    this.argmax = kernelArgmax(model.kernels);
    const k = specTokensFor(opts, cfg.mtpLayers);
    const interval = opts.stateTrackInterval ?? 256;
    if (!Number.isInteger(interval) || interval % kv.pageSize !== 0 || interval < k + 1) {
      throw new DeltaserveError('bad_config',
        `--state-track-interval ${interval} must be a multiple of --page-size ${kv.pageSize} (and of 64) and ≥ spec tokens + 1 (${k + 1})`);
    }
    this.prefix = opts.prefixCache === false ? null : {
      cache: new RadixCache(kv, state, model.layout.kvDim), kv, state, kvDim: model.layout.kvDim, interval, mtp: k > 0,
    };
    this.scheduler = new Scheduler({
      maxRunning: opts.maxRunning ?? 16,
      maxPrefillTokens: opts.maxPrefillTokens ?? 512,
      trackInterval: interval,
      prefix: this.prefix,
    }, kv, state);
    this.runner = new Runner(model, kv, state);
    this.drafter = k > 0 ? new MtpDrafter(model, kv, this.runner.ws, this.sampleVocab, this.argmax, draftVocabFor(opts)) : null;
    this.policy = new AdaptiveK(k, opts.specAdaptive ?? true);
    this.loopDone = this.loop();
  }

  static async load(opts: EngineOptions): Promise<Engine> {
    const kernels = await createKernels(opts.kernels ?? 'auto', opts.threads);
    try {
      const model = loadModel(opts.model, kernels, opts.quantize ? { quantize: opts.quantize } : {});
      const tokenizer = TextTokenizer.load(opts.model);
      const pageSize = opts.pageSize ?? 16;
      if (!Number.isInteger(pageSize) || pageSize < 1) throw new DeltaserveError('bad_config', `--page-size must be a positive integer (got ${pageSize})`);
      const maxRunning = opts.maxRunning ?? 16;
      const ctx = Math.min(opts.maxContext ?? model.config.maxPositionEmbeddings, model.config.maxPositionEmbeddings);
      const kvTokens = opts.kvCacheTokens ?? Math.max(ctx, 16 * 1024);
      const kv = new KvPool({
        numPages: Math.ceil(kvTokens / pageSize) + 1, pageSize, kvDim: model.layout.kvDim,
        numLayers: model.layout.fullLayers.length, numMtpLayers: model.layout.mtpLayers, alloc: (n) => kernels.alloc(n),
      });
      const k = specTokensFor(opts, model.config.mtpLayers);
      const cacheSlots = opts.prefixCache === false ? 0 : opts.cacheStateSlots ?? 4 * maxRunning;
      const state = new StatePool({
        slots: maxRunning + cacheSlots, numLinear: model.layout.linearLayers.length, convSize: model.layout.convSize,
        ssmSize: model.layout.ssmSize, batchCapacity: k > 0 ? maxRunning : 0, maxSteps: k > 0 ? k + 1 : 0,
        alloc: (n) => kernels.alloc(n),
      });
      return new Engine(model, tokenizer, kv, state, opts);
    } catch (e) {
      kernels.dispose();
      throw e;
    }
  }

  /** Start a request; its events stream through the returned iterator. Invalid requests
   * throw a DeltaserveError here, before anything is queued. */
  generate(req: GenerateRequest): AsyncIterableIterator<GenerateEvent> {
    if (this.closed) throw new DeltaserveError('bad_request', 'engine is shut down');
    const r = buildRequest(this, this.nextId++, req);
    const onAbort = (): void => this.abort(r);
    if (req.signal) {
      if (req.signal.aborted) r.aborted = true;
      else req.signal.addEventListener('abort', onAbort, { once: true });
    }
    this.scheduler.add(r);
    this.metrics.requestStarted(r.promptIds.length);
    this.wake?.();
    const events = r.events;
    return {
      next: () => events.next(),
      return: async () => {
        this.abort(r);
        return { value: undefined, done: true };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Run a request to completion and return its final event. */
  async complete(req: GenerateRequest): Promise<Extract<GenerateEvent, { type: 'done' }>> {
    for await (const ev of this.generate(req)) if (ev.type === 'done') return ev;
    throw new DeltaserveError('internal', 'request ended without a done event');
  }

  private abort(r: Request): void {
    if (r.status === 'finished') return;
    r.aborted = true;
    this.wake?.();
  }

  stats(): EngineStats {
    return this.metrics.snapshot(this.scheduler, this.kv, this.state, this.prefix?.cache.stats() ?? null,
      this.prefix?.cache.owners() ?? null);
  }

  /** Stop the loop; in-flight requests finish with reason 'abort'. */
  async close(): Promise<void> {
    if (this.closed) return;
    for (const r of [...this.scheduler.running, ...this.scheduler.waiting]) r.aborted = true;
    this.step(); // reaps the aborted requests
    this.closed = true;
    this.wake?.();
    await this.loopDone;
    this.model.kernels.dispose();
  }

  /** Pools and scheduler agree on who owns every page and slot. */
  checkIntegrity(): void {
    const { pages, slots, locks } = this.scheduler.owners();
    const cached = this.prefix?.cache.owners() ?? { pages: [], slots: [] };
    this.kv.checkIntegrity([...pages, ...cached.pages]);
    this.state.checkIntegrity([...slots, ...cached.slots]);
    this.prefix?.cache.checkIntegrity(locks);
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      if (!this.scheduler.hasWork()) {
        this.checkIntegrity();
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = null;
        continue;
      }
      this.step();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** One scheduling step: reap aborts, run one batch, sample or accept drafts, emit,
   * finish, then extend the MTP head and draft for the next step. */
  private step(): void {
    for (const r of this.scheduler.reapAborted()) this.emitDone(r, 'abort');
    const batch = this.scheduler.schedule();
    if (!batch) return;
    if (this.opts.poisonPadding) this.state.poison(batch.nReal);
    const t0 = performance.now();
    const rows = batch.rows.slice(0, batch.nReal);
    const result = this.guarded(rows.map((r) => r.req!), () => this.runner.run(batch));
    if (!result) return;
    const h = this.model.config.hiddenSize;
    const extend: ExtendInput[] = [];
    let generated = 0;
    rows.forEach((row, i) => {
      const req = row.req!;
      const logits = result.logits[i]!;
      const before = req.tokens.length;
      const off = result.offsets[i]!;
      const rowHidden = (step: number): Float32Array => result.hidden.subarray((off + step) * h, (off + step + 1) * h);
      let committed = row.n;
      if (row.verify) committed = this.verifyRow(row, i, logits, rowHidden) + 1;
      else {
        req.computed += row.n;
        // snapshot before sampling: the state is exactly that of tokens[0, computed)
        if (this.prefix && isSnapshotPoint(this.prefix, req, req.computed)) snapshotWorking(this.prefix, req, rowHidden(row.n - 1));
        if (row.sample) {
          req.captureLogits?.(logits[0]!);
          this.appendToken(req, sampleToken(logits[0]!, req.sampling, req.history, this.sampleVocab, req.rng, this.argmax));
        }
      }
      generated += req.tokens.length - before;
      if (this.drafter && req.status === 'running') extend.push(this.extendInput(req, row.start, committed, result.hidden.subarray(off * h, (off + committed) * h)));
    });
    const observedK = this.draftedK;
    this.draft(extend);
    const ms = performance.now() - t0;
    if (batch.kind !== 'prefill') this.policy.observe(batch.nReal, observedK, generated, ms);
    this.metrics.stepDone(batch, generated, ms);
  }

  /** MTP positions to (re)compute after a step; the first chunk after a prefix hit also
   * recomputes position hit−1 from the snapshot's hidden (its MTP KV depends on the token
   * after the cached prefix). */
  private extendInput(req: Request, start: number, n: number, hidden: Float32Array): ExtendInput {
    const hit = req.hitHidden;
    if (!hit || start === 0) return { req, start, n, hidden, drafts: 0 };
    req.hitHidden = null;
    const h = hit.length;
    const joined = new Float32Array((n + 1) * h);
    joined.set(hit);
    joined.set(hidden.subarray(0, n * h), h);
    return { req, start: start - 1, n: n + 1, hidden: joined, drafts: 0 };
  }

  /** Run `fn`; if it throws, fail `reqs` (and only them) with the error. */
  private guarded<T>(reqs: readonly Request[], fn: () => T): T | null {
    try {
      return fn();
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      for (const r of reqs) {
        if (r.status === 'finished') continue;
        this.scheduler.finish(r);
        this.emitDone(r, 'error', msg);
      }
      return null;
    }
  }

  /** Accept drafts of a verify row, commit the state, return the accepted count. */
  private verifyRow(row: BatchRow, batchRow: number, logits: Float32Array[], rowHidden: (step: number) => Float32Array): number {
    const req = row.req!;
    const chain = { tokens: req.drafts, probs: req.draftProbs };
    const k = chain.tokens.length;
    let alive = true;
    const j = acceptDrafts(chain, { sampling: req.sampling, history: req.history, vocab: this.sampleVocab, rng: req.rng, argmax: this.argmax },
      (s) => {
        req.captureLogits?.(logits[s]!);
        return logits[s]!;
      },
      (token) => (alive = this.appendToken(req, token)));
    req.drafts = [];
    req.draftProbs = null;
    req.spec.rounds++;
    req.spec.drafted += k;
    req.spec.accepted += j;
    this.metrics.specRound(k, j);
    if (alive) {
      // a snapshot point inside the committed run [L+1, L+j+1] is taken through commit
      const track = this.trackPoint(req, row.start, j);
      const trackSlot = track >= 0 && this.prefix ? snapshotSlot(this.prefix) : 0;
      commit(this.state, [{ row: batchRow, slot: req.slot, lastAcceptedStep: j, trackSlot, trackStep: trackSlot > 0 ? track : -1 }]);
      if (trackSlot > 0) {
        this.prefix!.cache.insert(req.tokens.slice(0, row.start + track + 1), req.pages, { slot: trackSlot, hidden: rowHidden(track).slice() });
      }
      req.computed += j + 1;
    }
    return j;
  }

  /** Verify step whose state is a snapshot point, or −1: committed lengths after steps
   * 0..j are start+1..start+j+1 (the interval ≥ k+1 allows at most one). */
  private trackPoint(req: Request, start: number, j: number): number {
    if (!this.prefix) return -1;
    for (let step = 0; step <= j; step++) if (isSnapshotPoint(this.prefix, req, start + step + 1)) return step;
    return -1;
  }

  /** MTP extend over what each request committed, then drafts for its next verify. */
  private draft(extend: ExtendInput[]): void {
    if (!this.drafter || extend.length === 0) return;
    const decoding = extend.filter((e) => !e.req.prefilling).length;
    const k = this.policy.choose(decoding);
    this.draftedK = k;
    // Seeded sampling must be reproducible, and which random draws a round consumes
    // depends on k: sampling requests always draft the configured k, never the adaptive one.
    const kFor = (r: Request): number => (isGreedy(r.sampling) ? k : this.policy.kMax);
    // When the policy has turned speculation off and no request needs drafts, the MTP
    // head is skipped entirely: its KV for these positions goes stale, which can only
    // lower the acceptance of later drafts (outputs are lossless either way).
    if (k === 0 && extend.every((e) => kFor(e.req) === 0)) return;
    const inputs = extend.map((e) => ({ ...e, drafts: e.req.prefilling ? 0 : this.draftRoom(e.req, kFor(e.req)) }));
    this.guarded(inputs.map((e) => e.req), () => this.drafter!.run(inputs));
    const override = this.opts.draftOverride;
    if (override) for (const e of inputs) if (e.req.drafts.length > 0) e.req.drafts = override(e.req, e.req.drafts).slice(0, e.req.drafts.length);
  }

  /** Drafts worth proposing: a round emits up to k+1 tokens, never past the limits. */
  private draftRoom(req: Request, k: number): number {
    return Math.max(0, Math.min(k, req.maxTokens - req.numGenerated - 1, req.maxLength - req.tokens.length - 1));
  }

  /** Commit a sampled token: stream its text, then check the stop conditions. Returns
   * false when the request just finished. */
  private appendToken(req: Request, id: number): boolean {
    req.tokens.push(id);
    req.history.push(id);
    const out = req.output.push(id);
    req.events.push({ type: 'delta', text: out.text, ids: [id] });
    let reason: FinishReason | null = out.stopped ? 'stop' : null;
    if (!reason && (req.numGenerated >= req.maxTokens || req.tokens.length >= req.maxLength)) reason = 'length';
    if (reason) {
      this.scheduler.finish(req);
      this.emitDone(req, reason);
      return false;
    }
    return true;
  }

  private emitDone(req: Request, reason: FinishReason, error?: string): void {
    if (req.finishReason) return;
    req.finishReason = reason;
    const tail = req.output.flush();
    if (tail) req.events.push({ type: 'delta', text: tail, ids: [] });
    this.metrics.requestFinished(req);
    req.events.push({
      type: 'done', finishReason: reason, text: req.output.text, outputIds: req.outputIds, promptIds: req.promptIds,
      usage: { promptTokens: req.promptIds.length, completionTokens: req.numGenerated, cachedTokens: req.cachedTokens },
      ...(error !== undefined ? { error } : {}),
      spec: { ...req.spec },
      preemptions: req.preemptions,
    });
    req.events.end();
  }
}

/** The kernels' argmax as the sampler's Argmax (one reusable output slot). */
function kernelArgmax(kernels: Kernels): Argmax {
  const slot = kernels.allocI32(1);
  return (logits, n) => {
    kernels.argmax(slot, logits, 1, n);
    return slot[0]!;
  };
}
