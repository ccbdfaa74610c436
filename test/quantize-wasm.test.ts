// The wasm block quantizer (assembly/quantize.ts via kernels/wasm/quantizer.ts)
// against its TypeScript twin (kernels/quant/quantize-ggml.ts, itself byte-identical to
// llama-quantize: test/quantize-gguf.test.ts): the same bytes for every type, from f32 and
// from bf16, on data built to hit the searches' corner cases (flat and zero groups, ties,
// tiny groups, outliers); the same bytes whatever the thread count and across the
// quantizer's internal slices; and a model loaded with --quantize through either
// quantizer holds the same weights.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { QUANT_FORMATS, quantRowBytes, type QuantType } from '../src/kernels/quant/formats.js';
import { OFFLINE_QUANT_TYPES } from '../src/kernels/quant/quantize-ggml.js';
import { refQuantizer, type QuantSource, type RowQuantizer, type RowSource } from '../src/kernels/quant/row-quantizer.js';
import { WasmQuantizer } from '../src/kernels/wasm/quantizer.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { withLoadQuantizer } from '../src/checkpoint/quantize-load.js';
import { loadModel } from '../src/model/model.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { TINY_THINK } from './paths.js';
import { rng } from './numeric.js';

const two = await WasmQuantizer.start(2);
after(() => two.dispose());

function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

/** Rows of 256-element super-blocks, each filled by one of several generators chosen at
 * random: plain gaussian weights, outliers, all-zero / constant (positive, negative) groups,
 * small integers (exact ties in every rounding), tiny magnitudes near GGML's 1e-15 group
 * threshold, subnormals, ±equal extremes, all-positive groups (the Q4_K min clamp). */
function corpus(seed: number, rows: number, cols: number): Float32Array {
  const r = rng(seed);
  const x = new Float32Array(rows * cols);
  const gens: ((i: number) => number)[] = [
    () => 0.02 * gaussian(r),
    () => 0.02 * gaussian(r) * (r() < 0.05 ? 30 : 1),
    () => 0,
    () => 0.37,
    () => -1.25,
    () => Math.round(16 * r()) - 8,
    () => (r() - 0.5) * 1e-15,
    () => (r() - 0.5) * 1e-40,
    (i) => (i % 7 === 0 ? 3 : i % 7 === 3 ? -3 : r() - 0.5),
    () => 0.5 + r(),
    (i) => (i % 32 < 16 ? 0 : 0.01 * gaussian(r)),
  ];
  for (let b = 0; b < x.length; b += 256) {
    const g = gens[Math.floor(r() * gens.length)]!;
    for (let i = 0; i < 256; i++) x[b + i] = g(i);
  }
  return x;
}

/** The bf16 bits of x (truncated: every bf16 value is then also exact in x's f32 copy). */
function toBf16(x: Float32Array): { bits: Uint16Array; values: Float32Array } {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const bits = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) bits[i] = u[i]! >>> 16;
  const values = new Float32Array(x.length);
  new Uint32Array(values.buffer).set(Array.from(bits, (b) => b << 16));
  return { bits, values };
}

function quantize(q: { quantizeRows: typeof refQuantizer.quantizeRows }, type: QuantType, src: QuantSource, rows: number, cols: number): Uint8Array {
  const out = new Uint8Array(rows * quantRowBytes(type, cols));
  q.quantizeRows(type, src, rows, cols, out);
  return out;
}

/** Index of the first differing block, or -1. */
function firstBlockDiff(type: QuantType, a: Uint8Array, b: Uint8Array): number {
  const bb = QUANT_FORMATS[type].blockBytes;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return Math.floor(i / bb);
  return -1;
}

for (const type of OFFLINE_QUANT_TYPES) {
  test(`${type}: wasm == TypeScript reference, bit for bit, from f32 and from bf16`, () => {
    const rows = 24;
    const cols = 1024;
    const x = corpus(type.length * 7 + 1, rows, cols);
    const ref = quantize(refQuantizer, type, x, rows, cols);
    const got = quantize(two, type, x, rows, cols);
    assert.equal(firstBlockDiff(type, ref, got), -1, `${type} f32: first differing block`);
    const { bits, values } = toBf16(x);
    const refB = quantize(refQuantizer, type, values, rows, cols);
    const gotB = quantize(two, type, bits, rows, cols);
    assert.equal(firstBlockDiff(type, refB, gotB), -1, `${type} bf16: first differing block`);
    assert.notDeepEqual(ref, new Uint8Array(ref.length), 'the corpus quantizes to non-zero blocks');
  });
}

