// The plain forms of Kernels.matmulGroup (one matmul call per entry) and Kernels.matmulAdd
// (matmul, then add), for backends that do not fuse them (ref; wasm for matmulAdd). Their
// results define the fused calls': a specialised backend must give the same bits.
import type { GatedInput, GroupConv, GroupMatmul, GroupNorm, Kernels, Tensor, Weight } from './types.js';

/** Checks every backend's matmulGroup makes of its arguments: m ≥ 0 and every weight has
 * the same inner size (x: [M, K]). Returns K (0 for an empty group). */
export function groupInnerSize<T extends Tensor>(group: readonly GroupMatmul<T>[], m: number): number {
  if (!Number.isInteger(m) || m < 0) throw new RangeError(`matmulGroup: m = ${m}`);
  const k = group[0]?.w.cols ?? 0;
  for (const g of group) {
    if (g.w.cols !== k) throw new RangeError(`matmulGroup: weights of ${k} and ${g.w.cols} columns share one input`);
  }
  return k;
}

/** The group's input: x, or rmsNorm(x) written to norm.out (the plain form of a norm). */
export function normedInput<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'rmsNorm'>, x: T, m: number, norm: GroupNorm<T> | undefined): T {
  if (!norm) return x;
  k.rmsNorm(norm.out, x, norm.w, m, norm.eps, norm.zeroCentered);
  return norm.out;
}

/** matmul(out, x, w, m) for every entry, in order (after the norm, if any), then the conv. */
export function matmulGroupByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'matmul' | 'rmsNorm' | 'causalConvSeqs'>, x: T, m: number,
  group: readonly GroupMatmul<T>[], norm?: GroupNorm<T>, conv?: GroupConv<T>): void {
  groupInnerSize(group, m);
  const input = normedInput(k, x, m, norm);
  for (const g of group) k.matmul(g.out, input, g.w, m);
  groupConvByCall(k, group, conv);
}

/** The plain form of a matmulGroup's conv: causalConvSeqs on group[0].out. */
export function groupConvByCall<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'causalConvSeqs'>, group: readonly GroupMatmul<T>[], conv?: GroupConv<T>): void {
  if (!conv) return;
  if (group.length === 0) throw new RangeError('matmulGroup: a conv without a group entry to read');
  k.causalConvSeqs(conv.out, group[0]!.out, conv.w, conv.seqs);
}

/** x ← x ⊙ act(gate.b) (if gated), matmul(tmp, x, w, m), then out += tmp. */
export function matmulAddByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'matmul' | 'add' | 'mulSilu' | 'mulSigmoid'>, out: T, x: T, w: Weight,
  m: number, tmp: T, gate?: GatedInput<T>): void {
  if (gate?.act === 'silu') k.mulSilu(x, x, gate.b, m * w.cols);
  else if (gate) k.mulSigmoid(x, x, gate.b, m * w.cols);
  k.matmul(tmp, x, w, m);
  k.add(out, out, tmp, m * w.rows);
}
