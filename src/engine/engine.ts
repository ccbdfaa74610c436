// The serving engine: owns the model, the pools and the scheduler, and runs the step
// loop (yielding to the event loop between steps). Public API: Engine.load, generate,
// complete, stats, close.
import { KvPool } from '../cache/kv-pool.js';
import { StatePool } from '../cache/state-pool.js';
import { createKernels, gpuAdapterOf, gpuMemoryBytes, type KernelsChoice } from '../kernels/index.js';
import type { AnyKernels, Tensor } from '../kernels/types.js';
import { type AnyModel, loadModel } from '../model/model.js';
import { type QuantizeMode, withLoadQuantizer } from '../checkpoint/quantize-load.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { Runner, type StepResult } from './runner.js';
import { Scheduler } from './scheduler.js';
import { type Admission, estimateStart, type NewRequest } from './admission.js';
import { type GenerateEvent, Request } from './request.js';
import { buildRequest, type GenerateRequest } from './request-builder.js';
import { type EngineInfo, engineInfo } from './info.js';
import { type Argmax, isGreedy } from './sampler.js';
import { BatchSampler, type LogprobSummary, logprobOf, type SampleOutcome, toProbs } from './sample-batch.js';
import { sampleStep } from './step-sampling.js';
import { adjustStepLogits, constraintEndError } from './logits-adjust.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import type { FinishReason } from './output.js';
import type { Batch, BatchRow } from './batch.js';
import { acceptDrafts } from './speculative/accept.js';
import { type ExtendInput, MtpDrafter } from './speculative/draft.js';
import { AdaptiveK } from './speculative/policy.js';
import { RadixCache } from '../cache/radix-cache.js';
import { modelIdentity, PrefixPersistence } from './prefix-persist.js';
import { isSnapshotPoint, type PrefixContext, queueGenerationSnapshot, recordSnapshot, snapshotSlot, snapshotWorking } from './prefix.js';
import { resolveModelPath } from '../hub/resolve.js';
import { BUILTIN_MODEL } from '../hub/builtin.js';
import type { EngineTestHooks } from './test-hooks.js';
import { availableMemory, DEFAULT_BUDGET_FRACTION, type MemoryPlan, memoryNeeds, parseMemoryBudget, planMemory } from './memory-plan.js';

export interface EngineOptions {
  /** Model directory (HF layout), a .gguf file, or a hub reference `org/name[@revision]`
   * or `org/name:QUANT` (HF cache, else downloaded from HF_ENDPOINT). An existing path is
   * always a path; default: the built-in model (BUILTIN_MODEL). */
  readonly model?: string;
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
  private readonly persist: PrefixPersistence | null = null;
  private readonly policy: AdaptiveK;
  /** k drafted for the step about to run (for the policy's measurement). */
  private draftedK = 0;
  private readonly metrics: EngineMetrics;
  private nextId = 1;
  private wake: (() => void) | null = null;
  private closed = false;
  private loopDone: Promise<void>;
  /** The step awaiting its read-back (asynchronous backends only). */
  private inFlight: Promise<void> | null = null;
  readonly maxContext: number;
  /** MTP draft tokens per verify round at most (0 = speculation off). */
  get specTokens(): number {
    return this.policy.kMax;
  }
  /** Model facts, limits and the prompt frontend: what the server and the CLI read. */
  readonly info: EngineInfo;
  /** Pool sizes chosen at load (print with formatPlan). */
  memoryPlan: MemoryPlan | null = null;
  /** Ids the sampler may produce (padded vocabulary rows excluded). */
  readonly sampleVocab: number;
  /** Greedy picks on the kernels (SIMD over the vocabulary, logits read in place). */
  private readonly argmax: Argmax;
  /** Every sampled / logprob / verify row of a step in one kernel call. */
  private readonly sampler: BatchSampler;
  /** p of verify positions 0..k in f64 (reused: one verify row is accepted at a time). */
  private readonly verifyProbs: Float64Array[] = [];

