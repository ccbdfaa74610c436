// Kernels.candidateDraws' WGSL twin (wgsl/candidate-draws.ts: ranks by a bitonic sort, top-p by
// a search over ranks) == the definition written out (candidate-draw-definition.ts: O(c²) ranks
// and masses; the ref, kernels/candidate-draws.ts, equals it too: candidate-draws.test) bit for
// bit on adversarial rows (candidate-draw-property.ts): weight ties everywhere, ±∞ and NaN
// values, padding, every branch of the cuts, c from 1 to 2048 (powers of two and not), greedy
// rows' slots left as they were.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { drawsOnGpu, gpuUnderTest, webgpuEngineKernels } from './webgpu-helpers.js';
import { drawBatches } from './candidate-draw-property.js';
import { candidateDrawsByDefinition } from './candidate-draw-definition.js';

before(webgpuEngineKernels);

test('webgpu candidateDraws == the definition on adversarial rows (ties, ±∞, NaN, padding, every cut), c from 1 to 2048', async () => {
  const g = await gpuUnderTest();
  let [rows, drawn] = [0, 0];
  for (const b of drawBatches([1, 2, 3, 5, 17, 64, 100, 256, 333, 1024, 1500, 2048], 40)) {
    const m = b.rows.length;
    const want = new Int32Array(m + 1).fill(-7);
    candidateDrawsByDefinition(want, 1, b.ids, b.vals, 0, b.c, b.rows);
    const picks = await drawsOnGpu(g, b.ids, b.vals, b.c, b.rows);
    b.rows.forEach((r, i) => {
      rows++;
      if (r) drawn++;
      assert.equal(picks[1 + i], want[1 + i], `c = ${b.c}, row ${i} ${JSON.stringify(r)}: webgpu pick == the definition's`);
    });
    assert.equal(picks[0], -7, 'the slot before the output untouched');
  }
  console.log(JSON.stringify({ rows, drawn }));
});
