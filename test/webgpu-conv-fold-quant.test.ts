// The causal conv folded into the QUANTIZED Gated DeltaNet in_proj on webgpu: the
// activation-quantizing group kernel (wgsl/qmatmul-acts-group.ts, M ≤ ACTS_FOLD_ROWS) stores the
// conv of qkv column c from the thread that forms c (wgsl/qmatmul-acts.ts actsStore;
// kernels/webgpu/conv-launch.ts convFoldPlan), forced on lavapipe (a CPU adapter keeps the
// separate dispatch and the quant_acts + qmatmul path by default):
// - gdnMixer's group (qkv, z, b, a of one quant type, the input norm folded) at decode rows (1,
//   3, and 6 over two tiles with a row no sequence owns), on the 8-column kernel (Q8_0: the
//   one-column too): post-conv rows, windows and z, b, a equal the matmul then causalConvSeqs
//   element by element, with the conv dispatch gone; Q8_0 and Q4_K (a GPU's types), the other
//   quant types at 3 decode rows and at mixed verify rows (their qkv kernel alone);
// - verify rows (steps variant): t = 1..4 rows to scratch, 3 sequences in two tiles, decode /
//   scratch / in-place rows mixed — every scratch window equal;
// - sequences across the tiles of ACTS_TILE rows (a 5-row verify; 3 verifies, one across row
//   4): the steps variant on one tile of CONV_STEPS_TILE = 8 rows;
// - 9 rows (past the activation-quantizing kernels) and the fold with those kernels off keep
//   the conv dispatch (same bits);
// - tiny-think Q8_0 and Q4_K_M GGUF and tiny-next-moe quantized to Q8_0 at load: forward with the
//   fold == without (prompt logits, decode of one and two sequences, a verify, the windows);
// - the engine (tiny-think Q8_0 GGUF, a GPU's launches): fold on, batched, MTP off and on ==
//   fold off, each request alone.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ConvSeq, Tensor, Weight, WeightDType } from '../src/kernels/types.js';
import type { QuantType } from '../src/kernels/quant/formats.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { ACTS_COLUMNS, CONV_STEPS_TILE } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { type AnyModel, loadModel } from '../src/model/model.js';
import { checkFoldEqualsCalls, convFoldForward, convFoldKernels, groupOutputs } from './conv-fold-forward.js';
import { TINY_NEXT_MOE, sharedPath } from './paths.js';
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
const H = 256; // in_proj's input width: one K-quant super-block
const C = 100; // conv channels (qkv columns): not a multiple of the 8-column kernel
const ZW = 48;
const HV = 6;
const GGUF = (name: string) => (): string => sharedPath('models', 'gguf', name);

interface Case {
  readonly dtype: QuantType;
  /** Each sequence's rows (t) and whether it writes scratch; rows follow in order. */
  readonly seqs: readonly { t: number; scratch?: boolean }[];
  /** Rows after the sequences' that no sequence owns. */
  readonly spare?: number;
  /** Output columns a workgroup of the activation-quantizing kernels (actsColumns). */
  readonly columns: number;
  /** The activation-quantizing kernels on (default) or off. */
  readonly acts?: boolean;
  /** z, b, a as BF16 (the quantized kernel holds qkv alone: a quarter of its compile on lavapipe). */
  readonly qkvAlone?: boolean;
}

interface Result { keys: string[]; outs: Float32Array[] }

/** gdnMixer's group (qkv, z, b, a, all `c.dtype`; qkvAlone: z, b, a BF16) with the input norm and the conv of `c`, fold
 * `on`; returns the dispatch keys and [conv out, windows, scratch, z, b, a, qkv]. */
