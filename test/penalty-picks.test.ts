// Kernels.penaltyPicks on ref and wasm (kernels/penalty-picks.ts): the gathered values let the
// host replay the exact f64 pick (== greedyToken over the full row) on random penalised rows and
// on a crafted near-tie, where the f32 pick must differ (so a replay has something to catch);
// wasm == ref bit for bit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { applying, chainCase, check, checkApplied, checkChain, nearTieCase, randomCases, runChain, runOn } from './penalty-pick-cases.js';

test('penaltyPicks (ref, wasm): replay from the gathered values == greedyToken; f32 picks agree off ties; wasm == ref', async () => {
  const ref = createRefKernels();
  const wasm = await createWasmKernels({ threads: 1 });
  try {
    let [rows, agree] = [0, 0];
    for (const c of randomCases()) {
      const r = runOn(ref, c);
      const w = runOn(wasm, c);
      assert.deepEqual(w.ids, r.ids, `${c.name}: wasm ids == ref`);
      assert.deepEqual(w.vals, r.vals, `${c.name}: wasm values == ref`);
      const ok = check(c, r.ids, r.vals);
      rows += ok.length;
      agree += ok.filter((x) => x).length;
    }
    // coarse logits make exact ties, which f32 and f64 penalties break alike: most picks agree
    assert.ok(agree >= rows * 0.8, `${agree} of ${rows} f32 picks == exact`);
    const tie = nearTieCase();
    const r = runOn(ref, tie);
    assert.deepEqual(check(tie, r.ids, r.vals), [false], 'the near tie: the f32 pick differs from the exact one (the replay catches it)');
    assert.equal(r.ids[tie.call.steps * tie.call.idsStride], 5);
    console.log(JSON.stringify({ rows, f32PicksExact: agree }));
  } finally {
    wasm.dispose();
  }
});

test('penaltyPicks in a draft chain (ref, wasm): each call reads the picks before it as drafts, the replay == greedyToken', async () => {
  const ref = createRefKernels();
  const wasm = await createWasmKernels({ threads: 1 });
  try {
    const c = chainCase();
    const r = await runChain(ref, c);
    const w = await runChain(wasm, c);
    assert.deepEqual([w.picks, w.bests, w.vals], [r.picks, r.bests, r.vals], 'wasm == ref');
    const same = checkChain(c, r);
    assert.equal(same, c.live.reduce((a, m) => a + m, 0), 'every f32 pick of the chain == exact (no near tie here)');
    assert.ok(new Set(r.picks.map((p) => p[0])).size > 1, `the penalties move row 0's picks: ${JSON.stringify(r.picks)}`);
  } finally {
    wasm.dispose();
  }
});

test('penaltyPicks with apply (ref, wasm): x holds the f32-adjusted rows (touched ids ≈ the definition, the rest raw), picks and values unchanged; wasm == ref', async () => {
  const ref = createRefKernels();
  const wasm = await createWasmKernels({ threads: 1 });
  try {
    let touched = 0;
    for (const base of randomCases()) {
      const c = applying(base);
      const r = runOn(ref, c);
      const w = runOn(wasm, c);
      assert.deepEqual(w, r, `${c.name}: wasm == ref (ids, values, x)`);
      const plain = runOn(ref, base);
      assert.deepEqual([r.ids, r.vals], [plain.ids, plain.vals], `${c.name}: picks and gathered values as without apply`);
      assert.ok(plain.x.every((v, i) => Object.is(v, base.x[i])), `${base.name}: without apply x is unchanged`);
      touched += checkApplied(c, r.x);
    }
    assert.ok(touched > 100, `${touched} touched values checked`);
  } finally {
    wasm.dispose();
  }
});
