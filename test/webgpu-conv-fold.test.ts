// The causal conv folded into the Gated DeltaNet in_proj matmul's stores on webgpu
// (Kernels.matmulGroup's conv; kernels/webgpu/conv-launch.ts convFoldPlan, wgsl/conv-fold.ts),
// forced on lavapipe (a CPU adapter keeps the separate dispatch by default):
// - the group of gdnMixer's shape (qkv, z, b, a; BF16 and F32, with the folded input norm)
//   at M = 1, 3, 6 decode rows (one row a sequence, a row no sequence owns), on the
//   one-column and (BF16) the 8-column float launch: post-conv rows, every window and the other
//   outputs equal the matmul then causalConvSeqs element by element, with one dispatch
//   fewer and no causal_conv;
// - a verify (t = 2..5 rows to scratch; 2 sequences; decode, scratch and in-place rows mixed)
//   on the 8-column launch: the steps variant — post-conv rows, windows and every scratch
//   window equal element by element;
// - past 8 rows, a verify on the one-column launch, a quantized qkv weight on the quant_acts +
//   qmatmul path (lavapipe's default; the activation-quantizing kernels fold it:
//   test/webgpu-conv-fold-quant), or windows in two
//   buffers keep the separate conv dispatch (same bits);
// - tiny-think (BF16) and tiny-next-moe (Qwen3-Next: interleaved in_proj_qkvz regrouped at
//   load) forward with the fold == without: logits of a prompt, decode steps (one sequence,
//   then two batched), a verify, and the conv windows;
// - the engine with a GPU's launches forced: fold on, batched (MTP off: the fold runs every
//   decode; MTP on: drafts verified) == fold off, each request alone.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ConvSeq, Tensor, Weight, WeightDType } from '../src/kernels/types.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { FLOAT_COLUMNS, COLUMN_ACCUMULATORS } from '../src/kernels/webgpu/wgsl/matmul-columns.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { type AnyModel, loadModel } from '../src/model/model.js';
import { checkFoldEqualsCalls, convFoldForward, convFoldKernels, groupOutputs } from './conv-fold-forward.js';
import { TINY_NEXT_MOE, TINY_THINK } from './paths.js';
import { randomWeight, rng } from './numeric.js';
import { randomAnyWeight } from './quant-blocks.js';
import { runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { Engine } from '../src/engine/engine.js';

let k: WebGpuBoundaryKernels;
let keys: string[] = [];
convFoldKernels((kernels) => { k = kernels; }, (key) => keys.push(key));

const ref = createRefKernels();
const TAPS = 4;
const H = 96; // in_proj's input width (a multiple of 32: the quantized case's blocks)
const C = 100; // conv channels (qkv columns): not a multiple of the 8-column launch
const ZW = 48;
const HV = 6;

interface Case {
  readonly dtype: WeightDType;
  /** Each sequence's rows (t) and whether it writes scratch; rows follow in order. */
  readonly seqs: readonly { t: number; scratch?: boolean }[];
  /** Rows after the sequences' that no sequence owns. */
  readonly spare?: number;
  /** Windows of the second half of the sequences in another buffer. */
  readonly split?: boolean;
  readonly columns: number;
}

interface Result { keys: string[]; outs: Float32Array[] }

/** gdnMixer's group (qkv, z, b, a) with the input norm and the conv of `c`, fold `on`;
 * returns the dispatch keys and [conv out, windows (both buffers), scratch, z, b, a, qkv]. */
async function runGroup(c: Case, on: boolean, seed: number): Promise<Result> {
  k.g.useLaunches('cpu', { convFold: on, floatColumns: c.columns, floatColumnsFromRows: 2, floatColumnAccumulators: COLUMN_ACCUMULATORS });
  const r = rng(seed);
  const sym = (n: number, s = 2) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const m = c.seqs.reduce((a, s) => a + s.t, 0) + (c.spare ?? 0);
  const hist = TAPS - 1;
  const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const weight = (dtype: WeightDType, rows: number): Weight => k.packWeight(dtype === 'bf16' || dtype === 'f32' ? randomWeight(ref, dtype, rows, H, () => r() - 0.5)
    : randomAnyWeight(ref, dtype, rows, H, r));
  const ws: Weight[] = [weight(c.dtype, C), weight('bf16', ZW), weight('bf16', HV), weight('bf16', HV)];
  const wc = randomWeight(ref, 'f32', C, TAPS, () => r() - 0.5);
  const normW = randomWeight(ref, 'f32', 1, H, () => r() - 0.5);
  const x = up(sym(m * H));
  const n = c.seqs.length;
  const half = c.split ? Math.ceil(n / 2) : n;
  const winA = up(sym(half * hist * C));
  const winB = up(sym(Math.max(1, n - half) * hist * C));
  const scr = up(new Float32Array(Math.max(1, m * hist * C)).fill(-7));
  const { qkv, conv, z, b, a, group } = groupOutputs(k, m, { c: C, zw: ZW, hv: HV }, ws);
  let row = 0;
  const seqs: ConvSeq<GpuTensor>[] = c.seqs.map((s, i) => {
    const window = i < half ? k.view(winA, i * hist * C, hist * C) : k.view(winB, (i - half) * hist * C, hist * C);
    const seq = { row, t: s.t, window, scratch: s.scratch ? k.view(scr, row * hist * C, s.t * hist * C) : undefined };
    row += s.t;
    return seq;
  });
  const normOut = k.alloc(m * H);
  await k.readBack([{ t: x, offset: 0, length: 1 }]);
  keys = [];
  k.matmulGroup(x, m, group, { w: normW, eps: 1e-6, zeroCentered: true, out: normOut }, { out: conv, w: wc, seqs });
  const ran = keys;
  const outs = await k.readBack([conv, winA, winB, scr, z, b, a, qkv].map((t) => ({ t, offset: 0, length: t.length })));
  return { keys: ran, outs: outs as Float32Array[] };
}

const DECODE = (n: number) => Array.from({ length: n }, () => ({ t: 1 }));
const NAMES = ['post-conv rows', 'windows', 'windows (second buffer)', 'scratch', 'z', 'b', 'a'];

/** Fold on == fold off for `c`, element by element (qkv too where the fold does not run). */
async function foldEqualsCalls(c: Case, folds: boolean): Promise<void> {
  const scratchRows = c.seqs.reduce((a, s) => a + (s.scratch ? s.t : 0), 0);
  await checkFoldEqualsCalls((on, seed) => runGroup(c, on, seed), 17 + c.seqs.length * 5 + (c.spare ?? 0),
    { names: NAMES, scratch: 3, scratchRows, taps: TAPS, channels: C, carries: folds ? /_conv4m\d+/ : null });
}

describe('webgpu: the conv folded into the in_proj matmul == matmulGroup then causalConvSeqs, bit for bit', () => {
  // (F32 on the one-column launch only: each variant of the 8-column kernel takes lavapipe's
  // LLVM minutes to compile; BF16's is the one a GPU runs)
  for (const dtype of ['bf16', 'f32'] as const) {
    for (const columns of dtype === 'bf16' ? [1, FLOAT_COLUMNS] : [1]) {
      for (const [streams, spare] of [[1, 0], [3, 0], [5, 1]] as const) {
        test(`${dtype}, ${columns}-column launch, ${streams} decode rows${spare ? ' and a row no sequence owns' : ''}`, async () => {
          await foldEqualsCalls({ dtype, seqs: DECODE(streams), spare, columns }, true);
        });
      }
    }
  }
  // the steps variant (8-column launch, 2 ≤ M ≤ 8): a verify's rows, every step's scratch window
  for (let t = 2; t <= 5; t++) {
    test(`BF16, 8-column launch, a verify of ${t} rows to scratch`, async () => {
      await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t, scratch: true }], columns: FLOAT_COLUMNS }, true);
    });
  }
  test('BF16, 8-column launch, 2 verifies (2 and 4 rows to scratch)', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t: 2, scratch: true }, { t: 4, scratch: true }], columns: FLOAT_COLUMNS }, true);
  });
  test('BF16, 8-column launch, a decode row, 3 rows to scratch, 2 rows in place and a row no sequence owns', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t: 1 }, { t: 3, scratch: true }, { t: 2 }], spare: 1, columns: FLOAT_COLUMNS }, true);
  });
  test('a verify of 9 rows (past 8) keeps the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t: 5, scratch: true }, { t: 4, scratch: true }], columns: FLOAT_COLUMNS }, false);
  });
  test('a verify on the one-column launch keeps the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t: 1 }, { t: 3, scratch: true }], columns: 1 }, false);
  });
  test('a decode row writing scratch at M = 1 keeps the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: [{ t: 1, scratch: true }], columns: FLOAT_COLUMNS }, false);
  });
  test('windows in two buffers keep the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'bf16', seqs: DECODE(4), split: true, columns: FLOAT_COLUMNS }, false);
  });
  test('a quantized qkv weight (Q8_0) on the quant_acts + qmatmul path keeps the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'q8_0', seqs: DECODE(2), columns: 1 }, false);
  });
});