  private constructor(
    readonly model: AnyModel,
    readonly tokenizer: TextTokenizer,
    readonly kv: KvPool<Tensor>,
    readonly state: StatePool<Tensor>,
    private readonly opts: EngineOptions,
    private readonly hooks: EngineTestHooks,
  ) {
    this.metrics = new EngineMetrics(hooks.clock);
    const cfg = model.config;
    this.maxContext = Math.min(opts.maxContext ?? cfg.maxPositionEmbeddings, cfg.maxPositionEmbeddings, kv.usablePages * kv.pageSize);
    this.sampleVocab = Math.min(cfg.vocabSize, tokenizer.size);
    this.argmax = kernelArgmax(model.kernels);
    this.sampler = new BatchSampler(model.kernels, this.argmax);
    const k = specTokensFor(opts, cfg.mtpLayers);
    const interval = opts.stateTrackInterval ?? 256;
    const chunk = model.layout.chunk;
    if (!Number.isInteger(interval) || interval % kv.pageSize !== 0 || interval % chunk !== 0 || interval < k + 1) {
      throw new DeltaserveError('bad_config',
        `--state-track-interval ${interval} must be a multiple of --page-size ${kv.pageSize} (and of ${chunk}) and ≥ spec tokens + 1 (${k + 1})`);
    }
    this.prefix = opts.prefixCache === false ? null : {
      cache: new RadixCache(kv, state), kv, state, kvDim: model.layout.kvDim, chunk, interval, mtp: k > 0, inserted: 0,
    };
    this.scheduler = new Scheduler({
      maxRunning: opts.maxRunning ?? 16,
      maxPrefillTokens: opts.maxPrefillTokens ?? 512,
      chunk,
      trackInterval: interval,
      prefix: this.prefix,
    }, kv, state);
    this.runner = new Runner(model, kv, state);
    this.drafter = k > 0 ? new MtpDrafter(model, kv, this.runner.ws, this.sampleVocab,
      (req, n) => this.scheduler.takeFreePages(req, n), this.argmax, draftVocabFor(opts)) : null;
    this.policy = new AdaptiveK(k, opts.specAdaptive ?? true);
    this.info = engineInfo(model, tokenizer, { maxContext: this.maxContext, sampleVocab: this.sampleVocab }, () => this.specTokens);
    if (this.prefix && opts.prefixCacheDir !== undefined) {
      const log = opts.log ?? ((msg: string) => void process.stderr.write(`deltaserve: ${msg}\n`));
      this.persist = new PrefixPersistence(this.prefix, modelIdentity(opts.model ?? BUILTIN_MODEL, model.kernels.name, k > 0, opts), cfg.hiddenSize, {
        dir: opts.prefixCacheDir, maxBytes: opts.prefixCacheDiskBytes ?? 2 * 1024 ** 3, saveMs: opts.prefixCacheSaveMs ?? 60_000,
        ...(hooks.prefixCacheIo ? { io: hooks.prefixCacheIo } : {}), onSaveEnd: () => this.wake?.(),
      }, log);
      this.persist.load();
    }
    this.loopDone = this.loop();
  }

