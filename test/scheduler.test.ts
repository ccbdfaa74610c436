// Scheduler, directly (docs/ARCHITECTURE.md "Scheduler and batches"): FCFS admission that
// needs a state slot and KV pages, preemption of the newest running request when pages run
// out (requeued to recompute everything it has), the chunked prefill token budget (chunks
// end at absolute multiples of the chunk or at the request's split points), verify rows and
// their commit, aborts freeing everything, and pool integrity while and after draining.
// Small pools and a simulated step loop stand in for the model: the scheduler never reads
// activations. The simulated loop mirrors Engine.step: every row's outcome (a sampled
// token, a verify row's accepted drafts and bonus) goes through the scheduler's update,
// which advances, commits and finishes at max_tokens; drafts go through it too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvPool } from '../src/cache/kv-pool.js';
import { StatePool } from '../src/cache/state-pool.js';
import { Scheduler, type SchedulerOptions } from '../src/engine/scheduler.js';
import type { Request, RequestView } from '../src/engine/request.js';
import type { RowOutcome } from '../src/engine/step-output.js';
import { Rng } from '../src/util/rng.js';
import { alloc, checkPools, request, type Setup, setup } from './scheduler-helpers.js';

/** What a batch row asked for, copied (rows are reused step after step). */
interface RowSeen {
  readonly req: RequestView;
  readonly start: number;
  readonly n: number;
  readonly chunked: boolean;
  readonly sample: boolean;
  readonly verify: boolean;
  /** The row was part of the request's (re)computed prefill. */
  readonly prefill: boolean;
  /** req.tokens.length when scheduled. */
  readonly known: number;
}

/** The token a request generates at position `pos`: a function of the request and the
 * position only, so a recompute after preemption sees the same tokens. */
const tokenAt = (req: RequestView, pos: number): number => (req.id * 7919 + pos * 31) % 5000;

/** The outcome of a row that emits `tokens` (a verify row: `accepted` of its `drafted`). */
const outcome = (tokens: number[], drafted = 0, accepted = 0): RowOutcome => ({ tokens, logprobs: [], logits: [], drafted, accepted });

/** One engine step: schedule, then update with every row's outcome, like Engine.step.
 * `accept` picks how many drafts a verify row accepts; `draft` how many drafts a running
 * decoding request proposes for the next step. */
function step(s: Setup, accept: (req: RequestView, k: number) => number = (_, k) => k,
  draft: (req: RequestView) => number = () => 0): RowSeen[] {
  const batch = s.sched.schedule();
  if (!batch) return [];
  const rows: RowSeen[] = batch.rows.slice(0, batch.nReal).map((r) => ({
    req: r.req!, start: r.start, n: r.n, chunked: r.chunked, sample: r.sample, verify: r.verify,
    prefill: r.start < r.req!.prefillEnd, known: r.req!.tokens.length,
  }));
  assert.ok(batch.rows.slice(batch.nReal).every((r) => r.req === null && r.n === 0), 'rows ≥ nReal are zero-length padding');
  s.sched.update({
    kind: 'step', batch,
    rows: rows.map((row) => {
      const req = row.req;
      if (!row.verify) return outcome(row.sample ? [tokenAt(req, row.known)] : []);
      const k = req.drafts.length;
      const j = accept(req, k);
      return outcome([...req.drafts.slice(0, j), tokenAt(req, row.start + j + 1)], k, j);
    }),
    // a snapshot's hidden row: the committed length it was taken at
    hiddenAt: (i, at) => new Float32Array([rows[i]!.start + at + 1]),
  });
  setDrafts(s, (req) => {
    const room = Math.min(draft(req), req.maxTokens - req.numGenerated - 1);
    return req.prefilling || room <= 0 ? [] : Array.from({ length: room }, (_, d) => tokenAt(req, req.tokens.length + d));
  });
  return rows;
}

/** Drafts for every running request, recorded through the scheduler's update. */
function setDrafts(s: Setup, drafts: (req: RequestView) => number[]): void {
  s.sched.update({ kind: 'drafts', proposals: s.sched.running.map((req) => ({ req, tokens: drafts(req), probs: null })) });
}

