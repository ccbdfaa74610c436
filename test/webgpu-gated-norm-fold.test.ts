// The Gated DeltaNet gated norm where out_proj reads it, on webgpu (kernels/webgpu/gated-norm.ts):
// - with out_proj's head order (a quantized GGUF's), the norm writes each head's block at
//   its stored position: Kernels.gatedRmsNorm(headOrder) and gdnRecurrentGatedSeqs(perm), on
//   the head and the column launch, equal the unpermuted rows moved, bit for bit;
// - on the column launch, gdnRecurrentGatedSeqs(project) forms the norm inside out_proj's
//   one-column float matmul (no norm pass): x + out_proj(norm(o)) equals the norm pass then
//   matmulAdd element by element (BF16 and F32, M = 1, 2, 5, with and without an order), and
//   FLOAT_COLUMNS columns at M ≥ 2 (folding it too up to M = 8; F32 at HV 4) give the same bits;
// - the multi-column float matmul forming the norm (g.floatColumns forced, 2 ≤ M ≤ 8: M = 2,
//   3, 5, 8, with and without an order, 8 and 4 columns) == the norm pass then the
//   multi-column matmulAdd, 2 dispatches against 3; M = 17 keeps the pass (webgpu-wide-fold: 9 ≤ M ≤ 16);
// - tiny-think (BF16 safetensors and the Q8_0 GGUF) equals the former path (norm, gather_rows,
//   out_proj: head-order-oracle.ts) on both launches;
// - the engine with a GPU's launch profile (kernels/webgpu/launches.ts: the column GDN launch,
//   8-column float matmuls, the conv fold, matmuls quantizing their input): MTP on in a batch
//   == each request alone, MTP off; BF16 MTP k = 3 (verifies of 4 and 8 rows folding the norm)
//   == the model on the unfolded path (head-order-oracle.ts formerHeadPath), ids and logits.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { COLUMN_ACCUMULATORS, FLOAT_COLUMNS } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import type { GdnDims, Kernels, Tensor, Weight, WeightDType } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { GdnLaunch } from '../src/kernels/webgpu/launches.js';
import { ACTS_COLUMNS } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { loadModel, type AnyModel } from '../src/model/model.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { randomWeight, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { headOrderOf, runGatedStep } from './gated-step-cases.js';
import { isQuantType } from '../src/kernels/quant/formats.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';
import { formerHeadPath, headPathSteps } from './head-order-oracle.js';
import type { Model } from '../src/model/model.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Engine } from '../src/engine/engine.js';
import { runAll, withEngine, type RunResult } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => { k?.dispose(); });

const ref = createRefKernels();

/** Block j of each token's HV blocks of `src` = block order[j] (order null: src). */
function moved(src: Float32Array, order: Int32Array | null, dv: number): Float32Array {
  if (!order) return src;
  const hv = order.length;
  const out = new Float32Array(src.length);
  for (let r = 0; r < src.length / dv; r++) {
    const from = r - (r % hv) + order[r % hv]!;
    out.set(src.subarray(from * dv, (from + 1) * dv), r * dv);
  }
  return out;
}

const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
const read = async (t: GpuTensor, n = t.length): Promise<Float32Array> => (await k.readBack([{ t, offset: 0, length: n }]))[0]!;


/** pad: o and z at an odd element offset (the quantized fold's scalar loads); acts: C columns
 * of the activation-quantizing matmuls, the fold on (a GPU's), for a quantized out_proj. */
interface Case { dims: GdnDims; m: number; h: number; dtype: WeightDType; ordered: boolean; pad?: number; acts?: number }

/** One recurrent step of M one-token sequences (a batch of decodes), as `form`: 'separate'
 * (the norm, to the permuted rows when ordered, then matmulAdd) or 'project'. */
