// Continuous batching: every step, all running requests advance (decode rows, and
// prefill chunks under a token budget), new requests are admitted FCFS when a state slot
// and KV pages are free, and the newest request is preempted (freed, requeued for
// recompute) when pages run out.
// A prefill step ends on one of the request's split points (multiples of the Gated DeltaNet
// chunk in absolute position, its message ends, the prompt's end; prefix.ts), so a prompt's
// numerics never depend on the budget, on other rows, or on where the prefix cache
// snapshots (snapshot points are split points too).
// Prompt tokens always take the chunked Gated DeltaNet form and generated tokens the
// recurrence, also when recomputed after preemption: recompute is bit-exact.
// The scheduler is the only writer of request progress (request.ts): schedule() admits,
// preempts and reaps aborted requests (pages, slot, status), update() commits what a step
// computed (update.ts: tokens, output, stop decisions, drafts, computed, hit state).
import type { Tensor } from '../kernels/types.js';
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import { type Batch, BatchSlots, type DecodeBatch } from './batch.js';
import type { MutableRequest, Request, RequestView } from './request.js';
import { DeltaserveError } from '../util/errors.js';
import { findPrefixHit, lastSplitBy, nextSnapshotPoint, type PrefixContext, type PrefixHit } from './prefix.js';
import type { DraftOutcome, FailedOutcome, StepCommit, StepOutcome, StepOutput } from './step-output.js';
import { applyDrafts, applyStep, emitDone, failRequests, own, type ProgressListener, type UpdateContext } from './update.js';

export interface SchedulerOptions {
  readonly maxRunning: number;
  readonly maxPrefillTokens: number;
  /** The Gated DeltaNet chunk (the model's layout.chunk): its multiples split every prefill. */
  readonly chunk: number;
  /** Snapshot interval of the prefix cache (a multiple of the chunk). */
  readonly trackInterval: number;
  /** Prefix cache (null = off). */
  readonly prefix: PrefixContext | null;
}

interface Planned {
  readonly req: MutableRequest;
  readonly n: number;
  readonly chunked: boolean;
  readonly verify: boolean;
  readonly prefilling: boolean;
}

export class Scheduler {
  private readonly queued: MutableRequest[] = [];
  private readonly active: MutableRequest[] = [];
  private readonly slots: BatchSlots;
  /** Batches of overlapped steps (chain): two, alternating. */
  private readonly chainSlots: readonly BatchSlots[];
  private chainFlip = 0;
  private readonly ctx: UpdateContext;
  /** Requests preempted so far (for stats/tests). */
  preemptions = 0;

  constructor(
    readonly opts: SchedulerOptions,
    private readonly kv: KvPool<Tensor>,
    private readonly state: StatePool<Tensor>,
    listener: ProgressListener = {},
  ) {
    if (opts.maxRunning < 1) throw new DeltaserveError('bad_config', `--max-running must be ≥ 1 (got ${opts.maxRunning})`);
    const chunk = opts.chunk;
    if (opts.maxPrefillTokens < chunk) {
      throw new DeltaserveError('bad_config', `--max-prefill-tokens must be ≥ ${chunk} (got ${opts.maxPrefillTokens})`);
    }
    if (opts.trackInterval % chunk !== 0 || opts.trackInterval < chunk) {
      throw new DeltaserveError('bad_config', `--state-track-interval must be a positive multiple of ${chunk} (got ${opts.trackInterval})`);
    }
    if (state.slots < opts.maxRunning) {
      throw new DeltaserveError('bad_config', `state pool has ${state.slots} slots, fewer than --max-running ${opts.maxRunning}`);
    }
    this.slots = new BatchSlots(opts.maxRunning);
    this.chainSlots = [new BatchSlots(opts.maxRunning), new BatchSlots(opts.maxRunning)];
    this.ctx = { state, prefix: opts.prefix, finish: (req) => this.finish(req), listener };
  }

  /** Requests waiting for admission, in arrival order. */
  get waiting(): readonly RequestView[] {
    return this.queued;
  }

  /** Requests admitted (holding a state slot and pages), oldest first. */
  get running(): readonly RequestView[] {
    return this.active;
  }

  /** Queue a request; from here on the scheduler alone writes its progress. */
  add(req: Request): void {
    insertByArrival(this.queued, own(req));
  }

  /** Would schedule() admit a waiting request now (one waits and the batch has room)? */
  get admits(): boolean {
    return this.queued.length > 0 && this.active.length < this.opts.maxRunning;
  }

  hasWork(): boolean {
    return this.queued.length > 0 || this.active.length > 0;
  }

  /** The client went away: `req` finishes with reason 'abort' at the next schedule(). */
  abort(req: RequestView): void {
    if (req.status !== 'finished') own(req).aborted = true;
  }

