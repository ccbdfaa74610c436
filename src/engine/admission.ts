// When would a new request start? The server asks before queueing one (503 + Retry-After
// instead of an unbounded wait when the pools are momentarily full).
// The estimate replays the scheduler's FCFS admission against the running requests'
// finishing order: every step advances each running request by one token, a request
// that finishes frees its state slot and its KV pages, and each waiting request (then
// each new one) starts once a slot and the pages for its whole prompt are free. A request
// is taken to generate the typical output length of recently finished requests (what it
// has left of that, at least one token), never more than its max_tokens allows, and all
// of max_tokens before any request has finished. Pages a running request grows into
// before it finishes are ignored (they come back with it).
import type { Tensor } from '../kernels/types.js';
import type { KvPool } from '../cache/kv-pool.js';
import type { RequestView } from './request.js';

/** A request that holds memory now: steps until it finishes, pages it frees then. */
export interface Holder {
  readonly steps: number;
  readonly pages: number;
}

/** A request that needs memory to start: pages of its prompt, steps it then runs. */
export interface Demand {
  readonly pages: number;
  readonly steps: number;
}

export interface PoolLoad {
  readonly freeSlots: number;
  readonly freePages: number;
  readonly running: readonly Holder[];
  /** Already queued, in start order (they go first). */
  readonly waiting: readonly Demand[];
}

/** What first held back the first demand that cannot start at once. */
export type Blocker = 'slots' | 'kv' | null;

export interface StartEstimate {
  /** Steps from now until each demand starts: the waiting ones, then the new ones
   * (Infinity: never, it needs more pages than the pool frees). */
  readonly steps: readonly number[];
  readonly blockedBy: Blocker;
}

/** Replay admission: at which step each queued demand, then each of `demands`, starts. */
export function startSteps(load: PoolLoad, demands: readonly Demand[]): StartEstimate {
  // finishing events, kept sorted by step (latest first, so the next one pops off the end)
  const events = load.running.map((h) => ({ at: h.steps, pages: h.pages })).sort((a, b) => b.at - a.at);
  let slots = load.freeSlots;
  let pages = load.freePages;
  let now = 0;
  let blockedBy: Blocker = null;
  const steps: number[] = [];
  for (const d of [...load.waiting, ...demands]) {
    while (slots < 1 || pages < d.pages) {
      blockedBy ??= slots < 1 ? 'slots' : 'kv';
      const ev = events.pop();
      if (!ev) return { steps: [...steps, ...Array<number>(load.waiting.length + demands.length - steps.length).fill(Infinity)], blockedBy };
      now = Math.max(now, ev.at);
      slots++;
      pages += ev.pages;
    }
    slots--;
    pages -= d.pages;
    steps.push(now);
    const done = { at: now + d.steps, pages: d.pages };
    let i = events.length;
    while (i > 0 && events[i - 1]!.at < done.at) i--;
    events.splice(i, 0, done);
  }
  return { steps, blockedBy };
}

/** Tokens a request is expected to generate after `generated`, of at most `bound` more. */
export function expectedLeft(bound: number, generated: number, typical: number | null): number {
  const left = typical === null ? bound : Math.min(bound, typical - generated);
  return Math.max(1, left);
}

/** Steps a request still needs: its prefill chunks, then one per token left to generate. */
function stepsLeft(r: RequestView, maxPrefillTokens: number, typical: number | null): number {
  const prefill = Math.ceil(Math.max(0, r.prefillEnd - r.computed) / maxPrefillTokens);
  if (r.snapshotOnly) return Math.max(1, prefill);
  return prefill + expectedLeft(Math.min(r.maxTokens - r.numGenerated, r.maxLength - r.tokens.length), r.numGenerated, typical);
}

/** The scheduler's queues as a PoolLoad. Pages held only by the prefix cache count as
 * free (the scheduler evicts them on demand); so do cache-held state slots. */
export function poolLoad(running: readonly RequestView[], waiting: readonly RequestView[], kv: KvPool<Tensor>, maxRunning: number,
  maxPrefillTokens: number, typical: number | null): PoolLoad {
  const held = new Set<number>();
  for (const r of running) for (const p of r.pages) held.add(p);
  return {
    freeSlots: Math.max(0, maxRunning - running.length),
    freePages: kv.usablePages - held.size,
    running: running.map((r) => ({ steps: stepsLeft(r, maxPrefillTokens, typical), pages: r.pages.length })),
    waiting: waiting.map((r) => ({ pages: kv.pagesFor(r.tokens.length), steps: stepsLeft(r, maxPrefillTokens, typical) })),
  };
}

/** A request the server is about to queue. */
export interface NewRequest {
  readonly promptTokens: number;
  readonly maxTokens: number;
}

export interface Admission extends StartEstimate {
  readonly waiting: number;
  readonly running: number;
  readonly maxRunning: number;
  /** KV pages free now (cache-only pages included) and pages in the pool. */
  readonly freePages: number;
  readonly totalPages: number;
  /** Pages the new requests' prompts need. */
  readonly pagesNeeded: number;
  /** Mean duration of the recent engine steps (null: no step in the last ~10 s). */
  readonly secondsPerStep: number | null;
}

/** The start estimate of `reqs` if they were queued behind the scheduler's queues now. */
export function estimateStart(sched: { readonly running: readonly RequestView[]; readonly waiting: readonly RequestView[];
  readonly opts: { readonly maxRunning: number; readonly maxPrefillTokens: number } }, kv: KvPool<Tensor>,
reqs: readonly NewRequest[], recent: { readonly secondsPerStep: number | null; readonly typicalOutput: number | null }): Admission {
  const { maxRunning, maxPrefillTokens } = sched.opts;
  const { secondsPerStep, typicalOutput } = recent;
  const load = poolLoad(sched.running, sched.waiting, kv, maxRunning, maxPrefillTokens, typicalOutput);
  const demands = reqs.map((r) => ({
    pages: kv.pagesFor(r.promptTokens),
    steps: Math.ceil(r.promptTokens / maxPrefillTokens) + expectedLeft(r.maxTokens, 0, typicalOutput),
  }));
  return {
    ...startSteps(load, demands), waiting: sched.waiting.length, running: sched.running.length, maxRunning,
    freePages: load.freePages, totalPages: kv.usablePages, pagesNeeded: demands.reduce((n, d) => n + d.pages, 0), secondsPerStep,
  };
}
