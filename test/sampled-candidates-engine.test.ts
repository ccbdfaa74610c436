// Sampled decode rows drawn from their top candidates (engine/candidate-step.ts) == the
// same requests with the candidate path forced off (every row read whole and sampled by
// Kernels.sample), on the wasm engine: seeded requests under Qwen's default cut, under
// min-p alone, and with top-k off (which must not take candidates at all); batched and alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { CASES, runAll, sampledRequests } from './sampled-candidates-cases.js';
import type { Engine } from '../src/engine/engine.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';

const opts = { kernels: 'wasm' as const, specTokens: 0, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
// on CPU backends the path is off unless forced (the runner's 'auto'): these tests force it
const forced = { sampledCandidates: true };
const N = 12;

for (const [name, sampling] of Object.entries(CASES)) {
  test(`wasm, ${name}: candidate path == full rows (seeded ids), batched`, async () => {
    const reqs = sampledRequests(sampling, N);
    const off = await withEngine({ ...opts, model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
    const on = await withEngine({ ...opts, ...forced, model: TINY_THINK() }, (e) => runAll(e, reqs));
    assert.deepEqual(on.ids, off.ids);
    assert.equal(off.rows, 0, 'forced off: no candidate rows');
    // every decode token after the first (the prefill's last position samples too); top-p
    // alone too (tiny-think's 1,000 ids fit NUCLEUS_CANDIDATES: every id a candidate)
    assert.ok(on.rows >= reqs.length * (N - 1), `candidate rows ${on.rows}`);
    if (name === 'minPWide') assert.equal(on.fallbacks, on.rows, 'more kept ids than candidates: every row refused');
    else if (name === 'biased') assert.ok(on.fallbacks < on.rows, `fallbacks ${on.fallbacks} of ${on.rows}`);
    else assert.equal(on.fallbacks, 0, `fallbacks ${on.fallbacks} of ${on.rows}`);
  });
}

test('wasm, hot top-k: a request alone == in the batch (candidate path on)', async () => {
  const reqs = sampledRequests(CASES.hotTopK, N);
  await withEngine({ ...opts, ...forced, model: TINY_THINK() }, async (e) => {
    const batched = await runAll(e, reqs);
    for (const [i, r] of reqs.entries()) assert.deepEqual((await runAll(e, [r])).ids[0], batched.ids[i], `request ${i}`);
  });
});

test('wasm, MTP on (k = 3): sampled verify rows, drafts and the prefill-end rows take candidates; ids == forced off (more: mtp-sampled-candidates)', async () => {
  const reqs = sampledRequests(CASES.hotTopK, N);
  const mtp = { ...opts, specTokens: 3, specAdaptive: false, specSampling: 'rejection' as const };
  const off = await withEngine({ ...mtp, model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
  const on = await withEngine({ ...mtp, ...forced, model: TINY_THINK() }, (e) => runAll(e, reqs));
  assert.deepEqual(on.ids, off.ids);
  assert.ok(on.rows >= reqs.length, `candidate rows ${on.rows}`);
});

/** The chat route's JSON-schema constraint over an engine (thinking off). */
function constraintFor(engine: Engine, schema: unknown): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false)!;
}

test('wasm, a JSON-schema constraint with a bias and penalties: candidates (masked candidates at −∞) == forced off', async () => {
  const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 6 } }, required: ['n', 's'] };
  const run = (sampledCandidates: boolean): Promise<Awaited<ReturnType<typeof runAll>>> =>
    withEngine({ ...opts, model: TINY_THINK(), sampledCandidates }, (e) => runAll(e, sampledRequests(CASES.hotTopK, 16).map((r, i) => ({
      ...r, presencePenalty: 0.4, logitsAdjust: { bias: i === 0 ? null : new Map([[54, 1.5]]), constraint: constraintFor(e, schema) },
    }))));
  const off = await run(false);
  const on = await run(true);
  assert.deepEqual(on.ids, off.ids);
  assert.ok(on.rows > 0, 'constrained rows read candidates');
  console.log(`# constrained: ${on.rows} candidate rows, ${on.fallbacks} refused`);
});

test('wasm, a mixed batch (greedy, greedy + bias, sampled, sampled + logprobs, top-p only): candidates on == forced off', async () => {
  const [a, b, c, d, e] = [...sampledRequests(CASES.hotTopK, N), ...sampledRequests(CASES.topPOnly, N)];
  const mixed = [
    { ...a!, temperature: 0 }, { ...b!, temperature: 0, logitsAdjust: { bias: new Map([[54, 1]]) } }, c!,
    { ...d!, topK: 20, logprobs: { top: 2, onToken: () => {} } }, e!,
  ];
  const off = await withEngine({ ...opts, model: TINY_THINK(), sampledCandidates: false }, (en) => runAll(en, mixed));
  const on = await withEngine({ ...opts, ...forced, model: TINY_THINK() }, (en) => runAll(en, mixed));
  assert.deepEqual(on.ids, off.ids);
  // the plain sampled request (c) and the top-p one (e) read candidates: N rows each
  assert.equal(on.rows, 2 * N, `candidate rows ${on.rows}`);
});

test('wasm by default (auto): sampled rows read in place and sample on the SIMD sampler, no candidates', async () => {
  const got = await withEngine({ ...opts, model: TINY_THINK() }, (e) => runAll(e, sampledRequests(CASES.qwen, 4)));
  assert.equal(got.rows, 0);
});