async function recurrentThenOutProj(c: Case, launch: GdnLaunch, form: 'separate' | 'project', columns = 1) {
  const { dims, m, h } = c;
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const r = rng(7 + m + hv);
  const sym = (n: number, s = 1) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const order = c.ordered ? headOrderOf(hv, 3) : null;
  const qkv = up(sym(m * (2 * hk * dk + hv * dv)));
  const [a, b] = [up(sym(m * hv, 4)), up(sym(m * hv, 4))];
  const padded = (n: number): GpuTensor => k.view(k.alloc(n + (c.pad ?? 0)), c.pad ?? 0, n);
  const z = padded(m * hv * dv);
  k.write(z, 0, sym(m * hv * dv, 3));
  const ss = hv * dk * dv;
  const states = up(sym(m * ss, 0.5));
  const aLog = randomWeight(ref, 'f32', 1, hv, () => r() - 1);
  const dtBias = randomWeight(ref, 'bf16', 1, hv, () => 2 * r() - 1);
  const norm = randomWeight(ref, 'f32', 1, dv, () => 0.5 + r());
  const w: Weight = k.packWeight(isQuantType(c.dtype) ? randomAnyWeight(ref, c.dtype, h, hv * dv, r) : randomWeight(ref, c.dtype, h, hv * dv, () => (2 * r() - 1) / 8));
  const x = up(sym(m * h));
  const out = padded(m * hv * dv);
  const normed = order ? k.alloc(m * hv * dv) : out;
  const seqs = Array.from({ length: m }, (_, i) => ({ row: i, t: 1, state: k.view(states, i * ss, ss) }));
  k.g.useLaunches('cpu', { gdnLaunch: launch, floatColumns: columns, floatColumnsFromRows: 2, floatColumnAccumulators: COLUMN_ACCUMULATORS, ...(c.acts ? { foldQuantActs: true, actsColumns: c.acts } : {}) });
  const inputs = { x, out, normed, order, qkv, a, b, z, states, aLog, dtBias, norm, w, m, h };
  return await runGatedStep(k, inputs, dims, seqs, form === 'project' ? 'project' : 'pass', () => read(x, 1), (t) => read(t));
}

/** The column launch's norm pass then out_proj against out_proj forming the norm: 3 against 2
 * dispatches, the same states and x, bit for bit. Returns the pass's run. */
async function foldEqualsPass(c: Case, columns = 1): Promise<{ x: Float32Array }> {
  const sep = await recurrentThenOutProj(c, 'columns', 'separate', columns);
  const fold = await recurrentThenOutProj(c, 'columns', 'project', columns);
  assert.equal(sep.dispatches, 3, 'recurrence, norm pass, out_proj');
  assert.equal(fold.dispatches, 2, 'recurrence, out_proj with the norm');
  assert.ok(sameBits(fold.states, sep.states), 'states differ');
  assert.ok(sameBits(fold.x, sep.x), 'x + out_proj(norm(o)) differs');
  return sep;
}

const QWEN = { numKeyHeads: 16, numValueHeads: 32, keyDim: 128, valueDim: 128 }; // qwen3.5-4b's linear heads
const SMALL = { numKeyHeads: 2, numValueHeads: 4, keyDim: 32, valueDim: 40 };

describe('webgpu: out_proj forms the gated norm (column launch, one-column float matmul) == the norm pass then matmulAdd, bit for bit', () => {
  for (const dtype of ['bf16', 'f32'] as const) {
    for (const [dims, ms] of [[SMALL, [1, 2, 5]], [QWEN, [1, 2]]] as const) {
      for (const m of ms) {
        for (const ordered of [false, true]) {
          test(`${dtype} HV ${dims.numValueHeads} dv ${dims.valueDim} M ${m}${ordered ? ', head order' : ''}`, async () => {
            const c: Case = { dims, m, h: 48, dtype, ordered };
            const sep = await foldEqualsPass(c);
            // the head launch's fused norm and the multi-column kernel (folding the norm too)
            const head = await recurrentThenOutProj(c, 'head', 'project');
            assert.ok(sameBits(head.x, sep.x), 'the head launch differs');
            // FLOAT_COLUMNS (the kernels the engine tests compile; C = 4 below); f32 at HV 4 only
            // (its HV 32 kernel would be one more 20 s lavapipe compile no other test shares)
            if (m >= 2 && (dtype === 'bf16' || dims === SMALL)) {
              const multi = await recurrentThenOutProj(c, 'columns', 'project', FLOAT_COLUMNS);
              assert.equal(multi.dispatches, 2, 'the multi-column kernel forms the norm at 2 ≤ M ≤ 8');
              assert.ok(sameBits(multi.x, sep.x), 'the multi-column out_proj differs');
            }
          });
        }
      }
    }
  }
});

