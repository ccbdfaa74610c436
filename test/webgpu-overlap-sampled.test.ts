// Overlapped sampled decode on webgpu (engine/overlap.ts): a chained step's sampled rows embed
// the device's draw from the step before's top candidates, with the uniform the host's exact
// draw then takes; a row the host overrules is computed for nothing and its request recomputes.
// Seeded outputs must be those of --overlap off token for token (the same uniforms consumed),
// whether the device's proposals agree (they nearly always do) or are forced to disagree.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { assertSameRuns, type RunResult, runAll, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { webgpuEngineKernels } from './webgpu-helpers.js';

const base = { kernels: 'webgpu' as const, specTokens: 0, kvCacheTokens: 2048, maxContext: 1024, maxRunning: 4, prefixCache: false };

/** Sampled requests with a top-k cut (they chain; top-p and min-p on top of it too), seeded,
 * and one greedy. At most 16 tokens each (was 24, 18, 20: most of the file's CPU-s is these
 * decode steps, four engines' worth): the sampled ones still end at different steps, and a
 * run still chains more than 10 steps (the first test). */
const REQUESTS: GenerateRequest[] = [
  { messages: [{ role: 'user', content: 'What is 12 + 7?' }], maxTokens: 16, temperature: 0.9, topK: 20, seed: 1 },
  { messages: [{ role: 'user', content: 'Name a color.' }], maxTokens: 13, temperature: 1.2, topK: 40, topP: 0.9, seed: 2 },
  { prompt: 'The capital of France is', maxTokens: 14, ignoreEos: true, temperature: 0.7, topK: 30, minP: 0.05, seed: 3 },
  { prompt: 'Counting from one: one, two,', maxTokens: 16, ignoreEos: true },
];

interface Outcome { runs: RunResult[]; overlapped: number; mispredicted: number; preemptions: number }

async function generate(overlapSteps: boolean, chainDrawU?: (u: number) => number): Promise<Outcome> {
  return withEngine({ ...base, model: TINY_THINK(), overlapSteps, ...(chainDrawU ? { chainDrawU } : {}) }, async (e) => {
    const runs = await runAll(e, REQUESTS, false);
    e.checkIntegrity();
    const s = e.stats();
    return { runs, overlapped: s.steps.overlapped, mispredicted: s.steps.mispredicted, preemptions: s.preemptions };
  });
}

let plain: Outcome;

before(async () => {
  await webgpuEngineKernels(); // fails with the reason when no adapter can be had
  plain = await generate(false);
});

test('sampled decode overlaps: the device draws with the exact draw\'s uniform; seeded outputs == --overlap off', async () => {
  assert.equal(plain.overlapped, 0);
  const on = await generate(true);
  assertSameRuns(on.runs, plain.runs, 'overlap on');
  assert.ok(on.overlapped > 10, `sampled steps chained: ${on.overlapped}`);
});

test('proposals the host overrules (forced: another uniform) cost a recompute, never a different token', async () => {
  const forced = await generate(true, (u) => (u + 0.5) % 1);
  assertSameRuns(forced.runs, plain.runs, 'forced mispredictions');
  assert.ok(forced.mispredicted > 0, 'the host overruled device draws');
  assert.equal(forced.preemptions, forced.mispredicted, `${forced.preemptions} recomputes for ${forced.mispredicted} overruled rows`);
});

test('a row whose candidates are refused after the next step was recorded (its logits overwritten) recomputes: the same tokens', async () => {
  // every 5th certified row refused, as ties at the top-k edge would: with overlap off it is read
  // whole; chained past, its logits are gone and its request recomputes
  let n = 0;
  const refuseCandidate = (): boolean => ++n % 5 === 0;
  const run = (overlapSteps: boolean): Promise<Outcome> => withEngine({ ...base, model: TINY_THINK(), overlapSteps, refuseCandidate }, async (e) => {
    const runs = await runAll(e, REQUESTS, false);
    e.checkIntegrity();
    const s = e.stats();
    return { runs, overlapped: s.steps.overlapped, mispredicted: s.steps.mispredicted, preemptions: s.preemptions };
  });
  const on = await run(true);
  assertSameRuns(on.runs, plain.runs, 'refused rows');
  assert.ok(on.mispredicted > 0 && on.preemptions === on.mispredicted, `lost rows recomputed: ${on.mispredicted}`);
  assert.ok(on.mispredicted <= 3, `a request whose row was lost chains no more: ${on.mispredicted} recomputes for 3 sampled requests`);
});
