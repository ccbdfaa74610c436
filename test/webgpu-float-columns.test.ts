// The multi-column float matmul (wgsl/matmul-columns.ts, WebGpuKernels.floatColumns): one
// workgroup computes FLOAT_COLUMNS output columns of a segment, each (row, column)'s sum by
// the one-column kernel's operations in its order — so forced on (lavapipe defaults it off)
// it must give the one-column kernel's bits, element by element (a column computed from
// another's weight row, or stored at another's place, differs there), for M = 2, 5, 17, 33,
// segments of 1, 3 (fewer rows than a workgroup's columns), 13 and 8 rows (13: not a multiple
// of the columns; bf16 with vector x loads), bf16 (x vector and scalar loads) and f32, plain,
// accumulating, with the folded norm and with a gated input (8 columns over tiles of 16 rows: M = 17 and 33 take 2 and 3 tiles where
// the one-column kernel takes lavapipe's one tile of 64); and M = 1 keeps the one-column
// kernel from 2 rows on (a GPU's floatColumnsFromRows) and takes C columns from 1 (a CPU
// adapter's), the same bits. The dispatch keys show the two runs took the two kernels.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { launchesOf } from '../src/kernels/webgpu/launches.js';
import type { Weight } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { f16ToF32, f32ToF16 } from '../src/kernels/quant/dequant.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { view, type GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { COLUMN_ACCUMULATORS, FLOAT_COLUMNS, floatColumnsTile } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import { assertSameBits, randomWeight, relErr, rng } from './numeric.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says; the columns compared are forced
before(async () => { g = await gpuUnderTest({ launches: 'cpu' }); });
after(() => g?.dispose());

const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);
type DType = 'f32' | 'bf16' | 'f16';

function uploadAt(data: Float32Array, at: number): GpuTensor {
  const padded = new Float32Array(at + data.length + 3);
  padded.set(data, at);
  return view(g.alloc.upload(padded), at, data.length);
}

function weights(dtype: DType, n: number, k: number, r: () => number): { gw: GpuWeight; wr: Weight } {
  if (dtype !== 'f16') {
    const w = randomWeight(ref, dtype, n, k, () => 2 * r() - 1);
    return { gw: g.uploadWeight(w), wr: w };
  }
  const bits = Uint16Array.from({ length: n * k }, () => f32ToF16(2 * r() - 1));
  const wr = ref.allocWeight('f32', n, k).weight;
  (wr.data as Float32Array).set(Array.from(bits, f16ToF32));
  return { gw: g.uploadWeightBytes('f16', n, k, new Uint8Array(bits.buffer)), wr };
}

/** The outputs of `body` (one tensor a weight) and its float matmul dispatch keys, with
 * `columns` output columns a workgroup allowed. */
async function withColumns(columns: number, outs: GpuTensor[], body: Parameters<typeof run>[1], kk = g, accumulators = COLUMN_ACCUMULATORS): Promise<{ keys: string[]; got: Float32Array[] }> {
  const keys: string[] = [];
  const plain = kk.run;
  const was = kk.floatColumns;
  const wasAcc = kk.floatColumnAccumulators;
  kk.floatColumns = columns;
  kk.floatColumnAccumulators = accumulators;
  kk.run = function (this: WebGpuKernels, ...args: Parameters<WebGpuKernels['run']>) {
    if (args[1].startsWith('matmul_group_')) keys.push(args[1]);
    return plain.apply(this, args);
  };
  try {
    return { keys, got: await run(kk, body, ...outs) };
  } finally {
    kk.run = plain;
    kk.floatColumns = was;
    kk.floatColumnAccumulators = wasAcc;
  }
}

const SEG_ROWS = [13, 1, 8, 3];

