// A step's batch on the GPU (Kernels.stepBatch): the row and sequence table and every
// row's RoPE angles go up once per forward, through the upload arena; RoPE, the KV write
// and attention then take every sequence of the batch in one dispatch per layer
// (wgsl/batch.ts). Sequences whose caches are different tensors (tests give each its own)
// run one dispatch each over the same table.
import type { AttentionDims, AttentionInputs, BatchSeq, KvLayerView, RopeTable, StepBatch } from '../types.js';
import { checkBatchSeqs } from '../batch-by-calls.js';
import { ropeTable, type WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { grid } from './wgsl/common.js';
import { packParams } from './params.js';
import { ATTENTION_BATCH, ATTENTION_INPUTS, KV_WRITE_BATCH, ROPE_BATCH } from './wgsl/batch.js';
import { attentionGroupDispatch, attentionGroupShape } from './attention-group.js';
import { attentionFoldDispatch } from './attention-fold.js';
import { ROW_MAX_HEAD_DIM } from './wgsl/attention.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

/** The attention inputs attentionBatch runs first: the operands, the norm weights' vectors,
 * and the separate calls where no single dispatch serves. */
export interface AttentionBatchInputs {
  readonly a: AttentionInputs<GpuTensor>;
  readonly qw: GpuTensor;
  readonly kw: GpuTensor;
  readonly byCalls: () => void;
}

export interface GpuStepBatch extends StepBatch {
  /** i32: rows [M × 4], then seqs [S × 4], then the page tables (wgsl/batch.ts). */
  readonly table: GpuTensor;
  readonly rowsOff: number; // element offsets in table.buffer
  readonly seqsOff: number;
  /** f32 [M, half, 2]: cos/sin of every row's position, in the table's buffer after the
   * page tables (null without a RoPE table). */
  readonly cs: GpuTensor | null;
}

/** Build and upload the batch's table (one arena write each for the table and the angles). */
export function makeGpuStepBatch(put: Put, seqs: readonly BatchSeq[], rope: RopeTable | null): GpuStepBatch {
  const rows = checkBatchSeqs(seqs);
  const pages = seqs.reduce((n, s) => n + s.pageTable.length, 0);
  const words = new Int32Array(4 * rows + 4 * seqs.length + pages);
  const positions = new Int32Array(rows);
  let pageAt = 4 * rows + 4 * seqs.length; // from the table's start (the row table)
  seqs.forEach((s, i) => {
    for (let j = 0; j < s.t; j++) {
      const r = s.row + j;
      positions[r] = s.start + j;
      words.set([i, s.start + j, 0, 0], 4 * r);
    }
    words.set([s.row, s.t, s.start, pageAt], 4 * rows + 4 * i);
    words.set(s.pageTable, pageAt);
    pageAt += s.pageTable.length;
  });
  // the RoPE angles ride in the same upload (as f32 bits), so a kernel that reads the table
  // can read them through the same binding
  const cs = rope && rows > 0 ? ropeTable(positions, rows, 2 * rope.invFreq.length, 0, rope.invFreq, rope.scale) : null;
  if (cs && rope) for (const q of seqs) if (q.mrope) mropeRows(cs, q, rope); // requests with images
  const all = new Int32Array(words.length + (cs?.length ?? 0));
  all.set(words);
  if (cs) all.set(new Int32Array(cs.buffer, cs.byteOffset, cs.length), words.length);
  const table = put(all, 'i32');
  const csView: GpuTensor | null = cs ? { ...table, offset: table.offset + words.length, length: cs.length, shape: [cs.length], elem: 'f32' } : null;
  return { seqs, rows, rope, table, rowsOff: table.offset, seqsOff: table.offset + 4 * rows, cs: csView };
}

/** Overwrite a sequence's rows of the cos/sin table with its multimodal angles: pair f of
 * row j at positions[axis_f·t + j] (the same f64 angle and single f32 rounding as ropeTable). */
function mropeRows(cs: Float32Array, q: BatchSeq, rope: RopeTable): void {
  const m = q.mrope!;
  const half = rope.invFreq.length;
  if (m.pairAxes.length !== half) throw new RangeError(`mrope: ${m.pairAxes.length} pair axes for ${half} rotary pairs`);
  for (let j = 0; j < q.t; j++) {
    for (let f = 0; f < half; f++) {
      const angle = m.positions[m.pairAxes[f]! * q.t + j]! * rope.invFreq[f]!;
      cs[((q.row + j) * half + f) * 2] = Math.cos(angle) * rope.scale;
      cs[((q.row + j) * half + f) * 2 + 1] = Math.sin(angle) * rope.scale;
    }
  }
}

/** Row ranges that share one cache: all rows when every sequence's view is the same
 * region, else each sequence's own rows. */
export function kvRuns(kv: readonly KvLayerView<GpuTensor>[], b: GpuStepBatch): { row: number; rows: number; kv: KvLayerView<GpuTensor> }[] {
  if (kv.length !== b.seqs.length) throw new RangeError(`${kv.length} KV views for a batch of ${b.seqs.length} sequences`);
  const first = kv[0];
  if (!first || b.rows === 0) return [];
  const same = (x: KvLayerView<GpuTensor>): boolean => x.k.buffer === first.k.buffer && x.k.offset === first.k.offset &&
    x.v.buffer === first.v.buffer && x.v.offset === first.v.offset && x.pageSize === first.pageSize;
  if (kv.every(same)) return [{ row: 0, rows: b.rows, kv: first }];
  return b.seqs.flatMap((s, i) => (s.t > 0 ? [{ row: s.row, rows: s.t, kv: kv[i]! }] : []));
}

export function ropeBatch(g: WebGpuKernels, enc: StepEncoder, x: GpuTensor, b: GpuStepBatch, heads: number, headDim: number, stride: number): void {
  if (b.rows === 0) return;
  if (!b.cs || !b.rope) throw new Error('ropeBatch: the step batch was made without a RoPE table');
  const half = b.rope.invFreq.length;
  if (x.length < (b.rows - 1) * stride + heads * headDim) throw new RangeError(`ropeBatch: tensor of ${x.length} elements for ${b.rows} rows`);
  g.run(enc, 'rope_batch', () => ROPE_BATCH,
    packParams('rope_batch', { rowBase: 0, rows: b.rows, heads, headDim, half, stride, xOff: x.offset, csOff: b.cs.offset }), null,
    [x.buffer, b.cs.buffer], grid(Math.ceil((b.rows * heads * half) / 64)), 'rope');
}

export function kvWriteBatch(g: WebGpuKernels, enc: StepEncoder, kv: readonly KvLayerView<GpuTensor>[], b: GpuStepBatch,
  k: GpuTensor, v: GpuTensor, kvDim: number): void {
  for (const run of kvRuns(kv, b)) {
    g.run(enc, 'kv_write_batch', () => KV_WRITE_BATCH,
      packParams('kv_write_batch', { rowBase: run.row, rows: run.rows, kvDim, pageSize: run.kv.pageSize, kOff: k.offset, vOff: v.offset,
        kcOff: run.kv.k.offset, vcOff: run.kv.v.offset, rowTable: b.rowsOff, seqTable: b.seqsOff }), null,
      [run.kv.k.buffer, run.kv.v.buffer, k.buffer, v.buffer, b.table.buffer], grid(Math.ceil((run.rows * kvDim) / 64)), 'kv_write');
  }
}

/** Attention of the batch's rows: the block kernel (each KV row read once per block of
 * queries, attention-group.ts) where the dims allow, else a workgroup per (head, row); the
 * same online softmax, so the same bits, either way. `inputs` (with its norm weights' vectors):
 * its attentionInputs first, folded into the block kernel where attention-fold.ts can,
 * else its own dispatch (attentionInputsDispatch, else `byCalls`). */
export function attentionBatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, q: GpuTensor, qStride: number,
  kv: readonly KvLayerView<GpuTensor>[], b: GpuStepBatch, dims: AttentionDims, inputs?: AttentionBatchInputs): void {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
  const runs = kvRuns(kv, b);
  if (runs.length === 0) return; // no rows: no inputs either
  for (const s of b.seqs) g.traffic.kvBytesIdeal += s.t > 0 ? 2 * 4 * nkv * hd * (s.start + s.t) : 0;
  if (inputs) {
    if (attentionFoldDispatch(g, enc, put, out, q, qStride, runs, inputs.a, b, dims, inputs.qw, inputs.kw)) return;
    if (!attentionInputsDispatch(g, enc, inputs.a, b, dims, inputs.qw, inputs.kw)) inputs.byCalls();
  }
  const shape = attentionGroupShape(g, dims);
  if (shape) {
    attentionGroupDispatch(g, enc, put, out, q, qStride, runs, b, dims, shape);
    return;
  }
  if (hd > ROW_MAX_HEAD_DIM) throw new RangeError(`attentionBatch: head dim ${hd} > ${ROW_MAX_HEAD_DIM} with ${nh / nkv} query heads per KV head`);
  for (const s of b.seqs) {
    // query i reads positions 0..start+i, K and V, hd floats per head
    g.traffic.kvBytesRead += 2 * 4 * nh * hd * (s.t * (s.start + 1) + (s.t * (s.t - 1)) / 2);
  }
  for (const run of runs) {
    g.run(enc, 'attention_batch', () => ATTENTION_BATCH,
      packParams('attention_batch', { rowBase: run.row, nH: nh, nKV: nkv, hd, pageSize: run.kv.pageSize, qOff: q.offset, qStride,
        outOff: out.offset, rowTable: b.rowsOff, seqTable: b.seqsOff, scale: 1 / Math.sqrt(hd), kcOff: run.kv.k.offset, vcOff: run.kv.v.offset }), null,
      [out.buffer, q.buffer, run.kv.k.buffer, run.kv.v.buffer, b.table.buffer], [nh, run.rows, 1], 'attention');
  }
}

