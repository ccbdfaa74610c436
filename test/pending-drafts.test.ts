// One read-back per MTP round (engine/speculative/pending-drafts.ts): a greedy round's drafts stay
// on the kernels until the verify that embeds them and reads them back with its picks. Forced on
// the CPU backend (a GPU turns it on by default), it must give the ids, texts and finish reasons
// of the 2-read-back round and of MTP off, batched and alone, with chains cut short by max_tokens,
// stop strings, preemption, aborts, and rounds mixing requests that cannot defer (sampled
// without the device draw path, penalised: such a round reads its drafts back as before);
// logprobs requests defer (their rows come back whole), with MTP off's logprobs. Every step of
// a deferred run reads back once: no read-back of drafts between steps.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { TokenLogprob } from '../src/engine/sample-batch.js';
import { assertSameRuns, countingReadBacks, evalPrompts, runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { allocBatchMemory, loadModel } from '../src/model/model.js';
import { StepArena } from '../src/model/arena.js';
import { forwardHidden } from '../src/model/forward.js';
import { TINY_THINK } from './paths.js';

const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

function requests(n: number, maxTokens: number): GenerateRequest[] {
  // max_tokens differ by 1..3 so that chains near their end draft fewer than k (unequal chains)
  return evalPrompts(n).map((messages, i) => ({ messages, maxTokens: maxTokens + (i % 4) }));
}

/** deferred: verify steps whose drafts came back with them, of `verifySteps`; rounds: requests' verify rounds. */
interface Run { results: RunResult[]; readBacks: number; steps: number; verifySteps: number; deferred: number; rounds: number; accepted: number }


async function run(reqs: readonly GenerateRequest[], specTokens: number, deferredDrafts: boolean, extra: Parameters<typeof withEngine>[0] = {}): Promise<Run> {
  return withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens, specAdaptive: false, maxRunning: 8, poisonPadding: true, deferredDrafts, ...extra },
    async (e) => {
      const { value: results, readBacks } = await countingReadBacks(e, () => runAll(e, reqs, false));
      const s = e.stats();
      return { results, readBacks, steps: s.steps.prefill + s.steps.decode + s.steps.verify, verifySteps: s.steps.verify, deferred: s.spec.deferredRounds,
        rounds: s.spec.rounds, accepted: s.spec.accepted };
    });
}


test('drafts read back with their verify: the ids of the 2-read-back round and of MTP off, one read-back a step (k = 1..4, 1 / 3 / 8 concurrent)', async () => {
  const reqs = requests(8, 14);
  const off = await run(reqs, 0, false);
  for (const k of [1, 2, 3, 4]) {
    for (const n of [1, 3, 8]) {
      const label = `k=${k} n=${n}`;
      const deferred = await run(reqs.slice(0, n), k, true);
      assertSameRuns(deferred.results, off.results.slice(0, n), label);
      assert.ok(deferred.rounds > 0 && deferred.deferred > 0, `${label}: rounds ${deferred.rounds}, deferred ${deferred.deferred}`);
      // every read-back is a step's: the drafts came back with the verify
      assert.equal(deferred.readBacks, deferred.steps, `${label}: ${deferred.readBacks} read-backs for ${deferred.steps} steps`);
      if (n === 3) {
        const plain = await run(reqs.slice(0, n), k, false);
        assertSameRuns(plain.results, off.results.slice(0, n), `${label} (drafts read back)`);
        // the 2-read-back round reads its drafts back between steps
        assert.ok(plain.readBacks > plain.steps, `${label}: the plain round read back ${plain.readBacks} times in ${plain.steps} steps`);
        assert.equal(plain.deferred, 0);
      }
    }
  }
});

test('stop strings, stop ids and max_tokens inside a deferred round end it as MTP off does', async () => {
  const base = requests(6, 24);
  const reqs = base.map((r, i) => (i % 2 === 0 ? { ...r, stop: ['\n', ' '] } : { ...r, ignoreEos: true, maxTokens: 5 + i }));
  const off = await run(reqs, 0, false);
  const deferred = await run(reqs, 3, true);
  assertSameRuns(deferred.results, off.results, 'stops');
  assert.ok(deferred.deferred > 0);
});