describe('webgpu: the multi-column float out_proj of 2 ≤ M ≤ 8 forms the gated norm == the norm pass then the multi-column matmulAdd, bit for bit', () => {
  const cases: [WeightDType, GdnDims, number, number, boolean][] = [
    ...[2, 3, 5, 8].flatMap((m) => [false, true].map((o): [WeightDType, GdnDims, number, number, boolean] => ['bf16', SMALL, 8, m, o])),
    ['f32', SMALL, 4, 3, true], ['bf16', QWEN, 8, 2, true], ['bf16', QWEN, 8, 5, false],
  ];
  for (const [dtype, dims, columns, m, ordered] of cases) {
    test(`${dtype} HV ${dims.numValueHeads} dv ${dims.valueDim} M ${m}${ordered ? ', head order' : ''}, C = ${columns}`, async () => {
      const c: Case = { dims, m, h: 37, dtype, ordered };
      const sep = await foldEqualsPass(c, columns);
      // the one-column kernel's pass: the same bits (the multi-column invariant)
      const one = await recurrentThenOutProj(c, 'columns', 'separate');
      assert.ok(sameBits(one.x, sep.x), 'the one-column out_proj differs');
    });
  }
  test('M = 17 (past COLUMNS_HEAD_NORM_ROWS) keeps the norm pass', async () => {
    const c: Case = { dims: SMALL, m: 17, h: 37, dtype: 'bf16', ordered: true };
    const sep = await recurrentThenOutProj(c, 'columns', 'separate', 8);
    const proj = await recurrentThenOutProj(c, 'columns', 'project', 8);
    assert.equal(proj.dispatches, 3);
    assert.ok(sameBits(proj.x, sep.x));
  });
});

// quantized out_proj (HV · dv a multiple of 256 for the k-quants), the fold on at C columns
const QSMALL = { numKeyHeads: 2, numValueHeads: 4, keyDim: 32, valueDim: 64 };
describe('webgpu: a quantized out_proj of M ≤ 8 (two tiles past 4) forms the gated norm in its activation-quantizing matmul == the norm pass then matmulAdd, bit for bit', () => {
  const cases: [WeightDType, GdnDims, number, boolean, number, number][] = [
    ['q8_0', QWEN, 1, true, 0, 8], ['q8_0', QWEN, 4, false, 0, 8], ['q8_0', QSMALL, 2, true, 1, 8],
    ['q4_k', QSMALL, 1, true, 0, 4], ['q4_k', QSMALL, 3, false, 0, 4], ['q6_k', QSMALL, 2, true, 1, 8], ['q8_0', QSMALL, 7, true, 0, 8],
  ];
  for (const [dtype, dims, m, ordered, pad, acts] of cases) {
    test(`${dtype} HV ${dims.numValueHeads} dv ${dims.valueDim} M ${m}${ordered ? ', head order' : ''}, C = ${acts}${pad ? ', scalar loads' : ''}`, async () => {
      const c: Case = { dims, m, h: 37, dtype, ordered, pad, acts };
      await foldEqualsPass(c);
    });
  }
});

