// webgpu-qmatmul-acts-cols for the K-quants (a file of its own: lavapipe's compile time):
// q4_k (offset terms) and q6_k (its lane scales) at C = ACTS_COLUMNS, M = 1..4, bit for bit
// against the fold off — q4_k a normed group with scalar loads, a sigmoid-gated accumulating
// lone weight with vec4 ones; q6_k a normed group with vec4 loads and a silu-gated lone weight
// with scalar ones (the plain group is q8_0's, webgpu-qmatmul-acts-cols: its q6_k oracle, the
// tiled 2-segment kernel, was ~28 s of lavapipe compile no other file shares).
import { after, before, describe, test } from 'node:test';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { ACTS_COLUMNS } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { checkActsColumns } from './webgpu-qmatmul-acts-cols-cases.js';
import { gpuUnderTest } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

describe(`webgpu activation-quantizing quantized matmuls, ${ACTS_COLUMNS} output columns a workgroup == the unfolded path (K-quants)`, () => {
  test('q4_k: normed group (scalar loads), sigmoid-gated accumulating lone weight (vec4); M = 1..4', async () => {
    await checkActsColumns(g, ref, 'q4_k', 'norm', false, ACTS_COLUMNS, 720);
    await checkActsColumns(g, ref, 'q4_k', 'sigmoid', true, ACTS_COLUMNS, 721);
  });

  test('q6_k: normed group (vec4 loads), silu-gated accumulating lone weight (scalar); M = 1..4', async () => {
    await checkActsColumns(g, ref, 'q6_k', 'norm', true, ACTS_COLUMNS, 730);
    await checkActsColumns(g, ref, 'q6_k', 'silu', false, ACTS_COLUMNS, 731);
  });
});