/** Run until nothing is left (bounded), checking the pools after every step; the rows of
 * every step. */
function drain(s: Setup, accept?: (req: RequestView, k: number) => number, draft?: (req: RequestView) => number): RowSeen[][] {
  const steps: RowSeen[][] = [];
  for (let i = 0; s.sched.hasWork(); i++) {
    assert.ok(i < 10_000, 'the workload drains');
    steps.push(step(s, accept, draft));
    checkPools(s);
  }
  return steps;
}

/** The rules every scheduled row keeps (see the file head). */
function checkRow(r: RowSeen, chunk: number, seed: number): void {
  const end = r.start + r.n;
  const p = r.req.promptIds.length;
  assert.ok(r.n > 0 || r.sample, 'a row of n = 0 is a whole-prompt hit that samples');
  if (r.verify) {
    assert.ok(!r.prefill && !r.chunked && r.sample && r.start === r.known - 1, 'a verify row starts at the bonus token');
    return;
  }
  assert.equal(r.sample, end === r.known, 'a row samples exactly when it reaches the known tokens');
  if (!r.prefill) {
    assert.deepEqual([r.n, r.chunked, r.start], [1, false, r.known - 1], 'a decode row is the last token, recurrent');
    return;
  }
  assert.equal(r.chunked, r.start < p, 'prompt tokens take the chunked form, generated ones the recurrence');
  assert.ok(r.start >= p || end <= p, 'the prompt and the generated part never share a row');
  assert.ok(end % chunk === 0 || r.req.splits.includes(end) || end === r.known,
    `seed ${seed}: request ${r.req.id} chunk [${r.start}, ${end}) ends at neither a multiple of ${chunk}, a split point nor the known end`);
}

const ids = (reqs: readonly Request[]): number[] => reqs.map((r) => r.id);

test('bad options are rejected with the flag at fault', () => {
  const kv = new KvPool({ numPages: 4, pageSize: 4, kvDim: 1, numLayers: 1, numMtpLayers: 0, alloc });
  const state = new StatePool({ slots: 2, numLinear: 1, convSize: 1, ssmSize: 1, batchCapacity: 0, maxSteps: 0, alloc });
  const base: SchedulerOptions = { maxRunning: 2, maxPrefillTokens: 16, chunk: 8, trackInterval: 8, prefix: null };
  assert.throws(() => new Scheduler({ ...base, maxRunning: 0 }, kv, state), /--max-running must be ≥ 1/);
  assert.throws(() => new Scheduler({ ...base, maxPrefillTokens: 7 }, kv, state), /--max-prefill-tokens must be ≥ 8 \(got 7\)/);
  assert.throws(() => new Scheduler({ ...base, trackInterval: 12 }, kv, state), /--state-track-interval must be a positive multiple of 8/);
  assert.throws(() => new Scheduler({ ...base, maxRunning: 3 }, kv, state), /2 slots, fewer than --max-running 3/);
});

test('admission is FCFS by arrival and needs a state slot', () => {
  const s = setup({ pages: 20, pageSize: 4, slots: 2, maxRunning: 2, budget: 64, chunk: 4 });
  const [a, b, c] = [request(1, 6, 3, 4), request(2, 6, 3, 4), request(3, 6, 3, 4)];
  s.sched.add(c);
  s.sched.add(a);
  s.sched.add(b);
  assert.deepEqual(ids(s.sched.waiting), [1, 2, 3], 'the queue is ordered by arrival, not by add()');
  // a slot held elsewhere (e.g. a snapshot being filled) leaves one free: only the head starts
  const held = s.state.alloc()!;
  const rows = step(s);
  assert.deepEqual(ids(rows.map((r) => r.req)), [1]);
  assert.deepEqual(ids(s.sched.running), [1]);
  assert.deepEqual(ids(s.sched.waiting), [2, 3]);
  assert.equal(b.slot, 0, 'a request that was not admitted holds no slot');
  assert.deepEqual(b.pages, []);
  checkPools(s, [], [held]);
  s.state.free(held);
  step(s);
  assert.deepEqual(ids(s.sched.running), [1, 2], 'the slot is back: the next in line starts');
  assert.equal(a.status, 'running');
  assert.ok(a.slot > 0 && b.slot > 0 && a.slot !== b.slot);
  drain(s);
  assert.deepEqual([a, b, c].map((r) => [r.status, r.numGenerated]), [['finished', 3], ['finished', 3], ['finished', 3]]);
  assert.equal(s.kv.freePages, 20);
  assert.equal(s.state.freeSlots, 2);
});

