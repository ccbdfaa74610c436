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

/** The block kernel's parameter block and bindings (one layout, one call site). */
export const ATTENTION_GROUP_BINDINGS = `${paramConsts('attention_group')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> KC: array<f32>;
@group(0) @binding(4) var<storage, read_write> VC: array<f32>;
@group(0) @binding(5) var<storage, read> TB: array<i32>;
@group(0) @binding(6) var<storage, read> BT: array<i32>;
`;