/** `model` forward with the fold `on` and a GPU's launches: two chunked prompts, a decode of
 * one sequence, a decode of two sequences batched, a 3-row verify to scratch;
 * every step's logits, then the conv windows. */
async function forwardAs(model: AnyModel, on: boolean): Promise<{ results: Float32Array[]; keys: string[] }> {
  k.g.useLaunches('gpu', { convFold: on });
  keys = [];
  const results = await convFoldForward(k, model);
  return { results, keys };
}

describe('webgpu forward with the conv fold == without, bit for bit (logits, conv windows, verify scratch)', () => {
  for (const [name, path] of [['tiny-think (BF16)', TINY_THINK], ['tiny-next-moe (Qwen3-Next, regrouped in_proj_qkvz)', TINY_NEXT_MOE]] as const) {
    test(name, async () => {
      const model = await loadModel(path(), k) as unknown as AnyModel;
      const off = await forwardAs(model, false);
      const on = await forwardAs(model, true);
      const count = (ks: string[], re: RegExp) => ks.filter((x) => re.test(x)).length;
      const linear = model.layout.linearLayers.length;
      // every step folds every linear layer's conv: the 2 decode steps (one sequence, two batched),
      // the verify (3 rows to scratch) and the prompts (6 and 3 rows ≤ 8) on the steps variant
      assert.equal(count(on.keys, /_conv\d+m\d+_/), 2 * linear, 'each decode step folds every linear layer\'s conv');
      assert.equal(count(on.keys, /_conv\d+m\d+s_/), 3 * linear, 'the verify and the prompts fold on the steps variant');
      assert.equal(count(off.keys, /^causal_conv/), 5 * linear, 'fold off: a conv dispatch a layer and step');
      assert.equal(count(on.keys, /^causal_conv/), 0, 'fold on: no conv dispatch');
      assert.equal(on.keys.length, off.keys.length - 5 * linear);
      assert.equal(on.results.length, off.results.length);
      off.results.forEach((h, i) => assert.ok(sameBits(on.results[i]!, h), `result ${i} differs (0-4: logits of each step, then windows, scratch)`));
    });
  }
});

