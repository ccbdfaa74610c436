// The many-row step's GDN gated norm (M > 8: 8–32 decode streams, big verify batches), on
// webgpu with the column GDN launch forced (kernels/webgpu/gated-norm.ts):
// - a quantized out_proj: the norm pass quantizes the normed rows into out_proj's activations
//   (wgsl/gated-norm.ts gdnGatedNormQuantShader) == the pass then quant_acts then the tiled
//   matmul, bit for bit (q8_0, q4_k, q6_k; M 9–33; with and without a head order; several
//   sequences of several tokens; both activation layouts), 3 dispatches against 4;
// - a float out_proj (BF16 / F32): the multi-column kernel forms the norm at 8 < M ≤ 16 too
//   (gated-norm.ts headNormFolds) == the pass then the multi-column matmulAdd, 2 against 3;
//   M = 17 keeps the pass;
// - tiny-think (BF16 safetensors, the Q8_0 and Q4_K_M GGUFs): the engine with a GPU's launch
//   profile (kernels/webgpu/launches.ts, the conv fold included) and 5 requests batched, MTP
//   k = 3 (decodes of up to 5 rows, verifies of up to 20) == the same engine on the former path (the norm pass, then matmulAdd: head-order-oracle.ts formerHeadPath), ids and
//   logits, and == each request alone.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { COLUMN_ACCUMULATORS } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import type { GdnDims, Tensor, Weight, WeightDType } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { COLUMNS_HEAD_NORM_ROWS } from '../src/kernels/webgpu/gated-norm.js';
import { QUANT_COLUMNS } from '../src/kernels/webgpu/wgsl/qmatmul-columns.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { isQuantType } from '../src/kernels/quant/formats.js';
import type { Model } from '../src/model/model.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Engine } from '../src/engine/engine.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { randomWeight, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { headOrderOf, runGatedStep } from './gated-step-cases.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { formerHeadPath } from './head-order-oracle.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => { k?.dispose(); });

const ref = createRefKernels();
const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
const read = async (t: GpuTensor): Promise<Float32Array> => (await k.readBack([{ t, offset: 0, length: t.length }]))[0]!;

/** seqs: tokens per sequence (M = their sum); foldActs: the GPU default (the activation-
 * quantizing matmuls on, so only M > ACTS_FOLD_ROWS leaves the quantization to the pass);
 * lanes: quant_acts with 8 lanes a block (the GPU's) rather than one thread a block. */
interface Case { dims: GdnDims; seqs: readonly number[]; h: number; dtype: WeightDType; ordered: boolean; foldActs?: boolean; lanes?: boolean; columns?: number }

/** One recurrent step of the case's sequences on the column launch, as `form`: 'pass' (the
 * norm pass, to the permuted rows when ordered, then matmulAdd) or 'project' (out_proj given
 * to gdnRecurrentGatedSeqs). Returns its dispatches, x + out_proj(norm(o)) and the states. */
async function stepThenOutProj(c: Case, form: 'pass' | 'project') {
  const { dims, h } = c;
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const m = c.seqs.reduce((a, b) => a + b, 0);
  const r = rng(11 + m + hv);
  const sym = (n: number, s = 1) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const order = c.ordered ? headOrderOf(hv, 5) : null;
  const qkv = up(sym(m * (2 * hk * dk + hv * dv)));
  const [a, b] = [up(sym(m * hv, 4)), up(sym(m * hv, 4))];
  const z = up(sym(m * hv * dv, 3));
  const ss = hv * dk * dv;
  const states = up(sym(c.seqs.length * ss, 0.5));
  const aLog = randomWeight(ref, 'f32', 1, hv, () => r() - 1);
  const dtBias = randomWeight(ref, 'bf16', 1, hv, () => 2 * r() - 1);
  const norm = randomWeight(ref, 'f32', 1, dv, () => 0.5 + r());
  const w: Weight = k.packWeight(isQuantType(c.dtype) ? randomAnyWeight(ref, c.dtype, h, hv * dv, r) : randomWeight(ref, c.dtype, h, hv * dv, () => (2 * r() - 1) / 8));
  const x = up(sym(m * h));
  const out = k.alloc(m * hv * dv);
  const normed = order ? k.alloc(m * hv * dv) : out;
  let row = 0;
  const seqs = c.seqs.map((t, i) => ({ row: (row += t) - t, t, state: k.view(states, i * ss, ss) }));
  const g = k.g;
  g.useLaunches('cpu', { gdnLaunch: 'columns', floatColumns: c.columns ?? 8, floatColumnsFromRows: 2, floatColumnAccumulators: COLUMN_ACCUMULATORS, foldQuantActs: c.foldActs ?? false, actsLayout: c.lanes ? 'lanes' : 'block',
    quantLayout: 'lanes', quantColumns: QUANT_COLUMNS });
  const inputs = { x, out, normed, order, qkv, a, b, z, states, aLog, dtBias, norm, w, m, h };
  return await runGatedStep(k, inputs, dims, seqs, form, () => read(k.view(x, 0, 1)), read);
}

