// The bind groups the webgpu encoder reuses across steps (kernels/webgpu/dispatch-memory.ts):
// parameters at a dynamic offset of one persistent uniform, each dispatch's group cached by
// (pipeline, buffers). A buffer reallocated between steps (a grown scratch, a replaced upload
// arena, a replaced parameter uniform) must never be read through a stale group: each case
// is compared with a fresh backend running the same step, and no device error is raised.
// A submit still in flight keeps its parameters when the next one rewrites the uniform.
// Warm steps create no bind group.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { takeUncapturedError } from '../src/kernels/webgpu/device.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';
import { BindGroupCache } from '../src/kernels/webgpu/dispatch-memory.js';
import { FILL } from '../src/kernels/webgpu/wgsl/rows.js';
import { sameBits } from './engine-helpers.js';

let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

function noDeviceError(): void {
  const err = takeUncapturedError();
  assert.equal(err, null, `webgpu device error: ${err}`);
}

/** fill the scratch `purpose` (length n) with `value`, then copy it strided into out. */
function scratchStep(k: WebGpuKernels, out: GpuTensor, n: number, value: number): Promise<[Float32Array]> {
  return run(k, (enc) => {
    const s = k.scratchTensor('bind-group-probe', n);
    k.fill(enc, s, 0, n, value);
    k.copyRows(enc, out, 0, 2, s, 0, 1, n, 1); // a stride: the copy_rows kernel, not a buffer copy
  }, out);
}

