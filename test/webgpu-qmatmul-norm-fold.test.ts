// The RMS norm folded into the activation-quantizing quantized matmul group (issue #47: a
// quantized decode layer's norm_quant_acts dispatches before in_proj / q,k,v / gate,up; at
// M ≤ ACTS_TILE on a GPU adapter, wgsl/qmatmul-acts-group.ts): every workgroup forms its
// rows' inverse RMS as NORM does, norms, quantizes and multiplies in ONE dispatch per quant
// type. Checked here, with the GPU's settings forced on lavapipe (foldQuantActs, 'lanes'):
// - q8_0, q4_k and q4_0 (compile time on lavapipe: see the loop), M = 1..4, groups of 2, 3 and 4 outputs, zero-centred and plain norm weights:
//   each output == rmsNorm + the lone activation-quantizing qmatmul per weight, and on q8_0
//   == norm_quant_acts + the tiled qmatmul group (the fold off), bit for bit; one dispatch, and the
//   normed rows left unwritten (no norm ran);
// - a mixed float + quantized group: the float weights fold the norm themselves, 2 dispatches;
// - an unnormed quantized group (== each weight's own matmul) and a gated matmulAdd over a
//   weight split in parts (== the weight whole): one dispatch each; x left as it was;
// - M = ACTS_TILE + 1 .. ACTS_FOLD_ROWS fold in two tiles of rows (the same bits); past that
//   norm_quant_acts + the tiled group.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { WeightDType } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import type { GpuGatedInput, WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { StepEncoder } from '../src/kernels/webgpu/encoder.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { ACTS_FOLD_ROWS, ACTS_TILE } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { assertSameBits, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { makeQuantCase, normThenEachMatmul, normedGroupOnce, type QuantCase } from './webgpu-quant-cases.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
// no read-back pacing: its sleeps learn per submit shape, and this file's shapes vary
before(async () => { g = await gpuUnderTest(); g.quantLayout = 'lanes'; });
after(() => g?.dispose());

const K = 2304; // 72 blocks of 32 (two 64-block chunks), 9 super-blocks of 256
const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

function anyWeight(k: WebGpuKernels, dtype: WeightDType, rows: number, r: () => number): GpuWeight {
  return k.uploadWeight(randomAnyWeight(ref, dtype, rows, K, r));
}

/** The group in one matmulGroup call with its norm (fold on or off): the outputs, the
 * normed rows' tensor and the dispatch count. */
async function normedGroup(c: QuantCase, m: number, fold: boolean): Promise<{ outs: Float32Array[]; normed: Float32Array; dispatches: number }> {
  g.foldQuantActs = fold;
  const { outs, dispatches } = await normedGroupOnce(g, c, m);
  return { outs: outs.slice(0, c.ws.length), normed: outs[c.ws.length]!, dispatches };
}

/** rmsNorm, then each weight's own matmul over the normed rows (fold on: at M ≤ ACTS_TILE
 * the lone activation-quantizing qmatmul). */
async function perWeight(c: QuantCase, m: number): Promise<Float32Array[]> {
  g.foldQuantActs = true;
  return (await normThenEachMatmul(g, c, m)).slice(0, c.ws.length);
}

const allNaN = (v: Float32Array): boolean => v.every((e) => Number.isNaN(e));