async function foldEqualsPass(c: Case, passDispatches: number): Promise<void> {
  const pass = await stepThenOutProj(c, 'pass');
  const fold = await stepThenOutProj(c, 'project');
  assert.equal(pass.dispatches, passDispatches, 'the pass path\'s dispatches');
  assert.equal(fold.dispatches, passDispatches - 1, 'one dispatch fewer');
  assert.ok(sameBits(fold.states, pass.states), 'states differ');
  assert.ok(sameBits(fold.x, pass.x), 'x + out_proj(norm(o)) differs');
}

const QWEN = { numKeyHeads: 16, numValueHeads: 32, keyDim: 128, valueDim: 128 }; // qwen3.5-4b's linear heads
const QSMALL = { numKeyHeads: 2, numValueHeads: 4, keyDim: 32, valueDim: 64 };
const ones = (n: number): number[] => Array.from({ length: n }, () => 1);

describe('webgpu: the gated norm pass quantizing a quantized out_proj\'s input (M > 8) == the pass then quant_acts then the matmul, bit for bit', () => {
  const cases: [string, Case][] = [
    ['q8_0 QWEN, 9 streams, head order, GPU defaults', { dims: QWEN, seqs: ones(9), h: 37, dtype: 'q8_0', ordered: true, foldActs: true, lanes: true }],
    ['q4_k, 32 streams, head order, GPU defaults', { dims: QSMALL, seqs: ones(32), h: 37, dtype: 'q4_k', ordered: true, foldActs: true, lanes: true }],
    ['q6_k, 12 streams', { dims: QSMALL, seqs: ones(12), h: 29, dtype: 'q6_k', ordered: false, foldActs: true }],
    ['q8_0, a verify batch: 3 sequences of 5, 4 and 7 tokens, head order', { dims: QSMALL, seqs: [5, 4, 7], h: 37, dtype: 'q8_0', ordered: true, foldActs: true, lanes: true }],
    ['q4_k, 33 rows in 11 sequences of 3', { dims: QSMALL, seqs: Array.from({ length: 11 }, () => 3), h: 21, dtype: 'q4_k', ordered: false, foldActs: true }],
    // the activation-quantizing matmuls off (a CPU adapter's setting): the pass quantizes at any M
    ['q8_0, 3 streams, activation folds off', { dims: QSMALL, seqs: ones(3), h: 37, dtype: 'q8_0', ordered: true }],
  ];
  for (const [name, c] of cases) test(name, () => foldEqualsPass(c, 4));
});

describe('webgpu: the multi-column float out_proj forming the gated norm at 8 < M ≤ 16 == the norm pass then the multi-column matmulAdd, bit for bit', () => {
  const cases: [string, Case][] = [
    ['bf16 QWEN, 9 streams, head order', { dims: QWEN, seqs: ones(9), h: 37, dtype: 'bf16', ordered: true }],
    ['bf16, 16 streams', { dims: QSMALL, seqs: ones(COLUMNS_HEAD_NORM_ROWS), h: 37, dtype: 'bf16', ordered: false }],
    ['bf16, 3 sequences of 5, 4 and 7 tokens, head order', { dims: { ...QSMALL, valueDim: 40 }, seqs: [5, 4, 7], h: 37, dtype: 'bf16', ordered: true }],
    ['f32, 9 streams, head order', { dims: QSMALL, seqs: ones(9), h: 21, dtype: 'f32', ordered: true }],
  ];
  for (const [name, c] of cases) test(name, () => foldEqualsPass(c, 3));
  test('M = 17 (past COLUMNS_HEAD_NORM_ROWS) keeps the norm pass', async () => {
    const c: Case = { dims: QSMALL, seqs: ones(COLUMNS_HEAD_NORM_ROWS + 1), h: 37, dtype: 'bf16', ordered: true };
    const pass = await stepThenOutProj(c, 'pass');
    const proj = await stepThenOutProj(c, 'project');
    assert.equal(proj.dispatches, 3);
    assert.ok(sameBits(proj.x, pass.x));
  });
});

