// Shared by the conv-fold suites (webgpu-conv-fold, webgpu-conv-fold-quant): the check that a
// fold equals matmulGroup then causalConvSeqs, and the model forward they run with the fold on
// and off: two chunked prompts (6 rows across two 4-row tiles; 3 rows), a decode of
// one sequence, a decode of two sequences batched, a 3-row verify to scratch. Returns every
// step's logits, then the conv windows (both sequences', then the scratch's).
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { GroupMatmul, Tensor, Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { type AnyModel, allocBatchMemory } from '../src/model/model.js';
import { sameBits } from './engine-helpers.js';

export async function convFoldForward(k: WebGpuBoundaryKernels, model: AnyModel): Promise<Float32Array[]> {
  // one allocation per layer for both sequences' windows (as the engine's state pool): the batched decode folds too
  const mems = allocBatchMemory(model, 2, 64);
  const ws = new StepArena(model);
  const { layout } = model;
  const scratch = layout.linearLayers.map(() => ({ conv: k.alloc(3 * layout.convSize), ssm: k.alloc(3 * layout.ssmSize) }));
  const v = model.config.vocabSize;
  const got: Float32Array[] = [];
  const step = async (inputs: { tokens: number[]; start: number; seq: number; extra?: Partial<SeqInput<Tensor>> }[]): Promise<void> => {
    const fw = forwardHidden(model, ws, inputs.map(({ tokens, start, seq, extra }) => {
      const mem = mems[seq]!;
      return { tokens, start, pageTable: mem.pageTable, kv: mem.kv, state: mem.state, chunked: false, ...extra };
    }));
    const rows = inputs.flatMap((s, i) => s.tokens.map((_, j) => fw.offsets[i]! + j));
    const out = lmHeadInto(model, ws, fw.hidden, rows, ws.logits.rows(rows.length));
    const [logits] = await k.readBack([{ t: out as GpuTensor, offset: 0, length: rows.length * v }]);
    got.push(logits!);
  };
  await step([{ tokens: [11, 12, 13, 14, 15, 16], start: 0, seq: 0, extra: { chunked: true } }]);
  await step([{ tokens: [31, 32, 33], start: 0, seq: 1, extra: { chunked: true } }]);
  await step([{ tokens: [17], start: 6, seq: 0 }]);
  await step([{ tokens: [18], start: 7, seq: 0 }, { tokens: [34], start: 3, seq: 1 }]);
  await step([{ tokens: [19, 20, 21], start: 8, seq: 0, extra: { scratch } }]);
  const tensors = [...mems.flatMap((mem) => mem.state.map((s) => s.conv)), ...scratch.map((s) => s.conv)] as unknown as GpuTensor[];
  got.push(...await k.readBack(tensors.map((t) => ({ t, offset: 0, length: t.length }))) as Float32Array[]);
  return got;
}

/** What one runGroup call of a conv-fold suite gave: the dispatch labels its matmulGroup
 * recorded, and its outputs read back (post-conv rows first, the windows second). */
export interface FoldRun { readonly keys: string[]; readonly outs: Float32Array[] }

/** Fold on == fold off, element by element, for one case of a conv-fold suite: `run(on,
 * seed)` runs it; `names` label the outputs compared (all but qkv, the last, compared only
 * where the conv keeps its dispatch); `scratch` is the scratch windows' index (filled with −7
 * before, so exactly `scratchRows` × (taps − 1) × channels elements are written); `carries`:
 * the fold's matmul variant among the on run's labels, or null when the conv keeps its
 * dispatch. A second input must change the rows and windows (the comparison can fail). */
export async function checkFoldEqualsCalls(run: (on: boolean, seed: number) => Promise<FoldRun>, seed: number,
  o: { names: readonly string[]; scratch: number; scratchRows: number; taps: number; channels: number; carries: RegExp | null }): Promise<void> {
  const off = await run(false, seed);
  const on = await run(true, seed);
  const convs = (ks: string[]) => ks.filter((x) => x.startsWith('causal_conv')).length;
  assert.ok(convs(off.keys) > 0, 'fold off: the conv ran as its own dispatch');
  if (o.carries) {
    assert.equal(convs(on.keys), 0, 'fold on: no conv dispatch');
    assert.equal(on.keys.length, off.keys.length - convs(off.keys), `fold on: the conv dispatch went away (${on.keys.join(' ')})`);
    assert.ok(on.keys.some((x) => o.carries!.test(x)), `a matmul variant carries the fold (${on.keys.join(' ')})`);
  } else assert.deepEqual(on.keys, off.keys, 'no fold: the same dispatches');
  assert.ok(!off.outs[0]!.slice(0, o.channels).includes(-3), 'the first row\'s conv was written');
  o.names.forEach((name, i) => assert.ok(sameBits(on.outs[i]!, off.outs[i]!), `${name} differ`));
  const qkv = o.names.length;
  if (!o.carries) assert.ok(sameBits(on.outs[qkv]!, off.outs[qkv]!), 'qkv differ');
  const written = (a: Float32Array) => a.filter((v) => v !== -7).length;
  assert.equal(written(off.outs[o.scratch]!), o.scratchRows * (o.taps - 1) * o.channels, 'every scratch step\'s window was written (and nothing else)');
  const other = await run(true, seed + 1);
  assert.ok(!sameBits(other.outs[0]!, on.outs[0]!) && !sameBits(other.outs[1]!, on.outs[1]!), 'another input gives other rows and windows (the comparison can fail)');
  if (o.scratchRows > 0) assert.ok(!sameBits(other.outs[o.scratch]!, on.outs[o.scratch]!), 'another input gives other scratch windows');
}

/** A conv-fold case's outputs (qkv, conv, z, b, a; −3 before the run), each its own buffer as
 * the step arena holds them (StepArena: a ScratchRows a field, a buffer each), and the in_proj
 * group writing them from `ws` (qkv, z, b, a). One shared buffer (as before) ran the kernels'
 * alias-folded variants, which the engine never runs: ~20 pipelines no other test compiled. */
export function groupOutputs(k: WebGpuBoundaryKernels, m: number, dims: { c: number; zw: number; hv: number }, ws: readonly Weight[]):
  { qkv: GpuTensor; conv: GpuTensor; z: GpuTensor; b: GpuTensor; a: GpuTensor; group: GroupMatmul<GpuTensor>[] } {
  const { c: C, zw: ZW, hv: HV } = dims;
  const rows = (width: number): GpuTensor => {
    const t = k.alloc(m * width);
    k.write(t, 0, new Float32Array(t.length).fill(-3));
    return t;
  };
  const [qkv, conv, z, b, a] = [rows(C), rows(C), rows(ZW), rows(HV), rows(HV)];
  return { qkv, conv, z, b, a, group: [{ out: qkv, w: ws[0]! }, { out: z, w: ws[1]! }, { out: b, w: ws[2]! }, { out: a, w: ws[3]! }] };
}

/** The suites' kernels, made before the file's tests (`use` receives them), each
 * dispatch's pipeline key passed to `dispatched` (so a test can see what ran); disposed after
 * the tests. */
export function convFoldKernels(use: (k: WebGpuBoundaryKernels) => void, dispatched: (key: string) => void): void {
  let k: WebGpuBoundaryKernels | null = null;
  before(async () => {
    k = new WebGpuBoundaryKernels(await gpuUnderTest());
    const run = k.g.run;
    k.g.run = function (...args: Parameters<typeof run>) {
      dispatched(args[1]);
      return run.apply(this, args);
    };
    use(k);
  });
  after(() => { k?.dispose(); });
}
