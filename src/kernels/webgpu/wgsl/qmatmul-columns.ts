// The multi-column tiled quantized matmul (Kernels.matmul / matmulGroup of quantized weights
// at M ≥ 2 rows on a GPU): one workgroup computes `columns` (C) output columns of one
// segment for its tile of TM rows, in the 'lanes' layout of wgsl/matmul.ts quantTiledBody:
// lane t reads word w = t & 7 of blocks (t >> 3) + 8i of every column's weight row, then
// for each tile row loads its activation word (and Q6_K / bias types' SX) ONCE and adds
// its integer share of each of the C columns into that (column, row, block)'s isum slot —
// each activation word is paired with C weight words (the one-column kernel loads it once
// per column). Thread t then decodes block c0 + t's head of each column and, per row, forms
// the f32 terms from the exact sums (DX, SX loaded once for the C columns), and thread
// u = c·TM + r chains column c's row r in block order.
// Invariant (the same bits as the one-column tiled kernel, 'lanes' or 'block'): each
// (column, row, block)'s integer sum is exact (integer adds in any order and split), its f32
// terms are the same expressions of the same values ((scale·dx)·f32(Σ), (offset·dx)·f32(SX)),
// and each (row, column)'s chain adds them in block order, scale term then offset term.
// Workgroup memory: C·TM·64 i32 sums (and as many f32 offset terms for the offset types);
// C·TM ≤ 64 (a chain thread each). Column j·C + c ≥ the segment's rows reads the last row
// (a valid one) and is never stored.
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { dot4Source, hasOffsetType, packedBias } from './quant.js';
import { laneWeightWords, quantTileRowBytes } from './matmul.js';
import { GROUP_SEGMENTS } from './matmul-group.js';
import { quantGroupBindings, quantGroupEntry, throughSegments } from './qmatmul-group.js';

/** Output columns a multi-column quantized workgroup computes (GPU launch at M ≥ 2). */
export const QUANT_COLUMNS = 4;

/** The row tiles a multi-column quantized matmul may use. */
export const QUANT_COLUMN_TILES = [8, 16, 32] as const;

/** Workgroup memory a multi-column quantized workgroup may declare, whatever the adapter
 * allows (16 KiB: every adapter's minimum; more would cut the workgroups an SM keeps). */
export const QUANT_COLUMNS_BYTES = 16384;

/** The tile of a `columns`-column quantized matmul of M rows: the smallest of
 * QUANT_COLUMN_TILES ≥ M whose sums fit (columns · tile ≤ 64 chain threads, columns · tile
 * rows of quantTileRowBytes within min(limitBytes, QUANT_COLUMNS_BYTES)), else the largest
 * that fits; null when none does. */
export function quantColumnsTile(m: number, type: QuantType, columns: number, limitBytes: number): number | null {
  const limit = Math.min(limitBytes, QUANT_COLUMNS_BYTES);
  let best: number | null = null;
  for (const tile of QUANT_COLUMN_TILES) {
    if (columns * tile > 64 || columns * tile * quantTileRowBytes(type) > limit) break;
    best = tile;
    if (tile >= m) break;
  }
  return best;
}

/** Workgroup declarations of a multi-column workgroup: the sums (then their f32 terms' bits)
 * and the offset terms, C·TM·64 each, slot (c·TM + r)·64 + block. */
export function quantColumnsDecls(type: QuantType, columns: number, tm: number): string {
  const n = columns * tm * 64;
  return `var<workgroup> isum: array<atomic<i32>, ${n}>;
${hasOffsetType(type) ? `var<workgroup> offt: array<f32, ${n}>;` : ''}`;
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** Column c's weight words (into qw<c>, Q6_K's lane factors into q6<c>, declared by the
 * caller) of the chunk: laneWeightWords' loads from row<c>. */
function columnWeightWords(q6: boolean, c: number): string {
  return laneWeightWords(q6).replace(/^\s*var (qw|q6): [^\n]*\n/gm, '')
    .replace(/\bqw\b/g, `qw${c}`).replace(/\bq6\b/g, `q6${c}`).replace(/\brow\b/g, `row${c}`);
}

/** Lane w's integer share of column c's block for the activation word `a`: matmul.ts
 * laneShare's, its row terms (`ones` = dot4(1s, a), `sxw` = SX where w = 0, else 0) formed
 * once for the C columns: select(0, f·SX, w == 0) = f · select(0, SX, w == 0) in i32. */
function columnShare(type: QuantType, c: number): string {
  if (type === 'q6_k') return `q6${c}[i].x * dot4(qw${c}[i], a) + q6${c}[i].y * ones - q6${c}[i].z * sxw`;
  const bias = packedBias(type);
  return bias === 0 ? `dot4(qw${c}[i], a)` : `dot4(qw${c}[i], a) - ${bias} * sxw`;
}

/** The multi-column quantized matmul over `segments` weight parts of one input (a lone
 * weight: one segment): PARAMS.qmatmul_group, the bindings of wgsl/qmatmul-group.ts (1 + s:
 * OUT_s, 1 + S: QX, 2 + S: DX, 3 + S: SX, 4 + S + s: W_s), segment s spanning
 * ceil(seg<s>Rows / columns) workgroups from seg<s>Start (groupSegmentParams with columns).
 * Only the weight reads and the store are per segment (branches on the workgroup's uniform
 * segment); the lanes' integer shares, terms and chains are written once (a body a segment
 * would multiply the shader, and lavapipe's compile time, by S). `accumulate`: out += the sum. */