async function runGroup(c: Case, on: boolean, seed: number): Promise<Result> {
  k.g.useLaunches('cpu', { convFold: on, foldQuantActs: c.acts ?? true, actsColumns: c.columns });
  const r = rng(seed);
  const sym = (n: number, s = 2) => Float32Array.from({ length: n }, () => s * (2 * r() - 1));
  const m = c.seqs.reduce((a, s) => a + s.t, 0) + (c.spare ?? 0);
  const hist = TAPS - 1;
  const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const weight = (rows: number, dtype: WeightDType = c.dtype): Weight => k.packWeight(randomAnyWeight(ref, dtype, rows, H, r));
  const rest = c.qkvAlone ? 'bf16' : c.dtype;
  const ws: Weight[] = [weight(C), weight(ZW, rest), weight(HV, rest), weight(HV, rest)];
  const wc = randomWeight(ref, 'f32', C, TAPS, () => r() - 0.5);
  const normW = randomWeight(ref, 'f32', 1, H, () => r() - 0.5);
  const x = up(sym(m * H));
  const win = up(sym(c.seqs.length * hist * C));
  const scr = up(new Float32Array(Math.max(1, m * hist * C)).fill(-7));
  const { qkv, conv, z, b, a, group } = groupOutputs(k, m, { c: C, zw: ZW, hv: HV }, ws);
  let row = 0;
  const seqs: ConvSeq<GpuTensor>[] = c.seqs.map((s, i) => {
    const seq = { row, t: s.t, window: k.view(win, i * hist * C, hist * C), scratch: s.scratch ? k.view(scr, row * hist * C, s.t * hist * C) : undefined };
    row += s.t;
    return seq;
  });
  const normOut = k.alloc(m * H);
  await k.readBack([{ t: x, offset: 0, length: 1 }]);
  keys = [];
  k.matmulGroup(x, m, group, { w: normW, eps: 1e-6, zeroCentered: true, out: normOut }, { out: conv, w: wc, seqs });
  const ran = keys;
  const outs = await k.readBack([conv, win, scr, z, b, a, qkv].map((t) => ({ t, offset: 0, length: t.length })));
  return { keys: ran, outs: outs as Float32Array[] };
}

const DECODE = (n: number) => Array.from({ length: n }, () => ({ t: 1 }));
const NAMES = ['post-conv rows', 'windows', 'scratch', 'z', 'b', 'a'];

/** Fold on == fold off for `c`, element by element (qkv too where the fold does not run);
 * `folds`: the fold's variant ('decode', 'steps'; 'steps8': on one tile of CONV_STEPS_TILE
 * rows) or null (the conv keeps its dispatch). */
async function foldEqualsCalls(c: Case, folds: 'decode' | 'steps' | 'steps8' | null): Promise<void> {
  const scratchRows = c.seqs.reduce((a, s) => a + (s.scratch ? s.t : 0), 0);
  const carries = folds ? new RegExp(`^qmatmul_acts_${c.dtype}_.*_conv4m1${{ decode: '', steps: 's', steps8: `s_t${CONV_STEPS_TILE}` }[folds]}_norm$`) : null;
  await checkFoldEqualsCalls((on, seed) => runGroup(c, on, seed), 29 + c.seqs.length * 7 + (c.spare ?? 0),
    { names: NAMES, scratch: 2, scratchRows, taps: TAPS, channels: C, carries });
}