  /** `hooks`: test-only (test-hooks.ts); production callers leave them out. */
  static async load(opts: EngineOptions = {}, hooks: EngineTestHooks = {}): Promise<Engine> {
    // a path, org/name[@rev][:QUANT] or none (built-in); resolved first: a bad name fails before any backend starts
    const dir = await resolveModelPath(opts.model ?? BUILTIN_MODEL);
    const kernels = await createKernels(opts.kernels ?? 'cpu', opts.threads);
    try {
      const model = await withLoadQuantizer(opts.quantize, kernels, (quantizer) =>
        loadModel(dir, kernels, { ...(opts.quantize ? { quantize: opts.quantize } : {}), ...(quantizer ? { quantizer } : {}), available: availableMemory() }));
      const tokenizer = TextTokenizer.load(dir);
      const pageSize = opts.pageSize ?? 16;
      if (!Number.isInteger(pageSize) || pageSize < 1) throw new DeltaserveError('bad_config', `--page-size must be a positive integer (got ${pageSize})`);
      const k = specTokensFor(opts, model.config.mtpLayers);
      const plan = planEngineMemory(opts, model, k, pageSize);
      // pools are chunked (one allocation per KV layer, per state slot, per scratch row),
      // so they may span several WebAssembly memories; their memory is the kernels' (on a
      // GPU backend device buffers: copies and snapshots run there, cache/pool-storage.ts)
      const kv = new KvPool({
        numPages: plan.kvPages, pageSize, kvDim: model.layout.kvDim,
        numLayers: model.layout.fullLayers.length, numMtpLayers: model.layout.mtpLayers, storage: kernels,
      });
      const state = new StatePool({
        slots: plan.maxRunning + plan.cacheSlots, numLinear: model.layout.linearLayers.length, convSize: model.layout.convSize,
        ssmSize: model.layout.ssmSize, batchCapacity: plan.scratchRows, maxSteps: k > 0 ? k + 1 : 0,
        storage: kernels,
      });
      // model: the resolved path (a hub name's snapshot), which the prefix cache's identity hashes
      const engine = new Engine(model, tokenizer, kv, state,
        { ...opts, model: dir, maxRunning: plan.maxRunning, maxContext: plan.maxContext, cacheStateSlots: plan.cacheSlots }, hooks);
      engine.memoryPlan = plan;
      return engine;
    } catch (e) {
      kernels.dispose();
      throw e;
    }
  }

  /** Start a request; its events stream through the returned iterator. Invalid requests
   * throw a DeltaserveError here, before anything is queued. The engine runs prompt ids
   * with their split points; a text or chat prompt is turned into those by the frontend
   * first (info.frontend, the same the server uses), a convenience for library callers. */
  generate(req: GenerateRequest): AsyncIterableIterator<GenerateEvent> {
    if (this.closed) throw new DeltaserveError('bad_request', 'engine is shut down');
    const r = buildRequest(this, this.nextId++, this.info.frontend.withPromptIds(req));
    if (this.hooks.adjustOverride) r.adjust = this.hooks.adjustOverride(r.adjust);
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
    const p = this.prefix;
    const cache = p ? {
      ...p.cache.stats(), inserted: p.inserted,
      snapshotBytes: p.cache.stats().snapshots * (this.stateSlotBytes() + 4 * this.model.config.hiddenSize),
      disk: this.persist?.stats() ?? null, ...this.metrics.prefixReuse(),
    } : null;
    return this.metrics.snapshot(this.scheduler, this.kv, this.state, cache, p?.cache.owners() ?? null);
  }

  /** When requests would start if queued now (the server's admission check, admission.ts). */
  admission(reqs: readonly NewRequest[]): Admission {
    return estimateStart(this.scheduler, this.kv, reqs,
      { secondsPerStep: this.metrics.secondsPerStep(), typicalOutput: this.metrics.typicalOutputTokens() });
  }

  /** Bytes of one recurrent-state slot (every linear layer's conv window and SSM state). */
  private stateSlotBytes(): number {
    return this.state.view(0).reduce((n, v) => n + 4 * (v.conv.length + v.ssm.length), 0);
  }

