// The pools' storage ops (cache/pool-storage.ts) on every backend: the same workload of
// state-slot copies, verify-scratch commits, KV page copy-on-write, zeroing, poisoning and
// host writes runs on plain host arrays (the definition) and on the ref, wasm and webgpu
// kernels as the pools' storage; every slot, scratch row and KV layer must end bit-identical
// (the copies are exact moves, so any reordering or stride slip shows).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KvPool } from '../src/cache/kv-pool.js';
import { hostPoolStorage, type PoolStorage, type PoolTensor } from '../src/cache/pool-storage.js';
import { StatePool } from '../src/cache/state-pool.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { AnyKernels } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { Rng } from '../src/util/rng.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const G = { slots: 5, numLinear: 3, convSize: 6, ssmSize: 10, batchCapacity: 3, maxSteps: 4, pages: 6, pageSize: 4, kvDim: 5 };
const disposers: (() => void)[] = [];
after(() => disposers.forEach((d) => d()));

/** Run the workload on pools over `storage`; returns every float of the pools, in order. */
async function workload<T extends PoolTensor>(storage: PoolStorage<T>): Promise<Float32Array> {
  const rng = new Rng(7);
  const state = new StatePool<T>({ ...G, storage });
  const kv = new KvPool<T>({ numPages: G.pages, pageSize: G.pageSize, kvDim: G.kvDim, numLayers: 2, numMtpLayers: 1, storage });
  const noise = (n: number): Float32Array => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
  const a = state.alloc()!;
  const b = state.alloc()!;
  const c = state.alloc()!;
  for (const s of [a, b]) state.storage.write(state.slotTensor(s), 0, noise(state.slotTensor(s).length));
  for (let row = 0; row < G.batchCapacity; row++) {
    for (const v of state.scratch(row, G.maxSteps)) {
      storage.write(v.conv, 0, noise(v.conv.length));
      storage.write(v.ssm, 0, noise(v.ssm.length));
    }
  }
  state.copy(c, a); // a snapshot into a working slot
  state.copyFromScratch(b, 1, 2); // commit: row 1's step 2
  state.copyFromScratch(a, 2, 0);
  state.zero(c);
  state.copy(c, b);
  state.poison(2, [1, 3]); // row 0 keeps 1 step, row 1 keeps 3, row 2 all NaN, slot 0 NaN
  const pages = kv.alloc(4)!;
  for (const l of [...kv.layers, ...kv.mtpLayers]) {
    storage.write(l.k, 0, noise(l.k.length));
    storage.write(l.v, 0, noise(l.v.length));
  }
  kv.copyPage(pages[3]!, pages[0]!, 3, G.kvDim); // copy-on-write of a partial page (same buffer)
  kv.copyPage(pages[1]!, pages[2]!, G.pageSize, G.kvDim);
  const ranges = [
    ...Array.from({ length: G.slots + 1 }, (_, s) => state.slotTensor(s)),
    ...Array.from({ length: G.batchCapacity }, (_, row) => state.scratch(row, G.maxSteps).flatMap((v) => [v.conv, v.ssm])).flat(),
    ...[...kv.layers, ...kv.mtpLayers].flatMap((l) => [l.k, l.v]),
  ].map((t) => ({ t, offset: 0, length: t.length }));
  const back = storage.readBack(ranges);
  const parts = back instanceof Promise ? await back : back;
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function sameBits(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  const x = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const y = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < x.length; i++) {
    // NaN poison: any NaN pattern is NaN
    if (Number.isNaN(got[i]) && Number.isNaN(want[i])) continue;
    assert.equal(x[i], y[i], `${what}: element ${i} (${got[i]} vs ${want[i]})`);
  }
}

describe('pool storage ops on every backend', () => {
  let want: Float32Array;
  test('host arrays: the workload poisons what it should and nothing else', async () => {
    want = await workload(hostPoolStorage());
    const slotFloats = G.numLinear * (G.convSize + G.ssmSize);
    assert.ok(want.subarray(0, slotFloats).every(Number.isNaN), 'slot 0 poisoned');
    assert.ok(!want.subarray(slotFloats, (G.slots + 1) * slotFloats).some(Number.isNaN), 'no allocated slot poisoned');
  });

  const backends: [string, () => Promise<AnyKernels>][] = [
    ['ref', async () => createRefKernels()],
    ['wasm', () => createWasmKernels({ threads: 1 })],
    ['webgpu', async () => new WebGpuBoundaryKernels(await gpuUnderTest()) as unknown as AnyKernels],
  ];
  for (const [name, make] of backends) {
    test(`${name} kernels as the pools' storage == host arrays, bit for bit`, async () => {
      const k = await make();
      disposers.push(() => k.dispose());
      sameBits(await workload(k), want, name);
    });
  }
});