describe('webgpu: the conv folded into the quantized in_proj (activation-quantizing kernels) == matmulGroup then causalConvSeqs, bit for bit', () => {
  // a GPU's columns only (one column runs on CPU adapters, which never fold): each variant
  // takes lavapipe 40-90 s to compile with a cold Mesa shader cache
  for (const dtype of ['q8_0', 'q4_k'] as const) {
    for (const columns of [ACTS_COLUMNS]) {
      const at = `${dtype}, ${columns} column${columns > 1 ? 's' : ''} a workgroup`;
      for (const [streams, spare] of [[1, 0], [3, 0], [5, 1]] as const) {
        test(`${at}, ${streams} decode rows${spare ? ' and a row no sequence owns (two tiles)' : ''}`, async () => {
          await foldEqualsCalls({ dtype, seqs: DECODE(streams), spare, columns }, 'decode');
        });
      }
      // the steps variant: verify rows, each sequence within one tile of ACTS_TILE rows
      for (const t of [1, 2, 4]) {
        test(`${at}, a verify of ${t} row${t > 1 ? 's' : ''} to scratch`, async () => {
          await foldEqualsCalls({ dtype, seqs: [{ t, scratch: true }], columns }, 'steps');
        });
      }
      test(`${at}, 3 verifies in two tiles (2, 2 and 3 rows to scratch)`, async () => {
        await foldEqualsCalls({ dtype, seqs: [{ t: 2, scratch: true }, { t: 2, scratch: true }, { t: 3, scratch: true }], columns }, 'steps');
      });
      test(`${at}, a decode row, 3 rows to scratch, 2 rows in place and a row no sequence owns`, async () => {
        await foldEqualsCalls({ dtype, seqs: [{ t: 1 }, { t: 3, scratch: true }, { t: 2 }], spare: 1, columns }, 'steps');
      });
      // sequences across the 4-row tiles: every row in one 8-row tile
      test(`${at}, a verify of 5 rows to scratch (one 8-row tile)`, async () => {
        await foldEqualsCalls({ dtype, seqs: [{ t: 5, scratch: true }], columns }, 'steps8');
      });
      test(`${at}, verifies of 3, 2 and 3 rows to scratch, the second across row 4 (one 8-row tile)`, async () => {
        await foldEqualsCalls({ dtype, seqs: [{ t: 3, scratch: true }, { t: 2, scratch: true }, { t: 3, scratch: true }], columns }, 'steps8');
      });
    }
  }
  // every other type the activation-quantizing kernels serve (the fold's code is the same), qkv's kernel alone
  for (const dtype of ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'q5_k', 'q6_k'] as const) {
    test(`${dtype} qkv (z, b, a BF16), 3 decode rows`, async () => {
      await foldEqualsCalls({ dtype, seqs: DECODE(3), columns: 1, qkvAlone: true }, 'decode');
    });
    test(`${dtype} qkv (z, b, a BF16), a decode row, 3 rows to scratch, 2 rows in place and a row no sequence owns`, async () => {
      await foldEqualsCalls({ dtype, seqs: [{ t: 1 }, { t: 3, scratch: true }, { t: 2 }], spare: 1, columns: 1, qkvAlone: true }, 'steps');
    });
  }
  test('9 decode rows (past the activation-quantizing kernels) keep the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'q8_0', seqs: DECODE(9), columns: 1 }, null);
  });
  test('the activation-quantizing kernels off keep the conv dispatch', async () => {
    await foldEqualsCalls({ dtype: 'q8_0', seqs: DECODE(2), columns: 1, acts: false }, null);
  });
});

/** `model` forward with the fold `on` and a GPU's launches: two chunked prompts (6 rows across
 * two 4-row tiles: the 8-row tile; 3 rows), a decode of one sequence, a decode of two sequences
 * batched, a 3-row verify to scratch; every step's logits, then the conv windows. */
async function forwardAs(model: AnyModel, on: boolean): Promise<{ results: Float32Array[]; keys: string[] }> {
  k.g.useLaunches('gpu', { convFold: on });
  keys = [];
  const results = await convFoldForward(k, model);
  return { results, keys };
}

