// The batched causal conv (Kernels.causalConvSeqs) on webgpu launched both ways
// (kernels/webgpu/conv-launch.ts): 'thread' (64 channels per workgroup, taps a parameter,
// CAUSAL_CONV_SEQS) and 'channels' (one-warp workgroups, taps compiled in and held in
// registers, convChannelsShader) must give the same bits: outputs, in-place windows and
// every verify scratch snapshot, for a batch of sequences of different lengths (decode,
// 0 tokens, multi-token in place and to scratch), channel counts that leave a partial
// workgroup, 2 to 8 taps (past 8 the channel launch falls back to 'thread'); and
// tiny-think's forward (prompt, decode, a 3-token verify to scratch, a 3-token in-place
// step) gives the same logits and conv windows either way.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ConvSeq, Tensor } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import type { ConvLaunch } from '../src/kernels/webgpu/launches.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { type AnyModel, allocSequenceMemory, loadModel } from '../src/model/model.js';
import { TINY_THINK } from './paths.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
let keys: string[] = [];
before(async () => {
  k = new WebGpuBoundaryKernels(await gpuUnderTest());
  const run = k.g.run;
  // every dispatch's pipeline key, so a test can see which launch ran
  k.g.run = function (...args: Parameters<typeof run>) {
    keys.push(args[1]);
    return run.apply(this, args);
  };
});
after(() => { k?.dispose(); });

const ref = createRefKernels();
// decode, empty, 3-token verify to scratch, 2 tokens in place, decode to scratch, 5 in place
const TS = [1, 0, 3, 2, 1, 5];
const SCRATCH = [false, false, true, false, true, false];

interface Result { keys: string[]; out: Float32Array; windows: Float32Array; scratch: Float32Array }

/** Every sequence of TS in one causalConvSeqs call over `c` channels and `taps` taps, launched as `launch`. */
async function runAs(launch: ConvLaunch, c: number, taps: number, seed: number): Promise<Result> {
  k.g.useLaunches('cpu', { convLaunch: launch });
  const r = rng(seed);
  const sym = (n: number) => Float32Array.from({ length: n }, () => 4 * r() - 2);
  const rows = TS.reduce((a, b) => a + b, 0);
  const hist = taps - 1;
  const up = (a: Float32Array): GpuTensor => { const t = k.alloc(a.length); k.write(t, 0, a); return t; };
  const x = up(sym(rows * c));
  const windows = up(sym(TS.length * hist * c)); // every window in one buffer (as the engine's state pool)
  const w = randomWeight(ref, 'f32', c, taps, () => r() - 0.5);
  const out = up(new Float32Array(rows * c).fill(-3));
  const scr = up(new Float32Array(rows * hist * c).fill(-7));
  let row = 0;
  const seqs: ConvSeq<GpuTensor>[] = TS.map((t, i) => {
    const s = { row, t, window: k.view(windows, i * hist * c, hist * c), scratch: SCRATCH[i] ? k.view(scr, row * hist * c, t * hist * c) : undefined };
    row += t;
    return s;
  });
  await k.readBack([{ t: x, offset: 0, length: 1 }]);
  keys = [];
  k.causalConvSeqs(out, x, w, seqs);
  const ran = keys;
  const [o, win, sc] = await k.readBack([out, windows, scr].map((t) => ({ t, offset: 0, length: t.length })));
  return { keys: ran, out: o!, windows: win!, scratch: sc! };
}

const CASES: [number, number][] = [[100, 4], [64, 4], [8192, 4], [37, 2], [70, 3], [33, 8]];

