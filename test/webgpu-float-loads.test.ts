// The float matmuls' load widths (wgsl/float-chunks.ts FloatLoads): a dispatch reads its
// weight in units of 4 elements (vec2<u32> of bf16 / f16, vec4<u32> of f32) where K allows
// (K ≡ 0 mod 4), and x (and
// the gate) as vec4<f32> where their offsets are 4-aligned, else as scalars. Both input
// widths read the same values in the same order, so x at an offset of 1 ('vec4w') must give
// the bits of x at offset 0 ('vec4'), plain, with the folded norm and with a gated input;
// every path (the element path of K not a multiple of 4 too) must match the ref within the
// float-matmul tolerance. The dispatch keys are checked so the comparison is of two paths.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Weight } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { f16ToF32, f32ToF16 } from '../src/kernels/quant/dequant.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { view, type GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { floatLoadsFor } from '../src/kernels/webgpu/wgsl/float-chunks.js';
import { assertSameBits, randomWeight, relErr, rng } from './numeric.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
// the one-column kernel's loads (a GPU adapter would take the multi-column kernel at M > 1:
// test/webgpu-float-columns compares the two)
before(async () => { g = await gpuUnderTest(); g.floatColumns = 1; });
after(() => g?.dispose());

const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

/** `data` uploaded `at` elements into a fresh buffer (the view's offset is `at`). */
function uploadAt(data: Float32Array, at: number): GpuTensor {
  const padded = new Float32Array(at + data.length + 3);
  padded.set(data, at);
  return view(g.alloc.upload(padded), at, data.length);
}

/** The float matmul dispatch keys `body` records. */
async function keysOf(body: Parameters<typeof run>[1], out: GpuTensor): Promise<{ keys: string[]; got: Float32Array }> {
  const keys: string[] = [];
  const plain = g.run;
  g.run = function (this: WebGpuKernels, ...args: Parameters<WebGpuKernels['run']>) {
    if (args[1].startsWith('matmul_group_')) keys.push(args[1]);
    return plain.apply(this, args);
  };
  try {
    const [got] = await run(g, body, out);
    return { keys, got };
  } finally {
    g.run = plain;
  }
}

/** A [n, k] weight of `dtype` on the GPU and its values as an f32 ref weight. */
function weights(dtype: 'f32' | 'bf16' | 'f16', n: number, k: number, r: () => number): { gw: GpuWeight; wr: Weight } {
  if (dtype !== 'f16') {
    const w = randomWeight(ref, dtype, n, k, () => 2 * r() - 1);
    return { gw: g.uploadWeight(w), wr: w };
  }
  const bits = Uint16Array.from({ length: n * k }, () => f32ToF16(2 * r() - 1));
  const wr = ref.allocWeight('f32', n, k).weight;
  (wr.data as Float32Array).set(Array.from(bits, f16ToF32));
  return { gw: g.uploadWeightBytes('f16', n, k, new Uint8Array(bits.buffer)), wr };
}

