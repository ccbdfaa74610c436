// A matmulGroup of quantized weights on webgpu (issue #47: quantized GGUF decode took a norm,
// an activation quantization and one qmatmul per weight — 5 dispatches for q/k/v):
// - the grouped path gives the bits of separate calls: rmsNorm, then each weight's own
//   matmul over the normed rows (its own quantization), for outputs AND the normed rows
//   (norm.out, which float weights of a mixed group read), per quant type, zero-centred or
//   not, M = 1, 3 and 17 (tiles 16 and 32), in a mixed float + quantized group and in a
//   group of more weights than one dispatch's segments;
// - a quantized matmulAdd with a gated input (down_proj's silu(gate)·up, attention's
//   sigmoid output gate) == the element-wise product then matmulAdd, for the output and for
//   x (both write the product in place), in 2 dispatches (before: 3);
// - the dispatch count: the norm and the activation quantization are ONE dispatch, and
//   the weights of one quant type are ONE qmatmul_group dispatch (segments, as the float
//   path's matmul_group);
// - the tiled kernel's 8 lanes per block (coalesced loads, integer shares in workgroup
//   atomics) and the CPU adapters' thread-per-block layout == the ref across two 64-block chunks;
// - at M ≤ ACTS_FOLD_ROWS one unnormed weight quantizes its own (gated) input in its matmul
//   (wgsl/qmatmul-acts.ts): ONE dispatch, the bits of quant_acts + qmatmul, x left as it was;
//   a normed group folds its norm there too (test/webgpu-qmatmul-norm-fold.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Weight, WeightDType } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { assertSameBits, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { makeQuantCase, normThenEachMatmul, normedGroupOnce } from './webgpu-quant-cases.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';
import { ACTS_FOLD_ROWS, ACTS_TILE } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';

/** Rows past the activation-quantizing matmuls (quant_acts / norm_quant_acts + the tiled qmatmuls). */
const PAST = ACTS_FOLD_ROWS + 1;

const ref = createRefKernels();
let g: WebGpuKernels;
// the matmul quantizing its own input at M ≤ ACTS_FOLD_ROWS, as on a GPU (off by default on lavapipe)
// and the tiled matmuls' GPU layout (8 lanes a block; a CPU adapter defaults to 'block', which
// the chunk test below checks too, and every other quantized webgpu test runs)
before(async () => { g = await gpuUnderTest(); g.foldQuantActs = true; g.quantLayout = 'lanes'; });
after(() => g?.dispose());

const K = 512; // a multiple of every block size (32, 256)
const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

function anyWeight(dtype: WeightDType, rows: number, r: () => number): GpuWeight {
  return g.uploadWeight(randomAnyWeight(ref, dtype, rows, K, r));
}

async function check(dtypes: readonly WeightDType[], m: number, seed: number, zeroCentered: boolean): Promise<number> {
  const c = makeQuantCase(g, ref, K, dtypes, m, seed, zeroCentered);
  const got = await normedGroupOnce(g, c, m);
  const want = await normThenEachMatmul(g, c, m);
  const what = `${dtypes.join('+')} M=${m}${zeroCentered ? ' zero-centred' : ''}`;
  c.ws.forEach((w, j) => assertSameBits(got.outs[j]!, want[j]!, `${what}: weight ${j} (${w.dtype} ${w.rows}x${w.cols})`));
  // at M ≤ ACTS_FOLD_ROWS every matmul folds the norm (wgsl/qmatmul-acts-group.ts; float:
  // matmul_group's): the normed rows are not written (Kernels.matmulGroup allows it)
  if (m > ACTS_FOLD_ROWS) assertSameBits(got.outs[c.ws.length]!, want[c.ws.length]!, `${what}: the normed rows`);
  return got.dispatches;
}

/** A random quantized [rows, k] weight (both forms: the ref's and the uploaded). */
function quantPair(dtype: QuantType, rows: number, k: number, r: () => number): { weight: Weight; gw: GpuWeight } {
  const weight = randomAnyWeight(ref, dtype, rows, k, r);
  return { weight, gw: g.uploadWeight(weight) };
}

