// Kernels.candidateDraws on ref and wasm (kernels/candidate-draws.ts): the f32 proposal drawn
// from a row's top candidates with its uniform == the exact f64 draw the host replays
// (sampled-candidates.ts, or the full row when the candidates are refused) on nearly every
// seeded row of the task's cuts; a greedy row's slot is left as it was; wasm == ref; the ref
// (sort-based) == the definition written out (candidate-draw-definition.ts) on adversarial rows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { AnyKernels } from '../src/kernels/types.js';
import { drawCases, exactPick, type DrawCase } from './candidate-draw-cases.js';
import { drawBatches } from './candidate-draw-property.js';
import { candidateDrawsByDefinition } from './candidate-draw-definition.js';

function runOn(k: AnyKernels, c: DrawCase): Int32Array {
  const out = new Int32Array(c.rows.length + 3).fill(-7);
  k.candidateDraws(out, 3, c.ids, c.vals, 0, c.c, c.rows);
  return out.slice(3);
}

test('candidateDraws (ref, wasm): the f32 proposal == the exact draw on nearly every row; greedy slots untouched; wasm == ref', async () => {
  const ref = createRefKernels();
  const wasm = await createWasmKernels({ threads: 1 });
  try {
    let [rows, agree] = [0, 0];
    for (const c of drawCases()) {
      const r = runOn(ref, c);
      assert.deepEqual(runOn(wasm, c), r, `${c.name}: wasm == ref`);
      c.rows.forEach((row, i) => {
        if (!row) return assert.equal(r[i], -7, `${c.name}: a greedy row's slot is left as it was`);
        rows++;
        if (r[i] === exactPick(c, i)) agree++;
      });
    }
    // f32 sums differ from the f64 ones only at a cut or draw boundary
    assert.ok(agree >= rows - 2, `${agree} of ${rows} proposals == exact`);
    console.log(JSON.stringify({ rows, proposalsExact: agree }));
  } finally {
    wasm.dispose();
  }
});

test('candidateDraws: bounds name the call', () => {
  const ref = createRefKernels();
  const row = { invTemperature: 1, topK: 0, topP: 1, minP: 0, u: 0.5 };
  assert.throws(() => ref.candidateDraws(new Int32Array(1), 0, new Int32Array(3000), new Float32Array(3000), 0, 3000, [row]), /candidateDraws: c = 3000/);
  assert.throws(() => ref.candidateDraws(new Int32Array(1), 1, new Int32Array(4), new Float32Array(4), 0, 4, [row]), /past the output/);
  assert.throws(() => ref.candidateDraws(new Int32Array(2), 0, new Int32Array(4), new Float32Array(4), 0, 4, [row, row]), /past the candidates/);
});

test('candidateDraws (ref, sort-based) == the definition written out (O(c²)) on adversarial rows: ties, ±∞, NaN, padding, every cut, c from 1 to 2048', () => {
  const ref = createRefKernels();
  let rows = 0;
  for (const b of drawBatches([1, 2, 3, 5, 17, 64, 100, 256, 333, 1024, 1500, 2048], 40, 77)) {
    const m = b.rows.length;
    const got = new Int32Array(m).fill(-7);
    const want = new Int32Array(m).fill(-7);
    ref.candidateDraws(got, 0, b.ids, b.vals, 0, b.c, b.rows);
    candidateDrawsByDefinition(want, 0, b.ids, b.vals, 0, b.c, b.rows);
    b.rows.forEach((r, i) => assert.equal(got[i], want[i], `c = ${b.c}, row ${i} ${JSON.stringify(r)}`));
    rows += m;
  }
  // the seeded task cuts too
  for (const c of drawCases()) {
    const m = c.rows.length;
    const [got, want] = [new Int32Array(m), new Int32Array(m)];
    ref.candidateDraws(got, 0, c.ids, c.vals, 0, c.c, c.rows);
    candidateDrawsByDefinition(want, 0, c.ids, c.vals, 0, c.c, c.rows);
    assert.deepEqual(got, want, c.name);
    rows += m;
  }
  console.log(JSON.stringify({ rows }));
});