describe('webgpu bind-group reuse', () => {
  test('a scratch grown between two steps is read through its new buffer (== a fresh backend)', async () => {
    const n = 1000;
    const out = g.alloc.tensor([2 * n]);
    await scratchStep(g, out, 64, 1);
    const small = g.scratchTensor('bind-group-probe', 64).buffer;
    const [grown] = await scratchStep(g, out, n, 2);
    assert.notEqual(g.scratchTensor('bind-group-probe', n).buffer, small, 'precondition: the scratch was reallocated');
    noDeviceError();
    const fresh = await gpuUnderTest();
    try {
      const [want] = await scratchStep(fresh, fresh.alloc.tensor([2 * n]), n, 2);
      assert.ok(sameBits(grown, want), 'grown scratch vs fresh backend');
    } finally {
      fresh.dispose();
    }
    for (let i = 0; i < n; i++) assert.equal(grown[2 * i], 2, `out[${2 * i}]`);
  });

  test('a parameter uniform replaced by a larger one (a step past its slots) clears the groups', async () => {
    const slots = 700; // > the first uniform's 512 slots
    const out = g.alloc.tensor([slots]);
    await run(g, (enc) => g.fill(enc, out, 0, slots, 0)); // the fill group, made with the first uniform
    const before = g.dispatchMemory.params.replacements;
    const [many] = await run(g, (enc) => { for (let i = 0; i < slots; i++) g.fill(enc, out, i, 1, i + 0.5); }, out);
    assert.ok(g.dispatchMemory.params.replacements > before, 'precondition: the uniform was replaced');
    noDeviceError();
    assert.deepEqual([...many], Array.from({ length: slots }, (_, i) => i + 0.5));
    // the next step binds the new uniform (a group of the old one would be a device error)
    const [again] = await run(g, (enc) => g.fill(enc, out, 3, 2, -1), out);
    noDeviceError();
    assert.deepEqual([...again.slice(0, 6)], [0.5, 1.5, 2.5, -1, -1, 5.5]);
  });

  test('an upload arena replaced and freed between steps: later steps == a fresh backend', async () => {
    const k = new WebGpuBoundaryKernels(await gpuUnderTest());
    const fresh = new WebGpuBoundaryKernels(await gpuUnderTest());
    try {
      const gatherStep = async (kk: WebGpuBoundaryKernels, rows: number[]): Promise<Float32Array> => {
        const src = kk.alloc(8);
        kk.write(src, 0, [10, 11, 12, 13, 14, 15, 16, 17]);
        const dst = kk.alloc(rows.length);
        kk.fill(dst, 0, rows.length, -1); // recorded first, so the rows go through the arena
        kk.gatherRows(dst, src, rows, 1);
        const [r] = await kk.readBack([{ t: dst, offset: 0, length: rows.length }]);
        return r!;
      };
      await gatherStep(k, [3, 1]);
      const big = Array.from({ length: (1 << 16) + 5 }, (_, i) => i % 8); // past one arena: replaced, the old freed at the step's end
      const bigOut = await gatherStep(k, big);
      assert.equal(bigOut[(1 << 16) + 4], 10 + (((1 << 16) + 4) % 8));
      const later = await gatherStep(k, [7, 0, 5]);
      noDeviceError();
      assert.ok(sameBits(later, await gatherStep(fresh, [7, 0, 5])), 'after the arena was replaced vs fresh backend');
      assert.deepEqual([...later], [17, 10, 15]);
    } finally {
      k.dispose();
      fresh.dispose();
    }
  });

  test('a submit in flight keeps its parameters when the next submit rewrites the uniform', async () => {
    const k = new WebGpuBoundaryKernels(await gpuUnderTest());
    try {
      const a = k.alloc(64);
      const big = k.alloc((1 << 16) + 8);
      const b = k.alloc(64);
      k.fill(a, 0, 64, 1); // slot 0 of the first submit
      k.fill(a, 32, 32, 2);
      k.write(big, 0, new Float32Array((1 << 16) + 8).fill(3)); // a large write: flushes the first submit unawaited
      k.fill(b, 0, 64, 4); // slot 0 of the second submit: same uniform bytes, other values
      k.fill(b, 0, 16, 5);
      const [ra, rb, rbig] = await k.readBack([{ t: a, offset: 0, length: 64 }, { t: b, offset: 0, length: 64 }, { t: big, offset: (1 << 16) + 7, length: 1 }]);
      noDeviceError();
      assert.deepEqual([ra![0], ra![31], ra![32], ra![63]], [1, 1, 2, 2]);
      assert.deepEqual([rb![0], rb![15], rb![16], rb![63]], [5, 5, 4, 4]);
      assert.equal(rbig![0], 3);
    } finally {
      k.dispose();
    }
  });

  test('warm steps create no bind group; a forgotten buffer gets a new one', async () => {
    const k = new WebGpuBoundaryKernels(await gpuUnderTest());
    try {
      const a = k.alloc(16);
      const b = k.alloc(32);
      const created: number[] = [];
      for (let step = 0; step < 3; step++) {
        const c0 = k.counters.bindGroupsCreated;
        k.fill(a, 0, 16, step);
        k.copyRows(b, 0, 2, a, 0, 1, 16, 1);
        const [r] = await k.readBack([{ t: b, offset: 0, length: 32 }]);
        assert.equal(r![30], step);
        created.push(k.counters.bindGroupsCreated - c0);
      }
      assert.deepEqual(created, [2, 0, 0], 'bind groups created per step (fill, copy_rows)');
      assert.equal(k.counters.bindGroups, 6, 'one group set per dispatch');
      const cache = k.g.dispatchMemory.bindGroups;
      const size = cache.size;
      cache.forget(a.buffer); // as GpuAllocator.free does before destroying it
      assert.equal(cache.size, size - 2, 'both groups binding the buffer are dropped');
      const c0 = k.counters.bindGroupsCreated;
      k.fill(a, 0, 16, 9);
      k.copyRows(b, 0, 2, a, 0, 1, 16, 1);
      const [r] = await k.readBack([{ t: b, offset: 0, length: 32 }]);
      assert.equal(r![30], 9);
      assert.equal(k.counters.bindGroupsCreated - c0, 2);
      noDeviceError();
    } finally {
      k.dispose();
    }
  });

  test('the cache starts over past its limit and still hands out the group asked for', async () => {
    const cache = new BindGroupCache(g.device, 2);
    const params = g.device.createBuffer({ size: 256, usage: 0x40 | 0x08 }); // UNIFORM | COPY_DST
    const bufs = [g.alloc.buffer(16, 'x0'), g.alloc.buffer(16, 'x1'), g.alloc.buffer(16, 'x2')];
    const bound = g.pipelines.bind('fill', () => FILL, [bufs[0]!]);
    const groups = bufs.map((b) => cache.get(bound.pipeline, bound.layout, params, [b]));
    assert.equal(new Set(groups).size, 3);
    assert.ok(cache.size <= 2, `size ${cache.size}`);
    assert.equal(cache.get(bound.pipeline, bound.layout, params, [bufs[2]!]), groups[2], 'the newest is still cached');
    assert.equal(cache.created, 3);
    await g.device.queue.onSubmittedWorkDone(); // errors arrive asynchronously
    noDeviceError();
    params.destroy();
  });
});