test('a round mixing greedy chains with sampled and penalised ones reads its drafts back: the same outputs', async () => {
  const base = requests(6, 16);
  const reqs: GenerateRequest[] = base.map((r, i) => {
    if (i === 1) return { ...r, temperature: 0.8, seed: 7 };
    if (i === 3) return { ...r, repetitionPenalty: 1.3 };
    if (i === 5) return { ...r, logprobs: { top: 2, onToken: () => undefined } };
    return r;
  });
  const plain = await run(reqs, 3, false);
  const deferred = await run(reqs, 3, true);
  assertSameRuns(deferred.results, plain.results, 'mixed');
  // rounds with only the greedy chains left (the others ended first) may still defer; a round
  // with a chain that cannot defer reads its drafts back: more read-backs than steps
  assert.ok(deferred.readBacks > deferred.steps, `mixed: ${deferred.readBacks} read-backs in ${deferred.steps} steps`);
  const greedyOnly = await run([base[0]!, base[2]!], 3, true);
  assert.equal(greedyOnly.readBacks, greedyOnly.steps);
});

test('logprobs requests defer (their verify rows come back whole, sampled after the drafts resolve): ids and logprobs of the 2-read-back round and MTP off, one read-back a step', async () => {
  const base = requests(4, 14);
  const streams: TokenLogprob[][] = [];
  // greedy and seeded sampled (verified by matching: MTP off's draws), each with top logprobs
  const reqs = (): GenerateRequest[] => base.map((r, i) => {
    const out: TokenLogprob[] = [];
    streams.push(out);
    return { ...r, ...(i % 2 === 1 ? { temperature: 0.8, topK: 20, seed: 11 + i } : {}), logprobs: { top: 3, onToken: (e: TokenLogprob) => out.push(e) } };
  });
  const sampledPaths = { sampledChain: true, sampledCandidates: true } as const;
  const logprobsOf = async (k: number, deferredDrafts: boolean): Promise<{ run: Run; logprobs: TokenLogprob[][] }> => {
    streams.length = 0;
    const got = await run(reqs(), k, deferredDrafts, sampledPaths);
    return { run: got, logprobs: [...streams] };
  };
  const off = await logprobsOf(0, false);
  const plain = await logprobsOf(3, false);
  const deferred = await logprobsOf(3, true);
  assertSameRuns(deferred.run.results, off.run.results, 'logprobs, deferred vs MTP off');
  assertSameRuns(plain.run.results, off.run.results, 'logprobs, 2-read-back round vs MTP off');
  assert.deepEqual(deferred.logprobs, off.logprobs, 'the logprobs of every token, as MTP off reports them');
  assert.ok(deferred.logprobs.every((l, i) => l.length === off.run.results[i]!.ids.length && l.length > 0));
  assert.ok(deferred.run.deferred > 0 && deferred.run.deferred === deferred.run.verifySteps, `${deferred.run.deferred} of ${deferred.run.verifySteps} verify steps deferred`);
  assert.equal(deferred.run.readBacks, deferred.run.steps, `${deferred.run.readBacks} read-backs in ${deferred.run.steps} steps`);
  assert.ok(plain.run.readBacks > plain.run.steps, 'the 2-read-back round reads its drafts back between steps');
});

test('preemption between a deferred round and its verify drops the claim; the request recomputes to the same ids', async () => {
  const reqs = requests(4, 20);
  const off = await run(reqs, 0, false);
  let calls = 0;
  // preempt request 1 every 7th check, mid-decode (its drafts pending on the kernels)
  const deferred = await run(reqs, 3, true, {
    preemptIf: (r) => r.tokens.length > r.promptIds.length + 2 && ++calls % 7 === 0,
  });
  assertSameRuns(deferred.results, off.results, 'preempted');
  assert.ok(calls >= 7, 'preemption happened');
});

