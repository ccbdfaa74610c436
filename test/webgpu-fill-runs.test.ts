// Kernels.fillRuns (the state pool's zeroing of a step's new slots) on webgpu: one
// dispatch whatever the number of runs, every run filled (runs longer than the capped
// grid's width included, NaN bits kept), nothing outside them touched, the ref's result.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const gpu = new WebGpuBoundaryKernels(await gpuUnderTest());
after(() => gpu.dispose());
const ref = createRefKernels();

test('fillRuns on webgpu == the ref, in one dispatch; a run past the tensor names the call', async () => {
  const n = 40_000;
  const init = Float32Array.from({ length: n }, (_, i) => i + 0.5);
  // lengths 1, 63, 64, 65 and one of 20,000 (past 256 workgroups of 64: the threads stride)
  const runs = [{ offset: 3, length: 1 }, { offset: 10, length: 63 }, { offset: 100, length: 64 }, { offset: 200, length: 65 }, { offset: 15_000, length: 20_000 }];
  for (const value of [0, Number.NaN, -2.5]) {
    const want = ref.alloc(n);
    want.set(init);
    ref.fillRuns(want, runs, value);
    const whole = gpu.alloc(n + 16);
    const t = gpu.view(whole, 16, n); // at an offset in its buffer
    gpu.write(t, 0, init);
    const before = gpu.recordedDispatches;
    gpu.fillRuns(t, runs, value);
    assert.equal(gpu.recordedDispatches - before, 1, 'one dispatch for every run');
    const [got] = await gpu.readBack([{ t, offset: 0, length: n }]);
    for (let i = 0; i < n; i++) if (!Object.is(got![i], want[i])) assert.fail(`value ${value}: [${i}] ${got![i]} !== ${want[i]}`);
  }
  assert.throws(() => gpu.fillRuns(gpu.alloc(8), [{ offset: 4, length: 5 }], 0), /fillRuns: 5 elements at 4/);
});