test('q8_0: wasm == reference on non-finite and extreme blocks (±inf, NaN, amax near the f32 range ends)', () => {
  const rows = 64;
  const cols = 256;
  const r = rng(11);
  const gens: ((i: number) => number)[] = [
    (i) => (i === 5 ? Infinity : 0.02 * gaussian(r)),
    (i) => (i % 32 === 0 ? -Infinity : 0.02 * gaussian(r)),
    (i) => (i === 9 ? NaN : 0.02 * gaussian(r)),
    () => (r() - 0.5) * 4e-36, // d near 2⁻¹²⁸: 1/d finite, d subnormal or barely normal
    () => (r() - 0.5) * 6e-37,
    () => (r() - 0.5) * 1e-38, // 1/d overflows to inf
    () => (r() - 0.5) * 6e38, // near the f32 maximum (finite in bf16 too)
    (i) => (i % 2 ? 127 : -127) * (1 + i / 256), // values near ±127·d, rounding ties
  ];
  const x = new Float32Array(rows * cols);
  for (let b = 0; b < rows; b++) for (let i = 0; i < cols; i++) x[b * cols + i] = gens[b % gens.length]!(i);
  const ref = quantize(refQuantizer, 'q8_0', x, rows, cols);
  assert.equal(firstBlockDiff('q8_0', ref, quantize(two, 'q8_0', x, rows, cols)), -1, 'f32: first differing block');
  const { bits, values } = toBf16(x);
  const refB = quantize(refQuantizer, 'q8_0', values, rows, cols);
  assert.equal(firstBlockDiff('q8_0', refB, quantize(two, 'q8_0', bits, rows, cols)), -1, 'bf16: first differing block');
});

test('same bytes with 1 and 3 threads, and across the quantizer\'s double-buffered 1M-element slices', async () => {
  const one = await WasmQuantizer.start(1);
  const three = await WasmQuantizer.start(3);
  try {
    const rows = 2200; // 2200 × 1024 elements: three slices (the third reuses the first's buffer, and is partial)
    const cols = 1024;
    const x = corpus(3, rows, cols);
    for (const type of ['q8_0', 'q4_k'] as const) {
      const a = quantize(one, type, x, rows, cols);
      const b = quantize(three, type, x, rows, cols);
      assert.equal(firstBlockDiff(type, a, b), -1, `${type}: 1 vs 3 threads`);
      if (type === 'q8_0') assert.equal(firstBlockDiff(type, a, quantize(refQuantizer, type, x, rows, cols)), -1, 'q8_0: vs the reference');
    }
  } finally {
    one.dispose();
    three.dispose();
  }
});

test('quantizeFrom (rows filled band by band into the quantizer) == quantizeRows, for bf16 and f32 sources, both quantizers', () => {
  const cases = [
    { rows: 700, cols: 4096 }, // 256 rows per slice: 3 slices, the last partial
    { rows: 2, cols: (1 << 20) + 256 }, // a row longer than a slice
  ];
  for (const { rows, cols } of cases) {
    const x = corpus(5, rows, cols);
    const { bits } = toBf16(x);
    for (const type of ['q8_0', 'q4_k'] as const) {
      if (type === 'q4_k' && rows === 2) continue; // the long row: q8_0 shows the fallback
      for (const src of [x, bits]) {
        const want = quantize(two, type, src, rows, cols);
        const fills: number[] = [];
        const source: RowSource = {
          kind: src instanceof Uint16Array ? 'bf16' : 'f32',
          fill(r0, n, into) {
            fills.push(r0);
            into.set(src.subarray(r0 * cols, (r0 + n) * cols));
          },
        };
        for (const q of [two, refQuantizer]) {
          fills.length = 0;
          const got = new Uint8Array(want.length);
          q.quantizeFrom(type, source, rows, cols, got);
          assert.equal(firstBlockDiff(type, want, got), -1, `${type} ${rows}×${cols} ${source.kind} ${q === two ? 'wasm' : 'ref'}`);
          assert.ok(fills.length >= 2, 'filled in several bands');
        }
      }
    }
  }
});

