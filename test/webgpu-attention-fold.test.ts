// The attention inputs (q / gate split, q and k head norms, partial RoPE, the KV write)
// folded into the decode / verify attention dispatch (kernels/webgpu/attention-fold.ts):
// Kernels.attentionBatch with its inputs, the fold forced on vs off (off: attention_inputs
// then attention), element by element — the attention output, q, the gate, k and both
// caches after the step — for decode (1 and 4 streams at different positions and page
// tables, a stream of no rows among them), verify (k + 1 = 2..5 rows beside a decode row),
// gated and not, head dims 16, 64 and 256 (16, 16 and 32 threads a workgroup: the 64 norm
// lanes' tree run by fewer threads), a cache per sequence (a dispatch each); and one
// dispatch where there were two. A step with a prefill (a sequence of several blocks) or a
// verify past a block keeps the two dispatches, the same bits.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { AttentionInputs, BatchSeq, KvLayerView } from '../src/kernels/types.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { forceAttentionFold } from '../src/kernels/webgpu/attention-fold.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => { forceAttentionFold(k.g, null); k?.dispose(); });

interface Dims { readonly nH: number; readonly nKV: number; readonly hd: number; readonly rotary: number }
type Spec = readonly { t: number; start: number }[];
const PS = 4;
const OUTPUTS = ['out', 'q', 'gate', 'k', 'cache k', 'cache v'];

/** One attentionBatch call with its inputs over random rows and caches (the same for a seed),
 * the fold on or off: every output read back, and the dispatches it took. */
async function step(d: Dims, spec: Spec, gated: boolean, fold: boolean, ownCaches = false): Promise<{ got: Float32Array[]; dispatches: number }> {
  const r = rng(1000 + d.hd + spec.length * 7 + (gated ? 1 : 0));
  const sym = (n: number, s = 1) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const ref = createRefKernels();
  const [qd, kvDim] = [d.nH * d.hd, d.nKV * d.hd];
  const pages = Math.max(...spec.map((s) => Math.ceil((s.start + s.t + 1) / PS)));
  // page tables interleave the sequences' pages over one pool, reversed within a sequence
  let row = 0;
  const seqs: BatchSeq[] = spec.map((s, i) => {
    const b = { row, t: s.t, start: s.start, pageTable: Array.from({ length: pages }, (_, p) => (pages - 1 - p) * spec.length + i) };
    row += s.t;
    return b;
  });
  const pool = pages * spec.length * PS * kvDim;
  const hist = [sym(pool), sym(pool)];
  const cache = (): KvLayerView<GpuTensor> => {
    const t = k.alloc(2 * pool);
    k.write(t, 0, hist[0]!);
    k.write(t, pool, hist[1]!);
    return { k: k.view(t, 0, pool), v: k.view(t, pool, pool), pageSize: PS };
  };
  const upload = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const qg = upload(sym(row * qd * (gated ? 2 : 1), 3));
  const q = gated ? k.alloc(row * qd) : qg;
  const gate = gated ? k.alloc(row * qd) : null;
  const [kk, v, out] = [upload(sym(row * kvDim, 3)), upload(sym(row * kvDim)), k.alloc(row * qd)];
  const shared = cache();
  const kv = seqs.map(() => (ownCaches ? cache() : shared));
  const [qNorm, kNorm] = [randomWeight(ref, 'bf16', 1, d.hd, () => 0.3 * (2 * r() - 1)), randomWeight(ref, 'bf16', 1, d.hd, () => 0.3 * (2 * r() - 1))];
  const dims = { numHeads: d.nH, numKvHeads: d.nKV, headDim: d.hd };
  const a: AttentionInputs<GpuTensor> = { qg, gated, q, gate, k: kk, v, qNorm, kNorm, eps: 1e-6, kv };
  const b = k.stepBatch(seqs, plainRopeTable(1e6, d.rotary));
  await k.readBack([{ t: qg, offset: 0, length: 1 }]); // uploads land first: count only the call's dispatches
  forceAttentionFold(k.g, fold);
  const d0 = k.recordedDispatches;
  k.attentionBatch(out, q, qd, kv, b, dims, a);
  const dispatches = k.recordedDispatches - d0;
  const caches = kv.filter((x, i) => kv.indexOf(x) === i).flatMap((x) => [x.k, x.v]);
  const got = await k.readBack([out, q, gate ?? q, kk, ...caches].map((t) => ({ t, offset: 0, length: t.length })));
  return { got, dispatches };
}

