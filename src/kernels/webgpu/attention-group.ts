// attentionBatch with each KV row read once per block of queries (wgsl/attention-tile.ts,
// one kernel text in two shapes): a decode / verify block is up to ATTENTION_QMAX queries,
// consecutive rows of one sequence × the G query heads of a KV head, so decode (1 row) and
// verify (k + 1 ≤ QMAX / G rows) read a sequence's cache once per KV head per layer, the
// ideal. A longer run of one sequence's rows (a prefill) takes blocks of QT / G rows: a query
// per thread (wgsl/attention-prefill.ts, QT = 512 up to head dim 64, 256 past it, up to head
// dim 256) where one block's K fits the workgroup memory (K and V together, else one after
// the other: head dim 256 at 16 KiB), else the tile shape (QT = 128 up to head dim 128, 64
// at 256, 32 at 512). All run the online softmax of wgsl/attention-online.ts, so a row's
// bits do not depend on its block. The block table is made on the host once per step batch and block
// sizes, and goes up through the upload arena.
import type { AttentionDims, BatchSeq, KvLayerView } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { packParams } from './params.js';
import { ATTENTION_QMAX } from './wgsl/attention-group.js';
import { attentionTileShader, groupShapeFor, tileShapeFor, type TileShape } from './wgsl/attention-tile.js';
import { attentionPrefillShader, prefillQueries, prefillShapeFor, type PrefillShape } from './wgsl/attention-prefill.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

/** What the kernel reads of a step batch (batch.ts StepTable). */
export interface StepTable {
  readonly seqs: readonly BatchSeq[];
  readonly table: GpuTensor;
  readonly rowsOff: number;
  readonly seqsOff: number;
}

/** A run of the batch's rows over one KV view (batch.ts kvRuns). */
export interface KvRun { readonly row: number; readonly rows: number; readonly kv: KvLayerView<GpuTensor> }

/** A block of one sequence's consecutive rows (first row, rows, last position). */
interface Block { readonly row: number; readonly rows: number; readonly last: number }
/** The blocks of each kernel, rows in order, and their table (2 words a block), uploaded once per batch. */
interface Blocks { readonly table: GpuTensor; readonly group: readonly Block[]; readonly tile: readonly Block[] }

const blockTables = new WeakMap<StepTable, Map<string, Blocks>>();

/** The decode / verify block shape for these dims on this device; null where a KV group has
 * more than QMAX query heads or the shape does not fit the workgroup memory (then a
 * workgroup per (head, row) serves). */
export function attentionGroupShape(g: WebGpuKernels, dims: AttentionDims): TileShape | null {
  if (dims.numHeads % dims.numKvHeads !== 0 || dims.numHeads / dims.numKvHeads > ATTENTION_QMAX) return null;
  return groupShapeFor(dims.headDim, g.device.limits.maxComputeWorkgroupStorageSize);
}

/** A prefill kernel for some dims: its shader key and text, queries and K/V tile positions
 * per workgroup, and rows per block (queries ÷ G). */
export interface TilePlan {
  readonly key: string;
  readonly shader: () => string;
  readonly queries: number;
  readonly bc: number;
  readonly rows: number;
  /** Which kernel: a query per thread (wgsl/attention-prefill.ts) or the shared tile (wgsl/attention-tile.ts). */
  readonly kind: 'prefill' | 'tile';
  readonly shape: PrefillShape | TileShape;
}

/** The workgroup limits a prefill plan depends on (a device's, or a test's). */
export type WorkgroupLimits = Pick<GPUSupportedLimits, 'maxComputeWorkgroupStorageSize' | 'maxComputeInvocationsPerWorkgroup'>;

/** The prefill kernel for these dims on this device, and its rows per block (attentionPlanFor). */
export function attentionTilePlan(g: WebGpuKernels, dims: AttentionDims): TilePlan | null {
  return attentionPlanFor(g.device.limits, dims);
}

/** The prefill kernel for these dims within these limits: the query-per-thread kernel where
 * one block's K fits the workgroup memory (K and V together, else split), else the shared tile
 * kernel; null where neither fits or a block would not beat the grouped kernel's rows. */
export function attentionPlanFor(lim: WorkgroupLimits, dims: AttentionDims): TilePlan | null {
  const heads = dims.numHeads / dims.numKvHeads;
  const pre = prefillShapeFor(dims.headDim, lim.maxComputeWorkgroupStorageSize, lim.maxComputeInvocationsPerWorkgroup);
  const tile = pre ? null : tileShapeFor(dims.headDim, lim.maxComputeWorkgroupStorageSize);
  const plan = pre ? prefillPlan(pre) : tile ? tilePlan(tile) : null;
  if (!plan) return null;
  const rows = Math.floor(plan.queries / heads);
  return rows > Math.floor(ATTENTION_QMAX / heads) ? { ...plan, rows } : null;
}

function prefillPlan(s: PrefillShape): Omit<TilePlan, 'rows'> {
  return { key: `attention_prefill_${s.hd}_${s.qpt}_${s.bc}_${s.wg}${s.split ? '_split' : ''}`, shader: () => attentionPrefillShader(s), queries: prefillQueries(s), bc: s.bc, kind: 'prefill', shape: s };
}

