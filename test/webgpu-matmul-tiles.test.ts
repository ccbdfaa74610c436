// Matmul tiles of 16, 32 and 64 rows (wgsl/matmul.ts matmulTile): a dispatch of M rows
// takes the smallest tile ≥ M the adapter's workgroup memory allows, so up to 32 (64) rows
// read each weight once per step. The tile must not change a bit: a row alone (M = 1,
// tile 16) == the same row inside batches of 16, 17, 32, 33 and 48 rows (tiles 16, 32, 64),
// for every float dtype and every quantized type, and for the folded-norm and gated-input
// variants. The traffic tally follows the tile: weight bytes read ÷ ideal = ⌈M / tile⌉.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Weight, WeightDType } from '../src/kernels/types.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { quantizeRowsGgml } from '../src/kernels/quant/quantize-ggml.js';
import { f32ToF16 } from '../src/kernels/quant/dequant.js';
import { QUANT_TYPES, type QuantType } from '../src/kernels/quant/formats.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { MATMUL_TILES, TM, floatTileBytes, matmulTile, quantTileRowBytes } from '../src/kernels/webgpu/wgsl/matmul.js';
import { assertSameBits, randomWeight, rng } from './numeric.js';
import { randomScaleMatrix } from './quant-blocks.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

const ref = createRefKernels();
let g: WebGpuKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says: these are the one-column kernels'
// tiles (a GPU's multi-column and activation-quantizing kernels take tiles of their own — 16
// rows at 8 float columns, ACTS_TILE rows at M ≤ ACTS_FOLD_ROWS — and read the weights once per
// such tile: webgpu-float-columns, webgpu-quant-columns, webgpu-qmatmul-acts-cols)
before(async () => { g = await gpuUnderTest({ launches: 'cpu' }); });
after(() => g?.dispose());

const BATCHES = [16, 17, 32, 33, 48];
const ROWS = [0, 15, 16, 31, 32, 47];
const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

function anyWeight(dtype: WeightDType, rows: number, cols: number, r: () => number): Weight {
  const sym = () => 2 * r() - 1;
  if (dtype === 'bf16' || dtype === 'f32' || dtype === 'f16') return randomWeight(ref, dtype, rows, cols, sym);
  const { weight, bytes } = ref.allocWeight(dtype, rows, cols);
  if (dtype === 'q8_0' || dtype === 'q4_k') quantizeRowsGgml(dtype, fill(rows * cols, sym), rows, cols, bytes);
  else bytes.set(randomScaleMatrix(dtype, rows, cols, Math.floor(r() * 2 ** 31)));
  return weight;
}

/** The rows of `body` over x's first M rows (out [M, n]). */
async function rowsOf(m: number, n: number, body: (out: ReturnType<WebGpuKernels['alloc']['tensor']>) => (e: Parameters<Parameters<typeof run>[1]>[0]) => void):
  Promise<Float32Array> {
  const out = g.alloc.tensor([m, n]);
  const [got] = await run(g, body(out), out);
  return got;
}

/** Each ROWS row alone (M = 1) == that row of each batch, for `mm`(out, x = rows [from, from + m) of the input, m, from). */
async function checkInvariant(what: string, k: number, n: number, mm: (e: Parameters<Parameters<typeof run>[1]>[0], out: ReturnType<WebGpuKernels['alloc']['tensor']>,
  x: ReturnType<WebGpuKernels['alloc']['upload']>, m: number, from: number) => void, r: () => number): Promise<void> {
  const x = fill(48 * k, () => 3 * (2 * r() - 1));
  const alone = new Map<number, Float32Array>();
  for (const row of ROWS) alone.set(row, await rowsOf(1, n, (out) => (e) => mm(e, out, g.alloc.upload(x.subarray(row * k, (row + 1) * k)), 1, row)));
  for (const m of BATCHES) {
    const all = await rowsOf(m, n, (out) => (e) => mm(e, out, g.alloc.upload(x.subarray(0, m * k)), m, 0));
    for (const row of ROWS.filter((i) => i < m)) assertSameBits(alone.get(row)!, all.subarray(row * n, (row + 1) * n), `${what}: row ${row} of M = ${m}`);
  }
}