describe('engine on webgpu with a GPU\'s launches forced: fold on (MTP off and on, batched) == fold off alone, bit for bit', () => {
  const prompts: GenerateRequest[] = [
    { prompt: 'What is 12 + 7?', maxTokens: 5, ignoreEos: true },
    { prompt: 'Name a color.', maxTokens: 4, ignoreEos: true },
  ];
  const gpuLaunches = (e: Engine, fold: boolean): void => {
    const g = (e.model.kernels as unknown as WebGpuBoundaryKernels).g;
    g.useLaunches('gpu', { convFold: fold });
    const run = g.run;
    // the steps variant's dispatches (a verify of ≤ 8 rows folds)
    g.run = function (...args: Parameters<typeof run>) {
      if (/_conv\d+m\d+s_/.test(args[1])) stepFolds++;
      return run.apply(this, args);
    };
  };
  let stepFolds = 0;
  test('tiny-think BF16', async () => {
    const base = { model: TINY_THINK(), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 512, prefixCache: false };
    const alone = await withEngine({ ...base, specTokens: 0, maxRunning: 1 }, async (e) => {
      gpuLaunches(e, false);
      const out: RunResult[] = [];
      for (const p of prompts) out.push(...await runAll(e, [p]));
      return out;
    });
    for (const spec of [0, 3]) {
      stepFolds = 0;
      const batched = await withEngine({ ...base, specTokens: spec, maxRunning: 3, poisonPadding: true }, async (e) => {
        gpuLaunches(e, true);
        const out = await runAll(e, [...prompts, prompts[0]!]);
        if (spec > 0) assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
        if (spec > 0) assert.ok(stepFolds > 0, 'a verify folded its conv (steps variant)');
        return out;
      });
      batched.forEach((r, i) => {
        const want = alone[i % prompts.length]!;
        assert.deepEqual(r.ids, want.ids, `MTP ${spec}, request ${i}: ids`);
        r.logits.forEach((l, j) => assert.ok(sameBits(l, want.logits[j]!), `MTP ${spec}, request ${i}: logits of token ${j} differ`));
      });
    }
  });
});