/** The forward of `path` (`quantize`: at load) with the fold == without; every step's fold as planned. */
function forwardTest(name: string, path: () => string, quantize?: 'q8_0'): void {
  test(name, async () => {
    const model = loadModel(path(), k, quantize ? { quantize } : {}) as unknown as AnyModel;
    const off = await forwardAs(model, false);
    const on = await forwardAs(model, true);
    const count = (ks: string[], re: RegExp) => ks.filter((x) => re.test(x)).length;
    const linear = model.layout.linearLayers.length;
    // the 2 decode steps fold every linear layer's conv; the verify (3 rows to scratch) and
    // the 3-row prompt on the steps variant; the 6-row prompt spans two 4-row tiles: one 8-row tile
    assert.equal(count(on.keys, /^qmatmul_acts_.*_conv\d+m\d+_/), 2 * linear, `each decode step folds every linear layer's conv (${on.keys.join(' ')})`);
    assert.equal(count(on.keys, /^qmatmul_acts_.*_conv\d+m\d+s_norm/), 2 * linear, 'the verify and the 3-row prompt fold on the steps variant');
    assert.equal(count(on.keys, /^qmatmul_acts_.*_conv\d+m\d+s_t8_norm/), linear, 'the 6-row prompt folds on one 8-row tile');
    assert.equal(count(off.keys, /^causal_conv/), 5 * linear, 'fold off: a conv dispatch a layer and step');
    assert.equal(count(on.keys, /^causal_conv/), 0, 'fold on: no conv dispatch');
    assert.equal(on.keys.length, off.keys.length - 5 * linear);
    assert.equal(on.results.length, off.results.length);
    off.results.forEach((h, i) => assert.ok(sameBits(on.results[i]!, h), `result ${i} differs (0-4: logits of each step, then windows, scratch)`));
  });
}

describe('webgpu forward of quantized models with the conv fold == without, bit for bit (logits, conv windows, verify scratch)', () => {
  forwardTest('tiny-think Q8_0 GGUF', GGUF('tiny-think-Q8_0.gguf'));
  forwardTest('tiny-think Q4_K_M GGUF (Q6_K and Q4_K in_proj)', GGUF('tiny-think-Q4_K_M.gguf'));
});

describe('engine on webgpu with a GPU\'s launches forced, tiny-think Q8_0 GGUF: fold on (MTP off and on, batched) == fold off alone, bit for bit', () => {
  const prompts: GenerateRequest[] = [
    { prompt: 'What is 12 + 7?', maxTokens: 5, ignoreEos: true },
    { prompt: 'Name a color.', maxTokens: 4, ignoreEos: true },
  ];
  let folds = { decode: 0, steps: 0 };
  const gpuLaunches = (e: Engine, fold: boolean): void => {
    const g = (e.model.kernels as unknown as WebGpuBoundaryKernels).g;
    g.useLaunches('gpu', { convFold: fold });
    const run = g.run;
    g.run = function (...args: Parameters<typeof run>) {
      if (/^qmatmul_acts_.*_conv\d+m\d+_/.test(args[1])) folds.decode++;
      if (/^qmatmul_acts_.*_conv\d+m\d+s_/.test(args[1])) folds.steps++;
      return run.apply(this, args);
    };
  };
  test('tiny-think Q8_0 GGUF', async () => {
    const base = { model: GGUF('tiny-think-Q8_0.gguf')(), kernels: 'webgpu' as const, specAdaptive: false, kvCacheTokens: 1024, maxContext: 512, prefixCache: false };
    const alone = await withEngine({ ...base, specTokens: 0, maxRunning: 1 }, async (e) => {
      gpuLaunches(e, false);
      const out: RunResult[] = [];
      for (const p of prompts) out.push(...await runAll(e, [p]));
      return out;
    });
    for (const spec of [0, 3]) {
      folds = { decode: 0, steps: 0 };
      // MTP on: three sequences' verify rows (≤ 8) cross the 4-row tiles: one 8-row tile; 9+ rows keep the dispatch
      const batched = await withEngine({ ...base, specTokens: spec, maxRunning: 3, poisonPadding: true }, async (e) => {
        gpuLaunches(e, true);
        const out = await runAll(e, [...prompts, prompts[0]!]);
        if (spec > 0) assert.ok(e.stats().spec.rounds > 0, 'drafts were verified');
        assert.ok(folds.decode > 0, 'a decode step folded its conv');
        if (spec > 0) assert.ok(folds.steps > 0, 'a verify folded its conv (steps variant)');
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

describe('webgpu forward of tiny-next-moe quantized at load with the conv fold == without, bit for bit', () => {
  forwardTest('tiny-next-moe, Q8_0 at load (Qwen3-Next: in_proj_qkvz regrouped)', TINY_NEXT_MOE, 'q8_0');
});
