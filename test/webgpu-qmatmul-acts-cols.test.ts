// The activation-quantizing quantized matmuls with C output columns a workgroup (issue #47:
// wgsl/qmatmul-acts.ts `cols`, WebGpuKernels.actsColumns = ACTS_COLUMNS on a GPU): the rows'
// norm inv, block maxima, quantizing and packing done once for C columns, each lane pairing
// its int8 word with C weight words. Checked with the GPU's settings forced on lavapipe, each
// output against the path it replaces (fold off: quant_acts / norm_quant_acts + the tiled
// qmatmul), bit for bit, M = 1..4 (webgpu-qmatmul-acts-cols-cases.ts):
// - the variant keys and grids (C columns, vec4 loads where the offsets allow);
// - q8_0: a normed group (vec4 loads), a plain group (scalar), a silu-gated accumulating
//   lone weight (vec4) at C = ACTS_COLUMNS; the normed group at C = 1 (the one-column kernel)
//   and C = 3; q4_k and q6_k in webgpu-qmatmul-acts-cols-k.
// Each C-column variant costs a cold lavapipe ~30 s to compile (every M is a parameter); all
// of q8_0, q4_k and q6_k's in one file ran 15 min cold (the per-file limit): split in two.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { quantActsDispatch, quantActsGroupDispatch } from '../src/kernels/webgpu/qmatmul-group.js';
import { view } from '../src/kernels/webgpu/tensor.js';
import { ACTS_COLUMNS, actsColumnsWithin } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { checkActsColumns, K, uploadAt } from './webgpu-qmatmul-acts-cols-cases.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

const zeros = (n: number): Float32Array => new Float32Array(n);

describe(`webgpu activation-quantizing quantized matmuls, ${ACTS_COLUMNS} output columns a workgroup == the unfolded path (q8_0)`, () => {
  test('the variant keys: C columns and vec4 loads where the offsets allow; ceil(rows / C) workgroups a segment', () => {
    const w = g.uploadWeight(randomAnyWeight(ref, 'q8_0', 13, K, rng(1)));
    const x = uploadAt(g, zeros(K), 0);
    const odd = uploadAt(g, zeros(K), 1);
    const out = g.alloc.upload(zeros(13));
    assert.equal(quantActsDispatch(x, undefined, out, w, 1, K, false, true, 8).key, 'qmatmul_acts_q8_0_c8v');
    assert.equal(quantActsDispatch(odd, undefined, out, w, 1, K, false, true, 8).key, 'qmatmul_acts_q8_0_c8');
    assert.equal(quantActsDispatch(x, { b: odd, act: 'silu' }, out, w, 1, K, true, true, 8).key, 'qmatmul_acts_q8_0_c8_acc_silu', 'a gate at an odd offset');
    assert.equal(quantActsDispatch(x, undefined, out, w, 1, K, false, false, 1).key, 'qmatmul_acts_q8_0_v_nodot4');
    assert.deepEqual(quantActsDispatch(x, undefined, out, w, 1, K, false, true, 8).groups, [2, 1, 1]);
    const seg = { out, w, part: w.parts[0]! };
    const d = quantActsGroupDispatch({ x }, 4, K, 'q8_0', [seg, seg], false, true, 8);
    assert.equal(d.key, 'qmatmul_acts_q8_0_c8v_g2');
    assert.deepEqual(d.groups, [4, 1, 1], 'ceil(13 / 8) workgroups a segment');
    // an offset type's C = 8 needs ~18 KB of workgroup memory: C = 4 within WebGPU's default 16 KB
    assert.equal(actsColumnsWithin('q4_k', 8, 16384), 4);
    assert.equal(actsColumnsWithin('q8_0', 8, 16384), 8);
    const w4 = g.uploadWeight(randomAnyWeight(ref, 'q4_k', 13, K, rng(2)));
    assert.equal(quantActsDispatch(x, undefined, out, w4, 1, K, false, true, 8, 16384).key, 'qmatmul_acts_q4_k_c4v');
    // an output in the input's buffer: scalar loads
    assert.equal(quantActsGroupDispatch({ x: view(x, 0, K) }, 1, K, 'q8_0', [{ ...seg, out: view(x, 0, 13) }], false, true, 8).key, 'qmatmul_acts_q8_0_c8_g1');
  });

  test(`q8_0 at C = ${ACTS_COLUMNS}: normed group (vec4 loads), plain group (scalar), silu-gated accumulating lone weight (vec4); M = 1..4`, async () => {
    await checkActsColumns(g, ref, 'q8_0', 'norm', true, ACTS_COLUMNS, 700);
    await checkActsColumns(g, ref, 'q8_0', 'plain', false, ACTS_COLUMNS, 701);
    await checkActsColumns(g, ref, 'q8_0', 'silu', true, ACTS_COLUMNS, 702);
  });

  test('q8_0 normed group at C = 1 (the one-column kernel) and C = 3 == the unfolded path', async () => {
    await checkActsColumns(g, ref, 'q8_0', 'norm', true, 1, 710);
    await checkActsColumns(g, ref, 'q8_0', 'norm', true, 3, 711);
  });
});