/** Kernels.attentionInputs in one dispatch (wgsl/batch.ts ATTENTION_INPUTS); false when it
 * cannot (caches of several tensors, a head over 512, too few storage bindings, no RoPE
 * table): the caller runs the separate calls, which define the bits. */
export function attentionInputsDispatch(g: WebGpuKernels, enc: StepEncoder, a: AttentionInputs<GpuTensor>, b: GpuStepBatch, dims: AttentionDims,
  qw: GpuTensor, kw: GpuTensor): boolean {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
  if (b.rows === 0) return true;
  const runs = kvRuns(a.kv, b);
  if (runs.length !== 1 || hd > 512 || !b.cs || !b.rope || g.adapter.limits.maxStorageBuffersPerShaderStage < 10) return false;
  const kv = runs[0]!.kv;
  if (a.gated && !a.gate) throw new Error('attentionInputs: a gated layer needs a gate tensor');
  g.run(enc, 'attention_inputs', () => ATTENTION_INPUTS,
    packParams('attention_inputs', { nH: nh, nKV: nkv, hd, half: b.rope.invFreq.length, gated: a.gated ? 1 : 0, qgOff: a.qg.offset, qOff: a.q.offset,
      gateOff: a.gate?.offset ?? 0, kOff: a.k.offset, vOff: a.v.offset, kcOff: kv.k.offset, vcOff: kv.v.offset, pageSize: kv.pageSize,
      rowTable: b.rowsOff, seqTable: b.seqsOff, csOff: b.cs.offset, eps: a.eps }), null,
    [a.qg.buffer, a.q.buffer, a.gate?.buffer ?? g.dummyBuffer, a.k.buffer, a.v.buffer, kv.k.buffer, kv.v.buffer, b.table.buffer,
      qw.buffer, kw.buffer], [nh + 2 * nkv, b.rows, 1], 'attention_inputs');
  return true;
}
