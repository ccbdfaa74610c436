// Dispatches per step on webgpu do not grow with the number of streams (issue #47:
// kvWrite, rope, attention, conv and GDN take the whole batch in one dispatch each), on
// tiny-think, in decode and in prefill (every chunked GDN prefill of a step in one
// dispatch, Kernels.gdnChunkedSeqs; the admitted requests' state slots zeroed by one fill,
// StatePool.flushZeros):
// - the bench's step (cli/bench-run.ts, `bench --kernels webgpu`): its batch memory
//   (model.ts allocBatchMemory) shares each layer's buffers as the engine's pools do, so 4
//   streams take the dispatches of 1 (each stream's own buffers took +15 per stream);
// - the bench's prefill step: 32 sequences take the dispatches of 1 (each took +6 before:
//   one chunked GDN per sequence and layer);
// - the engine's steps (KvPool, StatePool): 4 concurrent requests == 1 request, decode and
//   the prefill step that admits them (each request took +7 there before), but for the lm_head's
//   gather_rows of the prompts' last rows (one prompt's: a view, no dispatch);
// - exactness: a batch over the shared memory gives each sequence the bits it gets alone;
// - quantized GGUF weights (tiny-think Q8_0 / Q4_K_M, tiny-moe Q4_K_M) against their BF16
//   GGUF twins, per decode step: a matmulGroup's norm folds into its activation
//   quantization (rms_norm dispatches == the BF16 model's; before: +1 per group), and a
//   group's weights of one quant type are one dispatch (Q8_0: matmul dispatches == BF16's;
//   Q4_K_M: + at most one per layer for a group mixing q4_k and q6_k), and a gated
//   matmulAdd's product folds into its activation quantization (mul_silu / mul_sigmoid
//   dispatches == the BF16 model's). Before (decode step, 8 layers, with the one-gather
//   head order): Q8_0 148 dispatches, Q4_K_M 148, MoE Q4_K_M 620; after 92, 96, 584;
//   with the unnormed projections quantizing their own input at M ≤ 4: Q8_0 75
//   (BF16: 53, 397).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Tensor } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { CONV_FOLD_MAX_ROWS } from '../src/kernels/webgpu/conv-launch.js';
import { benchOnce } from '../src/cli/bench-run.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { type AnyModel, allocBatchMemory, allocSequenceMemory, loadModel, type SequenceMemory } from '../src/model/model.js';
import { Rng } from '../src/util/rng.js';
import { sameBits, withEngine } from './engine-helpers.js';
import { TINY_THINK, sharedPath } from './paths.js';
import { labelsPerStep } from './webgpu-step-labels.js';
import { dispatchesPerReadBack, gpuUnderTest } from './webgpu-helpers.js';

let k: WebGpuBoundaryKernels;
let model: AnyModel;
before(async () => {
  k = new WebGpuBoundaryKernels(await gpuUnderTest());
  model = await loadModel(TINY_THINK(), k) as unknown as AnyModel;
});
after(() => k?.dispose());

/** Dispatches per timed step of the bench at `streams` streams (decode: after a 3-token
 * prompt; prefill: a `prompt`-token chunked prefill per stream). */
async function benchDispatches(streams: number, mode: 'decode' | 'prefill' = 'decode', prompt = 3): Promise<number> {
  let from = { dispatches: 0, steps: 0 };
  const run = await benchOnce(model, mode, streams, prompt, 2, 1, new Rng(5), () => { from = { ...k.counters }; });
  assert.equal(k.counters.steps - from.steps, run.steps, 'one read-back per timed step');
  return (k.counters.dispatches - from.dispatches) / run.steps;
}

