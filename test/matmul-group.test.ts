// Kernels.matmulGroup (several matmuls of one input) against separate matmul calls on the
// same backend, BIT FOR BIT: every weight dtype the wasm backend runs (f32 / bf16 / f16
// panels, every GGML quant type in its repacked layout, and unpacked GGML blocks), mixed
// dtypes in one group (so the int8, interleaved-quad, q6 sums and q8x4 activation buffers
// coexist), odd row counts, M in 1..5 and 8, row-prefix views, operands outside wasm
// memory, weights spread over several memories, 1, 2 and 3 threads and the plain build. Also: a group really is one pool run, and
// bad groups are refused.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { GroupMatmul, Kernels, Weight, WeightDType } from '../src/kernels/types.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { WasmKernels } from '../src/kernels/wasm/backend.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import { assertSameBits, randomWeight, rng } from './numeric.js';

const backends = await wasmBackendsUnderTest();
const three = await createWasmKernels({ threads: 3 });
after(() => three.dispose());
backends.push({ label: 'wasm threads=3', k: three });

const K = 1024; // a multiple of every block size (32, 256)
const DENSE = ['f32', 'bf16', 'f16'] as const;
const ALL: readonly WeightDType[] = [...DENSE, ...QUANT_TYPES];
const MS = [1, 2, 3, 4, 5, 8];

/** A [rows, K] weight of `dtype` in k, packed unless `raw` (quantized: GGML blocks kept). */
function makeWeight(k: Kernels, dtype: WeightDType, rows: number, seed: number, raw = false): Weight {
  if (dtype === 'f32' || dtype === 'bf16' || dtype === 'f16') {
    const r = rng(seed);
    return k.packWeight(randomWeight(k, dtype, rows, K, () => 2 * r() - 1));
  }
  const { weight, bytes } = k.allocWeight(dtype, rows, K);
  bytes.set(randomScaleMatrix(dtype as QuantType, rows, K, seed));
  return raw ? weight : k.packWeight(weight);
}

function input(k: Kernels, m: number, seed: number, jsHeap = false): Float32Array {
  const r = rng(seed);
  const x = jsHeap ? new Float32Array(m * K) : k.alloc(m * K);
  for (let i = 0; i < x.length; i++) x[i] = (2 * r() - 1) * (i % 7 === 0 ? 4 : 1);
  return x;
}

/** Bits of a and b equal (NaN-poisoned outputs catch unwritten elements). */
/** matmulGroup(x, m, ws) == matmul per weight, for every m of MS. */
function checkGroup(k: Kernels, ws: readonly Weight[], what: string, opts: { jsHeap?: boolean; ms?: readonly number[] } = {}): void {
  for (const m of opts.ms ?? MS) {
    const x = input(k, m, 1000 + m, opts.jsHeap);
    const outs = ws.map((w) => (opts.jsHeap ? new Float32Array(m * w.rows) : k.alloc(m * w.rows)).fill(NaN));
    k.matmulGroup(x, m, ws.map((w, j): GroupMatmul => ({ out: outs[j]!, w })));
    ws.forEach((w, j) => {
      const want = k.alloc(m * w.rows).fill(NaN);
      k.matmul(want, x, w, m);
      assertSameBits(outs[j]!, want, `${what} M=${m}: weight ${j} (${w.dtype} ${w.layout ?? 'ggml'} ${w.rows}x${w.cols})`);
    });
  }
}