describe('webgpu matmul tiles', () => {
  test('matmulTile: the smallest tile ≥ M that fits, the largest that fits past 64, 16 under a 16 KiB limit for 64-row tiles', () => {
    const q4k = quantTileRowBytes('q4_k'); // offset type: terms and offset terms
    const q8 = quantTileRowBytes('q8_0');
    const f = floatTileBytes(false);
    const fn = floatTileBytes(true);
    assert.deepEqual([1, 16, 17, 32, 33, 64, 65, 500].map((m) => matmulTile(m, q8, 0, 32768)), [16, 16, 32, 32, 64, 64, 64, 64]);
    // the WebGPU default limit, 16 KiB: q4_k stops at 32, the folded norm's tree buffer keeps
    // the float tile at 32, plain float reaches 64
    assert.deepEqual([17, 33, 64].map((m) => matmulTile(m, q4k, 0, 16384)), [32, 32, 32]);
    assert.equal(matmulTile(33, fn.perRow, fn.extra, 16384), 32);
    assert.equal(matmulTile(33, f.perRow, f.extra, 16384), 64);
    assert.equal(matmulTile(40, q4k, 0, 8192), TM, 'the base tile whatever the limit');
    assert.deepEqual([...MATMUL_TILES], [16, 32, 64]);
  });

  test('a row alone == its row in batches of 16, 17, 32, 33, 48: float dtypes and every quantized type, bit for bit', async () => {
    const r = rng(41);
    const limit = g.device.limits.maxComputeWorkgroupStorageSize;
    console.log(`# workgroup storage ${limit} B: tiles at M = 17 / 33: float ${g.matmulTile(17, false)} / ${g.matmulTile(33, false)}, q4_k ${g.matmulTile(17, 'q4_k')} / ${g.matmulTile(33, 'q4_k')}`);
    assert.equal(g.matmulTile(17, false), 32, 'a 17-row float batch in one tile');
    for (const dtype of ['bf16', 'f32', 'f16', ...QUANT_TYPES] as const) {
      const k = dtype.endsWith('_k') ? 256 : 96;
      const n = 13;
      const gw = dtype === 'f16' ? g.uploadWeightBytes('f16', n, k, new Uint8Array(Uint16Array.from({ length: n * k }, () => f32ToF16(2 * r() - 1)).buffer))
        : g.uploadWeight(anyWeight(dtype, n, k, r));
      await checkInvariant(dtype, k, n, (e, out, x, m) => g.matmul(e, out, x, gw, m), r);
    }
  });

  test('folded norm and gated input (float), and accumulate (quantized): a row alone == its row of 17, 33, 48', async () => {
    const r = rng(43);
    const k = 128;
    const n = 11;
    const nw = g.uploadVector(randomWeight(ref, 'bf16', 1, k, () => 0.3 * (2 * r() - 1)));
    const bf = g.uploadWeight(anyWeight('bf16', n, k, r));
    await checkInvariant('bf16 norm', k, n, (e, out, x, m) =>
      g.matmulGroup(e, x, m, [{ out, w: bf }], false, { wv: nw, eps: 1e-6, zeroCentered: true, out: g.alloc.tensor([m, k]) }), r);
    const gate = fill(48 * k, () => 2 * r() - 1);
    await checkInvariant('bf16 gated', k, n, (e, out, x, m, from) =>
      g.matmulAdd(e, out, x, bf, m, { b: g.alloc.upload(gate.subarray(from * k, (from + m) * k)), act: 'silu' }), r);
    const q5k = g.uploadWeight(anyWeight('q5_k', n, 256, r));
    await checkInvariant('q5_k accumulate', 256, n, (e, out, x, m) => g.matmulAdd(e, out, x, q5k, m), r);
  });

  test('weight bytes read ÷ ideal = ⌈M / tile⌉: once per step up to the tile', async () => {
    const r = rng(47);
    const k = 64;
    const weights: [string, GpuWeight][] = [['bf16', g.uploadWeight(anyWeight('bf16', 8, k, r))], ['q8_0', g.uploadWeight(anyWeight('q8_0', 8, k, r))],
      ['q4_k', g.uploadWeight(anyWeight('q4_k', 8, 256, r))]];
    for (const [dtype, w] of weights) {
      for (const m of [1, 4, 8, 17, 32, 48]) {
        g.endStep();
        const t0 = { ...g.traffic };
        const out = g.alloc.tensor([m, 8]);
        await run(g, (e) => g.matmul(e, out, g.alloc.upload(fill(m * w.cols, () => r())), w, m), out);
        const ratio = (g.traffic.weightBytesRead - t0.weightBytesRead) / (g.traffic.weightBytesIdeal - t0.weightBytesIdeal);
        const tile = g.matmulTile(m, dtype === 'bf16' ? false : dtype as QuantType);
        assert.equal(ratio, Math.ceil(m / tile), `${dtype} M = ${m}`);
        if (m <= 32) assert.equal(ratio, 1, `${dtype} M = ${m}: the weight once`);
      }
    }
  });
});
