// The fused gated recurrence (Kernels.gdnRecurrentGatedSeqs) on webgpu launched both ways
// (kernels/webgpu/gdn-columns.ts): 'head' (one workgroup per value head, wgsl/gdn-gated.ts)
// and 'columns' (a workgroup per block of 8 state columns, then the norm pass,
// wgsl/gdn-columns.ts) must give the same bits, and so must the plain recurrence
// (gdnRecurrentSeqs: 64-column workgroups vs the column launch's): outputs, in-place
// states and every verify scratch snapshot, for a batch of sequences of different lengths (0, 1 and several tokens,
// in place and to scratch), value dims that leave a partial block, key dims up to 256; and
// tiny-think's forward (decode, a 3-token verify to scratch, a 3-token in-place step) gives
// the same logits and states either way.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnDims, GdnSeq, Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GdnLaunch } from '../src/kernels/webgpu/launches.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { Tensor } from '../src/kernels/types.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { type AnyModel, allocSequenceMemory, loadModel } from '../src/model/model.js';
import { TINY_THINK } from './paths.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => { k?.dispose(); });

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

/** Every sequence of TS in one call, launched as `launch`: the fused gated recurrence, or
 * the plain one (gdnRecurrentSeqs, the gates given: g = −|a|, β = σ(b) stand-ins). */
async function runAs(launch: GdnLaunch, x: Inputs, form: 'gated' | 'plain' = 'gated'): Promise<Result> {
  k.g.useLaunches('cpu', { gdnLaunch: launch });
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
  if (form === 'gated') k.gdnRecurrentGatedSeqs(out, qkv, { a, b, aLog: x.aLog, dtBias: x.dtBias, g: k.alloc(a.length), beta: k.alloc(a.length), z, norm: x.norm, eps: 1e-6 }, x.dims, seqs);
  else k.gdnRecurrentSeqs(out, qkv, up(x.a.map((v) => -Math.abs(v))), up(x.b.map((v) => 1 / (1 + Math.exp(-v)))), x.dims, seqs);
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
    test(`plain recurrence (gdnRecurrentSeqs), dk ${dims.keyDim}, dv ${dims.valueDim}`, async () => {
      const x = inputs(dims.keyDim * dims.valueDim, dims);
      const head = await runAs('head', x, 'plain');
      const cols = await runAs('columns', x, 'plain');
      assert.deepEqual([head.dispatches, cols.dispatches], [1, 1]);
      assert.ok(head.out.some((v) => v !== 0), 'the outputs are not all zero');
      assert.ok(sameBits(cols.out, head.out), 'outputs differ');
      assert.ok(sameBits(cols.states, head.states), 'in-place states differ');
      assert.ok(sameBits(cols.scratch, head.scratch), 'verify scratch snapshots differ');
    });
  }
});

/** tiny-think on `launch`: a chunked 6-token prompt, a decode step, a 3-token verify to
 * scratch, a 3-token in-place step; every step's logits, then the states and the scratch. */
async function forwardAs(model: AnyModel, launch: GdnLaunch): Promise<{ results: Float32Array[]; dispatches: number }> {
  k.g.useLaunches('cpu', { gdnLaunch: launch });
  const d0 = k.recordedDispatches;
  const mem = allocSequenceMemory(model, 64);
  const ws = new StepArena(model);
  const { layout } = model;
  const scratch = layout.linearLayers.map(() => ({ conv: k.alloc(3 * layout.convSize), ssm: k.alloc(3 * layout.ssmSize) }));
  const v = model.config.vocabSize;
  const got: Float32Array[] = [];
  const step = async (tokens: number[], start: number, extra: Partial<SeqInput<Tensor>>): Promise<void> => {
    const fw = forwardHidden(model, ws, [{ tokens, start, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: false, ...extra }]);
    const rows = tokens.map((_, i) => fw.offsets[0]! + i);
    const out = lmHeadInto(model, ws, fw.hidden, rows, ws.logits.rows(rows.length));
    const [logits] = await k.readBack([{ t: out as GpuTensor, offset: 0, length: rows.length * v }]);
    got.push(logits!);
  };
  await step([11, 12, 13, 14, 15, 16], 0, { chunked: true });
  await step([17], 6, {});
  await step([18, 19, 20], 7, { scratch });
  await step([21, 22, 23], 7, {});
  const tensors = [...mem.state.map((s) => s.ssm), ...scratch.map((s) => s.ssm)] as unknown as GpuTensor[];
  const dispatches = k.recordedDispatches - d0;
  got.push(...await k.readBack(tensors.map((t) => ({ t, offset: 0, length: t.length }))) as Float32Array[]);
  return { results: got, dispatches };
}

test('tiny-think forward: the column launch == the head launch, bit for bit (logits, states, verify scratch)', async () => {
  const model = await loadModel(TINY_THINK(), k) as unknown as AnyModel;
  const head = await forwardAs(model, 'head');
  const cols = await forwardAs(model, 'columns');
  // the 3 recurrent steps' norm passes are formed inside out_proj (kernels/webgpu/gated-norm.ts:
  // BF16 out_proj, the one-column float matmul), so both launches dispatch as many
  assert.equal(cols.dispatches, head.dispatches, 'the column launch without its norm passes');
  assert.equal(cols.results.length, head.results.length);
  head.results.forEach((h, i) => assert.ok(sameBits(cols.results[i]!, h), `result ${i} differs (0-3: logits of each step, then states, scratch)`));
});
