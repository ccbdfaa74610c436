// Kernels.gdnChunkedSeqs (every chunked prefill of a step in one call) on ref, wasm and
// webgpu: per backend, the batched call == one gdnChunked per segment between split points
// (seqs-by-calls.ts, the definition) and == each sequence alone in the call, bit for bit
// (outputs and states; states are views of one pool buffer, rows of the sequences not
// adjacent); each backend == the ref within the chunked form's tolerance (2e-5, as
// kernels-conformance); splits at 64-multiples change no bit; a split outside the sequence
// is an error naming the call.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { GdnChunkSeq, GdnDims, Kernels, Tensor } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { gdnChunkedSeqsByCalls } from '../src/kernels/seqs-by-calls.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { wasmBackendsUnderTest } from './wasm-backends.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { relErr, rng } from './numeric.js';

type AnyK = Kernels<Tensor, Tensor>;

const gpu = new WebGpuBoundaryKernels(await gpuUnderTest());
after(() => gpu.dispose());
const backends: { label: string; k: AnyK }[] = [
  { label: 'ref', k: createRefKernels() as unknown as AnyK },
  ...(await wasmBackendsUnderTest()).slice(0, 2).map((b) => ({ label: b.label, k: b.k as unknown as AnyK })),
  { label: 'webgpu', k: gpu as unknown as AnyK },
];

/** One sequence of a case: rows from `row`, positions from pos0, absolute split points. */
interface Spec { readonly row: number; readonly t: number; readonly pos0: number; readonly splits: readonly number[] }

const SEQS: readonly Spec[] = [
  { row: 0, t: 5, pos0: 0, splits: [] },
  { row: 5, t: 0, pos0: 9, splits: [] },
  // a gap row (6) that no sequence owns; splits off the 64-grid and one on it
  { row: 7, t: 130, pos0: 37, splits: [57, 64, 137] },
  { row: 137, t: 70, pos0: 64, splits: [100] },
  { row: 207, t: 1, pos0: 3, splits: [] },
];
const ROWS = 208;

const SHAPES: readonly GdnDims[] = [
  { numKeyHeads: 2, numValueHeads: 4, keyDim: 16, valueDim: 8 },
  // two 64-column blocks on webgpu, the second partial
  { numKeyHeads: 1, numValueHeads: 2, keyDim: 32, valueDim: 72 },
];

interface Inputs { qkv: Float32Array; g: Float32Array; beta: Float32Array; states: Float32Array }

function inputs(dims: GdnDims, seed: number): Inputs {
  const r = rng(seed);
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const width = 2 * hk * dk + hv * dv;
  return {
    qkv: Float32Array.from({ length: ROWS * width }, () => 2 * r() - 1),
    g: Float32Array.from({ length: ROWS * hv }, () => -1.5 * r()),
    beta: Float32Array.from({ length: ROWS * hv }, () => r()),
    states: Float32Array.from({ length: SEQS.length * hv * dk * dv }, () => 2 * r() - 1),
  };
}

/** Run `call` on fresh copies of the inputs; the output rows and every state, read back. */
async function runOn(k: AnyK, dims: GdnDims, x: Inputs,
  call: (out: Tensor, qkv: Tensor, g: Tensor, beta: Tensor, seqs: GdnChunkSeq<Tensor>[]) => void): Promise<{ out: Float32Array; states: Float32Array }> {
  const up = (a: Float32Array): Tensor => {
    const t = k.alloc(a.length);
    k.write(t, 0, a);
    return t;
  };
  const ss = dims.numValueHeads * dims.keyDim * dims.valueDim;
  const outLen = ROWS * dims.numValueHeads * dims.valueDim;
  const out = up(new Float32Array(outLen).fill(-7));
  const pool = up(x.states);
  const seqs = SEQS.map((s, i) => ({ ...s, state: k.view(pool, i * ss, ss) }));
  call(out, up(x.qkv), up(x.g), up(x.beta), seqs);
  const got = await k.readBack([{ t: out, offset: 0, length: outLen }, { t: pool, offset: 0, length: x.states.length }]);
  return { out: Float32Array.from(got[0]!), states: Float32Array.from(got[1]!) };
}

function sameBits(got: Float32Array, want: Float32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) if (!Object.is(got[i], want[i])) assert.fail(`${what}: [${i}] ${got[i]} !== ${want[i]}`);
}

for (const [si, dims] of SHAPES.entries()) {
  const x = inputs(dims, 11 + si);
  const shape = `HK${dims.numKeyHeads} HV${dims.numValueHeads} dk${dims.keyDim} dv${dims.valueDim}`;
  const want = await runOn(backends[0]!.k, dims, x, (o, q, g, b, seqs) => backends[0]!.k.gdnChunkedSeqs(o, q, g, b, dims, seqs));
  for (const { label, k } of backends) {
    describe(`gdnChunkedSeqs [${label}] ${shape}`, () => {
      test('one call == one gdnChunked per segment, in order (bit for bit), and == the ref within 2e-5', async () => {
        const batched = await runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, seqs));
        const byCalls = await runOn(k, dims, x, (o, q, g, b, seqs) => gdnChunkedSeqsByCalls(k, o, q, g, b, dims, seqs));
        sameBits(batched.out, byCalls.out, 'outputs');
        sameBits(batched.states, byCalls.states, 'states');
        const e = Math.max(relErr(batched.out, want.out), relErr(batched.states, want.states));
        assert.ok(e <= 2e-5, `vs ref: rel err ${e}`);
        // rows no sequence owns (the gap) are not written
        assert.equal(batched.out[6 * dims.numValueHeads * dims.valueDim], -7, 'the gap row was written');
      });

      test('a sequence alone in the call == the same sequence in the batch (bit for bit)', async () => {
        const batched = await runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, seqs));
        const od = dims.numValueHeads * dims.valueDim;
        const ss = dims.numValueHeads * dims.keyDim * dims.valueDim;
        for (const [i, s] of SEQS.entries()) {
          if (s.t === 0) continue;
          const alone = await runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, [seqs[i]!]));
          sameBits(alone.out.subarray(s.row * od, (s.row + s.t) * od), batched.out.subarray(s.row * od, (s.row + s.t) * od), `sequence ${i} output`);
          sameBits(alone.states.subarray(i * ss, (i + 1) * ss), batched.states.subarray(i * ss, (i + 1) * ss), `sequence ${i} state`);
        }
      });

      test('splits at multiples of 64 change no bit; a split outside the sequence names the call', async () => {
        const plain = await runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, seqs.map((s) => ({ ...s, splits: s.splits.filter((p) => p % 64 !== 0) }))));
        const grid = await runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, seqs));
        sameBits(grid.out, plain.out, 'outputs');
        sameBits(grid.states, plain.states, 'states');
        await assert.rejects(runOn(k, dims, x, (o, q, g, b, seqs) => k.gdnChunkedSeqs(o, q, g, b, dims, [{ ...seqs[3]!, splits: [64] }])),
          /gdnChunkedSeqs: split 64/);
      });
    });
  }
}