describe('webgpu quantized matmul group: the RMS norm folded into the activation-quantizing matmul (M ≤ ACTS_TILE)', () => {
  // q8_0, q4_k and a zero point (q4_0) through every M and group size; q6_k folds in the mixed
  // group below and an offset type (q4_1) in the unnormed group: each type's variants cost a
  // cold lavapipe 1.5–4 min to compile (q6_k 250 s, q4_1 and q6_k passed here too; the q5
  // types ~6 min each, q5_0 and q5_1 passed once in 365 s and 371 s), and the fold is off by
  // default on every adapter
  for (const dtype of ['q8_0', 'q4_k', 'q4_0'] as const satisfies readonly QuantType[]) {
    const ti = QUANT_TYPES.indexOf(dtype);
    // one group size a type (q8_0 2 outputs, q4_k 3, q4_0 4): the segment count is baked into
    // the kernel (a pipeline per count, ~5 s each to compile on lavapipe) and its branches are
    // the same text for every type, so the three types cover the three counts
    const segs = { q8_0: 2, q4_k: 3, q4_0: 4 }[dtype];
    test(`${dtype}: == norm_quant_acts + qmatmul group and == rmsNorm + qmatmul_acts per weight, bit for bit (M = 1..4, ${segs} outputs)`, async () => {
      for (let m = 1; m <= ACTS_TILE; m++) {
        const zeroCentered = (m + ti) % 2 === 0;
        const c = makeQuantCase(g, ref, K, Array<QuantType>(segs).fill(dtype), m, 1000 + 10 * ti + m, zeroCentered);
        const what = `${dtype} M=${m} ${segs} outputs${zeroCentered ? ' zero-centred' : ''}`;
        const folded = await normedGroup(c, m, true);
        assert.equal(folded.dispatches, 1, `${what}: one dispatch`);
        assert.ok(allNaN(folded.normed), `${what}: no norm dispatch wrote the normed rows`);
        const separate = await perWeight(c, m);
        c.ws.forEach((w, j) => assertSameBits(folded.outs[j]!, separate[j]!, `${what}: weight ${j} (${w.rows}x${w.cols}) vs rmsNorm + qmatmul_acts`));
        // the fold off (norm_quant_acts + the tiled group of `segs` outputs) on q8_0: its tiled
        // kernel is one the other files compile; q4_k's and q4_0's would be 20–25 s each on lavapipe
        if (dtype !== 'q8_0') continue;
        const unfolded = await normedGroup(c, m, false);
        assert.equal(unfolded.dispatches, 2, `${what}: norm_quant_acts + the group (fold off)`);
        c.ws.forEach((w, j) => assertSameBits(folded.outs[j]!, unfolded.outs[j]!, `${what}: weight ${j} (${w.rows}x${w.cols}) vs norm_quant_acts + qmatmul`));
      }
    });
  }

  test('mixed group (q4_k, bf16, q6_k, q8_0): each kind folds the norm, one dispatch a kind and quant type, == separate calls', async () => {
    for (const m of [1, 3]) {
      const c = makeQuantCase(g, ref, K, ['q4_k', 'bf16', 'q6_k', 'q8_0'], m, 60 + m, m === 1);
      const folded = await normedGroup(c, m, true);
      assert.equal(folded.dispatches, 4, `M=${m}: q4_k, q6_k, q8_0 and the bf16 matmul with its norm`);
      const separate = await perWeight(c, m);
      c.ws.forEach((w, j) => assertSameBits(folded.outs[j]!, separate[j]!, `M=${m} weight ${j} (${w.dtype})`));
    }
  });

  test('M = ACTS_TILE + 1 .. ACTS_FOLD_ROWS fold in two tiles == the fold off and == per weight; past ACTS_FOLD_ROWS norm_quant_acts + the tiled group', async () => {
    for (const m of [ACTS_TILE + 1, ACTS_FOLD_ROWS, ACTS_FOLD_ROWS + 1]) {
      const c = makeQuantCase(g, ref, K, ['q8_0', 'q8_0'], m, 77 + m, true);
      const folded = await normedGroup(c, m, true);
      const kept = m > ACTS_FOLD_ROWS;
      assert.equal(folded.dispatches, kept ? 2 : 1, `M=${m}`);
      assert.equal(folded.normed.some((e) => Number.isNaN(e)), !kept, kept ? 'norm_quant_acts wrote the normed rows' : 'no norm ran');
      const separate = await perWeight(c, m);
      const unfolded = kept ? folded : await normedGroup(c, m, false);
      c.ws.forEach((_, j) => {
        assertSameBits(folded.outs[j]!, separate[j]!, `M=${m} weight ${j}: per weight`);
        assertSameBits(folded.outs[j]!, unfolded.outs[j]!, `M=${m} weight ${j}: the fold off`);
      });
    }
  });

  // (against each weight's own activation-quantizing matmul, itself the ref's integer arithmetic
  // bit for bit in webgpu-conformance, every type: the tiled 3-output q4_1 kernel of the fold off
  // would be a 20 s lavapipe compile)
  test('unnormed group (q4_1 ×3, M = 2): one dispatch == each weight\'s own matmul', async () => {
    const m = 2;
    const c = makeQuantCase(g, ref, K, ['q4_1', 'q4_1', 'q4_1'], m, 88, false);
    g.foldQuantActs = true;
    const outs = c.ws.map((w) => g.alloc.upload(fill(m * w.rows, () => NaN)));
    const alone = c.ws.map((w) => g.alloc.upload(fill(m * w.rows, () => NaN)));
    let dispatches = 0;
    const got = await run(g, (e) => {
      const d0 = e.dispatchCount;
      g.matmulGroup(e, g.alloc.upload(c.x), m, c.ws.map((w, j) => ({ out: outs[j]!, w })));
      dispatches = e.dispatchCount - d0;
      c.ws.forEach((w, j) => g.matmul(e, alone[j]!, g.alloc.upload(c.x), w, m));
    }, ...outs, ...alone);
    assert.equal(dispatches, 1);
    c.ws.forEach((_, j) => assertSameBits(got[j]!, got[c.ws.length + j]!, `weight ${j}`));
  });

  // against the same weight whole on an adapter without the split (its gated activation-quantizing
  // matmul == the gate product + quant_acts + the tiled qmatmul: webgpu-quant-group), not the
  // split's fold off, whose tiled 3-part group kernels (the parts alias one buffer) were 15–26 s
  // lavapipe compiles no other file shares
  test('gated matmulAdd over a weight split in 3 parts (q4_k silu, q8_0 sigmoid; M = 1, 4): one dispatch == the weight whole', async () => {
    g.foldQuantActs = true;
    for (const [i, [dtype, act]] of ([['q4_k', 'silu'], ['q8_0', 'sigmoid']] as const).entries()) {
      const probe = anyWeight(g, dtype, 1, rng(5));
      const split = await gpuUnderTest({ maxBindingOverride: 8 * probe.rowBytes });
      try {
        split.quantLayout = 'lanes';
        split.foldQuantActs = true;
        const r = rng(500 + i);
        const host = randomAnyWeight(ref, dtype, 21, K, r);
        const w = split.uploadWeight(host);
        const whole = g.uploadWeight(host);
        assert.equal(w.parts.length, 3, 'the weight is split in 3 parts');
        assert.equal(whole.parts.length, 1, 'the weight whole');
        for (const m of [1, ACTS_TILE]) {
          const x = fill(m * K, () => 3 * (2 * r() - 1));
          const gb = fill(m * K, () => 4 * (2 * r() - 1));
          const acc = fill(m * w.rows, () => 2 * r() - 1);
          const once = async (k: WebGpuKernels, wk: GpuWeight): Promise<{ out: Float32Array; x: Float32Array; dispatches: number }> => {
            const gx = k.alloc.upload(x);
            const out = k.alloc.upload(acc);
            const gate: GpuGatedInput = { b: k.alloc.upload(gb), act };
            let dispatches = 0;
            const [o, xs] = await run(k, (e: StepEncoder) => {
              const d0 = e.dispatchCount;
              k.matmulAdd(e, out, gx, wk, m, gate);
              dispatches = e.dispatchCount - d0;
            }, out, gx);
            return { out: o, x: xs, dispatches };
          };
          const folded = await once(split, w);
          const want = await once(g, whole);
          const what = `${dtype} ${act} M=${m}`;
          assert.equal(folded.dispatches, 1, `${what}: one dispatch`);
          assertSameBits(folded.out, want.out, what);
          assertSameBits(folded.x, x, `${what}: x left as it was`);
        }
      } finally {
        split.dispose();
      }
    }
  });
});