test('admission needs the KV pages of the first chunk; a later, smaller request does not overtake', () => {
  const s = setup({ pages: 6, pageSize: 4, slots: 3, maxRunning: 3, budget: 32, chunk: 4 });
  const [a, b, c] = [request(1, 20, 2, 4), request(2, 16, 1, 4), request(3, 4, 1, 4)];
  for (const r of [a, b, c]) s.sched.add(r);
  const rows = step(s);
  assert.deepEqual(rows.map((r) => [r.req.id, r.n]), [[1, 20]]);
  assert.equal(s.kv.freePages, 1, 'a holds 5 pages');
  assert.deepEqual(ids(s.sched.waiting), [2, 3], 'b (4 pages) waits at the head; c (1 page) waits behind it');
  assert.equal(b.slot, 0, 'the slot tried for b was given back');
  assert.equal(b.computed, 0);
  assert.equal(s.state.freeSlots, 2);
  checkPools(s);
  step(s); // a decodes its last token (its 6th page) and finishes: its pages are free
  assert.equal(a.status, 'finished');
  assert.equal(s.kv.freePages, 6);
  const next = step(s);
  assert.deepEqual(next.map((r) => [r.req.id, r.n]), [[2, 16], [3, 4]], 'b and c start, in order');
  drain(s);
  assert.equal(s.kv.freePages, 6);
});

test('prefill chunks end at multiples of the chunk or at the request\'s split points, within the budget', () => {
  const s = setup({ pages: 40, pageSize: 4, slots: 2, maxRunning: 2, budget: 20, chunk: 8 });
  // splits of `a`: a message end at 19 and the prompt end 50
  const a = request(1, 50, 2, 8, [19]);
  const b = request(2, 30, 2, 8);
  s.sched.add(a);
  s.sched.add(b);
  const seen: [number, number, number][] = [];
  for (let i = 0; i < 6; i++) for (const r of step(s)) seen.push([r.req.id, r.start, r.n]);
  assert.deepEqual(seen, [
    [1, 0, 19], // floor(20/8)·8 = 16, but the split at 19 is later and within the budget
    // b: 1 token of budget left, no split point in reach: not admitted (nothing to run)
    [1, 19, 13], // 19 + 20 = 39 → 32
    [1, 32, 18], // reaches the prompt's end (samples)
    [1, 50, 1], [2, 0, 16], // a decode row takes no budget: b starts (and a finishes)
    [2, 16, 14], // b reaches its prompt end at 30
    [2, 30, 1],
  ]);
  assert.equal(a.status, 'finished');
  drain(s);
});

