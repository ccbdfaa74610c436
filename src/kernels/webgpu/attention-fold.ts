// Kernels.attentionBatch with its inputs (AttentionInputs: the q / gate split, the q and k
// head norms, RoPE, the KV write) folded into the decode / verify attention dispatch
// (wgsl/attention-tile.ts foldedInputs): when every sequence of the step is one block of the
// group shape (decode: 1 row; verify: k + 1 ≤ QMAX / G rows), the workgroup of (KV head h,
// sequence s) is the only one that writes or reads s's new rows of head h, so it writes them
// (K normed and rotated, V) to the cache, then its G query heads' rows to Q (and GATE), and
// attends after a storage barrier: one dispatch where attention_inputs + attention were two,
// the same bits (one WGSL text for the norms and RoPE, wgsl/head-inputs.ts). A step with a
// longer sequence (a prefill: several blocks, tile blocks) keeps the separate dispatch.
import type { AttentionDims, AttentionInputs, RopeTable } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { attentionGroupDispatch, attentionGroupShape, groupRowsOf, type KvRun, type StepTable } from './attention-group.js';
import { foldWorkgroupBytes } from './wgsl/attention-tile.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

/** What the fold reads of a step batch (batch.ts GpuStepBatch): the kernel's, and the rope's. */
interface FoldBatch extends StepTable {
  readonly cs: GpuTensor | null;
  readonly rope: RopeTable | null;
}

const forced = new WeakMap<WebGpuKernels, boolean>();

/** Fold the attention inputs where it can (true), never (false), or the adapter's default
 * (null: on every adapter). For tests comparing the two. */
export function forceAttentionFold(g: WebGpuKernels, on: boolean | null): void {
  if (on === null) forced.delete(g);
  else forced.set(g, on);
}

/** Whether `g` folds the attention inputs where it can. */
export function attentionFoldOn(g: WebGpuKernels): boolean {
  return forced.get(g) ?? true;
}

/** Why this step's attention cannot fold its inputs, or null when it can: every sequence one
 * decode / verify block, the group shape with a head row's workgroup memory, q the dense
 * [rows, nH, hd] tensor attention reads, a RoPE table, and the distinct buffers within the
 * adapter's storage bindings. */
export function attentionFoldRefusal(g: WebGpuKernels, out: GpuTensor, q: GpuTensor, qStride: number, a: AttentionInputs<GpuTensor>, b: FoldBatch,
  dims: AttentionDims, runs: readonly KvRun[], fold: readonly GPUBuffer[]): string | null {
  if (!attentionFoldOn(g)) return 'off';
  const shape = attentionGroupShape(g, dims);
  if (!shape || foldWorkgroupBytes(shape) > g.device.limits.maxComputeWorkgroupStorageSize) return 'no group shape';
  if (b.seqs.some((s) => s.t > groupRowsOf(dims))) return 'a sequence of several blocks';
  if (!b.cs || !b.rope) return 'no RoPE table';
  if (qStride !== dims.numHeads * dims.headDim || q.buffer !== a.q.buffer || q.offset !== a.q.offset) return 'q is not the inputs\' q';
  // bound per run: out, q, its cache, the step table, the fold's, and the block table (another
  // upload: counted as a buffer of its own, it may start a new one)
  const most = Math.max(...runs.map((r) => new Set([out.buffer, q.buffer, r.kv.k.buffer, r.kv.v.buffer, b.table.buffer, ...fold]).size + 1));
  if (most > g.adapter.limits.maxStorageBuffersPerShaderStage) return 'too many buffers';
  return null;
}

/** attentionBatch(out, q, …) after attentionInputs(a) in one dispatch per KV run; false
 * (nothing recorded) when attentionFoldRefusal refuses: the caller runs the two. */
export function attentionFoldDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, q: GpuTensor, qStride: number,
  runs: readonly KvRun[], a: AttentionInputs<GpuTensor>, b: FoldBatch, dims: AttentionDims, qw: GpuTensor, kw: GpuTensor): boolean {
  if (a.gated && !a.gate) throw new Error('attentionInputs: a gated layer needs a gate tensor');
  const fold = [a.qg.buffer, a.gate?.buffer ?? g.dummyBuffer, a.k.buffer, a.v.buffer, qw.buffer, kw.buffer];
  if (runs.length === 0 || attentionFoldRefusal(g, out, q, qStride, a, b, dims, runs, fold) !== null) return false;
  const shape = attentionGroupShape(g, dims)!;
  attentionGroupDispatch(g, enc, put, out, q, qStride, runs, b, dims, shape, {
    params: { hd: dims.headDim, half: b.rope!.invFreq.length, gated: a.gated ? 1 : 0, qgOff: a.qg.offset, gateOff: a.gate?.offset ?? 0,
      kOff: a.k.offset, vOff: a.v.offset, csOff: b.cs!.offset, eps: a.eps },
    buffers: fold,
  });
  return true;
}
