// The serving engine: owns the model, the pools, the scheduler and the speculator, and runs
// the step loop (yielding to the event loop between steps). Public API: Engine.load,
// generate, complete, stats, close. One step (Engine.step) is schedule → execute → sample
// → update → draft; the scheduler's update is the only writer of request progress.
import { KvPool } from '../cache/kv-pool.js';
import { StatePool } from '../cache/state-pool.js';
import { createKernels } from '../kernels/index.js';
import type { KernelLimits, Tensor } from '../kernels/types.js';
import { type AnyModel, loadModel } from '../model/model.js';
import { withLoadQuantizer } from '../checkpoint/quantize-load.js';
import { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { Runner, type StepResult } from './runner.js';
import { Scheduler } from './scheduler.js';
import { type Admission, estimateStart, type NewRequest } from './admission.js';
import type { GenerateEvent, RequestView } from './request.js';
import { buildRequest, type GenerateRequest } from './request-builder.js';
import { type EngineInfo, engineInfo } from './info.js';
import { BatchSampler } from './sample-batch.js';
import { stepOutcome } from './step-sampling.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import type { FinishReason } from './output.js';
import type { Batch } from './batch.js';
import { isGreedy } from './sampler.js';
import { candidateDrawOf } from './sampled-candidates.js';
import type { StepCommit, StepOutcome } from './step-output.js';
import { Speculator } from './speculative/speculator.js';
import { RadixCache } from '../cache/radix-cache.js';
import { modelIdentity, PrefixPersistence } from './prefix-persist.js';
import { type PrefixContext, queueGenerationSnapshot, rowMaySnapshot } from './prefix.js';
import { chainable, chainedPickStands, type ChainFacts } from './overlap.js';
import { maskRunOf } from './logits-adjust.js';
import type { MaskRun } from '../constrain/constraint.js';
import { resolveModel } from '../hub/resolve.js';
import { BUILTIN_MODEL } from '../hub/builtin.js';
import type { VisionModel } from '../vision/load.js';
import { chosenMmproj, loadEngineVision } from './vision-load.js';
import { towerMemory } from '../vision/memory.js';
import { DEFAULT_MAX_DECODE_PIXELS } from '../vision/decode.js';
import { VisionEngine } from './vision.js';
import type { EngineTestHooks } from './test-hooks.js';
import { availableMemory, type MemoryPlan } from './memory-plan.js';
import { draftVocabFor, type EngineOptions, kernelArgmax, maxPrefillTokensOf, overlapsSteps, planEngineMemory, specSamplingOf, specTokensFor } from './engine-options.js';
import { draftPassesOnKernels, draftPassMemory } from './draft-memory.js';
import { MAX_DRAW_CANDIDATES } from '../kernels/candidate-draws.js';

export type { EngineOptions } from './engine-options.js';

export class Engine {
  private readonly scheduler: Scheduler;
  private readonly runner: Runner;
  private readonly speculative: Speculator;
  private readonly prefix: PrefixContext | null;
  private readonly persist: PrefixPersistence | null = null;
  private readonly metrics: EngineMetrics;
  private nextId = 1;
  private wake: (() => void) | null = null;
  private closed = false;
  private loopDone: Promise<void>;
  /** The last step started: steps run one at a time (close() queues one behind the loop's). */
  private lastStep: Promise<void> = Promise.resolve();
  /** Requests whose candidates were refused past a chained step (overlap.ts): their sampled
   * rows chain no more. */
  private readonly recomputed = new WeakSet<RequestView>();
  /** Overlapped decode (overlap.ts) is on: a GPU backend, and not turned off. */
  private readonly overlap: boolean;
  /** The step recorded ahead (overlap.ts), taken by the next step() instead of scheduling. */
  private chained: RunningStep | null = null;
  /** When the last step's update ended (an overlapped step's time starts there at the earliest). */
  private lastStepEnd = 0;
  readonly maxContext: number;
  /** MTP draft tokens per verify round at most (0 = speculation off). */
  get specTokens(): number {
    return this.speculative.kMax;
  }
  /** Sampled logits rows (decode, MTP verify positions and drafts) drawn from their top
   * candidates since load, and those read whole after all (a refused certificate, or a
   * refused position of the same verify row): engine/candidate-step.ts. */
  get sampledCandidates(): { readonly rows: number; readonly fallbacks: number } {
    return this.runner.candidateCounts;
  }
  /** Sampled MTP chains drawn on the kernels since load (speculative/draft-device.ts): rounds,
   * passes, disagreements, rows refused by the certificate and their read-backs. */
  get sampledDrafts(): Speculator['sampledDrafts'] {
    return this.speculative.sampledDrafts;
  }

  /** Chains of deferred rounds verified by rejection sampling since load, by how their drafts
   * resolved (speculative/deferred-rejection.ts): whole, cut at a refused row, ended by a redraw. */
  get deferredRejection(): Readonly<Speculator['deferredRejection']> {
    return { ...this.speculative.deferredRejection };
  }

  /** Chains of deferred MTP rounds cut after a draft that ended their constraint's mask run
   * since load (a drafted `</think>` in an open reasoning block: speculative/pending-drafts.ts). */
  get maskRunCuts(): number {
    return this.speculative.runCuts;
  }

  /** MTP rounds of penalised or constrained greedy chains (no sampled chain among them) drafted
   * on the kernels since load, their passes (one read-back each; a pass past the first is a
   * redraft) and the chains whose exact replay disagreed with the kernels' pick: an f32 near
   * tie, or an unmasked pick the constraint refuses (speculative/draft-device.ts). */
  get penaltyDrafts(): Speculator['penaltyDrafts'] {
    return this.speculative.penaltyDrafts;
  }
  /** Model facts, limits and the prompt frontend: what the server and the CLI read. */
  readonly info: EngineInfo;
  /** The vision tower (null: a text-only model). */
  readonly vision: VisionEngine | null;
  /** Pool sizes chosen at load (print with formatPlan). */
  memoryPlan: MemoryPlan | null = null;
  /** Ids the sampler may produce (padded vocabulary rows excluded). */
  readonly sampleVocab: number;
  /** Every sampled / logprob / verify row of a step in one kernel call. */
  private readonly sampler: BatchSampler;

  private constructor(
    readonly model: AnyModel,
    readonly tokenizer: TextTokenizer,
    readonly kv: KvPool<Tensor>,
    readonly state: StatePool<Tensor>,
    private readonly opts: EngineOptions,
    private readonly hooks: EngineTestHooks,
    visionModel: VisionModel | null = null,
  ) {
    this.vision = visionModel ? new VisionEngine(visionModel, model.kernels, model.config.rotaryDim / 2, opts.maxImagePixels) : null;
    this.metrics = new EngineMetrics(hooks.clock);
    // a CPU backend computes while it records: there is nothing to overlap
    this.overlap = overlapsSteps(opts, model.kernels);
    const cfg = model.config;
    this.maxContext = Math.min(opts.maxContext ?? cfg.maxPositionEmbeddings, cfg.maxPositionEmbeddings, kv.usablePages * kv.pageSize);
    this.sampleVocab = Math.min(cfg.vocabSize, tokenizer.size);
    // greedy picks on the kernels (SIMD over the vocabulary, logits read in place)
    const argmax = kernelArgmax(model.kernels);
    this.sampler = new BatchSampler(model.kernels, argmax);
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
      maxPrefillTokens: maxPrefillTokensOf(opts),
      chunk,
      trackInterval: interval,
      prefix: this.prefix,
    }, kv, state, { finished: (req, reason) => this.finished(req, reason), specRound: (d, a) => this.metrics.specRound(d, a) });
    const prefix = this.prefix;
    this.runner = new Runner(model, kv, state, this.sampleVocab, this.vision, (row) => prefix !== null && rowMaySnapshot(prefix, row),
      hooks.sampledCandidates ?? 'auto', hooks.refuseCandidate ?? null);
    // MTP drafts stay on the kernels until their verify where steps overlap (pending-drafts.ts)
    const deferredDrafts = hooks.deferredDrafts ?? this.overlap;
    this.speculative = new Speculator(model, kv, this.runner.ws, {
      k, adaptive: opts.specAdaptive ?? true, sampling: specSamplingOf(opts), draftVocab: draftVocabFor(opts), sampleVocab: this.sampleVocab, argmax,
      takeFreePages: (req, n) => this.scheduler.takeFreePages(req, n), draftOverride: hooks.draftOverride, hostDrafts: hooks.hostDrafts,
      candidates: this.runner.candidateStep,
      penaltyChain: hooks.penaltyChain ?? 'auto',
      sampledChain: hooks.sampledChain ?? 'auto',
      redrafts: opts.specRedrafts ?? 0,
      deferDrafts: deferredDrafts,
      deferRejection: hooks.deferredRejection ?? true,
      deferSeededRejection: hooks.deferSeededRejection ?? false,
      refuseCandidate: hooks.refuseCandidate,
      chooseK: hooks.specK,
      draftUniforms: hooks.draftUniforms,
    });
    // the model's scratch arena at its bound, once (the plan counted it: model/arena.ts)
    this.runner.ws.reserve({ maxRunning: opts.maxRunning ?? 16, specTokens: k, maxPrefillTokens: maxPrefillTokensOf(opts), prefixCache: this.prefix !== null,
      draftVocab: Math.min(draftVocabFor(opts), this.sampleVocab), deferredDrafts });
    // the draft passes' buffers at their bound, once (the plan reserved them: draft-memory.ts)
    if (k > 0 && draftPassesOnKernels(model.kernels, hooks)) {
      draftPassMemory(model.kernels, Math.min(draftVocabFor(opts), this.sampleVocab)).reserve({
        batch: opts.maxRunning ?? 16, k, vocab: Math.min(draftVocabFor(opts), this.sampleVocab), hidden: cfg.hiddenSize, candidates: MAX_DRAW_CANDIDATES,
        context: this.maxContext,
      });
    }
    this.info = engineInfo(model, tokenizer, { maxContext: this.maxContext, sampleVocab: this.sampleVocab }, () => this.specTokens,
      visionModel ? { cfg: visionModel.cfg, pre: visionModel.pre, tokens: visionModel.tokens } : null);
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
    const { path: dir, mmproj: hubMmproj } = await resolveModel(opts.model ?? BUILTIN_MODEL);
    const mmproj = chosenMmproj(opts.mmproj, hubMmproj);
    const kernels = await createKernels(opts.kernels ?? 'cpu', opts.threads);
    try {
      const model = await withLoadQuantizer(opts.quantize, kernels, (quantizer) =>
        loadModel(dir, kernels, { ...(opts.quantize ? { quantize: opts.quantize } : {}), ...(quantizer ? { quantizer } : {}), available: availableMemory() }));
      const tokenizer = TextTokenizer.load(dir);
      const pageSize = opts.pageSize ?? 16;
      if (!Number.isInteger(pageSize) || pageSize < 1) throw new DeltaserveError('bad_config', `--page-size must be a positive integer (got ${pageSize})`);
      const k = specTokensFor(opts, model.config.mtpLayers);
      // the tower — --mmproj (or the hub reference's projector), else a release checkpoint's
      // own — before the plan: its weights are resident when the plan measures memory, and the
      // plan keeps room for its packed weights and the encode of the largest image the limits allow
      const visionModel = loadEngineVision(dir, mmproj, opts.mmproj === false, model, tokenizer);
      const tower = visionModel ? towerMemory(visionModel.cfg, visionModel.pre, visionModel.weights, opts.maxImagePixels ?? DEFAULT_MAX_DECODE_PIXELS) : undefined;
      const plan = planEngineMemory(opts, model, k, pageSize, tower, k > 0 && draftPassesOnKernels(kernels, hooks), tokenizer.size);
      // pools are chunked (one allocation per KV layer, per chunk of state slots or scratch rows),
      // so they may span several WebAssembly memories; their memory is the kernels' (on a
      // GPU backend device buffers: copies and snapshots run there, cache/pool-storage.ts)
      const kv = new KvPool({
        numPages: plan.kvPages, pageSize, kvDim: model.layout.kvDim,
        numLayers: model.layout.fullLayers.length, numMtpLayers: model.layout.mtpLayers, storage: kernels,
      });
      const state = new StatePool({
        slots: plan.maxRunning + plan.cacheSlots, numLinear: model.layout.linearLayers.length, convSize: model.layout.convSize,
        ssmSize: model.layout.ssmSize, batchCapacity: plan.scratchRows, maxSteps: k > 0 ? k + 1 : 0,
        storage: kernels, ...stateChunkLimit(kernels.limits),
      });
      // model: the resolved path (a hub name's snapshot), which the prefix cache's identity hashes
      const engine = new Engine(model, tokenizer, kv, state,
        { ...opts, model: dir, ...(mmproj !== null ? { mmproj } : {}), maxRunning: plan.maxRunning, maxContext: plan.maxContext, cacheStateSlots: plan.cacheSlots }, hooks, visionModel);
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
    this.scheduler.add(r);
    if (req.signal?.aborted) this.scheduler.abort(r);
    else req.signal?.addEventListener('abort', onAbort, { once: true });
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

  private abort(r: RequestView): void {
    if (r.status === 'finished') return;
    this.scheduler.abort(r);
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
    for (const r of [...this.scheduler.running, ...this.scheduler.waiting]) this.scheduler.abort(r);
    while (this.chained) await this.runStep(); // a step recorded ahead (aborted rows chain no further)
    await this.runStep(); // reaps the aborted requests
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
      if (!this.scheduler.hasWork() && !this.chained) {
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
      await this.runStep();
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Queue a step behind the one in progress (steps never overlap). */
  private runStep(): Promise<void> {
    const run = this.lastStep.then(() => this.step());
    this.lastStep = run.catch(() => undefined);
    return run;
  }

  /** One step: schedule → execute → sample → update → draft. A failure of the forward or
   * the sampler fails this batch's requests only; one of the MTP head, the drafting ones.
   * Overlapped decode (overlap.ts): the step after this one may be recorded and submitted
   * before this one's read-back; the next call then takes it instead of scheduling. */
  private async step(): Promise<void> {
    let running = this.chained;
    this.chained = null;
    if (!running) {
      this.testPreempt();
      const batch = this.scheduler.schedule(); // reaps aborts, admits, preempts
      if (!batch) return;
      this.testPoison(batch);
      const t0 = performance.now();
      // recorded and submitted; a round drafted on the kernels comes back with it (pending-drafts.ts)
      running = { batch, result: this.runner.run(batch, false, this.speculative.pending), t0, chained: false };
    }
    const { batch, t0 } = running;
    if (chainable(batch, this.chainFacts())) this.chainAfter(batch);
    const k = this.speculative.verifiedK;
    let result: StepResult;
    let sampled: StepOutcome;
    try {
      result = await running.result; // execute: the step's one await of a read-back
      if (result.chainedInputs) this.dropMispredicted(batch, result.chainedInputs);
      if (running.runs) this.dropMaskedOut(batch, result, running.runs);
      for (const i of result.lost) this.recompute(batch.rows[i]!.req!, true);
      if (result.draftRead) { // the drafts it verified
        this.scheduler.update(this.speculative.resolve(result.draftRead));
        this.metrics.draftsReadWithVerify();
      }
      sampled = stepOutcome(batch, result, this.sampler, this.speculative, this.model.config.hiddenSize, this.sampleVocab); // sample
    } catch (e) {
      this.scheduler.update({ kind: 'failed', reqs: batch.rows.slice(0, batch.nReal).map((r) => r.req!), error: e });
      return;
    }
    const commit = this.scheduler.update(sampled); // update: the only writer of request progress
    await this.draft(commit, result); // draft: the next round's drafts, recorded by the update
    // an overlapped step's time runs from its recording or the step before it ended, the later
    const end = performance.now();
    const ms = end - Math.max(t0, this.lastStepEnd);
    this.lastStepEnd = end;
    this.speculative.observe(batch, k, commit.generated, ms);
    this.metrics.stepDone(batch, commit.generated, ms, running.chained);
  }

  /** What decides whether the step after a batch may be recorded before its read-back. */
  private chainFacts(): ChainFacts {
    const prefix = this.prefix;
    const fixedK = (batch: Batch): boolean => batch.rows.slice(0, batch.nReal).some((r) => this.speculative.fixedK(r.req!));
    return {
      enabled: this.overlap && !this.closed && this.hooks.preemptIf === undefined && !this.hooks.poisonPadding,
      // a request at a fixed k drafts every round; the others draft iff the round's k is not 0
      draftsAfter: (batch) => this.speculative.kMax > 0 && (fixedK(batch) || this.speculative.chooseNextK(batch.nReal) > 0),
      admitting: this.scheduler.admits,
      maySnapshot: (row) => prefix !== null && rowMaySnapshot(prefix, row),
      sampleVocab: this.sampleVocab,
      candidates: this.runner.candidateStep !== null,
      recomputed: (req) => this.recomputed.has(req),
    };
  }

  /** Record and submit the step after `batch` now (overlap.ts): its sampled rows' tokens drawn
   * on the device with the uniforms their requests' exact draws will use. Nothing is chained
   * when that cannot be recorded (the batch's own step failed before its candidates). */
  private chainAfter(batch: Batch): void {
    const next = this.scheduler.chain(batch);
    if (!next) return;
    const recorded = performance.now();
    try {
      this.runner.drawChained(batch, batch.rows.slice(0, batch.nReal).map((r) => {
        const req = r.req!;
        if (isGreedy(req.sampling)) return null;
        const u = req.rng.fork().next(); // the uniform the exact draw of this token will take
        return candidateDrawOf(req.sampling, this.hooks.chainDrawU?.(u) ?? u, this.sampleVocab);
      }));
    } catch {
      return; // the next schedule() builds the step (the pages chain() took stay with their requests)
    }
    // each row's mask run as its pick is recorded under it (N's update may end it)
    const runs = batch.rows.slice(0, batch.nReal).map((r) => maskRunOf(r.req!));
    this.chained = { batch: next, result: this.runner.run(next, true), t0: recorded, chained: true, runs };
    this.chained.result.catch(() => undefined); // its failure is reported when its step is taken
  }

  /** A chained step's greedy rows whose pick was made under a mask run that the step before
   * ended (a `</think>`) and that the mask after it does not confirm (overlap.ts
   * chainedPickStands): their requests recompute, as for a mispredicted input. */
  private dropMaskedOut(batch: Batch, result: StepResult, runs: readonly (MaskRun | undefined)[]): void {
    batch.rows.slice(0, batch.nReal).forEach((row, i) => {
      const req = row.req!;
      const pick = result.ids[i]?.[0];
      if (req.status !== 'running' || row.start !== req.computed || pick === undefined) return;
      if (!chainedPickStands(req, runs[i], req.tokens[row.start]!, pick)) this.recompute(req, false);
    });
  }

  /** A chained step's rows whose input token (the device's proposal) is not the token the step
   * before committed: computed for nothing, and their state written with it. Their requests
   * recompute (preempted: every later row of theirs commits nothing, and they sample nothing
   * more until they run again). */
  private dropMispredicted(batch: Batch, inputs: Int32Array): void {
    batch.rows.slice(0, batch.nReal).forEach((row, i) => {
      const req = row.req!;
      if (req.status !== 'running' || row.start !== req.computed || req.tokens[row.start] === inputs[i]) return;
      this.recompute(req, false);
    });
  }

  /** A request whose step (a chained row, or a row whose logits a chained step overwrote) was
   * computed for nothing: it recomputes, sampling nothing now (overlap.ts). `chainsNoMore`: a
   * refused row (ties at its candidates' edge may recur every step); an overruled draw is a
   * rare accident of f32 rounding, and the request keeps chaining. */
  private recompute(req: RequestView, chainsNoMore: boolean): void {
    if (req.status !== 'running') return;
    if (chainsNoMore) this.recomputed.add(req);
    this.scheduler.preempt(req);
    this.metrics.chainMispredicted();
  }

  /** Draft the next round for what the step committed; update records the drafts. */
  private async draft(commit: StepCommit, result: StepResult): Promise<void> {
    try {
      const drafts = await this.speculative.draft(commit.rows, result.hidden, result.offsets);
      if (drafts) this.scheduler.update(drafts);
    } catch (e) {
      this.scheduler.update({ kind: 'failed', reqs: this.speculative.extending(commit.rows), error: e });
    }
  }

  /** Test hook preemptIf: preempt the running requests it picks. */
  private testPreempt(): void {
    const pick = this.hooks.preemptIf;
    if (!pick) return;
    for (const r of [...this.scheduler.running]) if (!r.prefilling && pick(r)) this.scheduler.preempt(r);
  }

  /** Test hook poisonPadding: NaN into every state region the batch must not read. */
  private testPoison(batch: Batch): void {
    if (this.hooks.poisonPadding) this.state.poison(batch.nReal, batch.rows.slice(0, batch.nReal).map((r) => (r.verify ? r.n : 0)));
  }

  /** A request finished (its done event is out): metrics, and at the end of a generation a
   * snapshot of the conversation for its next turn (prefix.ts). */
  private finished(req: RequestView, reason: FinishReason): void {
    this.metrics.requestFinished(req);
    if (!this.prefix || this.opts.prefixCacheGenerationSnapshots === false || this.closed) return;
    if (reason === 'stop' || reason === 'length') {
      queueGenerationSnapshot(this.prefix, req, this.tokenizer, this.nextId++, this.maxContext, (r) => this.scheduler.add(r));
    }
  }
}

/** A step whose forward is recorded and submitted, its read-back pending. */
interface RunningStep {
  readonly batch: Batch;
  readonly result: Promise<StepResult>;
  /** When its recording began (host clock, ms). */
  readonly t0: number;
  /** Recorded before the step before it was read back (overlap.ts). */
  readonly chained: boolean;
  /** A chained step's rows' mask runs when it was recorded (chainedPickStands). */
  readonly runs?: readonly (MaskRun | undefined)[];
}

/** State-pool chunks within the backend's binding limit (GPU: a batch's slots in one
 * chunk run their conv and recurrence in one dispatch). */
function stateChunkLimit(limits: KernelLimits): { maxChunkFloats?: number } {
  return limits.maxBindingBytes === null ? {} : { maxChunkFloats: Math.floor(limits.maxBindingBytes / 4) };
}