test('aborting a request whose drafts are pending on the kernels loses no other request\'s work', async () => {
  const reqs = requests(4, 20);
  const off = await run(reqs, 0, false);
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 3, specAdaptive: false, maxRunning: 8, deferredDrafts: true }, async (e) => {
    const ctrl = new AbortController();
    const victim = (async () => {
      let deltas = 0;
      for await (const ev of e.generate({ ...reqs[0]!, maxTokens: 200, ignoreEos: true, signal: ctrl.signal })) {
        if (ev.type === 'delta' && ++deltas === 4) ctrl.abort();
        if (ev.type === 'done') return ev.finishReason;
      }
      return 'none';
    })();
    const others = runAll(e, reqs.slice(1), false);
    assert.equal(await victim, 'abort');
    assertSameRuns(await others, off.results.slice(1), 'beside an abort');
    assert.ok(e.stats().spec.deferredRounds > 0);
    e.checkIntegrity();
  });
});

test('draftOverride (bench --accept-rate) over a deferred round: overridden drafts from the host, the others from the kernels; the same rounds as read back', async () => {
  const reqs = requests(4, 18);
  const off = await run(reqs, 0, false);
  // the targets by prompt, from MTP off
  const targets = new Map<string, readonly number[]>();
  await withEngine({ model: TINY_THINK(), kernels: KERNELS, specTokens: 0 }, async (e) => {
    for (const r of reqs) {
      const done = await e.complete(r);
      targets.set(done.promptIds.join(','), done.outputIds);
    }
  });
  // every second draft replaced by the target's own token (accepted, so the next position's
  // input is that host id), the others the model's own (on the kernels when deferred)
  const draftOverride = (req: { promptIds: readonly number[]; tokens: readonly number[] }, d: number[]): number[] => {
    const target = targets.get(req.promptIds.join(','))!;
    return d.map((x, i) => (i % 2 === 1 ? target[req.tokens.length + i - req.promptIds.length] ?? x : x));
  };
  const plain = await run(reqs, 3, false, { draftOverride });
  const deferred = await run(reqs, 3, true, { draftOverride });
  assertSameRuns(plain.results, off.results, 'override, drafts read back');
  assertSameRuns(deferred.results, off.results, 'override, deferred');
  assert.equal(deferred.rounds, plain.rounds, 'the same rounds');
  assert.equal(deferred.accepted, plain.accepted, 'the same drafts accepted');
  assert.ok(deferred.accepted > deferred.rounds, `drafts after an overridden one were accepted: ${deferred.accepted} in ${deferred.rounds} rounds`);
  assert.equal(deferred.readBacks, deferred.steps);
});

test('forwardHidden with some ids on the kernels (DeviceRows: embed, embedIds, one gather) == every id from the host, bit for bit', () => {
  const k = createRefKernels();
  const model = loadModel(TINY_THINK(), k);
  // three sequences: a verify-like row whose last two ids are on the kernels, a decode row, a
  // prefill row whose last id is; the kernels' ids hold unused entries between (valid ids)
  const host = [[5, 17, 42], [9], [100, 200, 300, 400]];
  const onKernels = new Map([[1, 4], [2, 1], [7, 0]]); // stacked row → index into the ids
  const ids = k.allocI32(6);
  ids.set([400, 42, 3, 3, 17, 3]);
  const hiddenOf = (device: boolean): Float32Array => {
    const mems = allocBatchMemory(model, 3, 64);
    const ws = new StepArena(model);
    const first = [0, 3, 4]; // each sequence's first stacked row
    const seqs = host.map((tokens, s) => ({
      // a row whose id is on the kernels carries a placeholder on the host
      tokens: tokens.map((t, j) => (device && onKernels.has(first[s]! + j) ? 0 : t)),
      start: 0, pageTable: mems[s]!.pageTable, kv: mems[s]!.kv, state: mems[s]!.state, chunked: false,
    }));
    const index = Int32Array.from({ length: 8 }, (_, r) => onKernels.get(r) ?? -1);
    const fw = forwardHidden(model, ws, seqs, device ? { ids, offset: 0, at: { index, span: ids.length } } : null);
    return fw.hidden.slice();
  };
  const want = hiddenOf(false);
  const got = hiddenOf(true);
  assert.equal(got.length, want.length);
  assert.ok(sameBits(got, want), 'hidden rows differ');
});
