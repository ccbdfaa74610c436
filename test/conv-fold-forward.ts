// The forward both conv-fold suites (webgpu-conv-fold, webgpu-conv-fold-quant) run with the
// fold on and off: two chunked prompts (6 rows across two 4-row tiles; 3 rows), a decode of
// one sequence, a decode of two sequences batched, a 3-row verify to scratch. Returns every
// step's logits, then the conv windows (both sequences', then the scratch's).
import type { Tensor } from '../src/kernels/types.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { type AnyModel, allocBatchMemory } from '../src/model/model.js';

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