export function quantColumnsShader(type: QuantType, segments: number, packedBuiltin: boolean, accumulate: boolean, tm: number,
  columns = QUANT_COLUMNS): string {
  if (!(QUANT_COLUMN_TILES as readonly number[]).includes(tm)) throw new RangeError(`quant columns: a tile of ${tm} rows`);
  if (!Number.isInteger(columns) || columns < 2 || columns * tm > 64) throw new RangeError(`quant columns: ${columns} columns × ${tm} rows`);
  if (!Number.isInteger(segments) || segments < 1 || segments > GROUP_SEGMENTS) throw new RangeError(`quant columns: ${segments} segments`);
  const offs = hasOffsetType(type);
  const q6 = type === 'q6_k';
  const sxInShare = q6 || packedBias(type) !== 0;
  const cs = range(columns);
  const ss = range(segments);
  const branch = (text: (s: number) => string): string => ss.map((s) => `${s === 0 ? '' : 'else '}if (sg == ${s}u) { ${text(s)} }`).join(' ');
  const segmentOf = ss.map((s) => `if (${s}u < pu(P_segments) && gcol >= pu(P_seg${s}Start) && `
    + `gcol < pu(P_seg${s}Start) + (pu(P_seg${s}Rows) + ${columns - 1}u) / ${columns}u) { sg = ${s}u; }`).join('\n  ');
  const share = cs.map((c) => `atomicAdd(&isum[(${c}u * TM + r) * 64u + jb], ${columnShare(type, c)});`).join('\n          ');
  const terms = cs.map((c) => `{
          let q = (${c}u * TM + r) * 64u + t;
          let sumi = atomicLoad(&isum[q]);
          atomicStore(&isum[q], bitcast<i32>((sb${c}.scale * dx) * f32(sumi)));
          ${offs ? `offt[q] = (sb${c}.offset * dx) * sx;` : ''}
        }`).join('\n        ');
  const store = (s: number): string => `let o = pu(P_seg${s}OutOff) + (m0 + ur) * pu(P_seg${s}OutStride) + pu(P_seg${s}Col0) + cb + uc;
      OUT${s}[o] = ${accumulate ? `OUT${s}[o] + ` : ''}acc;`;
  // the columns' weight words and heads through the segment's readers (seg_packed_word, …):
  // one copy a column, not a column and segment
  // (the words' readers — packed_word, packed_q6 — and the heads' — packed_head — are disjoint)
  const words = throughSegments(cs.map((c) => columnWeightWords(q6, c)).join('\n'), segments);
  const heads = throughSegments(cs.map((c) => `sb${c} = packed_head(row${c}, j);`).join(' '), segments);
  return `${HEADER}
${paramConsts('qmatmul_group')}
${quantGroupBindings(type, segments)}
${words.readers}
${heads.readers}
${dot4Source(packedBuiltin)}
const TM = ${tm}u;
${quantColumnsDecls(type, columns, tm)}
${quantGroupEntry(segments, segmentOf)}
  // the segment's first column of this workgroup and its rows
  var cb = 0u;
  var segRows = 0u;
  ${branch((s) => `cb = (gcol - pu(P_seg${s}Start)) * ${columns}u; segRows = pu(P_seg${s}Rows);`)}
  let m0 = wid.z * TM;
  let rows = min(TM, pu(P_m) - m0);
  let last = segRows - 1u;
  ${cs.map((c) => `let row${c} = min(cb + ${c}u, last) * pu(P_rowBytes);`).join('\n  ')}
  let w = t & 7u;
  // this thread's chain: column uc of the block, tile row ur
  let uc = t / TM;
  let ur = t % TM;
  var acc = 0.0;
  // the tile's rows' slots (a loop over the runtime rows: a constant bound would unroll C·TM stores)
  for (var r = 0u; r < rows; r++) {
    ${cs.map((c) => `atomicStore(&isum[(${c}u * TM + r) * 64u + t], 0);`).join(' ')}
  }
  workgroupBarrier();
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
    ${cs.map((c) => `var qw${c}: array<u32, 8>;${q6 ? ` var q6${c}: array<vec3<i32>, 8>;` : ''}`).join('\n    ')}
    ${words.text}
    for (var r = 0u; r < rows; r++) {
      let xr = m0 + r;
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          let a = QX[(xr * K + j * 32u) / 4u + w];
          ${q6 ? 'let ones = dot4(0x01010101u, a);' : ''}
          ${sxInShare ? 'let sxw = select(0, SX[xr * nb + j], w == 0u);' : ''}
          ${share}
        }
      }
    }
    workgroupBarrier();
    let j = c0 + t;
    if (j < nb) {
      ${cs.map((c) => `var sb${c}: PB;`).join(' ')}
      ${heads.text}
      for (var r = 0u; r < rows; r++) {
        let xr = m0 + r;
        let dx = DX[xr * nb + j];
        ${offs ? 'let sx = f32(SX[xr * nb + j]);' : ''}
        ${terms}
      }
    }
    workgroupBarrier();
    if (uc < ${columns}u && ur < rows) {
      let n = min(64u, nb - c0);
      let base = (uc * TM + ur) * 64u;
      for (var jj = 0u; jj < n; jj++) {
        acc = acc + bitcast<f32>(atomicExchange(&isum[base + jj], 0));
        ${offs ? 'acc = acc + offt[base + jj];' : ''}
      }
    }
    workgroupBarrier();
  }
  if (uc < ${columns}u && ur < rows && cb + uc < segRows) {
    ${branch(store)}
  }
}`;
}
