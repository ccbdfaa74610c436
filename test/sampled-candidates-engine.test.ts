// Sampled decode rows drawn from their top candidates (engine/candidate-step.ts) == the
// same requests with the candidate path forced off (every row read whole and sampled by
// Kernels.sample), on the wasm engine: seeded requests under Qwen's default cut, under
// min-p alone, and with top-k off (which must not take candidates at all); batched and alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { CASES, runAll, sampledRequests } from './sampled-candidates-cases.js';

const opts = { kernels: 'wasm' as const, specTokens: 0, kvCacheTokens: 2048, maxContext: 1024, prefixCache: false, maxRunning: 8 };
const N = 12;

for (const [name, sampling] of Object.entries(CASES)) {
  test(`wasm, ${name}: candidate path == full rows (seeded ids), batched`, async () => {
    const reqs = sampledRequests(sampling, N);
    const off = await withEngine({ ...opts, model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
    const on = await withEngine({ ...opts, model: TINY_THINK() }, (e) => runAll(e, reqs));
    assert.deepEqual(on.ids, off.ids);
    assert.equal(off.rows, 0, 'forced off: no candidate rows');
    if (name === 'topPOnly') assert.equal(on.rows, 0, 'top-k and min-p off: every row reads its logits row');
    else {
      // every decode token after the first (the prefill's last position samples too)
      assert.ok(on.rows >= reqs.length * (N - 1), `candidate rows ${on.rows}`);
      if (name === 'minPWide') assert.equal(on.fallbacks, on.rows, 'more kept ids than candidates: every row refused');
      else assert.equal(on.fallbacks, 0, `fallbacks ${on.fallbacks} of ${on.rows}`);
    }
  });
}

test('wasm, hot top-k: a request alone == in the batch (candidate path on)', async () => {
  const reqs = sampledRequests(CASES.hotTopK, N);
  await withEngine({ ...opts, model: TINY_THINK() }, async (e) => {
    const batched = await runAll(e, reqs);
    for (const [i, r] of reqs.entries()) assert.deepEqual((await runAll(e, [r])).ids[0], batched.ids[i], `request ${i}`);
  });
});

test('wasm, MTP on (k = 3): sampled verify rows keep the full row; the prefill-end rows take candidates; ids == forced off', async () => {
  const reqs = sampledRequests(CASES.hotTopK, N);
  const mtp = { ...opts, specTokens: 3, specAdaptive: false };
  const off = await withEngine({ ...mtp, model: TINY_THINK(), sampledCandidates: false }, (e) => runAll(e, reqs));
  const on = await withEngine({ ...mtp, model: TINY_THINK() }, (e) => runAll(e, reqs));
  assert.deepEqual(on.ids, off.ids);
  assert.ok(on.rows >= reqs.length, `candidate rows ${on.rows}`);
});