test('random workloads: chunk ends, budget, rows and preemptions keep the rules; pools drain clean', () => {
  for (let seed = 1; seed <= 30; seed++) {
    const rng = new Rng(seed);
    const int = (lo: number, hi: number): number => lo + Math.floor(rng.next() * (hi - lo + 1));
    const chunk = [4, 8][int(0, 1)]!;
    const maxRunning = int(1, 4);
    const budget = chunk * int(1, 4) + int(0, chunk - 1);
    const kMax = int(0, 3);
    const s = setup({ pages: int(12, 30), pageSize: 4, slots: maxRunning + int(0, 2), maxRunning, budget, chunk, maxSteps: kMax + 1, prefix: seed % 3 === 0 });
    const reqs = Array.from({ length: int(3, 10) }, (_, i) => {
      const len = int(1, 30);
      const ends = Array.from({ length: int(0, 3) }, () => int(1, len));
      // some requests share a prompt prefix (prefix-cache hits when the cache is on)
      return request(i + 1, len, int(1, 12), chunk, ends, i % 2 === 0 ? 0 : (i + 1) * 1000);
    });
    for (const r of reqs) s.sched.add(r);
    const steps = drain(s, (_, k) => int(0, k), () => int(0, kMax));
    for (const rows of steps) {
      const prefillTokens = rows.filter((r) => r.prefill).reduce((n, r) => n + r.n, 0);
      assert.ok(prefillTokens <= budget, `seed ${seed}: ${prefillTokens} prefill tokens in one step, budget ${budget}`);
      assert.ok(rows.length <= maxRunning);
      assert.equal(new Set(rows.map((r) => r.req)).size, rows.length, 'a request has at most one row per step');
    }
    for (const r of steps.flat()) checkRow(r, chunk, seed);
    for (const r of reqs) {
      assert.equal(r.status, 'finished');
      assert.equal(r.numGenerated, r.maxTokens, `seed ${seed}: request ${r.id} generated all its tokens`);
      const p = r.promptIds.length;
      assert.ok(r.outputIds.every((t, i) => t === tokenAt(r, p + i)), `seed ${seed}: request ${r.id} output is what an undisturbed run gives`);
    }
    s.prefix?.cache.evictPages(s.kv.usablePages);
    s.prefix?.cache.evictSlots(s.state.slots);
    assert.equal(s.kv.freePages, s.kv.usablePages, `seed ${seed}: every page is free after draining`);
    assert.equal(s.state.freeSlots, s.state.slots, `seed ${seed}: every slot is free after draining`);
  }
});

test('when pages run out the newest running request is preempted and recomputes what it had', () => {
  const s = setup({ pages: 6, pageSize: 4, slots: 2, maxRunning: 2, budget: 16, chunk: 4 });
  const [a, b] = [request(1, 8, 10, 4), request(2, 8, 10, 4)];
  s.sched.add(a);
  s.sched.add(b);
  for (let i = 0; i < 5; i++) step(s); // both at 12 known positions in 3 pages each: none free
  assert.deepEqual([a.computed, b.computed, s.kv.freePages], [12, 12, 0]);
  const rows = step(s); // a needs a 4th page: b, the newest, gives its 3 back and starts over
  assert.equal(a.preemptions, 0);
  assert.equal(b.preemptions, 1);
  assert.equal(b.prefillEnd, 13, 'everything b has becomes prefill');
  assert.deepEqual(rows.map((r) => [r.req.id, r.start, r.n, r.chunked, r.sample]), [[1, 12, 1, false, true], [2, 0, 8, true, false]],
    'b is readmitted at once for its prompt, chunked, without sampling');
  drain(s);
  for (const r of [a, b]) {
    assert.equal(r.numGenerated, 10);
    assert.ok(r.outputIds.every((t, i) => t === tokenAt(r, 8 + i)), 'recompute loses and repeats nothing');
  }
  assert.equal(a.preemptions, 0, 'the oldest request is never the victim while a newer one runs');
  assert.equal(s.kv.freePages, 6);
  assert.equal(s.state.freeSlots, 2);
});

test('preempt() frees everything and requeues by arrival; a request that cannot grow preempts itself', () => {
  const s = setup({ pages: 8, pageSize: 4, slots: 2, maxRunning: 2, budget: 16, chunk: 4 });
  const [a, b, c] = [request(1, 8, 6, 4), request(2, 8, 6, 4), request(3, 4, 6, 4)];
  for (const r of [a, b, c]) s.sched.add(r);
  step(s);
  setDrafts(s, (r) => (r === a ? [1, 2] : []));
  s.sched.preempt(a);
  assert.deepEqual([a.status, a.computed, a.pages, a.slot, a.prefillEnd, a.drafts], ['waiting', 0, [], 0, 9, []]);
  assert.deepEqual(ids(s.sched.waiting), [1, 3], 'a goes back ahead of the later c');
  assert.deepEqual(ids(s.sched.running), [2]);
  checkPools(s);
  s.sched.update({ kind: 'failed', reqs: [b, c], error: new Error('gone') });
  assert.deepEqual([b.status, b.finishReason, c.finishReason], ['finished', 'error', 'error']);
  // a alone, with every page it does not hold taken: it cannot reach its 3rd page
  step(s);
  assert.equal(a.computed, 8);
  const taken = s.kv.alloc(s.kv.freePages)!;
  const before = [...a.tokens];
  for (let i = 0; i < 4; i++) {
    step(s);
    checkPools(s, taken);
    assert.deepEqual(a.tokens, before, 'nothing is sampled twice while it waits');
    assert.ok(a.computed <= 8);
  }
  assert.ok(a.preemptions >= 1, 'it gave its pages back rather than wait holding them');
  s.kv.release(taken);
  drain(s);
  assert.equal(a.numGenerated, 6);
  assert.ok(a.outputIds.every((t, i) => t === tokenAt(a, 8 + i)));
  assert.equal(s.kv.freePages, 8);
});