function tilePlan(s: TileShape): Omit<TilePlan, 'rows'> {
  return { key: shapeKey(s), shader: () => attentionTileShader(s), queries: s.qt, bc: s.bc, kind: 'tile', shape: s };
}

/** Cut each sequence into blocks: one of more than `groupRows` rows (a prefill) into tile
 * blocks of `tileRows` (when there is a tile plan), else into grouped blocks of `groupRows`. */
function blocksOf(put: Put, b: StepTable, groupRows: number, tileRows: number): Blocks {
  let byShape = blockTables.get(b);
  if (!byShape) blockTables.set(b, (byShape = new Map()));
  const key = `${groupRows}/${tileRows}`;
  const hit = byShape.get(key);
  if (hit) return hit;
  const group: Block[] = [];
  const tile: Block[] = [];
  for (const s of b.seqs) {
    const [into, per] = tileRows > 0 && s.t > groupRows ? [tile, tileRows] : [group, groupRows];
    for (let i = 0; i < s.t; i += per) {
      const rows = Math.min(per, s.t - i);
      into.push({ row: s.row + i, rows, last: s.start + i + rows - 1 });
    }
  }
  const made = { table: put([...group, ...tile].flatMap((x) => [x.row, x.rows]), 'i32'), group, tile };
  byShape.set(key, made);
  return made;
}

/** The blocks of `blocks` (rows in order) inside a run: first index and count. */
function blocksIn(blocks: readonly Block[], run: KvRun): { first: number; count: number } {
  const first = blocks.findIndex((x) => x.row >= run.row && x.row < run.row + run.rows);
  let count = 0;
  while (first >= 0 && first + count < blocks.length && blocks[first + count]!.row < run.row + run.rows) count++;
  return { first, count };
}

/** The shader key of a shape. */
function shapeKey(s: TileShape): string {
  return `attention_tile_${s.hd}_${s.qt}_${s.bc}_${s.wg}_${s.ub ?? 1}${s.stage ? '_staged' : ''}`;
}

/** The attention inputs a decode / verify dispatch folds in (attention-fold.ts): the
 * attention_fold parameters past attention_group's, and bindings 7.. (QG, GATE, K, V, QW, KW). */
export interface GroupFold {
  readonly params: { readonly hd: number; readonly half: number; readonly gated: number; readonly qgOff: number; readonly gateOff: number;
    readonly kOff: number; readonly vOff: number; readonly csOff: number; readonly eps: number };
  readonly buffers: readonly GPUBuffer[];
}

/** Dispatches per KV run: the decode / verify blocks and the prefill tiles, workgroups (KV
 * head, block), for dims with a group shape (attentionGroupShape). Counts the KV bytes read:
 * each block reads its sequence's rows 0..last once per KV head, K and V. Both shapes give a
 * row the same bits. `fold`: every sequence is one decode / verify block, and the blocks run
 * the folded shape (its inputs first). */
export function attentionGroupDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, q: GpuTensor, qStride: number,
  runs: readonly KvRun[], b: StepTable, dims: AttentionDims, groupShape: TileShape, fold?: GroupFold): void {
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = dims;
  const groupRows = groupRowsOf(dims);
  const plan = attentionTilePlan(g, dims);
  const { table, group, tile } = blocksOf(put, b, groupRows, plan?.rows ?? 0);
  if (fold && (tile.length > 0 || group.length !== b.seqs.filter((s) => s.t > 0).length)) throw new RangeError('attention fold: a sequence is more than one block');
  for (const x of [...group, ...tile]) g.traffic.kvBytesRead += 2 * 4 * nkv * hd * (x.last + 1);
  const groupKind = fold ? { key: `${shapeKey(groupShape)}_fold`, shader: () => attentionTileShader(groupShape, true) }
    : { key: shapeKey(groupShape), shader: () => attentionTileShader(groupShape) };
  const kinds = [{ blocks: group, at: 0, ...groupKind },
    ...(plan ? [{ blocks: tile, at: group.length, key: plan.key, shader: plan.shader }] : [])];
  for (const run of runs) {
    for (const kind of kinds) {
      const { first, count } = blocksIn(kind.blocks, run);
      if (count === 0) continue;
      const common = { nH: nh, nKV: nkv, pageSize: run.kv.pageSize, qOff: q.offset, qStride, outOff: out.offset,
        rowTable: b.rowsOff, seqTable: b.seqsOff, blockTable: table.offset + 2 * (kind.at + first), scale: 1 / Math.sqrt(hd), kcOff: run.kv.k.offset, vcOff: run.kv.v.offset };
      const buffers = [out.buffer, q.buffer, run.kv.k.buffer, run.kv.v.buffer, b.table.buffer, table.buffer];
      g.run(enc, kind.key, kind.shader,
        fold ? packParams('attention_fold', { ...common, ...fold.params }) : packParams('attention_group', common),
        null, fold ? [...buffers, ...fold.buffers] : buffers, [nkv, count, 1], 'attention');
    }
  }
}

/** Rows of a decode / verify block: the QMAX queries ÷ G. */
export function groupRowsOf(dims: AttentionDims): number {
  return Math.max(1, Math.floor(ATTENTION_QMAX / (dims.numHeads / dims.numKvHeads)));
}
