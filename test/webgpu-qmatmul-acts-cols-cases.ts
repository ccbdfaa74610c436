// The C-column activation-quantizing matmuls' cases (webgpu-qmatmul-acts-cols*.test.ts): a
// group through matmulGroup with the fold on at C columns a workgroup, against the fold off
// (quant_acts / norm_quant_acts + the tiled qmatmul), output by output, bit for bit.
import assert from 'node:assert/strict';
import type { Kernels } from '../src/kernels/types.js';
import type { QuantType } from '../src/kernels/quant/formats.js';
import type { GpuGroupNorm, WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { StepEncoder } from '../src/kernels/webgpu/encoder.js';
import { view, type GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { ACTS_TILE } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { assertSameBits, randomWeight, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { run } from './webgpu-helpers.js';

export const K = 2304; // 72 blocks of 32: two 64-block chunks, the second partial; 9 super-blocks of 256
const fill = (n: number, f: () => number): Float32Array => Float32Array.from({ length: n }, f);

/** What the group's input is: x RMS-normed (a group of 37, 64, 5 rows: none a multiple of 8,
 * one under it), plain x (19, 37 rows), or x ⊙ act(gate) into one accumulating weight of 13. */
export type ActsKind = 'norm' | 'plain' | 'silu' | 'sigmoid';

/** `v` uploaded at element offset `pad` of its buffer (odd: the scalar-load variant). */
export function uploadAt(g: WebGpuKernels, v: Float32Array, pad: number): GpuTensor {
  const t = g.alloc.upload(Float32Array.from([...fill(pad, () => 7), ...v]));
  return view(t, pad, v.length);
}

interface Input { readonly x: Float32Array; readonly pad: number; readonly norm?: { wv: GpuTensor; zeroCentered: boolean };
  readonly gate?: { b: Float32Array; act: 'silu' | 'sigmoid' } }

/** One matmulGroup call over fresh uploads (a gated unfolded path overwrites x): the outputs
 * (each prefilled with `acc`, or NaN) and the dispatches. `cols` 0: the fold off. */
async function groupOnce(g: WebGpuKernels, ws: readonly GpuWeight[], m: number, inp: Input, cols: number,
  acc?: readonly Float32Array[]): Promise<{ outs: Float32Array[]; dispatches: number }> {
  g.foldQuantActs = cols > 0;
  g.actsColumns = Math.max(1, cols);
  const outs = ws.map((w, j) => g.alloc.upload(acc?.[j] ?? fill(m * w.rows, () => NaN)));
  const x = uploadAt(g, inp.x, inp.pad);
  const norm: GpuGroupNorm | undefined = inp.norm && { wv: inp.norm.wv, eps: 1e-6, zeroCentered: inp.norm.zeroCentered, out: g.alloc.upload(fill(m * K, () => NaN)) };
  const gate = inp.gate && { b: uploadAt(g, inp.gate.b, inp.pad), act: inp.gate.act };
  let dispatches = 0;
  const got = await run(g, (e: StepEncoder) => {
    const d0 = e.dispatchCount;
    g.matmulGroup(e, x, m, ws.map((w, j) => ({ out: outs[j]!, w })), acc !== undefined, norm, gate);
    dispatches = e.dispatchCount - d0;
  }, ...outs);
  return { outs: got, dispatches };
}

/** `kind`'s group of `dtype` weights at M = 1..ACTS_TILE, the input at offset 0 (vec4 loads)
 * or an odd one (scalar), C = `cols`: one dispatch, each output == the fold off's. Row 0 of x
 * has a zero block and a tie at the max (±2.5). */
export async function checkActsColumns(g: WebGpuKernels, ref: Pick<Kernels, 'allocWeight'>, dtype: QuantType, kind: ActsKind, vec: boolean, cols: number,
  seed: number): Promise<void> {
  const r = rng(seed);
  const rows = kind === 'norm' ? [37, 64, 5] : kind === 'plain' ? [19, 37] : [13];
  const ws = rows.map((n) => g.uploadWeight(randomAnyWeight(ref, dtype, n, K, r)));
  const wv = g.uploadVector(randomWeight(ref, 'bf16', 1, K, () => 0.5 * (2 * r() - 1)));
  for (let m = 1; m <= ACTS_TILE; m++) {
    const x = fill(m * K, () => 3 * (2 * r() - 1));
    x.fill(0, 32, 64);
    x[70] = 2.5; x[71] = -2.5;
    const zeroCentered = m % 2 === 0;
    const gated = kind === 'silu' || kind === 'sigmoid';
    const inp: Input = { x, pad: vec ? 0 : 2 * m - 1, ...(kind === 'norm' ? { norm: { wv, zeroCentered } } : {}),
      ...(gated ? { gate: { b: fill(m * K, () => 4 * (2 * r() - 1)), act: kind } } : {}) };
    const acc = gated ? [fill(m * rows[0]!, () => 2 * r() - 1)] : undefined;
    const what = `${dtype} ${kind}${kind === 'norm' && zeroCentered ? ' zero-centred' : ''} C=${cols} M=${m} ${vec ? 'vec4' : 'scalar'} loads`;
    const folded = await groupOnce(g, ws, m, inp, cols, acc);
    assert.equal(folded.dispatches, 1, `${what}: one dispatch`);
    const want = await groupOnce(g, ws, m, inp, 0, acc);
    ws.forEach((w, j) => assertSameBits(folded.outs[j]!, want.outs[j]!, `${what}: weight ${j} (${w.rows} rows)`));
  }
}
