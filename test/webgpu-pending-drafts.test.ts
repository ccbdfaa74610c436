// One read-back per MTP round on webgpu (engine/speculative/pending-drafts.ts; on by default with
// overlapped decode): a greedy round's drafts stay on the device, the verify embeds them there and
// reads them back with its picks. The outputs must be those of the 2-read-back round (--overlap
// off) and of MTP off, and every step must read back once: no read-back of drafts between steps.
// And with MTP on, decode steps the adaptive policy leaves without drafts (k = 0) overlap
// (engine/overlap.ts), switching back to rounds when k rises again; a seeded sampled request
// among them follows the policy (only a seeded one verified by rejection keeps its k).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { assertSameRuns, countingReadBacks, type RunResult, runAll, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

const base = { kernels: 'webgpu' as const, kvCacheTokens: 2048, maxContext: 1024, maxRunning: 4, specAdaptive: false, prefixCache: false };

/** Three requests of unequal lengths (chains near max_tokens draft fewer than k). */
const REQUESTS: GenerateRequest[] = [
  { messages: [{ role: 'user', content: 'What is 12 + 7?' }], maxTokens: 30 },
  { messages: [{ role: 'user', content: 'Name a color.' }], maxTokens: 11 },
  { prompt: 'The capital of France is', maxTokens: 13, ignoreEos: true },
];

interface Outcome { runs: RunResult[]; readBacks: number; steps: number; deferred: number; overlapped: number; rounds: number }

async function generate(specTokens: number, overlapSteps: boolean, reqs: readonly GenerateRequest[],
  specK?: (decoding: number) => number): Promise<Outcome> {
  return withEngine({ ...base, model: TINY_THINK(), specTokens, overlapSteps, ...(specK ? { specK } : {}) }, async (e: Engine) => {
    const { value: runs, readBacks } = await countingReadBacks(e, () => runAll(e, reqs, false));
    e.checkIntegrity();
    const s = e.stats();
    return { runs, readBacks, steps: s.steps.prefill + s.steps.decode + s.steps.verify, deferred: s.spec.deferredRounds, overlapped: s.steps.overlapped,
      rounds: s.spec.rounds };
  });
}


before(async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
});

/** The second test's requests: REQUESTS and a seeded sampled one. */
const MIXED: GenerateRequest[] = [...REQUESTS, { prompt: 'Counting from one: one, two,', maxTokens: 24, ignoreEos: true, temperature: 0.7, topK: 20, seed: 3 }];
/** MTP off, once for both tests (an engine and its run less, ~20 CPU-s): MIXED batched. Its first
 * three runs are REQUESTS' (a request's outputs do not depend on its batch: webgpu-engine's
 * batch of 16 == alone). */
let offMixed: Promise<Outcome> | null = null;
const mtpOff = (): Promise<Outcome> => (offMixed ??= generate(0, true, MIXED));

test('webgpu MTP k = 3: drafts read back with their verify == the 2-read-back round == MTP off; one read-back a step', async () => {
  const off = (await mtpOff()).runs.slice(0, REQUESTS.length);
  const twoReads = await generate(3, false, REQUESTS);
  const oneRead = await generate(3, true, REQUESTS);
  assertSameRuns(twoReads.runs, off, '--overlap off');
  assertSameRuns(oneRead.runs, off, 'drafts on the device');
  assert.equal(twoReads.deferred, 0, '--overlap off defers nothing');
  assert.ok(twoReads.readBacks > twoReads.steps, `the 2-read-back round: ${twoReads.readBacks} read-backs in ${twoReads.steps} steps`);
  assert.ok(oneRead.deferred > 0, 'rounds were deferred');
  assert.equal(oneRead.readBacks, oneRead.steps, `${oneRead.readBacks} read-backs in ${oneRead.steps} steps`);
});

test('webgpu MTP on, the policy at k = 0 for a stretch: those decode steps overlap (a seeded sampled request among them), rounds resume after; outputs == MTP off', async () => {
  let calls = 0;
  // k = 0 from the 4th choice to the 21st, k = 3 around it (one choice a step: a policy asked twice
  // for a chained step would chain at the 21st and draft at the 22nd)
  const specK = (): number => (++calls >= 4 && calls <= 21 ? 0 : 3);
  // a seeded sampled request follows the policy too (verified by matching: accept.ts)
  const mixed = await generate(3, true, MIXED, specK);
  assertSameRuns(mixed.runs, (await mtpOff()).runs, 'k switched off and on');
  assert.ok(mixed.overlapped > 0, 'decode steps at k = 0 were chained');
  assert.ok(mixed.rounds > 0 && mixed.deferred > 0, 'MTP rounds ran before and after');
});