describe('webgpu multi-column float matmul', () => {
  test('both launch profiles run FLOAT_COLUMNS columns a workgroup: the gpu one from 2 rows in tiles of 16, the cpu one from 1 in tiles of 4', () => {
    const gpu = launchesOf('gpu');
    assert.deepEqual([gpu.floatColumns, gpu.floatColumnsFromRows, gpu.floatColumnAccumulators], [FLOAT_COLUMNS, 2, COLUMN_ACCUMULATORS]);
    assert.deepEqual([g.floatColumns, g.floatColumnsFromRows, g.floatColumnAccumulators], [FLOAT_COLUMNS, 1, 32]);
    assert.deepEqual([1, 2, 3].map((m) => g.floatColumnsAt(m)), [FLOAT_COLUMNS, FLOAT_COLUMNS, FLOAT_COLUMNS]);
    assert.deepEqual([floatColumnsTile(16, FLOAT_COLUMNS), g.floatColumnsTile(16), g.floatColumnsTile(64)], [16, 4, 4]);
    assert.ok(FLOAT_COLUMNS >= 2);
  });

  // lavapipe compiles a pipeline per (dtype, loads, segments, tile), 10–25 s each at tiles of 16:
  // the segments on bf16 with vector x loads; scalar loads and f32 on the first segment alone
  // (f32 with vector loads only), to keep the file short
  for (const [dtype, loadsOf] of [['bf16', [[0, 'vec4', SEG_ROWS.length], [1, 'vec4w', 1]]], ['f32', [[0, 'vec4', 1]]]] as const) {
    test(`${dtype}: C columns == one column, bit for bit per element, M = 2, 5, 17, 33 (${loadsOf.map(([, l, n]) => `${l}: ${n === 1 ? 'one segment' : `${n} segments`}`).join(', ')})`, async () => {
      const r = rng(dtype === 'bf16' ? 101 : 103);
      const k = 264; // 66 units: thread t has two units for t < 2 only (has1 both ways)
      const ws = SEG_ROWS.map((n) => weights(dtype, n, k, r));
      for (const m of [2, 5, 17, 33]) {
        const x = fill(m * k, () => 2 * r() - 1);
        for (const [at, loads, segments] of loadsOf) {
          const segRows = SEG_ROWS.slice(0, segments);
          const runs: Float32Array[][] = [];
          // one column; C columns within a GPU's accumulators (tiles of 16) and a CPU adapter's (tiles of 4)
          for (const [columns, acc] of [[1, COLUMN_ACCUMULATORS], [FLOAT_COLUMNS, COLUMN_ACCUMULATORS], [FLOAT_COLUMNS, 32]] as const) {
            const outs = segRows.map((n) => g.alloc.tensor([m, n]));
            const { keys, got } = await withColumns(columns, outs, (e) => g.matmulGroup(e, uploadAt(x, at), m, outs.map((out, i) => ({ out, w: ws[i]!.gw }))), g, acc);
            const multi = columns > 1;
            assert.deepEqual(keys.map((key) => [key.endsWith(multi ? `_${loads}_cols${columns}` : `_${loads}`), key.includes('_cols')]), [[true, multi]], keys.join(' '));
            // C columns × the tile's rows within the accumulator budget: 8 columns, tiles of 16 rows (M = 17, 33: 2, 3 tiles), or of 4
            const tile = floatColumnsTile(64, columns, acc);
            if (multi) assert.ok(keys.every((key) => key.includes(`_tm${tile}_`) && tile * columns <= acc), keys.join(' '));
            runs.push(got);
          }
          segRows.forEach((n, i) => {
            const want = new Float32Array(m * n);
            ref.matmul(want, x, ws[i]!.wr, m);
            assert.ok(relErr(runs[1]![i]!, want) <= 1e-5, `${dtype} M=${m} segment ${i}: rel err ${relErr(runs[1]![i]!, want)}`);
            assertSameBits(runs[1]![i]!, runs[0]![i]!, `${dtype} M=${m} ${loads} segment ${i} (${n} rows)`);
            assertSameBits(runs[2]![i]!, runs[0]![i]!, `${dtype} M=${m} ${loads} segment ${i} (${n} rows), tiles of 4`);
          });
        }
      }
    });
  }

  test('accumulating (matmulAdd) with C columns == one column, bit for bit', async () => {
    const r = rng(109);
    const [n, k, m] = [21, 128, 6];
    const { gw } = weights('bf16', n, k, r);
    const x = fill(m * k, () => 2 * r() - 1);
    const start = fill(m * n, () => 2 * r() - 1);
    const got: Float32Array[] = [];
    for (const columns of [1, FLOAT_COLUMNS]) {
      const acc = g.alloc.upload(start);
      const res = await withColumns(columns, [acc], (e) => g.matmulAdd(e, acc, uploadAt(x, 0), gw, m));
      assert.deepEqual(res.keys.map((key) => key.includes('_acc') && key.includes('_cols') === columns > 1), [true], res.keys.join(' '));
      got.push(res.got[0]!);
    }
    assertSameBits(got[1]!, got[0]!, 'bf16 accumulate');
  });

  test('folded norm and gated input (silu, sigmoid) with C columns == one column, bit for bit', async () => {
    const r = rng(127);
    const [k, m] = [136, 5];
    const rows = [7, 2];
    const ws = rows.map((n) => weights('bf16', n, k, r).gw);
    const nw = g.uploadVector(randomWeight(ref, 'bf16', 1, k, () => 0.3 * (2 * r() - 1)));
    const x = fill(m * k, () => 3 * (2 * r() - 1));
    const gate = fill(m * k, () => 2 * r() - 1);
    for (const kind of ['norm', 'silu', 'sigmoid'] as const) {
      // the gated kernels on one segment (the segments are the plain kernel's, checked above)
      const kindRows = kind === 'norm' ? rows : rows.slice(0, 1);
      const runs: Float32Array[][] = [];
      for (const columns of [1, FLOAT_COLUMNS]) {
        const outs = kindRows.map((n) => g.alloc.tensor([m, n]));
        const group = outs.map((out, i) => ({ out, w: ws[i]! }));
        const norm = { wv: nw, eps: 1e-6, zeroCentered: true, out: g.alloc.tensor([m, k]) };
        const res = await withColumns(columns, outs, (e) => kind === 'norm' ? g.matmulGroup(e, uploadAt(x, 0), m, group, false, norm)
          : g.matmulGroup(e, uploadAt(x, 0), m, group, false, undefined, { b: uploadAt(gate, 0), act: kind }));
        assert.deepEqual(res.keys.map((key) => key.includes(`_${kind}_`) && key.includes('_cols') === columns > 1), [true], res.keys.join(' '));
        runs.push(res.got);
      }
      kindRows.forEach((n, i) => assertSameBits(runs[1]![i]!, runs[0]![i]!, `${kind} segment ${i} (${n} rows)`));
    }
  });

  test('without subgroups (the shared-memory trees, side by side): C columns == one column, bit for bit, plain and with the folded norm', async () => {
    const plain = await gpuUnderTest({ disable: ['subgroups'] });
    try {
      assert.equal(plain.adapter.features.subgroups, false);
      const r = rng(131);
      const [n, k] = [13, 264];
      const { wr } = weights('f32', n, k, r);
      const w = plain.uploadWeight(wr);
      const nw = plain.uploadVector(randomWeight(ref, 'f32', 1, k, () => 0.3 * (2 * r() - 1)));
      for (const [m, norm] of [[5, false], [17, false], [5, true]] as const) {
        const x = fill(m * k, () => 2 * r() - 1);
        const got: Float32Array[] = [];
        for (const columns of [1, FLOAT_COLUMNS]) {
          const out = plain.alloc.tensor([m, n]);
          const fold = norm ? { wv: nw, eps: 1e-6, zeroCentered: false, out: plain.alloc.tensor([m, k]) } : undefined;
          const res = await withColumns(columns, [out], (e) => plain.matmulGroup(e, plain.alloc.upload(x), m, [{ out, w }], false, fold), plain);
          assert.deepEqual(res.keys.map((key) => !key.includes('_sg') && key.includes('_norm') === norm && key.includes('_cols') === columns > 1), [true], res.keys.join(' '));
          got.push(res.got[0]!);
        }
        assertSameBits(got[1]!, got[0]!, `no subgroups, M=${m}${norm ? ', norm' : ''}`);
      }
    } finally {
      plain.dispose();
    }
  });

  test('M = 1: the one-column kernel from 2 rows on (a GPU), C columns from 1 (a CPU adapter); the same bits', async () => {
    const r = rng(113);
    const [n, k] = [10, 64];
    const { gw } = weights('bf16', n, k, r);
    const x = fill(k, () => 2 * r() - 1);
    const got: Float32Array[] = [];
    const was = g.floatColumnsFromRows;
    try {
      for (const fromRows of [2, 1]) {
        g.floatColumnsFromRows = fromRows;
        for (const columns of [1, FLOAT_COLUMNS]) {
          const out = g.alloc.tensor([1, n]);
          const res = await withColumns(columns, [out], (e) => g.matmul(e, out, uploadAt(x, 0), gw, 1), g, fromRows === 1 ? 32 : COLUMN_ACCUMULATORS);
          assert.deepEqual(res.keys.map((key) => key.includes('_cols')), [fromRows === 1 && columns > 1], `from ${fromRows} rows, ${columns} columns: ${res.keys.join(' ')}`);
          got.push(res.got[0]!);
        }
      }
    } finally {
      g.floatColumnsFromRows = was;
    }
    got.forEach((v, i) => assertSameBits(v, got[0]!, `bf16 M=1, run ${i}`));
  });
});
