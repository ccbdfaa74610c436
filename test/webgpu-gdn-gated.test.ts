// Kernels.gdnRecurrentGatedSeqs on webgpu (the gates, the recurrence and the gated RMSNorm
// of a batch's recurrent sequences in one dispatch, wgsl/gdn-gated.ts) against the ref's
// plain form (within tolerance), and against itself: every sequence alone == the same
// sequence in the batch, bit for bit (outputs, in-place states, verify scratch) — the
// invariant the fused form keeps in place of equality with the three plain calls.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, GdnSeq, Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { gdnGatedSeqsByCalls } from '../src/kernels/seqs-by-calls.js';
import { randomWeight, relErr, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says: the dispatch counts below are its
// (a GPU's folds and launches and their counts: the fold and launch suites, webgpu-*-fold, -columns)
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest({ launches: 'cpu' })); });
after(() => k?.dispose());

const ref = createRefKernels();
const TS = [1, 0, 3, 2, 1];
const SCRATCH = [false, false, true, false, true];

interface Inputs {
  dims: GdnDims; rows: number; qkv: Float32Array; a: Float32Array; b: Float32Array; z: Float32Array; states: Float32Array;
  aLog: Weight; dtBias: Weight; norm: Weight;
}

function inputs(seed: number, dims: GdnDims): Inputs {
  const r = rng(seed);
  const sym = (n: number, s = 1) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const rows = TS.reduce((x, y) => x + y, 0);
  return {
    dims, rows, qkv: sym(rows * (2 * hk * dk + hv * dv)), a: sym(rows * hv, 4), b: sym(rows * hv, 4), z: sym(rows * hv * dv, 3),
    states: sym(TS.length * hv * dk * dv, 0.5),
    aLog: randomWeight(ref, 'f32', 1, hv, () => r() - 1), dtBias: randomWeight(ref, 'bf16', 1, hv, () => 2 * r() - 1),
    norm: randomWeight(ref, 'f32', 1, dv, () => 0.5 + r()),
  };
}

/** Rows of the sequences `which` (indices into TS), stacked in order: their spans. */
function spans(which: readonly number[]): { i: number; row: number; t: number; from: number }[] {
  let row = 0;
  return which.map((i) => {
    const from = TS.slice(0, i).reduce((x, y) => x + y, 0);
    const s = { i, row, t: TS[i]!, from };
    row += TS[i]!;
    return s;
  });
}

interface Result { out: Float32Array; states: Float32Array; scratch: Float32Array[] }

/** Run the sequences `which` in one call on `kern`; each sequence's rows are taken from
 * its place in the full batch, so any subset sees the same inputs. */
async function runOn(kind: 'gpu' | 'ref', x: Inputs, which: readonly number[], count?: (n: number) => void): Promise<Result> {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = x.dims;
  const width = 2 * hk * dk + hv * dv;
  const sp = spans(which);
  const rows = sp.reduce((n, s) => n + s.t, 0);
  const pick = (src: Float32Array, w: number) => {
    const o = new Float32Array(Math.max(1, rows * w));
    for (const s of sp) o.set(src.subarray(s.from * w, (s.from + s.t) * w), s.row * w);
    return o;
  };
  const ss = hv * dk * dv;
  const host = { qkv: pick(x.qkv, width), a: pick(x.a, hv), b: pick(x.b, hv), z: pick(x.z, hv * dv), states: Float32Array.from(x.states) };
  if (kind === 'ref') {
    const out = new Float32Array(Math.max(1, rows * hv * dv));
    const scratch = sp.map((s) => new Float32Array(SCRATCH[s.i] ? s.t * ss : 0));
    const seqs: GdnSeq<Float32Array>[] = sp.map((s, j) => ({ row: s.row, t: s.t, state: host.states.subarray(s.i * ss, (s.i + 1) * ss),
      scratch: SCRATCH[s.i] ? scratch[j] : undefined }));
    const gating = { a: host.a, b: host.b, aLog: x.aLog, dtBias: x.dtBias, g: new Float32Array(host.a.length), beta: new Float32Array(host.a.length), z: host.z, norm: x.norm, eps: 1e-6 };
    gdnGatedSeqsByCalls(ref, out, host.qkv, gating, x.dims, seqs);
    return { out, states: host.states, scratch };
  }
  const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const [qkv, a, b, z, states] = [up(host.qkv), up(host.a), up(host.b), up(host.z), up(host.states)];
  const out = k.alloc(Math.max(1, rows * hv * dv));
  const scr = k.alloc(TS.reduce((n, t) => n + t, 0) * ss);
  const seqs: GdnSeq<GpuTensor>[] = sp.map((s) => ({ row: s.row, t: s.t, state: k.view(states, s.i * ss, ss),
    scratch: SCRATCH[s.i] ? k.view(scr, s.from * ss, s.t * ss) : undefined }));
  await k.readBack([{ t: qkv, offset: 0, length: 1 }]);
  const d0 = k.recordedDispatches;
  k.gdnRecurrentGatedSeqs(out, qkv, { a, b, aLog: x.aLog, dtBias: x.dtBias, g: k.alloc(a.length), beta: k.alloc(a.length), z, norm: x.norm, eps: 1e-6 }, x.dims, seqs);
  count?.(k.recordedDispatches - d0);
  const [o, st, sc] = await k.readBack([out, states, scr].map((t) => ({ t, offset: 0, length: t.length })));
  return { out: o!, states: st!, scratch: sp.map((s) => sc!.slice(s.from * ss, SCRATCH[s.i] ? (s.from + s.t) * ss : s.from * ss)) };
}

const CASES: GdnDims[] = [
  { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 24 }, // 64 threads, 40 idle
  { numKeyHeads: 1, numValueHeads: 2, keyDim: 32, valueDim: 80 }, // 128 threads: the norm's sums wrap past 64
];

describe('webgpu fused gated recurrence', () => {
  for (const dims of CASES) {
    test(`dv ${dims.valueDim}: one dispatch; vs the ref's three plain calls within 1e-5; alone == in the batch, bit for bit`, async () => {
      const x = inputs(dims.valueDim, dims);
      const all = TS.map((_, i) => i);
      let dispatches = -1;
      const got = await runOn('gpu', x, all, (n) => { dispatches = n; });
      assert.equal(dispatches, 1, 'gates, recurrence and norm in one dispatch');
      const want = await runOn('ref', x, all);
      const tol = 1e-5;
      assert.ok(relErr(got.out, want.out) <= tol, `out: rel err ${relErr(got.out, want.out)}`);
      assert.ok(relErr(got.states, want.states) <= tol, `states: rel err ${relErr(got.states, want.states)}`);
      got.scratch.forEach((s, j) => assert.ok(relErr(s, want.scratch[j]!) <= tol, `scratch of sequence ${j}: rel err ${relErr(s, want.scratch[j]!)}`));
      const { numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
      const ss = hv * dk * dv;
      for (const i of all) {
        if (TS[i] === 0) continue;
        const alone = await runOn('gpu', x, [i]);
        const s = spans(all)[i]!;
        const w = hv * dv;
        assert.ok(sameBits(alone.out.subarray(0, s.t * w), got.out.subarray(s.row * w, (s.row + s.t) * w)), `sequence ${i}: output alone != in the batch`);
        assert.ok(sameBits(alone.states.subarray(i * ss, (i + 1) * ss), got.states.subarray(i * ss, (i + 1) * ss)), `sequence ${i}: state alone != in the batch`);
        assert.ok(sameBits(alone.scratch[0]!, got.scratch[i]!), `sequence ${i}: scratch alone != in the batch`);
      }
    });
  }
});
