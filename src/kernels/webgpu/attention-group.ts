// attentionBatch with each KV row read once per block of queries (wgsl/attention-group.ts):
// a block is up to ATTENTION_QMAX queries, consecutive rows of one sequence × the G query
// heads of a KV head, so decode (1 row) and verify (k + 1 ≤ QMAX / G rows) read a
// sequence's cache once per KV head per layer, the ideal. The block table is made on the
// host once per step batch and block size, and goes up through the upload arena.
import type { AttentionDims, BatchSeq, KvLayerView } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { ATTENTION_GROUP, ATTENTION_QMAX } from './wgsl/attention-group.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

/** What the kernel reads of a step batch (batch.ts StepTable). */
interface StepTable {
  readonly seqs: readonly BatchSeq[];
  readonly table: GpuTensor;
  readonly rowsOff: number;
  readonly seqsOff: number;
}

/** A run of the batch's rows over one KV view (batch.ts kvRuns). */
export interface KvRun { readonly row: number; readonly rows: number; readonly kv: KvLayerView<GpuTensor> }

const blockTables = new WeakMap<StepTable, Map<number, { table: GpuTensor; blocks: { row: number; rows: number; last: number }[] }>>();

/** Whether the grouped kernel serves these dims (a KV group of at most QMAX query heads). */
export function attentionGroupFits(dims: AttentionDims): boolean {
  return dims.numHeads % dims.numKvHeads === 0 && dims.numHeads / dims.numKvHeads <= ATTENTION_QMAX;
}

/** Blocks of ≤ rowsPer rows of one sequence each (first row, rows, last position), uploaded once per batch. */
function blocksOf(put: Put, b: StepTable, rowsPer: number): { table: GpuTensor; blocks: { row: number; rows: number; last: number }[] } {
  let byRows = blockTables.get(b);
  if (!byRows) blockTables.set(b, (byRows = new Map()));
  const hit = byRows.get(rowsPer);
  if (hit) return hit;
  const blocks: { row: number; rows: number; last: number }[] = [];
  for (const s of b.seqs) {
    for (let i = 0; i < s.t; i += rowsPer) {
      const rows = Math.min(rowsPer, s.t - i);
      blocks.push({ row: s.row + i, rows, last: s.start + i + rows - 1 });
    }
  }
  const made = { table: put(blocks.flatMap((x) => [x.row, x.rows]), 'i32'), blocks };
  byRows.set(rowsPer, made);
  return made;
}

/** One dispatch per KV run: workgroups (KV head, block of the run's rows). Counts the KV
 * bytes read: each block reads its sequence's rows 0..last once per KV head, K and V. */
export function attentionGroupDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, q: GpuTensor, qStride: number,
  runs: readonly KvRun[], b: StepTable, dims: AttentionDims, sc: GpuTensor): void {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
  const rowsPer = Math.max(1, Math.floor(ATTENTION_QMAX / (nh / nkv)));
  const { table, blocks } = blocksOf(put, b, rowsPer);
  for (const x of blocks) g.traffic.kvBytesRead += 2 * 4 * nkv * hd * (x.last + 1);
  for (const run of runs) {
    const first = blocks.findIndex((x) => x.row >= run.row && x.row < run.row + run.rows);
    if (first < 0) continue;
    let count = 0;
    while (first + count < blocks.length && blocks[first + count]!.row < run.row + run.rows) count++;
    g.run(enc, 'attention_group', () => ATTENTION_GROUP,
      packParams('attention_group', { nH: nh, nKV: nkv, hd, pageSize: run.kv.pageSize, qOff: q.offset, qStride, outOff: out.offset,
        rowTable: b.rowsOff, seqTable: b.seqsOff, blockTable: table.offset + 2 * first, scale: 1 / Math.sqrt(hd), kcOff: run.kv.k.offset, vcOff: run.kv.v.offset }),
      null, [out.buffer, q.buffer, run.kv.k.buffer, run.kv.v.buffer, b.table.buffer, sc.buffer, table.buffer], [nkv, count, 1], 'attention');
  }
}
