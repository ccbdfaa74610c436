// Sampled MTP rounds on candidate lists (engine/candidate-step.ts for the verify positions'
// p_i, speculative/draft-candidates.ts for the drafts' q_i, speculative/sparse-accept.ts for
// the walk) == the same seeded requests with the candidate path forced off (every verify
// position and draft row read whole, the full-row walk of accept.ts), on the wasm engine with
// k = 3: identical ids, not just the same distribution. Covers top-k alone, min-p alone,
// top-p with top-k, penalties (counting the drafts before a position), a logit bias, a min-p
// the candidates cannot hold (every row refused: the second read-back), a mixed batch, and a
// JSON-schema constraint (masks after the drafts; some rows refused).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { CASES, runAll, sampledRequests } from './sampled-candidates-cases.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Engine } from '../src/engine/engine.js';
import type { Constraint } from '../src/constrain/constraint.js';
import type { ServerContext } from '../src/server/context.js';
import { TokenTexts } from '../src/server/api/logprobs.js';
import { structuredConstraint } from '../src/server/api/structured.js';

// rejection sampling (seeded requests are matched under 'auto'): its q's and p's must be exact
const opts = { kernels: 'wasm' as const, specTokens: 3, specAdaptive: false, specSampling: 'rejection' as const, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 16;

const MTP_CASES = {
  topKOnly: { temperature: 1.5, topK: 20 },
  minP: CASES.minP,
  qwen: CASES.qwen,
  hotTopK: CASES.hotTopK,
  penalised: CASES.penalised,
  biased: CASES.biased,
  minPWide: CASES.minPWide,
} as const;

async function onAndOff(reqs: readonly GenerateRequest[]): Promise<{ on: Awaited<ReturnType<typeof runAll>>; off: Awaited<ReturnType<typeof runAll>> }> {
  const off = await withEngine({ ...opts, model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
  const on = await withEngine({ ...opts, model: TINY_THINK(), sampledCandidates: true }, (e) => runAll(e, reqs));
  return { on, off };
}

for (const [name, sampling] of Object.entries(MTP_CASES)) {
  test(`wasm MTP k = 3, ${name}: verify positions and drafts on candidates == forced off (seeded ids)`, async () => {
    const reqs = sampledRequests(sampling, N);
    const { on, off } = await onAndOff(reqs);
    assert.deepEqual(on.ids, off.ids);
    assert.equal(off.rows, 0, 'forced off: no candidate rows');
    const tokens = on.ids.reduce((n, ids) => n + ids.length, 0);
    // a round of k = 3 has 4 verify positions and 3 draft rows and emits 1..4 tokens: well
    // over one candidate row per token when the rounds take candidates
    assert.ok(on.rows > 1.5 * tokens, `candidate rows ${on.rows} for ${tokens} tokens`);
    if (name === 'minPWide') assert.equal(on.fallbacks, on.rows, 'more kept ids than candidates: every row refused');
    else if (name !== 'biased') assert.equal(on.fallbacks, 0, `fallbacks ${on.fallbacks} of ${on.rows}`);
    console.log(`# ${name}: ${on.rows} candidate rows, ${on.fallbacks} read whole, ${tokens} tokens`);
  });
}

test('wasm MTP k = 3, a mixed batch (greedy, greedy + penalties, sampled, sampled + logprobs, top-p only): candidates on == forced off', async () => {
  const [a, b, c, d, e] = [...sampledRequests(CASES.hotTopK, N), ...sampledRequests(CASES.topPOnly, N)];
  const mixed: GenerateRequest[] = [
    { ...a!, temperature: 0 }, { ...b!, temperature: 0, presencePenalty: 0.5 }, c!,
    { ...d!, topK: 20, logprobs: { top: 2, onToken: () => {} } }, e!,
  ];
  const { on, off } = await onAndOff(mixed);
  assert.deepEqual(on.ids, off.ids);
  // the plain sampled request (c) and the top-p one (e) read candidates: verify positions and drafts
  assert.ok(on.rows > 1.5 * N, `candidate rows ${on.rows}`);
});

/** The chat route's JSON-schema constraint over an engine (thinking off). */
function constraintFor(engine: Engine, schema: unknown): Constraint {
  const ctx = { engine, texts: new TokenTexts(engine.tokenizer) } as unknown as ServerContext;
  return structuredConstraint(ctx, { kind: 'json_schema', name: 't', schema }, null, false)!;
}

test('wasm MTP k = 3, a JSON-schema constraint with a bias and penalties: drafts and verify positions (masked after the drafts before them) == forced off', async () => {
  const schema = { type: 'object', properties: { n: { type: 'integer' }, s: { type: 'string', maxLength: 6 } }, required: ['n', 's'] };
  const run = (sampledCandidates: boolean): Promise<Awaited<ReturnType<typeof runAll>>> =>
    withEngine({ ...opts, model: TINY_THINK(), sampledCandidates }, (e) => runAll(e, sampledRequests(CASES.hotTopK, N).map((r, i) => ({
      ...r, presencePenalty: 0.4, logitsAdjust: { bias: i === 0 ? null : new Map([[54, 1.5]]), constraint: constraintFor(e, schema) },
    }))));
  const off = await run(false);
  const on = await run(true);
  assert.deepEqual(on.ids, off.ids);
  assert.ok(on.rows > on.fallbacks, `candidate rows ${on.rows}, read whole ${on.fallbacks}`);
  console.log(`# constrained MTP: ${on.rows} candidate rows, ${on.fallbacks} read whole`);
});