describe('webgpu: the gated norm writes out_proj\'s head order == the rows moved, bit for bit', () => {
  test('gatedRmsNorm(headOrder)', async () => {
    const r = rng(5);
    const [hv, dv, tokens] = [8, 40, 3];
    const order = headOrderOf(hv, 9);
    const norm = randomWeight(ref, 'bf16', 1, dv, () => 0.5 + r());
    const o = up(Float32Array.from({ length: tokens * hv * dv }, () => 2 * r() - 1));
    const z = up(Float32Array.from({ length: tokens * hv * dv }, () => 4 * r() - 2));
    const plain = k.alloc(tokens * hv * dv);
    const perm = k.alloc(tokens * hv * dv);
    k.gatedRmsNorm(plain, o, z, norm, tokens * hv, 1e-6);
    k.gatedRmsNorm(perm, o, z, norm, tokens * hv, 1e-6, order);
    const [p, q] = [await read(plain), await read(perm)];
    assert.ok(p.some((v) => v !== 0));
    assert.ok(sameBits(q, moved(p, order, dv)), 'permuted rows differ');
  });
  for (const launch of ['head', 'columns'] as const) {
    test(`gdnRecurrentGatedSeqs(perm), ${launch} launch`, async () => {
      const dims = SMALL;
      const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
      const r = rng(11);
      const sym = (n: number, s = 1) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
      const rows = 4;
      const order = headOrderOf(hv, 4);
      const inputs = { qkv: sym(rows * (2 * hk * dk + hv * dv)), a: sym(rows * hv, 4), b: sym(rows * hv, 4), z: sym(rows * hv * dv, 3), s: sym(2 * hv * dk * dv, 0.5) };
      const aLog = randomWeight(ref, 'f32', 1, hv, () => r() - 1);
      const dtBias = randomWeight(ref, 'bf16', 1, hv, () => 2 * r() - 1);
      const norm = randomWeight(ref, 'f32', 1, dv, () => 0.5 + r());
      k.g.useLaunches('cpu', { gdnLaunch: launch });
      const run = async (permuted: boolean) => {
        const ss = hv * dk * dv;
        const states = up(inputs.s);
        const out = k.alloc(rows * hv * dv);
        const dst = k.alloc(rows * hv * dv);
        const seqs = [{ row: 0, t: 1, state: k.view(states, 0, ss) }, { row: 1, t: 3, state: k.view(states, ss, ss) }];
        await read(out, 1);
        const d0 = k.recordedDispatches;
        k.gdnRecurrentGatedSeqs(out, up(inputs.qkv), { a: up(inputs.a), b: up(inputs.b), aLog, dtBias, g: k.alloc(rows * hv), beta: k.alloc(rows * hv),
          z: up(inputs.z), norm, eps: 1e-6, ...(permuted ? { perm: { order, out: dst } } : {}) }, dims, seqs);
        const dispatches = k.recordedDispatches - d0;
        return { dispatches, normed: await read(permuted ? dst : out), states: await read(states) };
      };
      const plain = await run(false);
      const perm = await run(true);
      assert.equal(perm.dispatches, plain.dispatches, 'no dispatch for the order');
      assert.ok(sameBits(perm.states, plain.states));
      assert.ok(sameBits(perm.normed, moved(plain.normed, order, dv)), 'permuted rows differ');
    });
  }
});

describe('webgpu: tiny-think == the former head-order path (norm, gather_rows, out_proj), bit for bit', () => {
  const Q8 = (): string => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf');
  for (const [name, path, folded] of [['Q8_0 GGUF', Q8, false], ['BF16', TINY_THINK, false], ['Q8_0 GGUF, matmuls quantizing their input', Q8, true]] as const) {
    for (const launch of folded ? ['columns'] as const : ['head', 'columns'] as const) {
      test(`${name}, ${launch} launch`, async () => {
        // folded: out_proj forms the gated norm
        k.g.useLaunches('cpu', { gdnLaunch: launch, ...(folded ? { foldQuantActs: true, actsColumns: ACTS_COLUMNS } : {}) });
        const readT = (t: Tensor, n: number): Promise<Float32Array> => read(t as GpuTensor, n);
        const kk = k as unknown as Kernels<Tensor, Tensor>;
        const d0 = k.recordedDispatches;
        const now = await headPathSteps(loadModel(path(), kk) as unknown as AnyModel, readT);
        const d1 = k.recordedDispatches;
        const before = await headPathSteps(loadModel(path(), formerHeadPath(kk)) as unknown as AnyModel, readT);
        const d2 = k.recordedDispatches;
        // the GGUF loses its gathers; BF16 on the column launch its norm passes
        if (name === 'BF16' && launch === 'head') assert.equal(d1 - d0, d2 - d1, 'the same dispatches');
        else assert.ok(d1 - d0 < d2 - d1, `fewer dispatches (${d1 - d0} vs ${d2 - d1})`);
        assert.equal(now.length, before.length);
        now.forEach((g, i) => assert.ok(sameBits(g, before[i]!), `result ${i} differs (logits of each step, then states)`));
      });
    }
  }
});

