// GGML block formats: hand-built blocks (written field by field from the format spec, by
// encoders independent of the decoder) decode to the known values; the integer form
// (decodeSubBlock) agrees with the float form; allocWeight/rowPrefix/embed on quantized
// weights in both backends.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QUANT_FORMATS, QUANT_TYPES, quantRowBytes } from '../src/kernels/quant/formats.js';
import { decodeSubBlock, dequantizeRow, f16ToF32 } from '../src/kernels/quant/dequant.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels, type WasmKernels } from '../src/kernels/wasm/index.js';
import { weightBytes } from '../src/kernels/weight-view.js';
import { builtMatrix } from './quant-blocks.js';

const wasm = await createWasmKernels({ threads: 1 });
after(() => wasm.dispose());

describe('GGML block formats', () => {
  test('f16 decoding: normal, subnormal, signed, inf', () => {
    assert.equal(f16ToF32(0x3c00), 1);
    assert.equal(f16ToF32(0xc000), -2);
    assert.equal(f16ToF32(0x0001), 2 ** -24);
    assert.equal(f16ToF32(0x7bff), 65504);
    assert.equal(f16ToF32(0x7c00), Infinity);
  });

  for (const type of QUANT_TYPES) {
    test(`${type}: hand-built blocks dequantize to their values; the integer form agrees`, () => {
      const cols = 2 * QUANT_FORMATS[type].blockSize;
      const { bytes, values } = builtMatrix(type, 3, cols, 7);
      const row = new Float32Array(cols);
      const q = new Int32Array(32);
      for (let r = 0; r < 3; r++) {
        dequantizeRow(type, bytes, cols, r, row);
        for (let i = 0; i < cols; i++) assert.equal(row[i], values[r * cols + i], `${type} row ${r} element ${i}`);
        for (let j = 0; j < cols / 32; j++) {
          const sb = decodeSubBlock(type, bytes, cols, r, j, q);
          for (let l = 0; l < 32; l++) {
            const want = values[r * cols + j * 32 + l]!;
            assert.ok(Math.abs(sb.scale * q[l]! + sb.offset - want) <= 1e-6 * Math.max(1, Math.abs(want)), `${type} sub-block ${j}[${l}]`);
          }
        }
      }
    });
  }
});

describe('quantized weights in the backends', () => {
  for (const k of [createRefKernels(), wasm]) {
    test(`[${k.name}] allocWeight size, packWeight, rowPrefix and embed`, () => {
      for (const type of QUANT_TYPES) {
        const cols = QUANT_FORMATS[type].blockSize * 2;
        const { bytes: src, values } = builtMatrix(type, 5, cols, 3);
        const { weight, bytes } = k.allocWeight(type, 5, cols);
        assert.equal(bytes.byteLength, 5 * quantRowBytes(type, cols));
        bytes.set(src);
        const w = k.packWeight(weight);
        assert.equal(weightBytes(w), src.byteLength);
        // the wasm backend repacks every type (embed and rowPrefix read its layouts)
        const layouts: Record<string, string> = { q8_0: 'q8x4', q4_k: 'q4kx4', q6_k: 'q6kx4', q5_k: 'q5kx4', q4_0: 'q40x4', q4_1: 'q41x4', q5_0: 'q50x4', q5_1: 'q51x4' };
        // Q8_0: q8u4 where the vnni build's dot-add is AVX-VNNI (WasmKernels.q8u4)
        const layout = k === wasm ? (type === 'q8_0' && (wasm as WasmKernels).q8u4 ? 'q8u4' : layouts[type]) : undefined;
        assert.equal(w.layout, layout);
        const out = k.alloc(2 * cols);
        k.embed(out, w, [4, 1]);
        assert.deepEqual([...out], [...values.subarray(4 * cols, 5 * cols), ...values.subarray(cols, 2 * cols)]);
        const pre = k.weightRows(w, 2);
        assert.equal(pre.rows, 2);
        assert.equal(weightBytes(pre), 2 * quantRowBytes(type, cols));
        assert.throws(() => k.embed(out, pre, [2]));
        k.embed(out, pre, [1, 0]);
        assert.deepEqual([...out], [...values.subarray(cols, 2 * cols), ...values.subarray(0, cols)]);
      }
    });
  }
});