describe('webgpu quantized matmul: 8 lanes per block (coalesced weight loads)', () => {
  // K 2,304: 72 blocks of 32 = a full 64-block chunk and a partial one (the lanes' blocks past
  // nb idle); the integer share of each lane sums to the per-block integer of ref/quant.ts in
  // any order, the f32 chain stays in block order: the ref's bits (which the per-block-thread
  // kernel before it also gave on lavapipe: webgpu-conformance)
  // (every type within one chunk: webgpu-conformance; here the types of the shipped GGUFs)
  for (const dtype of ['q8_0', 'q4_k', 'q6_k'] as const satisfies readonly QuantType[]) for (const layout of ['lanes', 'block'] as const) {
    test(`${dtype}, ${layout} layout: == the ref bit for bit across chunks (K 2304; M = 1, 17)`, async () => {
      g.quantLayout = layout;
      const r = rng(300 + QUANT_TYPES.indexOf(dtype));
      const k = 2304;
      const { weight, gw } = quantPair(dtype, 13, k, r);
      for (const m of [1, 17]) {
        const x = fill(m * k, () => 3 * (2 * r() - 1));
        const want = new Float32Array(m * 13);
        ref.matmul(want, x, weight, m);
        const out = g.alloc.upload(fill(m * 13, () => NaN));
        const [got] = await run(g, (e) => g.matmul(e, out, g.alloc.upload(x), gw, m), out);
        if (g.adapter.cpuEmulation) assertSameBits(got!, want, `${dtype} M=${m}`);
        else for (let i = 0; i < want.length; i++) assert.ok(Math.abs(got![i]! - want[i]!) <= 1e-5 * (1 + Math.abs(want[i]!)), `${dtype} M=${m} [${i}]`);
      }
      g.quantLayout = 'lanes';
    });
  }
});

