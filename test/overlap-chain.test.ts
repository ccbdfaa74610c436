// Overlapped decode's host side (engine/overlap.ts), without a model: Scheduler.chain builds,
// before step N's update, exactly the decode batch schedule() builds after it (rows, starts,
// pages, over page boundaries); update commits nothing for a chained row whose request
// finished at step N; `chainable` refuses every step the plain loop would not build the same
// way (waiting requests, MTP, a snapshot, a row at its length limit, a non-greedy or
// constrained pick, a prefill). The GPU side and the outputs: webgpu-overlap.test.ts.
import { test } from 'node:test';
import type { Matcher } from '../src/constrain/constraint.js';
import assert from 'node:assert/strict';
import type { Batch } from '../src/engine/batch.js';
import { chainable, chainedPickStands, type ChainFacts } from '../src/engine/overlap.js';
import { Request, type RequestView } from '../src/engine/request.js';
import { OutputText } from '../src/engine/output.js';
import { TokenHistory } from '../src/engine/sampler.js';
import { Rng } from '../src/util/rng.js';
import { checkPools, GREEDY, request, type Setup, setup } from './scheduler-helpers.js';

const CHUNK = 4;
const FACTS: ChainFacts = { enabled: true, draftsAfter: () => false, admitting: false, maySnapshot: () => false, sampleVocab: 1000, candidates: true, recomputed: () => false };
const STOP = 4999;

interface RowKey { id: number; start: number; n: number; sample: boolean; chunked: boolean; verify: boolean }
const keys = (b: Batch): RowKey[] => b.rows.slice(0, b.nReal).map((r) => ({ id: r.req!.id, start: r.start, n: r.n, sample: r.sample, chunked: r.chunked, verify: r.verify }));

/** Commit `batch` with `token(req)` for every sampling row. */
function commit(s: Setup, batch: Batch, token: (req: RequestView) => number): void {
  s.sched.update({
    kind: 'step', batch,
    rows: batch.rows.slice(0, batch.nReal).map((r) => ({ tokens: r.sample ? [token(r.req!)] : [], logprobs: [], logits: [], drafted: 0, accepted: 0 })),
    hiddenAt: () => new Float32Array(1),
  });
}

/** Two requests (prompts of 5 and 3) run to their first decode batch. */
function decoding(maxTokens = 20, pages = 40): { s: Setup; batch: Batch } {
  const s = setup({ pages, pageSize: 4, slots: 4, maxRunning: 4, budget: 64, chunk: CHUNK });
  s.sched.add(request(1, 5, maxTokens, CHUNK));
  s.sched.add(stopping(2, 3, maxTokens));
  for (;;) {
    const batch = s.sched.schedule()!;
    if (batch.kind === 'decode') return { s, batch };
    commit(s, batch, (req) => 100 + req.tokens.length);
  }
}

/** A greedy request that stops at token STOP. */
function stopping(id: number, promptLength: number, maxTokens: number): Request {
  const prompt = Array.from({ length: promptLength }, (_, i) => id * 1000 + i);
  return new Request(id, id, prompt, maxTokens, promptLength + maxTokens, GREEDY, new Rng(id), new Rng(id + 1),
    new TokenHistory(prompt), new OutputText(() => '', prompt, new Set([STOP]), []));
}

test('a chained batch is the batch schedule() builds after the update, page boundaries included', () => {
  const { s, batch } = decoding();
  let cur = batch;
  for (let step = 0; step < 10; step++) {
    assert.ok(chainable(cur, FACTS), `step ${step} chains`);
    const chained = s.sched.chain(cur)!;
    assert.notEqual(chained, cur, 'a chained batch never aliases the running one');
    for (const r of chained.rows.slice(0, chained.nReal)) {
      assert.equal(r.req!.pages.length, s.kv.pagesFor(r.start + 1), `request ${r.req!.id}: pages for position ${r.start} taken ahead`);
    }
    const want = keys(chained);
    commit(s, cur, (req) => 200 + req.tokens.length);
    checkPools(s);
    const scheduled = s.sched.schedule()!;
    assert.deepEqual(want, keys(scheduled), `step ${step}: the chained rows are schedule()'s`);
    cur = chained;
  }
});

test('a chained row whose request stopped at the step before commits nothing; the chain ends there', () => {
  const { s, batch } = decoding();
  const chained = s.sched.chain(batch)!;
  const stopper = s.sched.running.find((r) => r.id === 2)!;
  commit(s, batch, (req) => (req.id === 2 ? STOP : 300));
  assert.equal(stopper.status, 'finished');
  const tokens = stopper.tokens.length;
  commit(s, chained, () => 301);
  assert.equal(stopper.tokens.length, tokens, 'nothing appended to the finished request');
  assert.equal(s.sched.running.length, 1);
  assert.equal(chainable(chained, FACTS), false, 'a batch with a finished row chains no further');
  checkPools(s);
});