  /** Commit what a step computed (update.ts): the one writer of request progress. */
  update(out: StepOutcome): StepCommit;
  update(out: DraftOutcome | FailedOutcome): void;
  update(out: StepOutput): StepCommit | void {
    if (out.kind === 'step') return applyStep(this.ctx, out);
    if (out.kind === 'drafts') applyDrafts(out);
    else failRequests(this.ctx, out.reqs, out.error);
  }

  /** Finish aborted requests (waiting or running): free their memory, end their streams. */
  private reapAborted(): void {
    for (const r of [...this.queued, ...this.active]) {
      if (!r.aborted) continue;
      this.finish(r);
      emitDone(this.ctx, r, 'abort');
    }
  }

  /** Release a request's memory and drop it from the queues. */
  private finish(req: MutableRequest): void {
    this.release(req);
    remove(this.active, req);
    remove(this.queued, req);
    req.status = 'finished';
  }

  /** Reap aborted requests, then build the next batch, or null when there is nothing to run. */
  schedule(): Batch | null {
    this.reapAborted();
    let budget = this.opts.maxPrefillTokens;
    const plan: Planned[] = [];
    for (let i = 0; i < this.active.length; i++) {
      const req = this.active[i]!;
      const n = req.prefilling ? this.prefillThatFits(req, this.prefillChunk(req, budget)) : 1 + req.drafts.length;
      if (n === 0) continue; // a prefill with no budget or no pages waits, holding what it has
      if (!this.ensurePages(req, req.computed + n)) {
        // preempted itself (it was the newest); the loop index now points past it
        i--;
        continue;
      }
      const prefilling = req.prefilling;
      if (prefilling) budget -= n;
      plan.push({ req, n, chunked: req.computed < req.promptIds.length, verify: !prefilling && req.drafts.length > 0, prefilling });
    }
    this.admit(plan, budget);
    if (plan.length === 0) return null;
    const kind = plan.some((p) => p.verify) ? 'verify' : plan.some((p) => p.prefilling) ? 'prefill' : 'decode';
    const batch = this.slots.begin(kind);
    // a preempted request may have been planned before it was chosen as a victim
    for (const p of plan) if (p.req.status === 'running') this.slots.push(batch, p.req, p.n, p.chunked, p.verify);
    return batch.nReal > 0 ? batch : null;
  }

  /** The decode step after `prev` for an overlapped step (overlap.ts), built before prev's
   * update: prev's rows in the same order, each one position on. Null when a row's next
   * position needs a page that is not free (nor evictable from the cache): schedule() then
   * decides, preempting if it must. Pages taken stay with their requests (the next step
   * needs them either way). Successive chained batches alternate between two batch slots, as
   * one is built while the other's step runs. */
  chain(prev: Batch): DecodeBatch | null {
    const rows = prev.rows.slice(0, prev.nReal);
    for (const r of rows) {
      const req = own(r.req!);
      const need = this.kv.pagesFor(r.start + 2) - req.pages.length;
      if (need <= 0) continue;
      if (!this.reservePages(need)) return null;
      req.pages.push(...this.kv.alloc(need)!);
    }
    this.chainFlip = 1 - this.chainFlip;
    const slots = this.chainSlots[this.chainFlip]!;
    const batch = slots.begin('decode');
    for (const r of rows) slots.pushChained(batch, r.req!, r.start + 1);
    return batch;
  }

  /** Tokens of `req`'s prefill to process within `budget`, ending on one of its split
   * points unless it reaches the end of the known tokens. */
  private prefillChunk(req: MutableRequest, budget: number): number {
    const c = req.computed;
    // A recompute after preemption replays generated tokens with the recurrence, as
    // they were first computed: the prompt part and the generated part never share a row.
    let limit = c < req.promptIds.length ? req.promptIds.length : req.tokens.length;
    // a chunk ends where a snapshot is due (aligned: the numerics do not change)
    if (this.opts.prefix) limit = Math.min(limit, nextSnapshotPoint(this.opts.prefix, req, c));
    let end = c + Math.min(limit - c, budget);
    if (end < limit) end = c < req.promptIds.length ? lastSplitBy(req, c, end, this.opts.chunk) : Math.floor(end / this.opts.chunk) * this.opts.chunk;
    return Math.max(0, end - c);
  }

  /** Running `req`'s prefill chunk of `n` tokens, or less. The newest request, while an older
   * one runs, gets only the tokens its pages (held, free or evictable) cover: preempting
   * itself would free its pages only to be readmitted at once and recompute them, step after
   * step. It waits instead; the older requests progress and finish, or preempt it when they
   * need pages. The shorter chunk still ends on a split point (prefillChunk). */
  private prefillThatFits(req: MutableRequest, n: number): number {
    const newest = this.active.length > 1 && this.active[this.active.length - 1] === req;
    const need = this.kv.pagesFor(req.computed + n) - req.pages.length;
    if (!newest || need <= 0 || this.reservePages(need)) return n;
    const coverable = (req.pages.length + this.kv.freePages) * this.kv.pageSize - req.computed;
    return coverable > 0 ? this.prefillChunk(req, Math.min(n, coverable)) : 0;
  }

