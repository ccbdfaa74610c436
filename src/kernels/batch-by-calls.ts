// The plain forms of the Kernels calls over a step's batch (stepBatch, ropeBatch,
// kvWriteBatch, attentionBatch, attentionInputs): one per-sequence call each, for backends that run them
// per sequence (ref, wasm). Their results define the batched calls': a backend that runs a
// batch as one dispatch (webgpu) must give the same bits as these loops.
import type { AttentionDims, AttentionInputs, BatchMrope, BatchSeq, Kernels, KvLayerView, RopeTable, StepBatch, Tensor } from './types.js';

/** A host StepBatch, with each sequence's positions (start..start+t−1). */
export interface HostStepBatch extends StepBatch {
  readonly positions: readonly Int32Array[];
}

/** Checks every backend makes of a batch: rows stacked in order, t ≥ 0, start ≥ 0. */
export function checkBatchSeqs(seqs: readonly BatchSeq[]): number {
  let row = 0;
  for (const [i, s] of seqs.entries()) {
    if (s.row !== row || !(Number.isInteger(s.t) && s.t >= 0) || !(Number.isInteger(s.start) && s.start >= 0)) {
      throw new RangeError(`stepBatch: sequence ${i} (row ${s.row}, t ${s.t}, start ${s.start}) is not stacked after row ${row}`);
    }
    row += s.t;
  }
  return row;
}

export function stepBatchOnHost(seqs: readonly BatchSeq[], rope: RopeTable | null): HostStepBatch {
  const rows = checkBatchSeqs(seqs);
  const positions = seqs.map((s) => Int32Array.from({ length: s.t }, (_, j) => s.start + j));
  return { seqs, rows, rope, positions };
}

function hostBatch(b: StepBatch): HostStepBatch {
  if (!('positions' in b)) throw new Error('a step batch of another backend (Kernels.stepBatch)');
  return b as HostStepBatch;
}

function seqKv<T extends Tensor>(kv: readonly KvLayerView<T>[], b: StepBatch, i: number): KvLayerView<T> {
  if (kv.length !== b.seqs.length) throw new RangeError(`${kv.length} KV views for a batch of ${b.seqs.length} sequences`);
  return kv[i]!;
}

export function ropeByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'rope' | 'view'>, x: T, b: StepBatch, heads: number,
  headDim: number, stride: number): void {
  const hb = hostBatch(b);
  if (!b.rope) throw new Error('ropeBatch: the step batch was made without a RoPE table');
  b.seqs.forEach((s, i) => {
    if (s.t <= 0) return;
    const rows = k.view(x, s.row * stride, (s.t - 1) * stride + heads * headDim);
    if (!s.mrope) k.rope(rows, hb.positions[i]!, s.t, heads, headDim, b.rope!, stride);
    else for (const axis of [0, 1, 2]) k.rope(rows, s.mrope.positions.subarray(axis * s.t, (axis + 1) * s.t), s.t, heads, headDim, axisTable(b.rope!, s.mrope, axis), stride);
  });
}

/** The rope table of one mrope axis: the other axes' pairs get frequency 0, i.e. angle 0,
 * cos 1, sin 0 — an exact identity (x·1 − y·0 = x) — so the three passes turn each pair once,
 * by its own axis' position: the bits of a one-pass multimodal rope. */
export function axisTable(rope: RopeTable, m: BatchMrope, axis: number): RopeTable {
  if (rope.scale !== 1) throw new RangeError(`multimodal RoPE with a scaled table (attention factor ${rope.scale}) is not supported`);
  if (m.pairAxes.length !== rope.invFreq.length) throw new RangeError(`mrope: ${m.pairAxes.length} pair axes for ${rope.invFreq.length} rotary pairs`);
  return { invFreq: rope.invFreq.map((f, j) => (m.pairAxes[j] === axis ? f : 0)), scale: 1 };
}

export function kvWriteByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'kvWrite' | 'view'>, kv: readonly KvLayerView<T>[],
  b: StepBatch, kk: T, v: T, kvDim: number): void {
  b.seqs.forEach((s, i) => {
    const rows = (buf: T): T => k.view(buf, s.row * kvDim, s.t * kvDim);
    if (s.t > 0) k.kvWrite(seqKv(kv, b, i), s.pageTable, s.start, rows(kk), rows(v), s.t, kvDim);
  });
}

export function attentionByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'attention' | 'view'>, out: T, q: T, qStride: number,
  kv: readonly KvLayerView<T>[], b: StepBatch, dims: AttentionDims): void {
  const qd = dims.numHeads * dims.headDim;
  b.seqs.forEach((s, i) => {
    if (s.t <= 0) return;
    k.attention(k.view(out, s.row * qd, s.t * qd), k.view(q, s.row * qStride, (s.t - 1) * qStride + qd), qStride, seqKv(kv, b, i),
      s.pageTable, s.start, s.t, dims);
  });
}

/** The attention inputs as separate calls: split q / gate, head norms, RoPE, KV write. */
export function attentionInputsByCalls<T extends Tensor>(
  k: Pick<Kernels<T, Tensor>, 'copyRows' | 'rmsNorm' | 'ropeBatch' | 'kvWriteBatch'>, a: AttentionInputs<T>, b: StepBatch, dims: AttentionDims): void {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
  const m = b.rows;
  if (a.gated) { // split every (row, head) of qg into its query and gate halves
    if (!a.gate) throw new Error('attentionInputs: a gated layer needs a gate tensor');
    k.copyRows(a.q, 0, hd, a.qg, 0, 2 * hd, m * nh, hd);
    k.copyRows(a.gate, 0, hd, a.qg, hd, 2 * hd, m * nh, hd);
  }
  k.rmsNorm(a.q, a.q, a.qNorm, m * nh, a.eps, true);
  k.rmsNorm(a.k, a.k, a.kNorm, m * nkv, a.eps, true);
  k.ropeBatch(a.q, b, nh, hd, nh * hd);
  k.ropeBatch(a.k, b, nkv, hd, nkv * hd);
  k.kvWriteBatch(a.kv, b, a.k, a.v, nkv * hd);
}
