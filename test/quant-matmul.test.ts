// Integer matmul on quantized weights: the wasm kernels (decode path M = 1, tiled path
// M > 1, 1 and 2 threads, fma and plain builds) against the reference twin, BIT FOR BIT
// (kernels/ref/quant.ts defines the arithmetic); batch invariance (a row alone == the same
// row inside a batch of M); and the integer path against an f64 matmul of the dequantized
// weights (error of the int8 activation blocks only).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QUANT_FORMATS, QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import { dequantizeRow } from '../src/kernels/quant/dequant.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import type { WasmKernels } from '../src/kernels/wasm/index.js';
import { relErr, rng } from './numeric.js';

const backends = await wasmBackendsUnderTest();
const ref = createRefKernels();

function quantWeight(k: Kernels, type: QuantType, rows: number, cols: number, seed: number, given?: Uint8Array): Weight {
  const src = given ?? randomScaleMatrix(type, rows, cols, seed);
  const { weight, bytes } = k.allocWeight(type, rows, cols);
  bytes.set(src);
  return k.packWeight(weight);
}

function fill(k: Kernels, n: number, r: () => number): Float32Array {
  const a = k.alloc(n);
  for (let i = 0; i < n; i++) a[i] = (2 * r() - 1) * (i % 7 === 0 ? 4 : 1); // some larger outliers
  return a;
}

function same(got: ArrayLike<number>, want: ArrayLike<number>, what: string, n = want.length): void {
  for (let i = 0; i < n; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]} (not bit-identical)`);
  }
}

for (const { label, k } of backends) {
  describe(`quantized matmul conformance [${label}]`, () => {
    for (const type of QUANT_TYPES) {
      test(`${type}: fast == ref bit for bit, M 1..6, 9, 17; odd N; batch rows == alone`, () => {
        const bs = QUANT_FORMATS[type].blockSize;
        const r = rng(11);
        // the last shape exceeds the parallel threshold (the pool splits columns)
        const shapes: [number, number][] = [[1, bs], [3, 2 * bs], [5, bs], [13, 3 * bs], [67, 2 * bs], [261, bs === 32 ? 1024 : 1024]];
        for (const [n, kk] of shapes) {
          const w = quantWeight(k, type, n, kk, n + kk);
          const wr = quantWeight(ref, type, n, kk, n + kk);
          for (const m of [1, 2, 3, 4, 5, 6, 9, 17]) {
            if (n * kk > 200_000 && m > 5 && m !== 17) continue;
            const x = fill(k, m * kk, r);
            const out = k.alloc(m * n);
            const want = new Float32Array(m * n);
            k.matmul(out, x, w, m);
            ref.matmul(want, x, wr, m);
            same(out, want, `${type} M=${m} N=${n} K=${kk}`);
            if (m > 1) { // the last row alone (decode path) == inside the batch (tiled path)
              const one = k.alloc(n);
              k.matmul(one, x.subarray((m - 1) * kk), w, 1);
              same(one, out.subarray((m - 1) * n), `${type} row ${m - 1} alone vs in M=${m}`);
            }
          }
        }
      });
    }
  });
}

const REPACKED = [['q8_0', 'q8x4'], ['q4_k', 'q4kx4'], ['q6_k', 'q6kx4'], ['q5_k', 'q5kx4'], ['q4_0', 'q40x4'], ['q4_1', 'q41x4'], ['q5_0', 'q50x4'], ['q5_1', 'q51x4']] as const;
for (const { label, k } of backends) for (const [type, packed] of REPACKED) {
  // Q8_0: q8u4 where the backend's dot-add is AVX-VNNI (WasmKernels.q8u4)
  const layout = type === 'q8_0' && (k as WasmKernels).q8u4 ? 'q8u4' : packed;
  test(`${type} (repacked ${layout} in wasm) [${label}]: M across L2 row blocks == ref; rowPrefix; embed == dequantizeRow`, () => {
    const r = rng(29);
    const [n, kk, m] = [11, 4096, 69]; // row blocks of 64 (int8) / 32 (i16) rows at K = 4096: 69 = 64 + 4 + 1
    const w = quantWeight(k, type, n, kk, 7);
    assert.equal(w.layout, layout);
    const wr = quantWeight(ref, type, n, kk, 7);
    const x = fill(k, m * kk, r);
    const out = k.alloc(m * n);
    const want = new Float32Array(m * n);
    k.matmul(out, x, w, m);
    ref.matmul(want, x, wr, m);
    same(out, want, `${type} M=${m} K=${kk}`);
    const pre = k.weightRows(w, 6);
    const part = k.alloc(m * 6);
    k.matmul(part, x, pre, m);
    for (let i = 0; i < m; i++) same(part.subarray(i * 6, i * 6 + 6), out.subarray(i * n, i * n + 6), `rowPrefix(6) row ${i}`);
    const rows = k.alloc(n * kk);
    k.embed(rows, w, Array.from({ length: n }, (_, i) => n - 1 - i));
    const one = new Float32Array(kk);
    for (let i = 0; i < n; i++) {
      dequantizeRow(type, wr.data as Uint8Array, kk, n - 1 - i, one);
      same(rows.subarray(i * kk, (i + 1) * kk), one, `embed row ${n - 1 - i}`);
    }
  });
}

for (const { label, k } of backends) {
  test(`q5_k single row [${label}]: the four-stream pass (whole groups in fours, a quarter apart) == ref bit for bit`, () => {
    // relaxed builds run M = 1 over each thread's whole groups in fours (assembly/q5kx4.ts
    // quadRow1), the leftover and partial groups per group: N from one pass (64) to passes
    // plus leftovers and a partial group, split over the threads; extreme quants too
    const r = rng(31);
    for (const [n, kk] of [[64, 256], [67, 512], [136, 256], [300, 512]] as const) {
      for (const extreme of [false, true]) {
        const bytes = randomScaleMatrix('q5_k', n, kk, n + kk);
        if (extreme) for (let b = 0; b < bytes.length; b += 176) bytes.fill(0xff, b + 16, b + 176); // qh, qs: every u = 31
        const w = quantWeight(k, 'q5_k', n, kk, 0, bytes);
        const wr = quantWeight(ref, 'q5_k', n, kk, 0, bytes);
        const x = extreme ? k.alloc(kk).fill(-0.75) : fill(k, kk, r);
        const out = k.alloc(n);
        const want = new Float32Array(n);
        k.matmul(out, x, w, 1);
        ref.matmul(want, x, wr, 1);
        same(out, want, `q5_k M=1 N=${n} K=${kk}${extreme ? ' extreme' : ''}`);
      }
    }
  });
}

describe('quantized matmul accuracy', () => {
  for (const type of QUANT_TYPES) {
    test(`${type}: integer path ≈ f64 matmul of the dequantized weights (≤ 2%)`, () => {
      const kk = 512;
      const n = 9;
      const m = 3;
      const r = rng(5);
      const w = quantWeight(ref, type, n, kk, 3);
      const x = fill(ref, m * kk, r);
      const got = new Float32Array(m * n);
      ref.matmul(got, x, w, m);
      const row = new Float32Array(kk);
      const want = new Float64Array(m * n);
      for (let c = 0; c < n; c++) {
        dequantizeRow(type, w.data as Uint8Array, kk, c, row);
        for (let i = 0; i < m; i++) {
          let acc = 0;
          for (let p = 0; p < kk; p++) acc += x[i * kk + p]! * row[p]!;
          want[i * n + c] = acc;
        }
      }
      const e = relErr(got, want);
      assert.ok(e < 0.02, `${type}: rel err ${e}`);
    });
  }
});
