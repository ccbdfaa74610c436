// Overlapped decode on webgpu (engine/overlap.ts): a greedy decode step is recorded and
// submitted while the step before it runs, embedding that step's picks on the device. The
// outputs must be those of the plain loop (--overlap off) token for token, whatever ends a
// request mid-chain (a stop id, a stop string, max_tokens), whoever arrives or aborts
// during a chain, and with the prefix cache's snapshots; and the chain must actually run
// (steps.overlapped counts the chained steps).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { withClosedThinkMask } from '../src/constrain/think.js';
import type { Engine } from '../src/engine/engine.js';
import { THINK_CLOSE, THINK_OPEN } from '../src/tokenizer/reasoning.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { switchesTo } from './constraint-helpers.js';
import { assertSameRuns, type RunResult, runAll, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

const base = { kernels: 'webgpu' as const, specTokens: 0, kvCacheTokens: 2048, maxContext: 1024, maxRunning: 4 };

/** Chat requests ending every way a chain can see: a stop id (tiny-think answers and stops),
 * max_tokens, a stop string, and ignore_eos past the stop id. */
const REQUESTS: GenerateRequest[] = [
  { messages: [{ role: 'user', content: 'What is 12 + 7?' }], maxTokens: 40 },
  { messages: [{ role: 'user', content: 'Name a color.' }], maxTokens: 9 },
  { messages: [{ role: 'user', content: 'What is 3 + 4?' }], maxTokens: 40, stop: ['+'] },
  { prompt: 'The capital of France is', maxTokens: 14, ignoreEos: true },
];

interface Outcome { runs: RunResult[]; overlapped: number; decode: number; generated: number }

async function generate(overlapSteps: boolean, reqs: readonly GenerateRequest[], maxRunning = base.maxRunning): Promise<Outcome> {
  return withEngine({ ...base, model: TINY_THINK(), overlapSteps, prefixCache: false, maxRunning }, async (e) => {
    const runs = await runAll(e, reqs, false);
    e.checkIntegrity();
    const { overlapped, decode } = e.stats().steps;
    return { runs, overlapped, decode, generated: e.stats().tokens.generated };
  });
}


let plain: Outcome;

before(async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
  plain = await generate(false, REQUESTS);
});

