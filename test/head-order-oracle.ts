// The Gated DeltaNet output path as it was before the gated norm wrote out_proj's head order
// (and before out_proj could form the norm itself), as a Kernels wrapper: gatedRmsNorm with a
// head order norms in place and then gathers the head blocks (model/layers.ts's former
// permuteHeads: one gatherRows), and gdnRecurrentGatedSeqs runs without perm and project,
// then gathers and calls matmulAdd. A model on the wrapper computes what the model computed
// before; tests compare it bit for bit with the model on the bare kernels.
import type { GdnDims, GdnGating, GdnSeq, Kernels, Tensor, Weight } from '../src/kernels/types.js';
import { allocBatchMemory, type AnyModel, type Model } from '../src/model/model.js';
import { forwardHidden, lmHeadInto } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';

/** Source row of each [dv] block of the permuted [M, HV] blocks: i·HV + order[j]. */
function headRows(order: Int32Array, tokens: number): Int32Array {
  const hv = order.length;
  return Int32Array.from({ length: tokens * hv }, (_, r) => r - (r % hv) + order[r % hv]!);
}

/** `k` with the former output path (module comment). */
export function formerHeadPath<T extends Tensor, I extends Tensor>(k: Kernels<T, I>): Kernels<T, I> {
  const gatedRmsNorm = (out: T, o: T, z: T, w: Weight, m: number, eps: number, order?: Int32Array): void => {
    if (!order) return k.gatedRmsNorm(out, o, z, w, m, eps);
    k.gatedRmsNorm(o, o, z, w, m, eps);
    k.gatherRows(out, o, headRows(order, m / order.length), w.cols);
  };
  const gdnRecurrentGatedSeqs = (out: T, qkv: T, gating: GdnGating<T>, dims: GdnDims, seqs: readonly GdnSeq<T>[]): void => {
    const { perm, project, ...plain } = gating;
    k.gdnRecurrentGatedSeqs(out, qkv, plain, dims, seqs);
    const vd = dims.numValueHeads * dims.valueDim;
    if (perm) k.gatherRows(perm.out, out, headRows(perm.order, (perm.out as { length: number }).length / vd), dims.valueDim);
    if (project) k.matmulAdd(project.x, perm?.out ?? out, project.w, project.m, project.tmp);
  };
  return new Proxy(k, {
    get(target, prop) {
      if (prop === 'gatedRmsNorm') return gatedRmsNorm;
      if (prop === 'gdnRecurrentGatedSeqs') return gdnRecurrentGatedSeqs;
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** A model's steps that exercise every output path of a linear layer: two sequences' chunked
 * prefills in one batch, then one decodes while the other prefills more (a span with a
 * recurrent row), a decode of both, a 3-token verify to scratch, a 3-token in-place step.
 * Every step's logits, then the final states. `read`: the backend's read-back. */
export async function headPathSteps(model: AnyModel, read: (t: Tensor, n: number) => Promise<Float32Array>): Promise<Float32Array[]> {
  const md = model as unknown as Model<Tensor, Tensor>;
  const k = md.kernels;
  const mem = allocBatchMemory(md, 2, 64, 16);
  const ws = new StepArena(md);
  const { layout } = model;
  const scratch = layout.linearLayers.map(() => ({ conv: k.alloc(3 * layout.convSize), ssm: k.alloc(3 * layout.ssmSize) }));
  const v = model.config.vocabSize;
  const got: Float32Array[] = [];
  const step = async (seqs: { s: number; tokens: number[]; start: number; chunked?: boolean; scratch?: boolean }[]): Promise<void> => {
    const fw = forwardHidden(md, ws, seqs.map((q) => ({ tokens: q.tokens, start: q.start, pageTable: mem[q.s]!.pageTable, kv: mem[q.s]!.kv,
      state: mem[q.s]!.state, chunked: q.chunked ?? false, ...(q.scratch ? { scratch } : {}) })));
    const rows = seqs.flatMap((q, i) => q.tokens.map((_, j) => fw.offsets[i]! + j));
    const out = lmHeadInto(md, ws, fw.hidden, rows, ws.logits.rows(rows.length));
    got.push(await read(out, rows.length * v));
  };
  await step([{ s: 0, tokens: [11, 12, 13, 14, 15, 16], start: 0, chunked: true }, { s: 1, tokens: [21, 22, 23], start: 0, chunked: true }]);
  await step([{ s: 0, tokens: [17], start: 6 }, { s: 1, tokens: [24, 25, 26, 27], start: 3, chunked: true }]);
  await step([{ s: 0, tokens: [18], start: 7 }, { s: 1, tokens: [28], start: 7 }]);
  await step([{ s: 0, tokens: [19, 20, 21], start: 8, scratch: true }]);
  await step([{ s: 1, tokens: [29, 30, 31], start: 8 }]);
  for (const m of mem) for (const st of m.state) got.push(await read(st.ssm, layout.ssmSize));
  return got;
}