describe('webgpu float matmul loads', () => {
  test('floatLoadsFor: 4-element units where K is a multiple of 4, vec4 inputs where the offsets are 4-aligned', () => {
    assert.equal(floatLoadsFor('bf16', 2560, 0, null), 'vec4');
    assert.equal(floatLoadsFor('bf16', 2560, 6, null), 'vec4w');
    assert.equal(floatLoadsFor('f16', 2560, 8, 2), 'vec4w');
    assert.equal(floatLoadsFor('bf16', 100, 0, null), 'vec4');
    assert.equal(floatLoadsFor('bf16', 102, 0, null), 'element');
    assert.equal(floatLoadsFor('f32', 102, 0, null), 'element');
  });

  test('x at offset 1 (scalar input loads) == x at offset 0 (vec4 input loads), bit for bit; both match the ref', async () => {
    const r = rng(71);
    for (const dtype of ['bf16', 'f16', 'f32'] as const) {
      const [n, k] = [13, 96];
      const { gw, wr } = weights(dtype, n, k, r);
      for (const m of [1, 5]) {
        const x = fill(m * k, () => 2 * r() - 1);
        const want = new Float32Array(m * n);
        ref.matmul(want, x, wr, m);
        const outs: Float32Array[] = [];
        for (const [at, loads] of [[0, 'vec4'], [1, 'vec4w']] as const) {
          const out = g.alloc.tensor([m, n]);
          const { keys, got } = await keysOf((e) => g.matmul(e, out, uploadAt(x, at), gw, m), out);
          assert.deepEqual(keys.map((key) => key.endsWith(`_${loads}`)), [true], `${dtype}: ${keys.join(' ')}`);
          assert.ok(relErr(got, want) <= 1e-5, `${dtype} M=${m} ${loads}: rel err ${relErr(got, want)}`);
          outs.push(got);
        }
        assertSameBits(outs[1]!, outs[0]!, `${dtype} M=${m}`);
      }
    }
  });

  test('folded norm and gated input: misaligned x / gate == aligned, bit for bit', async () => {
    const r = rng(73);
    const [n, k, m] = [11, 128, 3];
    const nw = g.uploadVector(randomWeight(ref, 'bf16', 1, k, () => 0.3 * (2 * r() - 1)));
    for (const dtype of ['bf16', 'f16'] as const) {
      const { gw } = weights(dtype, n, k, r);
      const x = fill(m * k, () => 3 * (2 * r() - 1));
      const gate = fill(m * k, () => 2 * r() - 1);
      const normed: Float32Array[] = [];
      const gated: Float32Array[] = [];
      for (const [xAt, gateAt, loads] of [[0, 0, 'vec4'], [1, 0, 'vec4w'], [0, 3, 'vec4w']] as const) {
        const out = g.alloc.tensor([m, n]);
        const norm = { wv: nw, eps: 1e-6, zeroCentered: true, out: g.alloc.tensor([m, k]) };
        const a = await keysOf((e) => g.matmulGroup(e, uploadAt(x, xAt), m, [{ out, w: gw }], false, norm), out);
        assert.deepEqual(a.keys.map((key) => key.endsWith(`_norm_${gateAt === 0 ? loads : 'vec4'}`)), [true], a.keys.join(' '));
        normed.push(a.got);
        const acc = g.alloc.upload(fill(m * n, () => 1));
        const b = await keysOf((e) => g.matmulAdd(e, acc, uploadAt(x, xAt), gw, m, { b: uploadAt(gate, gateAt), act: 'silu' }), acc);
        assert.deepEqual(b.keys.map((key) => key.endsWith(`_silu_${loads}`)), [true], b.keys.join(' '));
        gated.push(b.got);
      }
      for (const i of [1, 2]) {
        assertSameBits(normed[i]!, normed[0]!, `${dtype} norm, variant ${i}`);
        assertSameBits(gated[i]!, gated[0]!, `${dtype} gated, variant ${i}`);
      }
    }
  });

  test('K not a multiple of 4 keeps the element loads (bf16, f16) and matches the ref', async () => {
    const r = rng(79);
    for (const dtype of ['bf16', 'f16'] as const) {
      const [n, k, m] = [9, 102, 4];
      const { gw, wr } = weights(dtype, n, k, r);
      const x = fill(m * k, () => 2 * r() - 1);
      const want = new Float32Array(m * n);
      ref.matmul(want, x, wr, m);
      const out = g.alloc.tensor([m, n]);
      const { keys, got } = await keysOf((e) => g.matmul(e, out, uploadAt(x, 0), gw, m), out);
      assert.deepEqual(keys.map((key) => key.endsWith('_element')), [true], keys.join(' '));
      assert.ok(relErr(got, want) <= 1e-5, `${dtype}: rel err ${relErr(got, want)}`);
    }
  });
});
