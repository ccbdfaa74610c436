// Models larger than one WebAssembly memory (4 GiB): weights, KV pool and recurrent states
// spill into further memories. Forced here with small memories: the engine must give the
// same tokens as with one memory, and every layer's K and V must share a memory (attention
// runs in one memory; a V elsewhere would be copied in whole on every call).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels, probeBandwidth, WasmKernels } from '../src/kernels/wasm/index.js';
import { evalPrompts, runAll, withEngine } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';

test('engine with weights, KV and states over several memories == one memory (MTP on, prefix cache)', async () => {
  const opts = { model: TINY_THINK(), specTokens: 2, maxRunning: 4, cacheStateSlots: 8, kvCacheTokens: 4096 };
  const reqs = evalPrompts(6).map((messages) => ({ messages, maxTokens: 24 }));
  const one = await withEngine({ ...opts, kernels: await createWasmKernels({ threads: 2 }) }, (e) => runAll(e, reqs, false));
  const kernels = await createWasmKernels({ threads: 2, memoryBytes: 8 << 20 });
  assert.ok(kernels instanceof WasmKernels);
  const spread = await withEngine({ ...opts, kernels }, async (e) => {
    assert.ok(kernels.mem.arenas.length >= 3, `only ${kernels.mem.arenas.length} memories`);
    for (const layer of [...e.kv.layers, ...e.kv.mtpLayers]) {
      assert.equal(kernels.mem.locate(layer.k as Float32Array), kernels.mem.locate(layer.v as Float32Array), 'K and V of a layer in different memories');
    }
    return runAll(e, reqs, false);
  });
  assert.deepEqual(spread.map((r) => r.ids), one.map((r) => r.ids));
  assert.ok(one.every((r) => r.ids.length > 0));
});

test('the bandwidth probe finds room when the weights fill memory 0', async () => {
  const k = await createWasmKernels({ threads: 2, memoryBytes: 32 << 20 });
  try {
    assert.ok(k instanceof WasmKernels);
    k.alloc((20 << 20) / 4); // most of memory 0's allocatable part
    const gbs = probeBandwidth(k, 16 << 20);
    assert.ok(Number.isFinite(gbs) && gbs > 0, `probe ${gbs}`);
    assert.ok(k.mem.arenas.length >= 2);
  } finally {
    k.dispose();
  }
});
