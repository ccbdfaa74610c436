// Prefix cache under eviction pressure: 500 randomized multi-turn chat requests with
// aborts on a tiny KV pool and few snapshot slots. Every request that is not aborted
// produces the cache-off output bit for bit (ids and the logits of every token: hits are
// exact), and after the drain the pools and the tree are consistent.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { ChatMessage } from '../src/frontend/chat-template.js';
import { Rng } from '../src/util/rng.js';
import { evalPrompts, sameBits, withEngine } from './engine-helpers.js';
import { TINY_NEXT_MOE } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';
const N = 500;

/** Conversations grow turn by turn; later requests often extend earlier ones. */
function workload(): GenerateRequest[] {
  const rng = new Rng(21);
  const bases = evalPrompts(9).map((m) => m.slice(-1)); // short single-message starts
  const convs: ChatMessage[][] = bases.map((b) => [...b]);
  return Array.from({ length: N }, (_, i) => {
    const c = Math.floor(rng.next() * convs.length);
    const conv = convs[c]!;
    if (rng.next() < 0.5) conv.push({ role: 'assistant', content: `${i % 97}` }, { role: 'user', content: `What is ${i} + ${c}?` });
    if (conv.length > 9) convs[c] = [...bases[c]!];
    return { messages: [...conv], maxTokens: 1 + Math.floor(rng.next() * 4), ignoreEos: true };
  });
}

interface Out { ids: number[]; logits: Float32Array[]; reason: string }

async function run(e: Engine, reqs: GenerateRequest[], abortSeed: number | null): Promise<Out[]> {
  const rng = new Rng(abortSeed ?? 1);
  // submitted in waves of 25 so later waves find earlier turns in the cache
  const out: Out[] = [];
  for (let w = 0; w < reqs.length; w += 25) {
    out.push(...(await Promise.all(reqs.slice(w, w + 25).map(async (r) => {
      const ctl = new AbortController();
      const abortAfter = abortSeed !== null && rng.next() < 0.12 ? Math.floor(rng.next() * 3) : -1;
      if (abortAfter === 0) ctl.abort();
      const logits: Float32Array[] = [];
      let seen = 0;
      for await (const ev of e.generate({ ...r, signal: ctl.signal, captureLogits: (l) => logits.push(l.slice()) })) {
        if (ev.type === 'delta' && ++seen === abortAfter) ctl.abort();
        if (ev.type === 'done') return { ids: [...ev.outputIds], logits, reason: ev.finishReason };
      }
      throw new Error('no done event');
    }))));
  }
  return out;
}

test('500 multi-turn requests, tiny pool, aborts: cache-on outputs == cache-off, integrity after drain', async () => {
  const reqs = workload();
  const cold = await withEngine({ model: TINY_NEXT_MOE(), kernels: KERNELS, prefixCache: false, specTokens: 0 }, (e) => run(e, reqs, null));
  await withEngine({
    model: TINY_NEXT_MOE(), kernels: KERNELS, maxRunning: 8, kvCacheTokens: 768, pageSize: 16, cacheStateSlots: 6, specTokens: 2,
  }, async (e) => {
    const hot = await run(e, reqs, 5);
    let compared = 0;
    hot.forEach((h, i) => {
      if (h.reason === 'abort') return;
      compared++;
      const c = cold[i]!;
      assert.deepEqual(h.ids, c.ids, `request ${i}: ids`);
      h.logits.forEach((l, t) => assert.ok(sameBits(l, c.logits[t]!), `request ${i}: logits of token ${t} differ from cold`));
    });
    const s = e.stats();
    assert.ok(compared > 400, `compared ${compared}`);
    assert.ok(s.prefixCache!.hits > 100, `prefix hits ${s.prefixCache!.hits}`);
    assert.ok(s.prefixCache!.evictions > 20, `evictions ${s.prefixCache!.evictions}`);
    await new Promise((r) => setTimeout(r, 20));
    const after = e.stats();
    assert.equal(after.running + after.waiting, 0);
    assert.equal(after.kvPages.used, after.kvPages.cached, 'pages leaked');
    assert.equal(after.stateSlots.used, after.stateSlots.cached, 'slots leaked');
    e.checkIntegrity();
  });
});
