// Invariant 1 (docs/ARCHITECTURE.md "Invariants") on the wasm backend: two threads (the worker pool path), and
// two threads with small memories, so the tiny models' weights, KV and state are sharded
// across several WebAssembly memories (the > 4 GiB path, exercised at small scale); and
// the plain SIMD128 build (what runtimes without relaxed SIMD run).
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createWasmKernels, WasmKernels } from '../src/kernels/wasm/index.js';
import { checkGolden } from './golden-check.js';

const pooled = await createWasmKernels({ threads: 2 });
const plain = await createWasmKernels({ threads: 2, variant: 'plain' });
// tiny-think has 16 MB of weights, tiny-next-moe 3.5 MB: ¾ of each memory takes allocations.
const shardedThink = await createWasmKernels({ threads: 2, memoryBytes: 16 << 20 });
const shardedMoe = await createWasmKernels({ threads: 2, memoryBytes: 4 << 20 });
after(() => {
  pooled.dispose();
  plain.dispose();
  shardedThink.dispose();
  shardedMoe.dispose();
});

describe('wasm threads=2', () => {
  checkGolden('tiny-think', () => pooled);
  checkGolden('tiny-next-moe', () => pooled);
});

describe('wasm plain (no relaxed SIMD) threads=2', () => {
  checkGolden('tiny-think', () => plain);
  checkGolden('tiny-next-moe', () => plain);
});

describe('wasm threads=2, weights sharded over several memories', () => {
  checkGolden('tiny-think', () => shardedThink);
  checkGolden('tiny-next-moe', () => shardedMoe);
  test('the models really span several memories', () => {
    for (const k of [shardedThink, shardedMoe]) {
      assert.ok(k instanceof WasmKernels);
      assert.ok(k.mem.arenas.length >= 2, `only ${k.mem.arenas.length} memory`);
    }
  });
});
