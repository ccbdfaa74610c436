// MoE routing plan (grouped experts): the routed (row, slot)s of one layer sorted by
// expert, computed on the device from the router's ids, so the expert GEMMs read only
// routed experts' weights and gather only their rows.
// MOE_PLAN, one workgroup. params: 0 N = M·topK, 1 E, 2 ids offset, 3 rows per weight read
// (TM; 0: all of an expert's rows in one read, the whole-expert GEMMs), 4 topK.
// Bindings: 1 PLAN (i32, at 0): [0, E) counts, [E, 2E) first position of each expert,
// [2E, 2E+N) entries i·topK + s in expert order (ascending within an expert), [2E+N, 2E+2N)
// the row i of each entry; 2 IDS (i32 [M, topK]); 3 TALLY (u32 [E, 2], accumulated over
// calls): per expert the row tiles its GEMMs run (each reads the expert's weights once)
// and whether it was routed at all (the routed-only ideal reads it once).
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { MOE_ROUTE_ROW, moeRouteBindings } from './dense.js';
import { quantBlockFn } from './matmul.js';

export const MOE_MAX_EXPERTS = 1024;

/** The plan (one workgroup). \`fused\`: the router's rows first (route_row, wgsl/dense.ts:
 * thread t routes rows i ≡ t mod 64, the bits of MOE_ROUTE), and with 'gather' the gathered
 * input after the plan (XG[j, :] = X[row of entry j, :], GATHER_ROWS's copy), with 'quant'
 * instead its quantization (block b of gathered row j from X's row: quant_block, the bits of
 * QUANT_ACTS over the gathered rows), each phase after a storage barrier (the workgroup's own
 * writes). params: PARAMS.moe_plan, or PARAMS.moe_route_plan (fused). Fused bindings: 4 WTS,
 * 5 L (the router's), 6 X; gather: 7 XG; quant: 7 QX, 8 DX, 9 SX. */
export function moePlanShader(fused: 'route' | 'gather' | 'quant' | null, packedBuiltin = false): string {
  const route = fused ? `
  for (var i = t; i < pu(P_m); i += 64u) { route_row(i); }
  storageBarrier();` : '';
  const gather = fused === 'gather' ? `
  storageBarrier();
  let h = pu(P_h);
  for (var q = t; q < n * h; q += 64u) {
    let j = q / h;
    XG[pu(P_xgOff) + j * h + q % h] = X[pu(P_xOff) + u32(PLAN[2u * e + n + j]) * h + q % h];
  }` : fused === 'quant' ? `
  storageBarrier();
  let h = pu(P_h);
  let nb = h / 32u;
  for (var b = t; b < n * nb; b += 64u) { quant_block(b, pu(P_xOff) + u32(PLAN[2u * e + n + b / nb]) * h + (b % nb) * 32u); }` : '';
  return `${HEADER}
${paramConsts(fused ? 'moe_route_plan' : 'moe_plan')}
@group(0) @binding(1) var<storage, read_write> PLAN: array<i32>;
${fused ? moeRouteBindings(2, 4, 5) : '@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;'}
@group(0) @binding(3) var<storage, read_write> TALLY: array<u32>;
${fused === 'gather' || fused === 'quant' ? '@group(0) @binding(6) var<storage, read_write> X: array<f32>;' : ''}
${fused === 'gather' ? '@group(0) @binding(7) var<storage, read_write> XG: array<f32>;' : ''}
${fused === 'quant' ? `@group(0) @binding(7) var<storage, read_write> QX: array<u32>;
@group(0) @binding(8) var<storage, read_write> DX: array<f32>;
@group(0) @binding(9) var<storage, read_write> SX: array<i32>;
${quantBlockFn('X', packedBuiltin)}` : ''}
${fused ? MOE_ROUTE_ROW : ''}
var<workgroup> cnt: array<u32, ${MOE_MAX_EXPERTS}>;
var<workgroup> first: array<u32, ${MOE_MAX_EXPERTS}>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = pu(P_n);
  let e = pu(P_e);
  let io = pu(P_idsOff);${route}
  for (var x = t; x < e; x += 64u) {
    var c = 0u;
    for (var p = 0u; p < n; p++) { if (IDS[io + p] == i32(x)) { c++; } }
    cnt[x] = c;
  }
  workgroupBarrier();
  if (t == 0u) {
    var acc = 0u;
    for (var x = 0u; x < e; x++) { first[x] = acc; acc += cnt[x]; }
  }
  workgroupBarrier();
  for (var x = t; x < e; x += 64u) {
    PLAN[x] = i32(cnt[x]);
    PLAN[e + x] = i32(first[x]);
    var at = first[x];
    for (var p = 0u; p < n; p++) {
      if (IDS[io + p] == i32(x)) { PLAN[2u * e + at] = i32(p); PLAN[2u * e + n + at] = i32(p / pu(P_topK)); at++; }
    }
    let tm = pu(P_rowsPerRead);
    TALLY[2u * x] += select((cnt[x] + tm - 1u) / max(tm, 1u), min(cnt[x], 1u), tm == 0u);
    TALLY[2u * x + 1u] += select(0u, 1u, cnt[x] > 0u);
  }${gather}
}`;
}

export const MOE_PLAN = moePlanShader(null);

// MOE_COMBINE: a row's slots summed in slot order, OUT[i, d] = Σ_s W[i, s]·SLOT[i·topK + s, d]
// (f32, from 0), then the layer's tail (Kernels.moeExperts' MoeTail) in the same thread:
// 'shared': OUT += σ(GT[i])·Y[i, d] (ADD_SIGMOID_SCALED's expression), then (either tail)
// RES += OUT (ELEMENTWISE add's a + b, a = RES): each value is rounded to f32 as the separate
// dispatches store it, so the bits of combine, add_sigmoid_scaled, add.
// params: PARAMS.moe_combine. Bindings: 1 OUT, 2 SLOT, 3 WTS; tail: 4 RES; shared: 5 Y, 6 GT.
export function moeCombineShader(tail: 'residual' | 'shared' | null): string {
  const shared = tail === 'shared' ? `
  acc = acc + sigmoid(GT[pu(P_gOff) + i]) * Y[pu(P_yOff) + g];` : '';
  return `${HEADER}
${paramConsts('moe_combine')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> SLOT: array<f32>;
@group(0) @binding(3) var<storage, read_write> WTS: array<f32>;
${tail ? '@group(0) @binding(4) var<storage, read_write> RES: array<f32>;' : ''}
${tail === 'shared' ? `@group(0) @binding(5) var<storage, read_write> Y: array<f32>;
@group(0) @binding(6) var<storage, read_write> GT: array<f32>;` : ''}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let h = pu(P_h);
  let k = pu(P_topK);
  if (g >= pu(P_m) * h) { return; }
  let i = g / h;
  let d = g % h;
  var acc = 0.0;
  for (var s = 0u; s < k; s++) { acc = acc + WTS[pu(P_wOff) + i * k + s] * SLOT[pu(P_slotOff) + (i * k + s) * h + d]; }${shared}
  OUT[pu(P_outOff) + g] = acc;${tail ? `
  RES[pu(P_resOff) + g] = RES[pu(P_resOff) + g] + acc;` : ''}
}`;
}