/** The last row's logits of each sequence after a prompt step and one decode step. */
async function lastLogits(mems: readonly SequenceMemory<Tensor>[], prompts: readonly number[][]): Promise<Float32Array[]> {
  const ws = new StepArena(model);
  const input = (i: number, tokens: number[], start: number): SeqInput<Tensor> =>
    ({ tokens, start, pageTable: mems[i]!.pageTable, kv: mems[i]!.kv, state: mems[i]!.state, chunked: false });
  forwardHidden(model, ws, prompts.map((p, i) => input(i, p, 0)));
  const fw = forwardHidden(model, ws, prompts.map((p, i) => input(i, [(p[0]! * 7) % 900], p.length)));
  const rows = prompts.map((_, i) => i);
  const v = model.config.vocabSize;
  const out = lmHeadInto(model, ws, fw.hidden, rows, ws.logits.rows(rows.length));
  const [all] = await model.kernels.readBack([{ t: out, offset: 0, length: rows.length * v }]);
  return rows.map((r) => all!.slice(r * v, (r + 1) * v));
}

describe('webgpu dispatches per step vs streams (decode and prefill)', () => {
  test('bench step: 4 streams take the dispatches of 1 stream', async () => {
    const one = await benchDispatches(1);
    const four = await benchDispatches(4);
    assert.ok(one > 0, 'the step dispatched');
    assert.equal(four, one, `dispatches per decode step: ${four} at 4 streams vs ${one} at 1`);
  });

  test('bench prefill step: 32 sequences take the dispatches of 1 sequence', async () => {
    // one token each: lavapipe's time grows with the rows, the dispatch count must not
    const one = await benchDispatches(1, 'prefill', 1);
    const many = await benchDispatches(32, 'prefill', 1);
    assert.ok(one > 0, 'the step dispatched');
    assert.equal(many, one, `dispatches per prefill step: ${many} at 32 sequences vs ${one} at 1`);
  });

  test('a batch over the shared memory == each sequence alone (logits bit for bit)', async () => {
    const prompts = [[11, 12, 13], [40, 41, 42, 43, 44], [300, 7], [9, 99, 999, 5]];
    const shared = await lastLogits(allocBatchMemory(model, prompts.length, 16), prompts);
    for (const [i, p] of prompts.entries()) {
      const [alone] = await lastLogits([allocSequenceMemory(model, 16)], [p]);
      assert.ok(sameBits(shared[i]!, alone!), `sequence ${i}: logits in the batch differ from alone`);
    }
  });

  const PROMPT = [1, 2, 3, 4, 5, 6];
  /** Dispatches of each engine step (prefill first) serving n concurrent requests, and the
   * conv dispatches a prefill of n prompts keeps (the conv fold takes ≤ CONV_FOLD_MAX_ROWS rows). */
  const engineSteps = async (n: number): Promise<{ steps: number[]; convs: number }> =>
    withEngine({ model: TINY_THINK(), kernels: 'webgpu', specAdaptive: false, kvCacheTokens: 1024, maxContext: 256, specTokens: 0, prefixCache: false, maxRunning: n }, async (e) => {
      const g = e.model.kernels as unknown as WebGpuBoundaryKernels;
      const perStep = dispatchesPerReadBack(g);
      const req = { promptIds: PROMPT, maxTokens: 4, ignoreEos: true };
      await Promise.all(Array.from({ length: n }, () => e.complete(req)));
      const folds = g.g.convFold && n * PROMPT.length <= CONV_FOLD_MAX_ROWS;
      return { steps: perStep, convs: folds ? 0 : e.model.layout.linearLayers.length };
    });

  test('engine steps: 4 concurrent requests take the dispatches of 1 request, in the prefill step that admits them and in decode', async () => {
    const { steps: [onePrefill, ...one], convs: oneConvs } = await engineSteps(1);
    const { steps: [fourPrefill, ...four], convs: fourConvs } = await engineSteps(4);
    assert.ok(one.length >= 2 && one.every((d) => d === one[0]), `1 request: ${one.join(', ')}`);
    assert.deepEqual(four, one, 'dispatches per decode step, 4 requests vs 1');
    // the lm_head reads one prompt's last row through a view (forward.ts lmHeadInto); the last rows
    // of 4 prompts are not contiguous: one gather_rows more, whatever the number of prompts. On the
    // gpu launch profile 6 prompt rows fold the conv into in_proj and 24 do not: a conv dispatch
    // a linear layer more.
    assert.equal(fourPrefill, onePrefill! + 1 + fourConvs - oneConvs, `dispatches of the prefill step: ${fourPrefill} at 4 requests vs ${onePrefill} at 1`);
  });
});

