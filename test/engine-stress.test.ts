// Invariants 3 and 7 (docs/ARCHITECTURE.md "Invariants") under load: 1,000 requests with random lengths, random
// aborts and a pool small enough to force preemption. Every request that is not aborted
// produces exactly the output it produces in a roomy pool (recompute is bit-exact);
// afterwards checkIntegrity() holds and no page or slot leaks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { Rng } from '../src/util/rng.js';
import { withEngine } from './engine-helpers.js';
import { TINY_NEXT_MOE } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';
const N = 1000;

function workload(seed: number): GenerateRequest[] {
  const rng = new Rng(seed);
  return Array.from({ length: N }, () => {
    const len = 1 + Math.floor(rng.next() * (rng.next() < 0.1 ? 90 : 24));
    return {
      promptIds: Array.from({ length: len }, () => Math.floor(rng.next() * 990)),
      maxTokens: 1 + Math.floor(rng.next() * 8),
      ignoreEos: true,
    };
  });
}

interface Outcome { ids: number[]; reason: string; preemptions: number }

async function run(engine: Engine, reqs: GenerateRequest[], abortSeed: number | null): Promise<Outcome[]> {
  const rng = new Rng(abortSeed ?? 0);
  return Promise.all(reqs.map(async (r) => {
    const ctl = new AbortController();
    // abort ~15% of requests: some before they start, some after a few tokens
    const abortAfter = abortSeed !== null && rng.next() < 0.15 ? Math.floor(rng.next() * 4) : -1;
    if (abortAfter === 0) ctl.abort();
    let seen = 0;
    for await (const ev of engine.generate({ ...r, signal: ctl.signal })) {
      if (ev.type === 'delta' && ++seen === abortAfter) ctl.abort();
      if (ev.type === 'done') return { ids: [...ev.outputIds], reason: ev.finishReason, preemptions: ev.preemptions };
    }
    throw new Error('no done event');
  }));
}

test('1,000 requests, small pool, random aborts: survivors match a roomy run, no leaks', async () => {
  const reqs = workload(42);
  const roomy = await withEngine({ model: TINY_NEXT_MOE(), kernels: KERNELS, maxRunning: 16, maxPrefillTokens: 256 },
    (e) => run(e, reqs, null));
  assert.ok(roomy.every((o) => o.reason === 'length'));
  await withEngine({ model: TINY_NEXT_MOE(), kernels: KERNELS, maxRunning: 12, maxPrefillTokens: 128, kvCacheTokens: 128, pageSize: 8 },
    async (e) => {
      const tight = await run(e, reqs, 7);
      let aborted = 0;
      let preempted = 0;
      tight.forEach((o, i) => {
        if (o.reason === 'abort') {
          aborted++;
          return;
        }
        if (o.preemptions > 0) preempted++;
        assert.equal(o.reason, 'length', `request ${i}`);
        assert.deepEqual(o.ids, roomy[i]!.ids, `request ${i} (preempted ${o.preemptions}×) output changed`);
      });
      assert.ok(aborted > 50, `expected aborts, got ${aborted}`);
      assert.ok(preempted > 20, `expected preemptions, got ${preempted}`);
      await new Promise((r) => setTimeout(r, 20));
      const s = e.stats();
      assert.equal(s.running + s.waiting, 0);
      assert.equal(s.kvPages.used, s.kvPages.cached, 'KV pages leaked (used beyond what the prefix cache holds)');
      assert.equal(s.stateSlots.used, s.stateSlots.cached, 'state slots leaked');
      e.checkIntegrity();
    });
});
