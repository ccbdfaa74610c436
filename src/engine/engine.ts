// The serving engine: owns the model, the pools and the scheduler, and runs the step
// loop (yielding to the event loop between steps). Public API: Engine.load, generate,
// complete, stats, close.
import { KvPool } from '../cache/kv-pool.js';
import { StatePool } from '../cache/state-pool.js';
import { createKernels, type KernelsChoice } from '../kernels/index.js';
import { loadModel, type Model } from '../model/model.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { Runner } from './runner.js';
import { Scheduler } from './scheduler.js';
import { type GenerateEvent, Request } from './request.js';
import { buildRequest, type GenerateRequest } from './request-builder.js';
import { sampleToken } from './sampler.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import type { FinishReason } from './output.js';

export interface EngineOptions {
  /** Model directory (HF layout). */
  readonly model: string;
  readonly kernels?: KernelsChoice;
  readonly threads?: number;
  readonly maxRunning?: number;
  readonly maxPrefillTokens?: number;
  readonly pageSize?: number;
  /** KV pool capacity in tokens (default: max(context, 16·1024)). */
  readonly kvCacheTokens?: number;
  /** Context length cap (default: the model's max_position_embeddings). */
  readonly maxContext?: number;
  /** Test hook: poison slot 0 and padding scratch with NaN before every step. */
  readonly poisonPadding?: boolean;
}

export class Engine {
  private readonly scheduler: Scheduler;
  private readonly runner: Runner;
  private readonly metrics = new EngineMetrics();
  private nextId = 1;
  private wake: (() => void) | null = null;
  private closed = false;
  private loopDone: Promise<void>;
  readonly maxContext: number;
  /** Ids the sampler may produce (padded vocabulary rows excluded). */
  readonly sampleVocab: number;

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
    this.scheduler = new Scheduler({
      maxRunning: opts.maxRunning ?? 16,
      maxPrefillTokens: opts.maxPrefillTokens ?? 512,
    }, kv, state);
    this.runner = new Runner(model, kv, state);
    this.loopDone = this.loop();
  }

  static async load(opts: EngineOptions): Promise<Engine> {
    const kernels = await createKernels(opts.kernels ?? 'ref', opts.threads);
    try {
      const model = loadModel(opts.model, kernels);
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
      const state = new StatePool({
        slots: maxRunning, numLinear: model.layout.linearLayers.length, convSize: model.layout.convSize,
        ssmSize: model.layout.ssmSize, batchCapacity: 0, maxSteps: 0, alloc: (n) => kernels.alloc(n),
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
    return this.metrics.snapshot(this.scheduler, this.kv, this.state);
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
    const { pages, slots } = this.scheduler.owners();
    this.kv.checkIntegrity(pages);
    this.state.checkIntegrity(slots);
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

  /** One scheduling step: reap aborts, run one batch, sample, emit, finish. */
  private step(): void {
    for (const r of this.scheduler.reapAborted()) this.emitDone(r, 'abort');
    const batch = this.scheduler.schedule();
    if (!batch) return;
    if (this.opts.poisonPadding) this.state.poison(batch.nReal);
    const t0 = performance.now();
    let result;
    try {
      result = this.runner.run(batch);
    } catch (e) {
      // A failing step must not take the engine down: fail this batch's requests only.
      const msg = e instanceof Error ? e.message : String(e);
      for (const row of batch.rows.slice(0, batch.nReal)) {
        this.scheduler.finish(row.req!);
        this.emitDone(row.req!, 'error', msg);
      }
      return;
    }
    let generated = 0;
    for (const row of batch.rows.slice(0, batch.nReal)) row.req!.computed += row.n;
    for (const { row, logits } of result.sampled) {
      const req = row.req!;
      req.captureLogits?.(logits);
      const id = sampleToken(logits, req.sampling, req.history, this.sampleVocab, req.rng);
      generated++;
      this.appendToken(req, id);
    }
    this.metrics.stepDone(batch, generated, performance.now() - t0);
  }

  /** Commit a sampled token: stream its text, then check the stop conditions. */
  private appendToken(req: Request, id: number): void {
    req.tokens.push(id);
    req.history.push(id);
    const out = req.output.push(id);
    req.events.push({ type: 'delta', text: out.text, ids: [id] });
    let reason: FinishReason | null = out.stopped ? 'stop' : null;
    if (!reason && (req.numGenerated >= req.maxTokens || req.tokens.length >= req.maxLength)) reason = 'length';
    if (reason) {
      this.scheduler.finish(req);
      this.emitDone(req, reason);
    }
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