/** Folded == unfolded, output by output; the dispatches of each. */
async function foldEqualsUnfolded(d: Dims, spec: Spec, gated: boolean, ownCaches = false): Promise<{ on: number; off: number }> {
  const off = await step(d, spec, gated, false, ownCaches);
  const on = await step(d, spec, gated, true, ownCaches);
  const what = `hd ${d.hd} G ${d.nH / d.nKV} ${JSON.stringify(spec)} gated ${gated}`;
  assert.equal(on.got.length, off.got.length);
  on.got.forEach((g, i) => assert.ok(sameBits(g, off.got[i]!), `${what}: ${OUTPUTS[Math.min(i, OUTPUTS.length - 1)]} (output ${i}) differs`));
  return { on: on.dispatches, off: off.dispatches };
}

const TINY: Dims = { nH: 4, nKV: 2, hd: 64, rotary: 16 }; // tiny-think's attention (G 2: blocks of 8 rows)

describe('webgpu attention inputs folded into the decode / verify attention', () => {
  test('decode, 1 and 4 streams (one of no rows), gated and not: the same bits, one dispatch where there were two', async () => {
    for (const gated of [true, false]) {
      for (const spec of [[{ t: 1, start: 37 }], [{ t: 1, start: 0 }, { t: 1, start: 5 }, { t: 0, start: 3 }, { t: 1, start: 30 }, { t: 1, start: 17 }]]) {
        const n = await foldEqualsUnfolded(TINY, spec, gated);
        assert.deepEqual(n, { on: 1, off: 2 }, 'attention_inputs folded into the attention');
      }
    }
  });

  test('verify of k + 1 = 2..5 rows beside a decode row: the same bits, one dispatch', async () => {
    for (let rows = 2; rows <= 5; rows++) {
      const n = await foldEqualsUnfolded(TINY, [{ t: 1, start: 11 }, { t: rows, start: 20 + rows }], rows % 2 === 0);
      assert.deepEqual(n, { on: 1, off: 2 }, `verify of ${rows} rows`);
    }
  });

  test('head dims 16 and 256 (partial RoPE; 16 and 32 threads), G 1, 2 and 4: the same bits', async () => {
    for (const [d, spec] of [
      [{ nH: 4, nKV: 2, hd: 16, rotary: 8 }, [{ t: 3, start: 6 }, { t: 1, start: 2 }]],
      [{ nH: 8, nKV: 2, hd: 256, rotary: 64 }, [{ t: 4, start: 18 }, { t: 1, start: 40 }]],
      [{ nH: 2, nKV: 2, hd: 64, rotary: 64 }, [{ t: 5, start: 3 }, { t: 1, start: 9 }]],
    ] as const) {
      assert.deepEqual(await foldEqualsUnfolded(d, spec, true), { on: 1, off: 2 }, `hd ${d.hd}`);
    }
  });

  test('a cache per sequence: the same bits, a dispatch per sequence with rows (before: the separate calls, then one each)', async () => {
    const spec = [{ t: 1, start: 9 }, { t: 0, start: 1 }, { t: 3, start: 4 }];
    const n = await foldEqualsUnfolded(TINY, spec, true, true);
    assert.equal(n.on, 2);
    assert.ok(n.off > 2 + 2, `${n.off} dispatches unfolded`);
  });

  test('not folded: a prefill of 13 rows in the step, a verify past a block (5 rows at G 4): the separate dispatches, the same bits', async () => {
    const prefill = await foldEqualsUnfolded(TINY, [{ t: 1, start: 20 }, { t: 13, start: 2 }], true);
    assert.equal(prefill.on, prefill.off, 'a step with a prefill keeps attention_inputs');
    const wide = await foldEqualsUnfolded({ nH: 8, nKV: 2, hd: 64, rotary: 16 }, [{ t: 5, start: 7 }], false);
    assert.equal(wide.on, wide.off, 'a verify of 5 rows at G 4 is two blocks');
  });
});
