// The fused gated recurrence (Kernels.gdnRecurrentGatedSeqs) on webgpu launched both ways
// (kernels/webgpu/gdn-columns.ts): 'head' (one workgroup per value head, wgsl/gdn-gated.ts)
// and 'columns' (a workgroup per block of 8 state columns, then the norm pass,
// wgsl/gdn-columns.ts) must give the same bits: outputs, in-place states and every verify
// scratch snapshot, for a batch of sequences of different lengths (0, 1 and several tokens,
// in place and to scratch), value dims that leave a partial block, key dims up to 256.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, GdnSeq, Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { forceGdnLaunch, gdnLaunch, type GdnLaunch } from '../src/kernels/webgpu/gdn-columns.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => { if (k) forceGdnLaunch(k.g, null); k?.dispose(); });

const ref = createRefKernels();
const TS = [1, 0, 3, 2, 1, 4];
const SCRATCH = [false, false, true, false, true, true];

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

interface Result { dispatches: number; out: Float32Array; states: Float32Array; scratch: Float32Array }

/** Every sequence of TS in one call, launched as `launch`. */
async function runAs(launch: GdnLaunch, x: Inputs): Promise<Result> {
  forceGdnLaunch(k.g, launch);
  assert.equal(gdnLaunch(k.g), launch);
  const { numValueHeads: hv, keyDim: dk, valueDim: dv } = x.dims;
  const ss = hv * dk * dv;
  const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const [qkv, a, b, z, states] = [up(x.qkv), up(x.a), up(x.b), up(x.z), up(x.states)];
  const out = k.alloc(x.rows * hv * dv);
  const scr = up(new Float32Array(x.rows * ss).fill(-7));
  let row = 0;
  const seqs: GdnSeq<GpuTensor>[] = TS.map((t, i) => {
    const s = { row, t, state: k.view(states, i * ss, ss), scratch: SCRATCH[i] ? k.view(scr, row * ss, Math.max(1, t) * ss) : undefined };
    row += t;
    return s;
  });
  await k.readBack([{ t: qkv, offset: 0, length: 1 }]);
  const d0 = k.recordedDispatches;
  k.gdnRecurrentGatedSeqs(out, qkv, { a, b, aLog: x.aLog, dtBias: x.dtBias, g: k.alloc(a.length), beta: k.alloc(a.length), z, norm: x.norm, eps: 1e-6 }, x.dims, seqs);
  const dispatches = k.recordedDispatches - d0;
  const [o, st, sc] = await k.readBack([out, states, scr].map((t) => ({ t, offset: 0, length: t.length })));
  return { dispatches, out: o!, states: st!, scratch: sc! };
}

const CASES: GdnDims[] = [
  { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 20 }, // 3 blocks, the last half full
  { numKeyHeads: 1, numValueHeads: 2, keyDim: 32, valueDim: 80 }, // the norm's sums wrap past 64
  { numKeyHeads: 2, numValueHeads: 4, keyDim: 128, valueDim: 128 }, // qwen3.5's head dims
  { numKeyHeads: 1, numValueHeads: 1, keyDim: 256, valueDim: 64 }, // the largest key dim: a full staged block
];

describe('webgpu gated recurrence: the column launch == the head launch, bit for bit', () => {
  for (const dims of CASES) {
    test(`dk ${dims.keyDim}, dv ${dims.valueDim}, ${dims.numValueHeads} value heads`, async () => {
      const x = inputs(dims.keyDim + dims.valueDim, dims);
      const head = await runAs('head', x);
      const cols = await runAs('columns', x);
      assert.equal(head.dispatches, 1, 'head launch: one dispatch');
      assert.equal(cols.dispatches, 2, 'column launch: the recurrence and the norm pass');
      assert.ok(head.out.some((v) => v !== 0), 'the outputs are not all zero');
      assert.ok(sameBits(cols.out, head.out), 'outputs differ');
      assert.ok(sameBits(cols.states, head.states), 'in-place states differ');
      assert.ok(sameBits(cols.scratch, head.scratch), 'verify scratch snapshots differ');
      assert.ok(!sameBits(head.states, x.states), 'the states were updated');
    });
  }
});