  private admit(plan: Planned[], budget: number): void {
    const prefix = this.opts.prefix;
    while (this.queued.length > 0 && this.active.length < this.opts.maxRunning) {
      const req = this.queued[0]!;
      if (!this.reserveSlot()) return; // FCFS: no overtaking
      const slot = this.state.alloc()!;
      req.slot = slot;
      if (prefix && req.computed === 0) {
        const hit = findPrefixHit(prefix, req);
        if (hit) this.applyHit(req, hit);
      }
      // a hit covering the whole prompt runs a row of n = 0 that only samples (runner.ts)
      const whole = req.computed > 0 && req.computed === req.tokens.length;
      const n = whole ? 0 : this.prefillChunk(req, budget);
      const pagesNeeded = this.kv.pagesFor(req.computed + n) - req.pages.length;
      if ((n === 0 && !whole) || !this.reservePages(pagesNeeded)) {
        this.release(req); // undo: the request waits at the head of the queue
        req.computed = 0;
        req.hitHidden = null;
        return;
      }
      req.pages.push(...this.kv.alloc(pagesNeeded)!);
      req.status = 'running';
      this.queued.shift();
      this.active.push(req);
      budget -= n;
      plan.push({ req, n, chunked: req.computed < req.promptIds.length, verify: false, prefilling: true });
    }
  }

  /** Start `req` (nothing computed yet) from a cached prefix. */
  private applyHit(req: MutableRequest, hit: PrefixHit): void {
    req.pages = hit.pages;
    req.computed = hit.length;
    // usage counts prompt tokens only (a recompute after preemption may hit generated ones)
    req.cachedTokens = Math.max(req.cachedTokens, Math.min(hit.length, req.promptIds.length));
    req.lockHandle = hit.handle;
    req.hitHidden = hit.hidden;
  }

  /** A free state slot, evicting cached snapshots if needed. */
  private reserveSlot(): boolean {
    if (this.state.freeSlots > 0) return true;
    return this.opts.prefix?.cache.evictSlots(1) ?? false;
  }

  /** Grow req's page list by up to `n` pages that are free right now (no eviction, no
   * preemption): room for MTP draft positions, which drafting never preempts for. */
  takeFreePages(req: RequestView, n: number): void {
    const got = n > 0 ? this.kv.alloc(Math.min(n, this.kv.freePages)) : null;
    if (got) own(req).pages.push(...got);
  }

  /** `n` free pages, evicting unused cache entries if needed. */
  private reservePages(n: number): boolean {
    if (this.kv.freePages >= n) return true;
    return this.opts.prefix?.cache.evictPages(n) ?? false;
  }

  /** Grow req's page list to cover `tokens` positions, preempting the newest running
   * requests while pages are short. False when `req` itself had to be preempted. */
  private ensurePages(req: MutableRequest, tokens: number): boolean {
    const need = this.kv.pagesFor(tokens) - req.pages.length;
    if (need <= 0) return true;
    this.reservePages(need);
    while (this.kv.freePages < need) {
      const victim = this.active[this.active.length - 1]!;
      this.preempt(victim);
      if (victim === req) return false;
    }
    req.pages.push(...this.kv.alloc(need)!);
    return true;
  }

  /** Free a running request's memory and requeue it to recompute everything it has. */
  preempt(view: RequestView): void {
    const req = own(view);
    this.release(req);
    remove(this.active, req);
    req.computed = 0;
    req.prefillEnd = req.tokens.length;
    req.drafts = [];
    req.draftProbs = null;
    req.pendingDrafts = null;
    req.lastDraftUnverified = false;
    req.status = 'waiting';
    req.preemptions++;
    this.preemptions++;
    insertByArrival(this.queued, req);
  }

  private release(req: MutableRequest): void {
    if (req.pages.length > 0) this.kv.release(req.pages);
    req.pages = [];
    if (req.slot > 0) this.state.free(req.slot);
    req.slot = 0;
    if (req.lockHandle) this.opts.prefix?.cache.unlock(req.lockHandle);
    req.lockHandle = null;
  }

  /** Every page / slot reference held by requests (for pool integrity checks). */
  owners(): { pages: number[]; slots: number[]; locks: object[] } {
    const all = [...this.active, ...this.queued];
    return {
      pages: all.flatMap((r) => r.pages),
      slots: all.filter((r) => r.slot > 0).map((r) => r.slot),
      locks: all.flatMap((r) => (r.lockHandle ? [r.lockHandle] : [])),
    };
  }
}

function remove(list: MutableRequest[], req: MutableRequest): void {
  const i = list.indexOf(req);
  if (i >= 0) list.splice(i, 1);
}

function insertByArrival(list: MutableRequest[], req: MutableRequest): void {
  let i = list.length;
  while (i > 0 && list[i - 1]!.arrival > req.arrival) i--;
  list.splice(i, 0, req);
}