describe('webgpu quantized matmulGroup', () => {
  // At M = 17 the tiled kernel is compiled per (type, segments), 25–35 s each on lavapipe: three
  // segments of one type on q8_0 and q4_k; q6_k and q5_0 one segment beside a q8_0 weight (the
  // segment logic is the type's decode-independent part, the type's decode the one-segment kernel's)
  const tiledGroup = (dtype: QuantType): QuantType[] => dtype === 'q8_0' || dtype === 'q4_k' ? [dtype, dtype, dtype] : [dtype, 'q8_0'];
  for (const dtype of ['q8_0', 'q4_k', 'q6_k', 'q5_0'] as const satisfies readonly QuantType[]) {
    test(`${dtype}: grouped with its norm == rmsNorm + a matmul per weight, bit for bit (M = 1, 3, 17)`, async () => {
      for (const [i, m] of [1, 3, 17].entries()) await check(m > ACTS_FOLD_ROWS ? tiledGroup(dtype) : [dtype, dtype, dtype], m, 11 * i + m, i % 2 === 0);
    });
  }

  test('mixed group (q8_0, bf16, q4_k): outputs and normed rows == separate calls', async () => {
    for (const m of [1, PAST]) await check(['q8_0', 'bf16', 'q4_k'], m, 90 + m, true);
  });

  test('more weights than one dispatch binds (6 q4_k, 2 q8_0): == separate calls', async () => {
    assert.ok(g.quantGroupSegments < 6, `${g.quantGroupSegments} segments per dispatch`);
    for (const m of [1, 4]) await check(['q4_k', 'q4_k', 'q8_0', 'q4_k', 'q4_k', 'q8_0', 'q4_k', 'q4_k'], m, 70 + m, false);
  });

  test('dispatches of a normed group: M = 1, each quant type one (the norm folded); M = ACTS_FOLD_ROWS + 1, norm + quantization one more', async () => {
    // before: rms_norm + quant_acts + one qmatmul per weight (q/k/v: 5, gate/up: 4); then
    // norm_quant_acts + one qmatmul_group per quant type (2, 2, 3)
    assert.equal(await check(['q8_0', 'q8_0', 'q8_0'], 1, 7, false), 1, 'q8_0 q/k/v');
    assert.equal(await check(['q4_k', 'q4_k'], 1, 8, true), 1, 'q4_k gate/up');
    assert.equal(await check(['q4_k', 'q6_k', 'q4_k'], 1, 9, false), 2, 'q4_k, q6_k, q4_k');
    assert.equal(await check(['q8_0', 'q8_0', 'q8_0'], PAST, 10, true), 2, `q8_0 q/k/v, M = ${PAST}`);
  });

  test('gated quantized matmulAdd == element-wise product then matmulAdd (silu, sigmoid; M = 1, ACTS_FOLD_ROWS + 1)', async () => {
    for (const [i, act] of (['silu', 'sigmoid'] as const).entries()) {
      for (const m of [1, PAST]) {
        const r = rng(200 + 10 * i + m);
        const w = anyWeight(i === 0 ? 'q4_k' : 'q8_0', 21, r);
        const x = fill(m * K, () => 3 * (2 * r() - 1));
        const gb = fill(m * K, () => 4 * (2 * r() - 1));
        const acc = fill(m * w.rows, () => 2 * r() - 1);
        let dispatches = 0;
        const gx = g.alloc.upload(x);
        const gout = g.alloc.upload(acc);
        const got = await run(g, (e) => {
          const d0 = e.dispatchCount;
          g.matmulAdd(e, gout, gx, w, m, { b: g.alloc.upload(gb), act });
          dispatches = e.dispatchCount - d0;
        }, gout, gx);
        const sx = g.alloc.upload(x);
        const sout = g.alloc.upload(acc);
        const want = await run(g, (e) => {
          g.elementwise(e, act === 'silu' ? 1 : 2, sx, sx, g.alloc.upload(gb), m * K, `mul_${act}`);
          g.matmulAdd(e, sout, sx, w, m);
        }, sout, sx);
        assertSameBits(got[0], want[0], `${act} M=${m}: out`);
        if (m <= ACTS_FOLD_ROWS) {
          // the matmul quantizes x ⊙ act(g) itself: one dispatch, x left as it was
          assertSameBits(got[1], x, `${act} M=${m}: x unchanged`);
          assert.equal(dispatches, 1, `${act} M=${m}: the matmul quantizing its gated input`);
        } else {
          assertSameBits(got[1], want[1], `${act} M=${m}: x ⊙ ${act}(g) in place`);
          assert.equal(dispatches, 2, `${act} M=${m}: quantization with the gate + the matmul`);
        }
      }
    }
  });

  test('M ≤ ACTS_TILE: the matmul quantizing its own input == quant_acts + the tiled qmatmul, gated or not, bit for bit', async () => {
    // the separate path forced by a second weight in the group (quant_acts once, then
    // qmatmul_group: the single-weight kernel's bits); K 2304: two chunks
    const k = 2304;
    // one type of each lane share: plain (q8_0), a zero point (q4_0), an offset term (q4_k), Q6_K
    for (const [ti, dtype] of (['q8_0', 'q4_0', 'q4_k', 'q6_k'] as const).entries()) {
      const r = rng(400 + ti);
      const { weight, gw } = quantPair(dtype, 11, k, r);
      const { gw: other } = quantPair(dtype, 3, k, r);
      for (const m of [1, ACTS_TILE]) {
        const gate = ([null, 'silu', 'sigmoid'] as const)[(ti + m) % 3]!;
        const x = fill(m * k, () => 3 * (2 * r() - 1));
        const gb = fill(m * k, () => 4 * (2 * r() - 1));
        const acc = fill(m * 11, () => 2 * r() - 1);
        const what = `${dtype} M=${m} gate ${gate ?? 'none'}`;
        const fout = g.alloc.upload(acc);
        let dispatches = 0;
        const [fused] = await run(g, (e) => {
          const d0 = e.dispatchCount;
          g.matmulGroup(e, g.alloc.upload(x), m, [{ out: fout, w: gw }], true, undefined, gate ? { b: g.alloc.upload(gb), act: gate } : undefined);
          dispatches = e.dispatchCount - d0;
        }, fout);
        assert.equal(dispatches, 1, `${what}: one dispatch`);
        const sout = g.alloc.upload(acc);
        const [separate] = await run(g, (e) => g.matmulGroup(e, g.alloc.upload(x), m, [{ out: sout, w: gw }, { out: g.alloc.upload(fill(m * 3, () => 0)), w: other }],
          true, undefined, gate ? { b: g.alloc.upload(gb), act: gate } : undefined), sout);
        assertSameBits(fused!, separate!, what);
        if (!gate && g.adapter.cpuEmulation) {
          const want = new Float32Array(m * 11);
          ref.matmul(want, x, weight, m);
          const plain = g.alloc.upload(fill(m * 11, () => NaN));
          const [got] = await run(g, (e) => g.matmul(e, plain, g.alloc.upload(x), gw, m), plain);
          assertSameBits(got!, want, `${what}: == ref`);
        }
      }
    }
  });
});
