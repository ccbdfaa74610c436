// The multi-column tiled quantized matmul (wgsl/qmatmul-columns.ts, WebGpuKernels.quantColumns):
// at M ≥ 2 one workgroup computes QUANT_COLUMNS output columns of a segment, each activation
// word loaded once for them, each (row, column)'s integer sums exact and its f32 chain the
// one-column kernel's — so forced on (a CPU adapter defaults to one column) it must give the
// one-column 'lanes' kernel's bits element by element (a column summed from another's weight
// row, stored at another's place, or a term chained out of block order differs there):
// q8_0, q4_k (offset terms), q6_k (Q6_K's lane factors, SX in the lanes' shares); M = 2..5,
// 9 (q4_k: two tiles of 8, the sums' workgroup memory capping the tile) and, for q8_0, 32
// (two tiles of 16 against the one-column kernel's one of 32); K = 2304 (a full 64-block
// chunk and a partial one); a lone weight (matmul) and a group of two segments of 37 and 3
// rows (neither a multiple of the columns; 3 fewer than a workgroup's) accumulating
// (matmulGroup with accumulate, as matmulAdd), outputs at an offset. (Few variants: lavapipe
// compiled a cold 4-column variant in ~10 s alone, 55–95 s as a group of 3 segments, on a
// loaded 2-core VM.) M = 1 keeps the one-column kernel. The dispatch keys show which kernel
// ran. Then the engine with a GPU's launch profile (the kernel among them): tiny-think Q8_0 and
// Q4_K_M GGUFs, MTP on in a batch of 2 == each request alone on the CPU profile (MTP off), bit
// for bit.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { launchesOf } from '../src/kernels/webgpu/launches.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import type { QuantType } from '../src/kernels/quant/formats.js';
import type { WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { view, type GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GpuWeight } from '../src/kernels/webgpu/weights.js';
import { QUANT_COLUMNS, quantColumnsTile } from '../src/kernels/webgpu/wgsl/qmatmul-columns.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Engine } from '../src/engine/engine.js';
import { assertSameBits, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';
import { runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { sharedPath } from './paths.js';

const ref = createRefKernels();
let g: WebGpuKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says (a GPU's would route M ≤ 8 to the
// activation-quantizing kernels and change the counts below); the choices compared are forced
before(async () => { g = await gpuUnderTest({ launches: 'cpu' }); g.quantLayout = 'lanes'; });
after(() => g?.dispose());

const K = 2304;
const SEG_ROWS = [37, 3];
const fill = (n: number, f: () => number) => Float32Array.from({ length: n }, f);

function uploadAt(data: Float32Array, at: number): GpuTensor {
  const padded = new Float32Array(at + data.length + 3);
  padded.set(data, at);
  return view(g.alloc.upload(padded), at, data.length);
}

/** The outputs of `body` and its quantized matmul dispatch keys, with `columns` output
 * columns a workgroup allowed. */
async function withColumns(columns: number, outs: GpuTensor[], body: Parameters<typeof run>[1]): Promise<{ keys: string[]; got: Float32Array[] }> {
  const keys: string[] = [];
  const plain = g.run;
  const was = g.quantColumns;
  g.quantColumns = columns;
  g.run = function (this: WebGpuKernels, ...args: Parameters<WebGpuKernels['run']>) {
    if (args[1].startsWith('qmatmul_')) keys.push(args[1]);
    return plain.apply(this, args);
  };
  try {
    return { keys, got: await run(g, body, ...outs) };
  } finally {
    g.run = plain;
    g.quantColumns = was;
  }
}

/** One pass of both forms over x [m, K]: each weight alone (matmul), then the weights as one
 * group accumulating into outputs prefilled from rng(seed). */
async function allForms(columns: number, ws: readonly GpuWeight[], x: Float32Array, m: number, seed: number): Promise<{ keys: string[]; got: Float32Array[] }> {
  const r = rng(seed);
  const outs = Array.from({ length: 2 }, (_, form) => ws.map((w, j) => uploadAt(fill(m * w.rows, () => 2 * r() - 1), 5 + 3 * j + form)));
  return withColumns(columns, outs.flat(), (e) => {
    ws.forEach((w, j) => g.matmul(e, outs[0]![j]!, g.alloc.upload(x), w, m));
    g.matmulGroup(e, g.alloc.upload(x), m, ws.map((w, j) => ({ out: outs[1]![j]!, w })), true);
  });
}

const FORMS = ['matmul', 'group accumulating'];

describe('webgpu multi-column tiled quantized matmul', () => {
  test('the cpu launch profile runs one column, the gpu one QUANT_COLUMNS; the tiles the sums\' memory allows', () => {
    assert.equal(g.quantColumns, 1);
    assert.equal(launchesOf('gpu').quantColumns, QUANT_COLUMNS);
    assert.ok(QUANT_COLUMNS >= 2);
    assert.equal(quantColumnsTile(5, 'q8_0', 4, 32768), 8);
    assert.equal(quantColumnsTile(9, 'q8_0', 4, 32768), 16);
    assert.equal(quantColumnsTile(32, 'q8_0', 4, 32768), 16, '4 columns × 16 rows: the 64 chain threads');
    assert.equal(quantColumnsTile(9, 'q4_k', 4, 32768), 8, 'offset terms too: 16 KiB at 8 rows');
    assert.equal(quantColumnsTile(5, 'q4_k', 8, 32768), null);
  });

  const types: readonly [QuantType, readonly number[]][] = [['q8_0', [2, 3, 5, 9, 32]], ['q4_k', [2, 4, 5, 9]], ['q6_k', [2, 5]]];
  for (const [dtype, ms] of types) {
    test(`${dtype}: ${QUANT_COLUMNS} columns == one column ('lanes'), bit for bit, M = ${ms.join(', ')}; lone, grouped accumulating`, async () => {
      const r = rng(500 + ms.length + dtype.length);
      const ws = SEG_ROWS.map((n) => g.uploadWeight(randomAnyWeight(ref, dtype, n, K, r)));
      for (const m of ms) {
        const x = fill(m * K, () => 3 * (2 * r() - 1));
        const one = await allForms(1, ws, x, m, m);
        const cols = await allForms(QUANT_COLUMNS, ws, x, m, m);
        assert.ok(one.keys.length > 0 && one.keys.every((k) => !k.includes('_cols')), `${dtype} M=${m}: one column: ${one.keys.join(', ')}`);
        assert.ok(cols.keys.every((k) => k.endsWith(`_cols${QUANT_COLUMNS}`)), `${dtype} M=${m}: columns: ${cols.keys.join(', ')}`);
        one.got.forEach((want, i) => assertSameBits(cols.got[i]!, want, `${dtype} M=${m} ${FORMS[Math.floor(i / ws.length)]} weight ${i % ws.length} (${ws[i % ws.length]!.rows} rows)`));
      }
    });
  }

  test('M = 1 keeps the one-column kernel with columns allowed', async () => {
    const r = rng(77);
    const ws = [g.uploadWeight(randomAnyWeight(ref, 'q8_0', 37, K, r))];
    const cols = await allForms(QUANT_COLUMNS, ws, fill(K, () => 2 * r() - 1), 1, 1);
    assert.ok(cols.keys.length > 0 && cols.keys.every((k) => !k.includes('_cols')), cols.keys.join(', '));
  });
});

describe('engine on webgpu with a GPU\'s launch profile (multi-column quantized matmuls among them): MTP on, batched == alone on the CPU profile, bit for bit', () => {
  const prompts: GenerateRequest[] = [
    { prompt: 'What is 12 + 7?', maxTokens: 5, ignoreEos: true },
    { prompt: 'Name a color.', maxTokens: 4, ignoreEos: true },
  ];
  const kernelsOf = (e: Engine): WebGpuKernels => (e.model.kernels as unknown as WebGpuBoundaryKernels).g;
  for (const name of ['Q8_0', 'Q4_K_M'] as const) {
    test(`tiny-think ${name} GGUF`, async () => {
      const base = { model: sharedPath('models', 'gguf', `tiny-think-${name}.gguf`), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024,
        maxContext: 512, prefixCache: false };
      const alone = await withEngine({ ...base, specTokens: 0, maxRunning: 1 }, async (e) => {
        kernelsOf(e).useLaunches('cpu');
        const out: RunResult[] = [];
        for (const p of prompts) out.push(...await runAll(e, [p]));
        return out;
      });
      let columnsRan = 0;
      const batched = await withEngine({ ...base, specTokens: 2, maxRunning: 2, poisonPadding: true }, async (e) => {
        const k = kernelsOf(e);
        // the whole profile, as the other engine tests with a GPU's launches (the pipelines they compile)
        k.useLaunches('gpu');
        const plain = k.run;
        k.run = function (this: WebGpuKernels, ...args: Parameters<WebGpuKernels['run']>) {
          if (args[1].endsWith(`_cols${QUANT_COLUMNS}`) && args[1].startsWith('qmatmul_')) columnsRan++;
          return plain.apply(this, args);
        };
        const out = await runAll(e, prompts);
        assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
        return out;
      });
      assert.ok(columnsRan > 0, 'the multi-column kernel ran');
      batched.forEach((r, i) => {
        const want = alone[i % prompts.length]!;
        assert.deepEqual(r.ids, want.ids, `request ${i}: ids`);
        r.logits.forEach((l, j) => assert.ok(sameBits(l, want.logits[j]!), `request ${i}: logits of token ${j} differ`));
      });
    });
  }
});