test('quantizeFrom: a band that fails to fill throws its error, and the quantizer keeps working', () => {
  const rows = 600;
  const cols = 4096;
  const x = corpus(6, rows, cols);
  const failing: RowSource = {
    kind: 'f32',
    fill(r0, n, into) {
      if (r0 > 0) throw new Error(`read failed at row ${r0}`);
      into.set(x.subarray(0, n * cols));
    },
  };
  assert.throws(() => two.quantizeFrom('q8_0', failing, rows, cols, new Uint8Array(rows * quantRowBytes('q8_0', cols))), /read failed at row 256/);
  assert.equal(firstBlockDiff('q8_0', quantize(refQuantizer, 'q8_0', x, rows, cols), quantize(two, 'q8_0', x, rows, cols)), -1);
});

test('wasm quantizer: a row that is not whole blocks, or a short source, is a RangeError naming it', () => {
  assert.throws(() => two.quantizeRows('q4_k', new Float32Array(300), 1, 300, new Uint8Array(1000)), /q4_k: 300 columns/);
  assert.throws(() => two.quantizeRows('q8_0', new Float32Array(32), 2, 32, new Uint8Array(68)), /32 source elements for 2 × 32/);
  assert.throws(() => two.quantizeRows('q5_k', new Float32Array(256), 1, 256, new Uint8Array(176)), /no offline quantizer for q5_k/);
});

test('--quantize at load through Kernels.startQuantizer: the ref and wasm backends\' quantizers give the same weights', async () => {
  const kernels = createRefKernels();
  const wasm = await createWasmKernels({ threads: 2, calibrate: false });
  // both loads land in ref kernels' memory (GGML blocks, not repacked), so the bytes compare
  // q8_0: the reference's Q4_K search is slow; the algorithms are compared above, this
  // compares the load path (BF16 handed over as stored, linear weights, gathered rows)
  // rows each load's quantizer was handed: every quantized weight goes through it
  const rowsThrough = new Map<Kernels, number>();
  const load = (backend: Kernels) => withLoadQuantizer('q8_0', backend, (quantizer) => {
    assert.ok(quantizer, `${backend.name}: a quantizer under --quantize`);
    assert.equal(quantizer instanceof WasmQuantizer, backend === wasm, `${backend.name}: its own quantizer`);
    const counted: RowQuantizer = {
      quantizeRows: (type, src, rows, ...rest) => (rowsThrough.set(backend, (rowsThrough.get(backend) ?? 0) + rows), quantizer.quantizeRows(type, src, rows, ...rest)),
      quantizeFrom: (type, source, rows, ...rest) => (rowsThrough.set(backend, (rowsThrough.get(backend) ?? 0) + rows), quantizer.quantizeFrom(type, source, rows, ...rest)),
    };
    return loadModel(TINY_THINK(), kernels, { quantize: 'q8_0', quantizer: counted });
  });
  const viaRef = await load(kernels);
  const viaWasm = await load(wasm).finally(() => wasm.dispose());
  const quantized = (w: Weight): boolean => w.dtype === 'q8_0';
  const pairs: [Weight, Weight][] = [];
  const walk = (a: unknown, b: unknown): void => {
    if (a && typeof a === 'object' && 'dtype' in a && 'data' in a) {
      if (quantized(a as Weight)) pairs.push([a as Weight, b as Weight]);
      return;
    }
    if (a && typeof a === 'object') for (const k of Object.keys(a)) walk((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
  };
  walk(viaRef.weights, viaWasm.weights);
  assert.ok(pairs.length > 20, `${pairs.length} quantized weights`);
  const quantizedRows = [...new Set(pairs.map(([w]) => w))].reduce((n, w) => n + w.rows, 0); // a shared weight once
  assert.deepEqual([rowsThrough.get(kernels), rowsThrough.get(wasm)], [quantizedRows, quantizedRows], 'rows through each backend\'s quantizer');
  for (const [a, b] of pairs) {
    assert.equal(b.dtype, a.dtype);
    assert.ok(Buffer.from(a.data as Uint8Array).equals(Buffer.from(b.data as Uint8Array)), `a ${a.dtype} [${a.rows}, ${a.cols}] weight differs`);
  }
});
