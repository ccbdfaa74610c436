// The gated RMSNorm with out_proj's head order (Kernels.gatedRmsNorm with headOrder): row
// i·HV + j of OUT is the normed row i·HV + order[j] — NORM's gated rows (wgsl/dense.ts: the
// same opening, sum, tree and products), each written at its head block of out_proj's
// stored order, so no gather follows. One workgroup of 64 per output row.
// params: PARAMS.gated_norm_perm. Bindings: 1 OUT, 2 X, 3 Z, 4 WV (f32 [d]), 5 ORD (i32, the
// order at orderOff).
import { HEADER, rmsRowOpening, treeSum } from './common.js';
import { paramConsts } from '../params.js';
import { gatedNormPassHead } from './gdn-columns.js';
import { gatedNormRow } from './gdn-gated.js';
import { quantBlockFn } from './matmul.js';

export const GATED_NORM_PERM = /* wgsl */ `${HEADER}
${paramConsts('gated_norm_perm')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> Z: array<f32>;
@group(0) @binding(4) var<storage, read_write> WV: array<f32>;
@group(0) @binding(5) var<storage, read> ORD: array<i32>;
${treeSum()}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${rmsRowOpening('P_rows', 'P_d', 'row - row % pu(P_hv) + u32(ORD[pu(P_orderOff) + row % pu(P_hv)])')}
  let zo = pu(P_zOff) + (xo - pu(P_xOff));
  for (var p = t; p < d; p += 64u) {
    OUT[oo + p] = X[xo + p] * inv * WV[p] * silu(Z[zo + p]);
  }
}`;

/** The column launch's gated norm pass writing out_proj's quantized input (a quantized
 * out_proj whose activation-quantizing matmul does not take the norm: M > ACTS_FOLD_ROWS):
 * workgroup (h, i, sequence) forms row (i, h)'s normed values with the pass's text
 * (gatedNormRow, into ov in place of DST) and thread t < dv ÷ 32 quantizes block t of them
 * with QUANT_ACTS' quant_block — the block (row0 + i)·HV·dv ÷ 32 + dest_head(h)·dv ÷ 32 + t of
 * the [M, HV·dv] input, whole within the head (dv ≡ 0 mod 32): the bits of the pass then
 * quant_acts over its stored rows, with no f32 row stored. OUT keeps the un-normed rows.
 * params: PARAMS.gdn_gated_seqs. Bindings: 1 OUT, 2 Z, 3 NW, 4 DS (the pass's), 5 QX, 6 DX,
 * 7 SX (the activation scratch, from element 0). */
export function gdnGatedNormQuantShader(wg: number, packedBuiltin: boolean): string {
  return `${gatedNormPassHead(wg, `@group(0) @binding(5) var<storage, read_write> QX: array<u32>;
@group(0) @binding(6) var<storage, read_write> DX: array<f32>;
@group(0) @binding(7) var<storage, read_write> SX: array<i32>;`)}
${gatedNormRow('ov', '', 'c')}  workgroupBarrier();
  let nbh = dv / 32u;
  if (t < nbh) { quant_block(((row0 + i) * hv + dest_head(h)) * nbh + t, 32u * t); }
}
${quantBlockFn('ov', packedBuiltin)}`;
}