const sum = (c: Map<string, number>, f: (label: string) => boolean): number => [...c].filter(([l]) => f(l)).reduce((a, [, n]) => a + n, 0);
const isMatmul = (l: string): boolean => l.startsWith('matmul_');
const gguf = (name: string): string => sharedPath('models', 'gguf', name);
const isGateProduct = (l: string): boolean => l === 'mul_silu' || l === 'mul_sigmoid';

describe('webgpu quantized decode dispatches vs the BF16 twin (issue #47)', () => {
  // a GPU's dispatches: the unnormed projections quantize their own input (off by default on a CPU adapter)
  before(() => { k.g.foldQuantActs = true; });
  after(() => { k.g.foldQuantActs = false; });
  test('tiny-think Q8_0 and Q4_K_M: norms folded, one matmul dispatch per group and quant type', async () => {
    const bf16 = await labelsPerStep(gguf('tiny-think-BF16.gguf'), k);
    const layers = 8;
    for (const [name, extraMatmuls] of [['tiny-think-Q8_0.gguf', 0], ['tiny-think-Q4_K_M.gguf', layers]] as const) {
      const q = await labelsPerStep(gguf(name), k);
      const what = `${name}: ${JSON.stringify(Object.fromEntries(q))}`;
      assert.equal(q.get('rms_norm') ?? 0, bf16.get('rms_norm') ?? 0, `rms_norm dispatches per step, ${what}`);
      assert.equal(sum(q, isGateProduct), sum(bf16, isGateProduct), `gate product dispatches per step, ${what}`);
      assert.ok(sum(q, isMatmul) <= sum(bf16, isMatmul) + extraMatmuls, `matmul dispatches per step ${sum(q, isMatmul)} vs BF16 ${sum(bf16, isMatmul)}, ${what}`);
      // one activation quantization per matmul call at most (BF16: one dispatch per call)
      // decode (M = 1): the unnormed projections (out_proj, o_proj, down_proj, lm_head) quantize
      // their own input in the matmul's dispatch (wgsl/qmatmul-acts.ts; before: + one quant_acts each)
      assert.equal(q.get('quant_acts') ?? 0, 0, `quant_acts dispatches per decode step, ${what}`);
      const acts = sum(q, (l) => l === 'rms_norm' || l === 'quant_acts' || l === 'norm_quant_acts');
      assert.ok(acts <= sum(bf16, isMatmul) + (bf16.get('rms_norm') ?? 0), `norm + quantization dispatches per step ${acts}, ${what}`);
    }
  });

  test('tiny-moe Q4_K_M: the group norms fold into the quantized matmuls, the gate products into the activation quantization', async () => {
    const bf16 = await labelsPerStep(gguf('tiny-moe-BF16.gguf'), k);
    const q = await labelsPerStep(gguf('tiny-moe-Q4_K_M.gguf'), k);
    assert.equal(q.get('rms_norm') ?? 0, bf16.get('rms_norm') ?? 0, `rms_norm dispatches per step: ${JSON.stringify(Object.fromEntries(q))}`);
    // decode (M = 1 ≤ ACTS_TILE): each workgroup norms and quantizes its rows (wgsl/qmatmul-acts-group.ts)
    assert.equal(q.get('norm_quant_acts') ?? 0, 0, `the normed groups fold their norm: ${JSON.stringify(Object.fromEntries(q))}`);
    assert.equal(sum(q, isGateProduct), sum(bf16, isGateProduct), `gate product dispatches per step: ${JSON.stringify(Object.fromEntries(q))}`);
  });
});