describe('engine on webgpu with a GPU\'s launches forced: MTP on, batched == alone, MTP off, bit for bit', () => {
  const prompts: GenerateRequest[] = [
    { prompt: 'What is 12 + 7?', maxTokens: 5, ignoreEos: true },
    { prompt: 'Name a color.', maxTokens: 4, ignoreEos: true },
  ];
  const gpuLaunches = (e: Engine): void => {
    const g = (e.model.kernels as unknown as WebGpuBoundaryKernels).g;
    // the whole profile (Q8_0: out_proj forms the gated norm at M ≤ 4), not knob by knob: the
    // pipelines the other engine tests compile (4 float columns here compiled ~150 CPU-s no other test shared)
    g.useLaunches('gpu');
  };
  for (const [name, path] of [['BF16', TINY_THINK], ['Q8_0 GGUF', () => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf')]] as const) {
    test(name, async () => {
      const base = { model: path(), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 512, prefixCache: false };
      const alone = await withEngine({ ...base, specTokens: 0, maxRunning: 1 }, async (e) => {
        gpuLaunches(e);
        const out: RunResult[] = [];
        for (const p of prompts) out.push(...await runAll(e, [p]));
        return out;
      });
      const batched = await withEngine({ ...base, specTokens: 2, maxRunning: 3, poisonPadding: true }, async (e) => {
        gpuLaunches(e);
        const out = await runAll(e, [...prompts, prompts[0]!]);
        assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
        return out;
      });
      batched.forEach((r, i) => {
        const want = alone[i % prompts.length]!;
        assert.deepEqual(r.ids, want.ids, `request ${i}: ids`);
        r.logits.forEach((l, j) => assert.ok(sameBits(l, want.logits[j]!), `request ${i}: logits of token ${j} differ`));
      });
    });
  }
});

describe('engine on webgpu, BF16 tiny-think, MTP k = 3, 8-column float matmuls forming the gated norm == the unfolded path, bit for bit', () => {
  test('two requests batched (verifies of 4 and 8 rows)', async () => {
    const prompts: GenerateRequest[] = [
      { prompt: 'What is 12 + 7?', maxTokens: 6, ignoreEos: true },
      { prompt: 'Name a color.', maxTokens: 5, ignoreEos: true },
    ];
    const opts = { model: TINY_THINK(), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 512, prefixCache: false, specTokens: 3, maxRunning: 2 };
    const run = (unfolded: boolean) => withEngine(opts, async (e) => {
      const kk = e.model.kernels as unknown as WebGpuBoundaryKernels;
      kk.g.useLaunches('gpu');
      // the model's layers on the former path: the norm pass, then matmulAdd (no fold)
      if (unfolded) (e.model as unknown as { kernels: unknown }).kernels = formerHeadPath((e.model as unknown as Model<Tensor, Tensor>).kernels);
      // the multi-column out_proj forming the norm (…_headnorm<HV>_<loads>_cols8), counted
      let colsFolds = 0;
      const run = kk.g.run.bind(kk.g);
      kk.g.run = (enc, key, ...rest) => { if (/_headnorm\d+_\w+_cols8$/.test(key)) colsFolds++; run(enc, key, ...rest); };
      const d0 = kk.recordedDispatches;
      const out = await runAll(e, prompts);
      assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
      return { out, dispatches: kk.recordedDispatches - d0, colsFolds };
    });
    const folded = await run(false);
    const unfolded = await run(true);
    assert.ok(folded.colsFolds > 0 && unfolded.colsFolds === 0, `multi-column folds: ${folded.colsFolds}, unfolded ${unfolded.colsFolds}`);
    assert.ok(folded.dispatches < unfolded.dispatches, `fewer dispatches (${folded.dispatches} vs ${unfolded.dispatches})`);
    assert.equal(folded.out.length, prompts.length);
    folded.out.forEach((r, i) => {
      assert.deepEqual(r.ids, unfolded.out[i]!.ids, `request ${i}: ids`);
      assert.equal(r.logits.length, unfolded.out[i]!.logits.length);
      r.logits.forEach((l, j) => assert.ok(sameBits(l, unfolded.out[i]!.logits[j]!), `request ${i}: logits of token ${j} differ`));
    });
  });
});