// 5 requests batched (was each prompt twice, 10: ~1/3 of the file's CPU-s went to the extra
// rows): the prefill step and a verify step of all 5 (20 rows) pass 16 rows (the quantizing
// pass; the float pass kept), and as requests finish (max tokens 4 to 6) steps of 9 to 16
// rows fold the norm: the `seen` counts below assert that both kinds ran.
describe('engine on webgpu, tiny-think, 5 requests batched with MTP k = 3 (a GPU\'s launches) == the former path and == each alone, bit for bit', () => {
  const prompts: GenerateRequest[] = ['What is 12 + 7?', 'Name a color.', 'Count to five.', 'Say hi.', 'What is 3 times 4?']
    .map((prompt, i) => ({ prompt, maxTokens: 4 + (i % 3), ignoreEos: true }));
  const requests = prompts;
  const gpuLaunches = (e: Engine): WebGpuBoundaryKernels => {
    const kk = e.model.kernels as unknown as WebGpuBoundaryKernels;
    kk.g.useLaunches('gpu');
    return kk;
  };
  const models: [string, () => string][] = [['BF16', TINY_THINK], ['Q8_0 GGUF', () => sharedPath('models', 'gguf', 'tiny-think-Q8_0.gguf')],
    ['Q4_K_M GGUF', () => sharedPath('models', 'gguf', 'tiny-think-Q4_K_M.gguf')]];
  for (const [name, path] of models) {
    test(name, async () => {
      const base = { model: path(), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 4096, maxContext: 512, prefixCache: false };
      const batched = (former: boolean) => withEngine({ ...base, specTokens: 3, maxRunning: requests.length }, async (e) => {
        const kk = gpuLaunches(e);
        if (former) (e.model as unknown as { kernels: unknown }).kernels = formerHeadPath((e.model as unknown as Model<Tensor, Tensor>).kernels);
        // per recurrent step (its rows): norm passes storing f32 rows, passes quantizing out_proj's
        // input, multi-column out_proj forming the norm
        let rows = 0;
        const seen = { plainAtFold: 0, plainPastFold: 0, quant: 0, colsFold: 0, wide: 0, foldRange: 0, pastFold: 0 };
        const run = kk.g.run.bind(kk.g);
        kk.g.run = (enc, key, ...rest) => {
          if (/^gdn_gated_norm_\d+$/.test(key)) seen[rows > COLUMNS_HEAD_NORM_ROWS ? 'plainPastFold' : 'plainAtFold']++;
          if (key.startsWith('gdn_gated_norm_quant') && rows > 8) seen.quant++;
          if (/_headnorm\d+_\w+_cols8$/.test(key) && rows > 8) seen.colsFold++;
          run(enc, key, ...rest);
        };
        const gated = kk.gdnRecurrentGatedSeqs.bind(kk);
        kk.gdnRecurrentGatedSeqs = (out, qkv, gating, dims, seqs) => {
          rows = seqs.reduce((n, s) => n + s.t, 0);
          if (rows > 8) seen.wide++;
          if (rows > 8 && rows <= COLUMNS_HEAD_NORM_ROWS) seen.foldRange++;
          if (rows > COLUMNS_HEAD_NORM_ROWS) seen.pastFold++;
          gated(out, qkv, gating, dims, seqs);
        };
        const out = await runAll(e, requests);
        assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
        return { out, seen };
      });
      const folded = await batched(false);
      const former = await batched(true);
      const s = folded.seen;
      assert.ok(s.wide > 0, 'steps of more than 8 recurrent rows');
      assert.ok(s.foldRange > 0 && s.pastFold > 0, `steps of 9 to ${COLUMNS_HEAD_NORM_ROWS} rows and of more: ${JSON.stringify(s)}`);
      // every step of ≤ 16 rows folds its norm (into out_proj, or the quantizing pass); a float
      // out_proj of more rows keeps the pass, a quantized one's pass quantizes
      assert.equal(s.plainAtFold, 0, 'a norm pass stored f32 rows at ≤ 16 rows');
      if (name === 'BF16') assert.ok(s.colsFold > 0 && s.quant === 0, JSON.stringify(s));
      else assert.ok(s.quant > 0 && s.plainPastFold === 0 && s.colsFold === 0, JSON.stringify(s));
      assert.ok(former.seen.plainAtFold > 0 && former.seen.quant === 0 && former.seen.colsFold === 0, `the former path: ${JSON.stringify(former.seen)}`);
      const alone = await withEngine({ ...base, specTokens: 0, maxRunning: 1 }, async (e) => {
        gpuLaunches(e);
        const out: RunResult[] = [];
        for (const p of prompts) out.push(...await runAll(e, [p]));
        return out;
      });
      folded.out.forEach((r, i) => {
        for (const [want, what] of [[former.out[i]!, 'the former path'], [alone[i % prompts.length]!, 'alone']] as const) {
          assert.deepEqual(r.ids, want.ids, `request ${i}: ids vs ${what}`);
          assert.equal(r.logits.length, want.logits.length);
          r.logits.forEach((l, j) => assert.ok(sameBits(l, want.logits[j]!), `request ${i}: logits of token ${j} differ from ${what}`));
        }
      });
    });
  }
});
