// The parameter block and bindings of the block attention kernel (wgsl/attention-tile.ts),
// shared by its two uses: decode / verify blocks of up to QMAX queries (consecutive rows of
// ONE sequence × every query head of a KV head's group: decode one row, G heads; verify
// k + 1 rows) and prefill tiles of QT queries. Each reads a sequence's K/V rows once per
// block. params: PARAMS.attention_group. Block table BT (i32, 2 words per block at
// blockTable: first row, rows); TB the step table (wgsl/batch.ts), both read only (uniform
// loop bounds). Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 TB (i32), 6 BT (i32).
import { paramConsts } from '../params.js';

/** Queries per decode / verify block. */
export const ATTENTION_QMAX = 16;

/** The block kernel's parameter block and bindings (one layout, one call site); `fold`: the
 * decode / verify shape with the attention inputs folded in (PARAMS.attention_fold, the
 * group's fields first; bindings 7 QG, 8 GATE, 9 K, 10 V, 11 QW, 12 KW as ATTENTION_INPUTS'). */
export function attentionGroupBindings(fold: boolean): string {
  return `${paramConsts(fold ? 'attention_fold' : 'attention_group')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read> TB: array<i32>;
@group(0) @binding(6) var<storage, read> BT: array<i32>;
${fold ? ['QG', 'GATE', 'K', 'V', 'QW', 'KW'].map((n, i) => `@group(0) @binding(${7 + i}) var<storage, read_write> ${n}: array<f32>;\n`).join('') : ''}`;
}

export const ATTENTION_GROUP_BINDINGS = attentionGroupBindings(false);

/** A block's opening lines in `main(wid, t)` (every block kernel): kh the KV head (wid.x), block
 * wid.y = rows r0..r0+rows−1 of ONE sequence `seq` (nq = rows·G queries), pt its page-table base
 * in TB, nmax the block's positions 0..(last row's position) — uniform (read-only tables). The
 * kernel defines HD before. */
export const ATTENTION_BLOCK_HEAD = `  let kh = wid.x;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let ps = pu(P_pageSize);
  let G = nH / nKV;
  let kvDim = nKV * HD;
  let r0 = u32(BT[pu(P_blockTable) + 2u * wid.y]);
  let rows = u32(BT[pu(P_blockTable) + 2u * wid.y + 1u]);
  let nq = rows * G;
  let rt = pu(P_rowTable);
  let seq = u32(TB[rt + 4u * r0]);
  let pt = rt + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  // positions of the block: 0..(the last row's position); uniform (read-only tables)
  let nmax = u32(TB[rt + 4u * (r0 + rows - 1u) + 1u]) + 1u;
`;