describe('webgpu causal conv: the channel launch == the thread launch, bit for bit', () => {
  for (const [c, taps] of CASES) {
    test(`${c} channels, ${taps} taps`, async () => {
      const thread = await runAs('thread', c, taps, c + taps);
      const chans = await runAs('channels', c, taps, c + taps);
      assert.deepEqual(thread.keys, ['causal_conv_seqs'], 'thread launch: one dispatch of the 64-thread kernel');
      assert.deepEqual(chans.keys, [`causal_conv_channels_${taps}`], 'channel launch: one dispatch of the channel kernel');
      assert.ok(!thread.out.includes(-3), 'every output row was written');
      assert.ok(sameBits(chans.out, thread.out), 'outputs differ');
      assert.ok(sameBits(chans.windows, thread.windows), 'in-place windows differ');
      assert.ok(sameBits(chans.scratch, thread.scratch), 'verify scratch snapshots differ');
      const fresh = await runAs('thread', c, taps, c + taps + 1);
      assert.ok(!sameBits(fresh.out, thread.out), 'another input gives other outputs (the comparison can fail)');
    });
  }
  test('9 taps: the channel launch falls back to the thread kernel', async () => {
    const chans = await runAs('channels', 40, 9, 9);
    assert.deepEqual(chans.keys, ['causal_conv_seqs']);
  });
});

/** tiny-think on `launch`: a chunked 6-token prompt, a decode step, a 3-token verify to
 * scratch, a 3-token in-place step; every step's logits, then the conv windows and scratch. */
async function forwardAs(model: AnyModel, launch: ConvLaunch): Promise<{ results: Float32Array[]; keys: string[] }> {
  k.g.useLaunches('cpu', { convLaunch: launch });
  keys = [];
  const mem = allocSequenceMemory(model, 64);
  const ws = new StepArena(model);
  const { layout } = model;
  const scratch = layout.linearLayers.map(() => ({ conv: k.alloc(3 * layout.convSize), ssm: k.alloc(3 * layout.ssmSize) }));
  const v = model.config.vocabSize;
  const got: Float32Array[] = [];
  const step = async (tokens: number[], start: number, extra: Partial<SeqInput<Tensor>>): Promise<void> => {
    const fw = forwardHidden(model, ws, [{ tokens, start, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: false, ...extra }]);
    const rows = tokens.map((_, i) => fw.offsets[0]! + i);
    const out = lmHeadInto(model, ws, fw.hidden, rows, ws.logits.rows(rows.length));
    const [logits] = await k.readBack([{ t: out as GpuTensor, offset: 0, length: rows.length * v }]);
    got.push(logits!);
  };
  await step([11, 12, 13, 14, 15, 16], 0, { chunked: true });
  await step([17], 6, {});
  await step([18, 19, 20], 7, { scratch });
  await step([21, 22, 23], 7, {});
  const ran = keys;
  const tensors = [...mem.state.map((s) => s.conv), ...scratch.map((s) => s.conv)] as unknown as GpuTensor[];
  got.push(...await k.readBack(tensors.map((t) => ({ t, offset: 0, length: t.length }))) as Float32Array[]);
  return { results: got, keys: ran };
}

test('tiny-think forward: the channel launch == the thread launch, bit for bit (logits, conv windows, verify scratch)', async () => {
  const model = await loadModel(TINY_THINK(), k) as unknown as AnyModel;
  const thread = await forwardAs(model, 'thread');
  const chans = await forwardAs(model, 'channels');
  const count = (ks: string[], prefix: string) => ks.filter((x) => x.startsWith(prefix)).length;
  assert.ok(count(chans.keys, 'causal_conv_channels_') > 0, 'the channel launch ran');
  assert.equal(count(chans.keys, 'causal_conv_seqs'), 0, 'no recurrent conv took the thread kernel');
  assert.equal(count(chans.keys, 'causal_conv_channels_'), count(thread.keys, 'causal_conv_seqs'), 'one conv dispatch replaced by one');
  assert.equal(chans.results.length, thread.results.length);
  thread.results.forEach((h, i) => assert.ok(sameBits(chans.results[i]!, h), `result ${i} differs (0-3: logits of each step, then windows, scratch)`));
});