describe('overlapped decode on webgpu', () => {
  test('a batch ending by stop id, max_tokens, stop string and length: the plain loop\'s outputs, most decode steps chained', async () => {
    assert.equal(plain.overlapped, 0, '--overlap off chains nothing');
    assert.deepEqual(plain.runs.map((r) => r.finishReason).sort(), ['length', 'length', 'stop', 'stop'], 'every way to end is covered');
    // two at a time: a full batch with two waiting keeps chaining; a request that ends frees
    // its slot and the chain ends a step later for the next one's admission
    const on = await generate(true, REQUESTS, 2);
    assertSameRuns(on.runs, plain.runs, 'overlap on');
    // a row whose request stopped at the step before commits nothing (update.ts)
    assert.equal(on.generated, on.runs.reduce((n, r) => n + r.ids.length, 0), 'tokens generated = tokens returned');
    assert.ok(on.overlapped >= on.decode / 2, `most decode steps chained (${on.overlapped} of ${on.decode})`);
  });

  // The references are the plain loop's runs of the first test (a batch of 4 == each alone:
  // webgpu-engine's batch test), not a second --overlap off engine here (~12 CPU-s): the
  // running request's 14 tokens (3 before the arrival, 11 chained beside the newcomer's
  // prefill and decode) still cover an admission mid-chain.
  test('each request alone, then a second request arriving mid-chain: the same outputs', async () => {
    const on = await withEngine({ ...base, model: TINY_THINK(), overlapSteps: true, prefixCache: false }, async (e) => {
      const first = e.complete(REQUESTS[3]!);
      await firstTokens(e, 3);
      const running = e.stats().tokens.generated;
      const second = await e.complete(REQUESTS[0]!);
      e.checkIntegrity();
      return { first: await first, second, running, overlapped: e.stats().steps.overlapped };
    });
    assert.ok(on.running < REQUESTS[3]!.maxTokens!, `the first request was still running when the second arrived (${on.running} tokens)`);
    assert.deepEqual([...on.first.outputIds], plain.runs[3]!.ids, 'the running request');
    assert.deepEqual([...on.second.outputIds], plain.runs[0]!.ids, 'the request that arrived mid-chain');
    assert.ok(on.overlapped > 0, 'chained steps ran');
  });

  test('an abort mid-chain ends that request only; close() during a chain ends the rest', async () => {
    await withEngine({ ...base, model: TINY_THINK(), overlapSteps: true, prefixCache: false }, async (e) => {
      const controller = new AbortController();
      const doomed = collect(e, { ...REQUESTS[3]!, maxTokens: 200 }, controller.signal, 4, () => controller.abort());
      const kept = e.complete(REQUESTS[1]!);
      assert.equal((await doomed).finishReason, 'abort');
      assert.deepEqual([...(await kept).outputIds], plain.runs[1]!.ids, 'the other request is untouched');
      e.checkIntegrity();
      const last = e.complete({ ...REQUESTS[3]!, maxTokens: 200 });
      await firstTokens(e, 3);
      await e.close();
      assert.equal((await last).finishReason, 'abort', 'close() ends a chained request with abort');
    });
  });

  test('prefix cache on: a second chat turn hits the same snapshot and answers the same', async () => {
    const first: GenerateRequest = { messages: [{ role: 'user', content: 'What is 12 + 7?' }], maxTokens: 40 };
    const turns = async (overlapSteps: boolean): Promise<{ ids: number[][]; cached: number; overlapped: number }> =>
      withEngine({ ...base, model: TINY_THINK(), overlapSteps, prefixCache: true }, async (e) => {
        const a = await e.complete(first);
        const chainedBefore = e.stats().steps.overlapped;
        // the second turn's first 12 tokens (was 40): its prefill from the hit, then 11 decode
        // steps that chain on the restored state (on.overlapped > 0 below)
        const b = await e.complete({ messages: [...first.messages!, { role: 'assistant', content: a.text }, { role: 'user', content: 'And 2 + 2?' }], maxTokens: 12 });
        e.checkIntegrity();
        return { ids: [[...a.outputIds], [...b.outputIds]], cached: b.usage.cachedTokens, overlapped: e.stats().steps.overlapped - chainedBefore };
      });
    const off = await turns(false);
    const on = await turns(true);
    assert.deepEqual(on.ids, off.ids, 'both turns');
    assert.equal(on.cached, off.cached, 'the second turn reuses as much of the conversation');
    assert.ok(on.cached > 0, 'the second turn hit the cache');
    assert.ok(on.overlapped > 0, 'chained steps ran in the turn that hit the cache');
  });

  // The open reasoning block's mask run (any id until `</think>`) chains; N + 1's pick, made
  // under the run, is checked against the mask after N's pick once it is known (overlap.ts
  // chainedPickStands): beside the real closed-think mask, a run that a newline ends and whose
  // mask after it allows one id only, which the row chained past the newline did not pick: that
  // request recomputes (steps.mispredicted), and both answer as the plain loop does.
  test('mask runs chain: an open reasoning block, and a run whose end refuses the chained pick (recomputed); the plain loop\'s ids', async () => {
    const reqs = (e: Engine): GenerateRequest[] => {
      const t = e.tokenizer;
      const ids = { open: t.tokenToId(THINK_OPEN), close: t.tokenToId(THINK_CLOSE) };
      const prompt = (q: string) => t.encode(`<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n<think>\n`);
      return [
        { promptIds: prompt('What is 2 + 3?'), maxTokens: 24, ignoreEos: true, logitsAdjust: { bias: null, constraint: withClosedThinkMask(null, 'open', ids, e.sampleVocab) } },
        { promptIds: prompt('What is 4 + 1?'), maxTokens: 16, ignoreEos: true, logitsAdjust: { bias: null, constraint: switchesTo(t.encode('\n')[0]!, onlyId(5)) } },
      ];
    };
    const onlyId = (id: number): Uint32Array => Uint32Array.from({ length: 32 }, (_, w) => (w === id >>> 5 ? 1 << (id & 31) : 0));
    const run = (overlapSteps: boolean) => withEngine({ ...base, model: TINY_THINK(), overlapSteps, prefixCache: false }, async (e) => {
      const ids = await Promise.all(reqs(e).map(async (r) => [...(await e.complete(r)).outputIds]));
      e.checkIntegrity();
      const { overlapped, mispredicted } = e.stats().steps;
      return { ids, overlapped, mispredicted, text: ids.map((i) => e.tokenizer.decode(i)) };
    });
    const off = await run(false);
    const on = await run(true);
    assert.deepEqual(on.ids, off.ids, 'overlap on');
    assert.ok(off.text[0]!.includes('</think>'), `the reasoning closes mid-answer: ${JSON.stringify(off.text[0])}`);
    assert.ok(on.overlapped > 10, `steps chained under the runs (${on.overlapped})`);
    assert.ok(on.mispredicted >= 1, `the pick past the run's end was refused and recomputed (${on.mispredicted})`);
  });
});

/** Resolves once the running requests have produced `n` tokens in all (polls the stats). */
async function firstTokens(e: Engine, n: number): Promise<void> {
  while (e.stats().tokens.generated < n) await new Promise((r) => setTimeout(r, 5));
}

/** Stream `req`; call `after` once it has `n` tokens; resolve with its done event. */
async function collect(e: Engine, req: GenerateRequest, signal: AbortSignal, n: number, after: () => void): Promise<{ finishReason: string }> {
  let seen = 0;
  for await (const ev of e.generate({ ...req, signal })) {
    if (ev.type === 'delta' && (seen += ev.ids.length) >= n && seen - ev.ids.length < n) after();
    if (ev.type === 'done') return ev;
  }
  throw new Error('no done event');
}
