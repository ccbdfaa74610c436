// Prefix-cache hits are bit-exact (invariant 6, docs/ARCHITECTURE.md "Invariants"):
// - seeded sampling on a hit gives the bits of a cold run (logits of every token, ids);
// - a request preempted mid-generation resumes from a snapshot made by the MTP verify
//   commit and finishes with the bits of an uninterrupted cold run — this fails if the
//   tracking snapshot after verify is dropped or taken from the wrong step;
// - after a hit, every MTP-cache row below the prompt's end equals the cold run's, and
//   speculative acceptance equals the cold run's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Request } from '../src/engine/request.js';
import { runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

const longPrompt = (n: number, tag: string): string =>
  `Here are some values (${tag}):\n` + Array.from({ length: n }, (_, i) => `- ${tag}${i}=${(i * 37) % 1000}`).join('\n') + '\nWhat is the first value?';

function assertSameBits(got: RunResult, want: RunResult, label: string): void {
  assert.deepEqual(got.ids, want.ids, `${label}: ids`);
  assert.equal(got.logits.length, want.logits.length, `${label}: logits count`);
  got.logits.forEach((l, t) => assert.ok(sameBits(l, want.logits[t]!), `${label}: logits of token ${t} differ`));
}

test('seeded sampling and greedy on a prefix hit are bit-identical to cold (spec on and off)', async () => {
  const reqs: GenerateRequest[] = [
    { prompt: longPrompt(40, 'a'), maxTokens: 24, temperature: 0.9, topP: 0.95, seed: 7, ignoreEos: true },
    { prompt: longPrompt(40, 'a') + ' And the second?', maxTokens: 24, temperature: 1.0, seed: 11, ignoreEos: true },
    { prompt: longPrompt(40, 'a') + ' And the third?', maxTokens: 16, ignoreEos: true },
  ];
  for (const specTokens of [0, 3]) {
    const opts = { model: TINY_THINK(), kernels: KERNELS, specTokens, specAdaptive: false };
    const cold = await withEngine({ ...opts, prefixCache: false }, (e) => runAll(e, reqs));
    await withEngine(opts, async (e) => {
      await runAll(e, [reqs[0]!]); // warm: the first prompt's snapshots
      const hot: RunResult[] = [];
      for (const r of reqs) hot.push(...(await runAll(e, [r])));
      const s = e.stats().prefixCache!;
      assert.ok(s.hits >= 3, `every request hits (${JSON.stringify(s)})`);
      hot.forEach((h, i) => assertSameBits(h, cold[i]!, `k=${specTokens} request ${i}`));
      e.checkIntegrity();
    });
  }
});

/** A preemptIf hook preempting once, when the request has generated `after` tokens. */
function preemptOnce(after: number): { hook: (r: { promptIds: readonly number[]; tokens: readonly number[] }) => boolean; at: () => number } {
  let at = 0;
  return {
    hook: (r) => {
      if (at > 0 || r.tokens.length < r.promptIds.length + after) return false;
      at = r.tokens.length;
      return true;
    },
    at: () => at,
  };
}

test('preempted mid-generation: the recompute resumes from a verify-made snapshot, bit-identical to a cold recompute', async () => {
  for (const [specTokens, sampled] of [[3, false], [2, true], [1, false]] as const) {
    const req: GenerateRequest = {
      prompt: longPrompt(12, 'p'), maxTokens: 170, ignoreEos: true, ...(sampled ? { temperature: 0.8, seed: 3 } : {}),
    };
    const label = `k=${specTokens}${sampled ? ' sampled' : ''}`;
    // (no end-of-generation snapshot request: it would add its own hit to the counters)
    const opts = { model: TINY_THINK(), kernels: KERNELS, specTokens, specAdaptive: false, stateTrackInterval: 64, prefixCacheGenerationSnapshots: false };
    // cold: the same preemption, recomputing everything (a preemption redraws the pending
    // drafts, so a sampled request is compared with a preempted run, not an uninterrupted one)
    const coldPre = preemptOnce(140);
    const [cold] = await withEngine({ ...opts, prefixCache: false, preemptIf: coldPre.hook }, (e) => runAll(e, [req]));
    const pre = preemptOnce(140);
    await withEngine({ ...opts, preemptIf: pre.hook }, async (e) => {
      const [hot] = await runAll(e, [req]);
      const s = e.stats();
      assert.equal(s.preemptions, 1, 'the hook preempted once');
      assert.equal(pre.at(), coldPre.at(), 'preempted at the same length as the cold run');
      const prompt = e.tokenizer.encode(req.prompt!).length;
      // the only hit is the recompute's: at the last interval multiple it committed
      const resumed = s.prefixCache!.hitTokens;
      assert.ok(resumed > prompt && resumed === Math.floor((pre.at() - 1) / 64) * 64,
        `${label}: resumed at ${resumed} (prompt ${prompt}, preempted at ${pre.at()})`);
      assertSameBits(hot!, cold!, label);
      e.checkIntegrity();
    });
    if (!sampled) {
      const [plain] = await withEngine({ ...opts, prefixCache: false }, (e) => runAll(e, [req]));
      assertSameBits(cold!, plain!, `${label}: greedy recompute vs uninterrupted`);
    }
  }
});

/** MTP KV rows [0, n) of the running request (K then V, in position order). */
function mtpRows(e: Engine, req: Request, n: number): Float32Array {
  const kv = e.kv.mtpLayers[0]!;
  const ps = e.kv.pageSize;
  const dim = kv.k.length / (e.kv.numPages * ps);
  const out = new Float32Array(2 * n * dim);
  for (let p = 0; p < n; p++) {
    const at = (req.pages[Math.floor(p / ps)]! * ps + (p % ps)) * dim;
    out.set((kv.k as Float32Array).subarray(at, at + dim), p * dim); // a CPU backend's pool: host memory
    out.set((kv.v as Float32Array).subarray(at, at + dim), (n + p) * dim);
  }
  return out;
}

test('after a hit, the MTP-cache rows below the prompt end equal a cold run, and so does acceptance (aligned and tail snapshots)', async () => {
  // page size 48: snapshots at multiples of 64 fall inside a page (tail snapshots)
  for (const pageSize of [16, 48]) await mtpRowsCase({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, specAdaptive: false, pageSize, stateTrackInterval: 192 });
});

async function mtpRowsCase(opts: import('../src/engine/engine.js').EngineOptions): Promise<void> {
  const first = { prompt: longPrompt(30, 'm'), maxTokens: 8, ignoreEos: true };
  const second = { prompt: longPrompt(30, 'm') + ' Then the last one?', maxTokens: 40, ignoreEos: true };
  /** The second request's MTP rows once its prompt's MTP extend has run (2nd sampled token). */
  const run = async (e: Engine): Promise<{ rows: Float32Array; spec: unknown; ids: readonly number[] }> => {
    let rows: Float32Array | null = null;
    let calls = 0;
    const sched = (e as unknown as { scheduler: { running: Request[] } }).scheduler;
    const done = await e.complete({
      ...second,
      captureLogits: () => {
        if (++calls !== 2) return;
        const req = sched.running[0]!;
        rows = mtpRows(e, req, req.promptIds.length - 1);
      },
    });
    assert.ok(rows, 'rows captured');
    return { rows, spec: done.spec, ids: done.outputIds };
  };
  const cold = await withEngine({ ...opts, prefixCache: false }, run);
  await withEngine(opts, async (e) => {
    await e.complete(first);
    const hot = await run(e);
    assert.ok(e.stats().prefixCache!.hitTokens >= 128, 'the second request hit the first one\'s prefix');
    assert.ok(sameBits(hot.rows, cold.rows), 'MTP KV rows after the hit equal the cold run');
    assert.deepEqual(hot.ids, cold.ids);
    assert.deepEqual(hot.spec, cold.spec, 'acceptance on the hit equals cold');
  });
}

test('end of generation: the next request extending prompt + answer hits at the answer\'s end (rounded down to 64), bit-identical to cold', async () => {
  // interval 64: verify-made snapshots (and their decode-made KV) sit at the same positions
  // as the end-of-generation ones; they must not serve, or be mixed into, the prompt's path
  const opts = { model: TINY_THINK(), kernels: KERNELS, specTokens: 2, specAdaptive: false, stateTrackInterval: 64 };
  const first = { prompt: longPrompt(6, 'g'), maxTokens: 150, ignoreEos: true };
  await withEngine(opts, async (e) => {
    const done = await e.complete(first);
    const conversation = [...done.promptIds, ...done.outputIds];
    for (let i = 0; i < 500 && e.stats().running + e.stats().waiting > 0; i++) await new Promise((r) => setTimeout(r, 10));
    const next: GenerateRequest = { promptIds: [...conversation, ...e.tokenizer.encode('\nNow the next value?')], maxTokens: 12 };
    const logits: Float32Array[] = [];
    const hit = await e.complete({ ...next, captureLogits: (l) => logits.push(l.slice()) });
    assert.ok(hit.usage.cachedTokens >= Math.floor(conversation.length / 64) * 64,
      `cached ${hit.usage.cachedTokens} of a ${conversation.length}-token conversation (prompt ${done.promptIds.length})`);
    const hot: RunResult = { ids: [...hit.outputIds], logits, finishReason: hit.finishReason, text: hit.text };
    const [cold] = await withEngine({ ...opts, prefixCache: false }, (c) => runAll(c, [next]));
    assertSameBits(hot, cold!, 'after an end-of-generation snapshot');
    e.checkIntegrity();
  });
});