test('chainable refuses every step the plain loop would not build the same way', () => {
  const { s, batch } = decoding();
  assert.ok(chainable(batch, FACTS));
  assert.equal(chainable(batch, { ...FACTS, enabled: false }), false, 'overlap off');
  assert.equal(chainable(batch, { ...FACTS, draftsAfter: () => true }), false, 'MTP drafts after this step');
  // the policy's choice is made only once every other condition holds (it is consumed)
  let asked = 0;
  const counting = { ...FACTS, draftsAfter: () => (asked++, false) };
  assert.ok(chainable(batch, counting));
  assert.equal(chainable(batch, { ...counting, admitting: true }), false);
  assert.equal(chainable(batch, { ...counting, enabled: false }), false);
  assert.equal(asked, 1, 'draftsAfter asked once, by the step that chains');
  assert.equal(chainable(batch, { ...FACTS, admitting: true }), false, 'a request would be admitted');
  assert.equal(chainable(batch, { ...FACTS, maySnapshot: (r) => r.req!.id === 1 }), false, 'a row may snapshot');
  const req = s.sched.running[0]! as Request;
  // a constraint's mask after the token: unknown for a matcher whose mask may change; its fixed
  // mask (the closed-think mask of a chat answer) is the same at every position
  const runs = { fixed: { until: [] }, until: { until: [7] }, lastPosition: { until: [7], positions: 1 } };
  const matcher = (run: keyof typeof runs | null, n = 0): Matcher => ({
    get length() { return n; }, mask: () => null, advance() { n++; }, fork: () => matcher(run, n), endError: () => null,
    ...(run ? { maskRun: () => ({ mask: new Uint32Array(32).fill(0xffffffff), ...runs[run] }) } : {}),
  });
  // (a request's matcher is started once, its constraint never changes: each case a new constraint object)
  const other = s.sched.running[1]! as Request;
  req.adjust = { bias: null, constraint: { start: () => matcher('fixed') } };
  assert.ok(chainable(batch, FACTS), 'a fixed mask is the same after any token');
  other.adjust = { bias: null, constraint: { start: () => matcher('until') } };
  assert.ok(chainable(batch, FACTS), 'a mask run the pick may end (an open reasoning block): the next pick is checked once it is known');
  for (const [run, why] of [[null, 'a constrained pick needs the matcher after the token'], ['lastPosition', 'a mask run that ends at this position']] as const) {
    const fresh = decoding();
    (fresh.s.sched.running[1]! as Request).adjust = { bias: null, constraint: { start: () => matcher(run) } };
    assert.equal(chainable(fresh.batch, FACTS), false, why);
  }
  req.adjust = null;
  other.adjust = null;
  (req as { sampling: Request['sampling'] }).sampling = { ...GREEDY, temperature: 0.7 };
  assert.equal(chainable(batch, FACTS), false, 'a sampled row');
  (req as { sampling: Request['sampling'] }).sampling = GREEDY;
  assert.ok(chainable(batch, FACTS));
  s.sched.abort(req);
  assert.equal(chainable(batch, FACTS), false, 'an aborted request');
});

test('a request waiting blocks the chain only while the batch has room for it', () => {
  const s = setup({ pages: 40, pageSize: 4, slots: 4, maxRunning: 2, budget: 64, chunk: CHUNK });
  s.sched.add(request(1, 5, 20, CHUNK));
  assert.equal(s.sched.admits, true, 'an empty batch admits');
  s.sched.schedule();
  s.sched.add(request(2, 3, 20, CHUNK));
  assert.equal(s.sched.admits, true, 'one running of two: the next schedule admits');
  s.sched.schedule();
  s.sched.add(request(3, 3, 20, CHUNK));
  assert.equal(s.sched.waiting.length, 1);
  assert.equal(s.sched.admits, false, 'a full batch admits nothing: a saturated server keeps overlapping');
});

test('a row at its max_tokens does not chain; nor does a row without a free page for its next position', () => {
  const { s, batch } = decoding(2);
  assert.equal(chainable(batch, FACTS), false, 'the coming token is the last');
  const tight = decoding(20, 3); // 3 pages of 4: requests of 5 and 3 tokens hold 2 + 1
  let cur = tight.batch;
  let chained: Batch | null = null;
  for (let i = 0; i < 6 && (chained = tight.s.sched.chain(cur)); i++) {
    commit(tight.s, cur, () => 500);
    cur = chained;
  }
  assert.equal(chained, null, 'the chain stops where a page would have to be evicted or preempted for');
  checkPools(tight.s);
});

test('a chained pick made under a mask run stands unless the run ended and the mask after it refuses it or widens the run\'s', () => {
  const words = 32;
  const allow = (...ids: number[]): Uint32Array => {
    const m = new Uint32Array(words);
    for (const id of ids) m[id >>> 5]! |= 1 << (id & 31);
    return m;
  };
  // a request whose committed matcher's mask is `now` (its last committed id is the step before's pick)
  const withMask = (now: Uint32Array | null): RequestView => {
    const matcher = (n: number): Matcher => ({ get length() { return n; }, mask: () => now, advance() { n++; }, fork: () => matcher(n), endError: () => null });
    return { adjust: { bias: null, constraint: { start: () => matcher(0) } }, tokens: [1, 2, 9], promptIds: [1, 2], drafts: [] } as unknown as RequestView;
  };
  const open = { mask: null, until: [9] };
  assert.ok(chainedPickStands(withMask(allow(3)), undefined, 9, 4), 'no run: nothing to check');
  assert.ok(chainedPickStands(withMask(allow(3)), open, 8, 4), 'the run did not end');
  assert.ok(chainedPickStands(withMask(allow(3, 4)), open, 9, 4), 'ended; the mask after allows the pick, and the run allowed every id');
  assert.equal(chainedPickStands(withMask(allow(3)), open, 9, 4), false, 'ended; the mask after refuses the pick');
  const narrow = { mask: allow(3, 4), until: [9] };
  assert.ok(chainedPickStands(withMask(allow(4)), narrow, 9, 4), 'the mask after within the run\'s');
  assert.equal(chainedPickStands(withMask(allow(4, 5)), narrow, 9, 4), false, 'the mask after allows 5, which the run\'s refused: 5 may be its argmax');
  assert.equal(chainedPickStands(withMask(null), narrow, 9, 4), false, 'no mask after a narrower run');
});