test('a verify row of k + 1 tokens: update appends the accepted drafts and the bonus, commits the scratch state and tracks a snapshot', () => {
  const s = setup({ pages: 8, pageSize: 4, slots: 4, maxRunning: 2, budget: 16, chunk: 4, maxSteps: 4, prefix: true });
  const a = request(1, 2, 10, 4);
  s.sched.add(a);
  step(s);
  assert.deepEqual([a.computed, a.tokens.length, a.pages.length], [2, 3, 1]);
  const drafts = [tokenAt(a, 3), tokenAt(a, 4), 999];
  setDrafts(s, () => drafts);
  const batch = s.sched.schedule()!;
  assert.equal(batch.kind, 'verify');
  assert.equal(batch.nReal, 1);
  const row = batch.rows[0]!;
  assert.deepEqual([row.start, row.n, row.verify, row.sample, row.chunked], [2, 4, true, true, false]);
  assert.equal(a.pages.length, 2, 'pages cover the bonus token and every draft');
  // the runner would write the state after each verify step into the row's scratch
  const scratch = s.state.scratch(0, 4)[0]!;
  for (let t = 0; t < 4; t++) scratch.ssm.fill(10 + t, t * 2, t * 2 + 2);
  const inserted = s.prefix!.inserted;
  // 2 drafts accepted, then the bonus; committed lengths 3, 4, 5: 4 is a snapshot point (step 1)
  s.sched.update({ kind: 'step', batch, rows: [outcome([drafts[0]!, drafts[1]!, tokenAt(a, 5)], 3, 2)], hiddenAt: (_, at) => new Float32Array([at]) });
  assert.equal(a.computed, 5, 'the bonus token and 2 accepted drafts are computed');
  assert.deepEqual(a.tokens.slice(2), [a.tokens[2], drafts[0], drafts[1], tokenAt(a, 5)]);
  assert.deepEqual([a.drafts, a.draftProbs, a.spec], [[], null, { rounds: 1, drafted: 3, accepted: 2 }]);
  assert.deepEqual([...s.state.view(a.slot)[0]!.ssm], [12, 12], 'working slot = state after the last accepted draft');
  assert.equal(s.prefix!.inserted, inserted + 1, 'the snapshot point inside the round is tracked');
  const tracked = s.prefix!.cache.owners().slots.filter((slot) => s.state.view(slot)[0]!.ssm[0] === 11);
  assert.equal(tracked.length, 1, 'tracking slot = state at its step (before the working slot moved on)');
  checkPools(s);
  drain(s);
  assert.equal(s.sched.hasWork(), false);
});