for (const { label, k } of backends) {
  describe(`matmulGroup == separate matmul calls [${label}]`, () => {
    for (const dtype of ALL) {
      test(`${dtype}: a big (pool-sized), an odd and a tiny weight`, () => {
        const ws = [261, 13, 3].map((rows, i) => makeWeight(k, dtype, rows, 7 * i + rows));
        checkGroup(k, ws, dtype);
      });
    }

    test('every dtype in one group (odd rows; int8, quad, q6 sums and q8x4 activations side by side)', () => {
      const ws = ALL.map((dtype, i) => makeWeight(k, dtype, [261, 67, 13, 29, 5, 131, 3, 45, 263, 9, 17][i % 11]!, 100 + i));
      checkGroup(k, ws, 'mixed');
      checkGroup(k, [...ws].reverse(), 'mixed, reversed');
    });

    test('q8_0 with k-quants and GGML blocks; unpacked GGML weights; row-prefix views', () => {
      checkGroup(k, [makeWeight(k, 'q8_0', 261, 1), makeWeight(k, 'q4_k', 133, 2), makeWeight(k, 'q6_k', 77, 3)], 'q8_0+q4_k+q6_k');
      checkGroup(k, [makeWeight(k, 'q8_0', 261, 4), makeWeight(k, 'q5_0', 45, 5, true)], 'q8_0+raw q5_0');
      checkGroup(k, [makeWeight(k, 'q4_k', 261, 6, true), makeWeight(k, 'q6_k', 29, 7, true), makeWeight(k, 'bf16', 11, 8)], 'raw k-quants+bf16');
      const big = [makeWeight(k, 'q4_k', 300, 9), makeWeight(k, 'f16', 300, 10), makeWeight(k, 'q8_0', 300, 11)];
      checkGroup(k, big.map((w, i) => k.weightRows(w, [261, 37, 299][i]!)), 'row prefixes');
    });

    test('large weights (several chunks each) and operands outside wasm memory', () => {
      const ws = [makeWeight(k, 'f32', 1031, 12), makeWeight(k, 'q8_0', 4099, 13), makeWeight(k, 'q4_k', 16, 14), makeWeight(k, 'bf16', 2053, 15)];
      checkGroup(k, ws, 'large', { ms: [1, 5] });
      checkGroup(k, ws, 'large, JS-heap x and outs', { jsHeap: true, ms: [1, 2, 8] });
    });

    test('refused: weights of different K; an empty group and M = 0 are no-ops', () => {
      const a = makeWeight(k, 'f32', 8, 16);
      const { weight } = k.allocWeight('f32', 8, 512);
      const b = k.packWeight(weight);
      assert.throws(() => k.matmulGroup(k.alloc(K), 1, [{ out: k.alloc(8), w: a }, { out: k.alloc(8), w: b }]), /share one input/);
      k.matmulGroup(k.alloc(K), 1, []);
      const out = k.alloc(8).fill(7);
      k.matmulGroup(k.alloc(K), 0, [{ out, w: a }, { out: k.alloc(8), w: a }]);
      assert.equal(out[0], 7);
    });
  });
}

test('a group of pool-sized weights is ONE pool run (separate calls: one each), 2 threads', () => {
  const k = backends.find((b) => b.label === 'wasm threads=2')!.k;
  assert.ok(k instanceof WasmKernels);
  const ws = [makeWeight(k, 'q4_k', 523, 1), makeWeight(k, 'q4_k', 261, 2), makeWeight(k, 'q4_k', 16, 3), makeWeight(k, 'f16', 261, 4)];
  const pool = k.pool;
  const run = pool.run;
  let runs = 0;
  pool.run = (...a: Parameters<typeof run>): void => {
    runs++;
    run.apply(pool, a);
  };
  try {
    const x = input(k, 1, 5);
    k.matmulGroup(x, 1, ws.map((w) => ({ out: k.alloc(w.rows), w })));
    assert.equal(runs, 1, 'matmulGroup pool runs');
    runs = 0;
    for (const w of ws) k.matmul(k.alloc(w.rows), x, w, 1);
    assert.equal(runs, 3, 'separate calls: the three pool-sized weights run on the pool');
  } finally {
    pool.run = run;
  }
});

test('weights over several memories and one outside wasm memory == separate calls (2 threads)', async () => {
  const k = await createWasmKernels({ threads: 2, memoryBytes: 8 << 20 });
  try {
    assert.ok(k instanceof WasmKernels);
    const ws: Weight[] = [];
    for (let i = 0; i < 8; i++) ws.push(makeWeight(k, (['q8_0', 'q4_k', 'f32', 'q6_k'] as const)[i % 4]!, 517 + 2 * i, 40 + i));
    const arenas = new Set(ws.map((w) => k.mem.locate(w.data)));
    assert.ok(!arenas.has(undefined) && arenas.size >= 2, `weights in ${arenas.size} memories`);
    // GGML blocks in the JS heap (never packed): a separate call stages them per call
    const heap = makeWeight(createRefKernels(), 'q4_k', 45, 50);
    assert.equal(k.mem.locate(heap.data), undefined);
    checkGroup(k, [...ws, heap], 'several memories', { ms: [1, 5] });
    checkGroup(k, [ws[0]!, heap, ws[7]!], 'a memory, the heap, another memory', { ms: [2] });
  } finally {
    k.dispose();
  }
});

test('ref backend: matmulGroup == matmul per weight; different K refused', () => {
  const ref = createRefKernels();
  const ws = (['f32', 'bf16', 'q4_k', 'q8_0'] as const).map((d, i) => makeWeight(ref, d, 13 + 2 * i, i));
  checkGroup(ref, ws, 'ref', { ms: [1, 3] });
  const { weight } = ref.allocWeight('f32', 2, 32);
  assert.throws(() => ref.matmulGroup(ref.alloc(K), 1, [{ out: ref.alloc(13), w: ws[0]! }, { out: ref.alloc(2), w: weight }]), /share one input/);
});