  /** Stop the loop; in-flight requests finish with reason 'abort'. */
  async close(): Promise<void> {
    if (this.closed) return;
    for (const r of [...this.scheduler.running, ...this.scheduler.waiting]) r.aborted = true;
    const reaping = this.runStep(); // reaps the aborted requests
    if (reaping) await reaping;
    this.closed = true;
    this.wake?.();
    await this.loopDone;
    await this.persist?.close();
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
        this.persist?.maybeSave();
        // idle: wait for work, or until unsaved cache changes are due for saving
        const due = this.persist?.dueInMs() ?? null;
        let timer: NodeJS.Timeout | undefined;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          if (due !== null) timer = setTimeout(resolve, due + 1).unref();
        });
        clearTimeout(timer);
        this.wake = null;
        continue;
      }
      const pending = this.runStep();
      if (pending) await pending;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Steps one at a time: a step awaiting its read-back (asynchronous backends) finishes
   * before the next starts. Synchronous backends never get a promise here. */
  private runStep(): void | Promise<void> {
    if (this.inFlight) return this.inFlight.then(() => this.runStep());
    const pending = this.step();
    if (!pending) return;
    this.inFlight = pending.finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /** One scheduling step: reap aborts, run one batch, sample or accept drafts, emit,
   * finish, then extend the MTP head and draft for the next step. */
  private step(): void | Promise<void> {
    for (const r of this.scheduler.reapAborted()) this.emitDone(r, 'abort');
    this.testPreempt();
    const batch = this.scheduler.schedule();
    if (!batch) return;
    if (this.hooks.poisonPadding) this.state.poison(batch.nReal, batch.rows.slice(0, batch.nReal).map((r) => (r.verify ? r.n : 0)));
    const t0 = performance.now();
    const rows = batch.rows.slice(0, batch.nReal);
    const result = this.guarded(rows.map((r) => r.req!), () => this.runner.run(batch));
    if (!result) return;
    // a backend with an asynchronous read-back: the one await of the step
    if (result instanceof Promise) return result.then((r) => this.afterRun(batch, rows, r, t0), (e: unknown) => this.fail(rows.map((r) => r.req!), e));
    return this.afterRun(batch, rows, result, t0);
  }

  /** The host half of a step: sample or accept drafts, emit, finish, snapshot, draft. */
  private afterRun(batch: Batch, rows: readonly BatchRow[], result: StepResult, t0: number): void | Promise<void> {
    const h = this.model.config.hiddenSize;
    const extend: ExtendInput[] = [];
    let generated = 0;
    const picks = this.guarded(rows.map((r) => r.req!), () => {
      adjustStepLogits(rows, result.logits, this.sampleVocab);
      return sampleStep(this.sampler, rows, result.logits, this.sampleVocab);
    });
    if (!picks) return;
    rows.forEach((row, i) => {
      const req = row.req!;
      const logits = result.logits[i]!;
      const before = req.tokens.length;
      const off = result.offsets[i]!;
      const rowHidden = (step: number): Float32Array => result.hostHidden.subarray((off + step) * h, (off + step + 1) * h);
      let committed = row.n;
      // the page table as of this step (finishing clears req.pages, see below)
      const pages = req.pages;
      let snapshotted = false;
      if (row.verify) committed = this.verifyRow(row, i, logits, picks[i]!, rowHidden) + 1;
      else {
        this.scheduler.advance(req, row.n);
        // snapshot before sampling: the state is exactly that of tokens[0, computed)
        // (a row of n = 0 is a whole-prompt hit: its state is that snapshot)
        if (this.prefix && row.n > 0 && isSnapshotPoint(this.prefix, req, req.computed)) snapshotted = snapshotWorking(this.prefix, req, rowHidden(row.n - 1));
        if (row.sample && req.snapshotOnly) {
          this.scheduler.finish(req); // its snapshots are taken: nothing to sample
          req.events.end();
          committed = row.n - 1; // the MTP row of the last position needs a next token
        } else if (row.sample) {
          req.captureLogits?.(logits[0]!);
          const pick = picks[i]![0]!;
          this.appendToken(req, pick.token, pick.logprobs);
        }
      }
      generated += req.tokens.length - before;
      // A request that just finished still gets its MTP KV written when it snapshotted this
      // step: the rows [start, computed) live in pages the snapshot keeps, and a hit reads them.
      const extendFinished = snapshotted && req.status === 'finished' && !req.aborted && committed > 0;
      if (this.drafter && (req.status === 'running' || extendFinished)) {
        extend.push({ ...this.extendInput(req, row.start, committed, result.hidden, off), pages });
      }
    });
    const observedK = this.draftedK;
    const finish = (): void => {
      const ms = performance.now() - t0;
      if (batch.kind !== 'prefill') this.policy.observe(batch.nReal, observedK, generated, ms);
      this.metrics.stepDone(batch, generated, ms);
    };
    const drafting = this.draft(extend);
    if (drafting) return drafting.then(finish);
    finish();
  }

  /** Test hook preemptIf: preempt the running requests it picks. */
  private testPreempt(): void {
    const pick = this.hooks.preemptIf;
    if (!pick) return;
    for (const r of [...this.scheduler.running]) if (!r.prefilling && pick(r)) this.scheduler.preempt(r);
  }

  /** MTP positions to (re)compute after a step; the first chunk after a prefix hit also
   * recomputes position hit−1 from the snapshot's hidden (its MTP KV depends on the token
   * after the cached prefix). */
  private extendInput(req: Request, start: number, n: number, hidden: Tensor, hiddenRow: number): ExtendInput {
    const hit = req.hitHidden;
    if (!hit || start === 0) return { req, start, n, hidden, hiddenRow, drafts: 0 };
    req.hitHidden = null;
    // the snapshot's hidden (host) is the first row, then the step's rows
    return { req, start: start - 1, n: n + 1, hidden, hiddenRow, hiddenFirst: hit, drafts: 0 };
  }

  /** Run `fn`; if it throws, fail `reqs` (and only them) with the error. */
  private guarded<T>(reqs: readonly Request[], fn: () => T): T | null {
    try {
      return fn();
    } catch (e) {
      this.fail(reqs, e);
      return null;
    }
  }

  /** Finish `reqs` (and only them) with error `e`. */
  private fail(reqs: readonly Request[], e: unknown): void {
    const msg = e instanceof Error ? e.message : String(e);
    for (const r of reqs) {
      if (r.status === 'finished') continue;
      this.scheduler.finish(r);
      this.emitDone(r, 'error', msg);
    }
  }

  /** Accept drafts of a verify row, commit the state, return the accepted count. */
  private verifyRow(row: BatchRow, batchRow: number, logits: Float32Array[], picks: readonly SampleOutcome[],
    rowHidden: (step: number) => Float32Array): number {
    const req = row.req!;
    const chain = { tokens: req.drafts, probs: req.draftProbs };
    const k = chain.tokens.length;
    let alive = true;
    let emitted = 0;
    const targetAt = (s: number): Float64Array => {
      const o = picks[s]!;
      this.verifyProbs[s] ??= new Float64Array(this.sampleVocab);
      return toProbs(o.weights!, o.mass, this.sampleVocab, this.verifyProbs[s]!);
    };
    const j = acceptDrafts(chain, {
      sampling: req.sampling, history: req.history, vocab: this.sampleVocab, rng: req.rng, argmax: this.argmax,
      ...(isGreedy(req.sampling) ? {} : { targetAt }),
    },
      (s) => {
        req.captureLogits?.(logits[s]!);
        return logits[s]!;
      },
      (token) => (alive = this.appendToken(req, token, picks[emitted++]?.logprobs ?? null)));
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
      this.scheduler.commitVerify(req, batchRow, j, { slot: trackSlot, step: track });
      if (trackSlot > 0) recordSnapshot(this.prefix!, req, row.start + track + 1, trackSlot, rowHidden(track));
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
  private draft(extend: ExtendInput[]): void | Promise<void> {
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
    const inputs = extend.map((e) => ({ ...e, drafts: e.req.prefilling || e.req.status !== 'running' ? 0 : this.draftRoom(e.req, kFor(e.req)) }));
    const override = (): void => {
      const o = this.hooks.draftOverride;
      if (o) for (const e of inputs) if (e.req.drafts.length > 0) e.req.drafts = o(e.req, e.req.drafts).slice(0, e.req.drafts.length);
    };
    const reqs = inputs.map((e) => e.req);
    const drafting = this.guarded(reqs, () => this.drafter!.run(inputs));
    if (drafting) return drafting.then(override, (e: unknown) => this.fail(reqs, e));
    override();
  }

  /** Drafts worth proposing: a round emits up to k+1 tokens, never past the limits. */
  private draftRoom(req: Request, k: number): number {
    return Math.max(0, Math.min(k, req.maxTokens - req.numGenerated - 1, req.maxLength - req.tokens.length - 1));
  }

  /** End of generation: snapshot the conversation for its next turn (prefix.ts). */
  private snapshotGeneration(req: Request): void {
    if (!this.prefix || this.opts.prefixCacheGenerationSnapshots === false || this.closed) return;
    queueGenerationSnapshot(this.prefix, req, this.tokenizer, this.nextId++, this.maxContext, (r) => this.scheduler.add(r));
  }

  /** Commit a sampled token: stream its text, then check the stop conditions. Returns
   * false when the request just finished. */
  private appendToken(req: Request, id: number, logprobs: LogprobSummary | null = null): boolean {
    // a stop id under a constraint whose output is not complete: an error finish, not a stop
    const endError = req.output.isStopId(id) ? constraintEndError(req) : null;
    if (endError !== null) {
      this.fail([req], endError);
      return false;
    }
    if (req.onLogprob && logprobs) req.onLogprob({ id, logprob: logprobOf(logprobs, id), top: logprobs.top });
    req.tokens.push(id);
    req.history.push(id);
    const out = req.output.push(id);
    req.events.push(req.delta(out.text, [id]));
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
    if (req.snapshotOnly) {
      req.events.end();
      return;
    }
    if (reason === 'stop' || reason === 'length') this.snapshotGeneration(req);
    const tail = req.output.flush();
    const last = req.delta(tail, [], true);
    if (last.text || last.reasoning || last.content) req.events.push(last);
    this.metrics.requestFinished(req);
    req.events.push({
      type: 'done', finishReason: reason, text: req.output.text, ...req.finalParts(),
      outputIds: req.outputIds, promptIds: req.promptIds,
      usage: { promptTokens: req.promptIds.length, completionTokens: req.numGenerated, cachedTokens: req.cachedTokens },
      ...(error !== undefined ? { error } : {}),
      spec: { ...req.spec },
      preemptions: req.preemptions,
    });
    req.events.end();
  }
}

/** Pool sizes for the options (memory-plan.ts), from the memory available now. */
function planEngineMemory(opts: EngineOptions, model: AnyModel, k: number, pageSize: number): MemoryPlan {
  const b = opts.memoryBudget;
  const gpu = gpuAdapterOf(model.kernels);
  const available = availableMemory();
  // WebGPU reports no device memory: by default the pools take what the host could hold,
  // at most one maximal buffer of the adapter (--memory-budget sets it exactly)
  const budget = b === undefined
    ? gpu ? { bytes: Math.floor(Math.min(available * DEFAULT_BUDGET_FRACTION, gpu.limits.maxBufferSize)),
      from: `WebGPU: ${Math.round(DEFAULT_BUDGET_FRACTION * 100)}% of host memory, at most the adapter's max buffer size` } : undefined
    : typeof b === 'number' ? { bytes: b } : parseMemoryBudget(b);
  const needs = memoryNeeds(model, k);
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

/** The kernels' argmax as the sampler's Argmax (one reusable output slot). */
function kernelArgmax(kernels: AnyKernels): Argmax {
  const slot = new Int32Array(1); // host: argmax reads and writes host rows
  return (logits, n) => {
    kernels.argmax(slot, logits, 1, n);
    return slot[0]!;
  };
}