test('aborted requests, waiting or running, free everything at the next step boundary', () => {
  const s = setup({ pages: 12, pageSize: 4, slots: 5, maxRunning: 2, budget: 32, chunk: 4, prefix: true });
  const [a, b, c] = [request(1, 12, 2, 4, [], 0), request(2, 12, 5, 4, [], 0), request(3, 8, 5, 4)];
  s.sched.add(a);
  drain(s); // a leaves snapshots of its prompt in the cache
  s.sched.add(b);
  s.sched.add(c);
  s.sched.add(request(4, 8, 5, 4));
  step(s);
  assert.ok(b.lockHandle !== null && b.cachedTokens === 12, 'b runs from a prefix hit (and holds its lock)');
  assert.deepEqual(ids(s.sched.running), [2, 3]);
  s.sched.abort(b);
  const d = s.sched.waiting[0]!;
  s.sched.abort(d);
  s.sched.schedule(); // reaps the aborted ones first
  for (const r of [b, d]) assert.deepEqual([r.status, r.pages, r.slot, r.lockHandle, r.finishReason], ['finished', [], 0, null, 'abort']);
  assert.deepEqual(ids(s.sched.running), [3]);
  assert.deepEqual(ids(s.sched.waiting), []);
  checkPools(s);
  s.sched.abort(c);
  assert.equal(s.sched.schedule(), null);
  assert.equal(s.sched.hasWork(), false);
  checkPools(s);
  s.prefix!.cache.evictPages(s.kv.usablePages);
  s.prefix!.cache.evictSlots(s.state.slots);
  assert.equal(s.kv.freePages, 12);
  assert.equal(s.state.freeSlots, 5);
});

test('prefix hits at admission: a whole prompt prefills nothing; a longer one resumes at a split it shares', () => {
  const s = setup({ pages: 20, pageSize: 4, slots: 6, maxRunning: 2, budget: 32, chunk: 4, prefix: true });
  const a = request(1, 10, 1, 4, [], 0);
  s.sched.add(a);
  drain(s);
  const b = request(2, 10, 2, 4, [], 0);
  const c = request(3, 15, 2, 4, [], 0); // a's 10 tokens and 5 more; it does not split at 10
  s.sched.add(b);
  s.sched.add(c);
  const rows = step(s);
  assert.deepEqual(rows.map((r) => [r.req.id, r.start, r.n, r.chunked, r.sample]), [[2, 10, 0, false, true], [3, 8, 4, true, false]],
    'c stops at the next snapshot point (12, a multiple of the interval)');
  assert.deepEqual([b.cachedTokens, c.cachedTokens], [10, 8]);
  assert.equal(b.tokens.length, 11, 'the whole-prompt hit sampled its first token');
  drain(s);
  for (const r of [b, c]) assert.deepEqual([r.status, r.numGenerated], ['finished', 2]);
});

test('admission evicts a cached snapshot when it needs its state slot', () => {
  const s = setup({ pages: 20, pageSize: 4, slots: 2, maxRunning: 1, budget: 32, chunk: 4, prefix: true });
  s.sched.add(request(1, 8, 1, 4));
  drain(s);
  assert.equal(s.prefix!.cache.owners().slots.length, 1, 'a snapshot of request 1 holds a slot');
  const held = s.state.alloc()!; // the last free slot, held elsewhere
  const r = request(2, 6, 1, 4);
  s.sched.add(r);
  step(s);
  assert.equal(r.status, 'running', 'it started by evicting the snapshot');
  assert.ok(r.slot > 0 && r.computed > 0);
  checkPools(s, [], [held]);
  s.state.free(held);
  drain(s);
  assert.equal(r.status, 'finished');
});

test('a newest request whose next prefill chunk finds no pages waits holding them, while an older one decodes', () => {
  // a (older) decodes for a while; b's prompt outgrows the pages a leaves. Preempting itself
  // would free b's pages only for b to be readmitted at once and recompute the same chunks,
  // step after step, until a finishes.
  // a holds 2 pages of 16 positions for all its 32; b's 40-token prompt needs 3 of the 4.
  const s = setup({ pages: 4, pageSize: 16, slots: 2, maxRunning: 2, budget: 16, chunk: 4 });
  const [a, b] = [request(1, 16, 16, 4), request(2, 40, 4, 4)];
  s.sched.add(a);
  s.sched.add(b);
  const steps = drain(s);
  const bPrefill = steps.flat().filter((r) => r.req === b && r.prefill).reduce((sum, r) => sum + r.n, 0);
  assert.equal(a.preemptions, 0);
  assert.equal(b.preemptions, 0, 'b waited in place instead of giving back its pages');
  assert.equal(bPrefill, 40, 'every prompt token of b was computed once');
  for (const r of [a, b]) assert.ok(r.outputIds.every((t, i) => t === tokenAt(r, r.promptIds.length + i)));
});
