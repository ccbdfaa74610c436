// The standalone activation quantization with 8 lanes a 32-block (issue #47: at M = 1 the
// one-thread-a-block QUANT_ACTS is 2 workgroups for K = 2560 and norm_quant_acts ONE, so a
// decode step's quantizations were latency-bound). A workgroup of 64 threads is 8 blocks × 8
// lanes (t = 8·slot + lane); lane l of block b holds its elements 4l..4l+3 in a register — the
// f32 value the one-thread kernels wrote to memory and read back — and quant_lanes forms
// QUANT_ACTS' expressions from them: the block's max |y| as a max over the lanes (exact in any
// order), d = amax / 127, id = select(0, 1/d, d ≠ 0), q = i32(round(y·id)), the lane's word
// (QX[8b + l], quant_block's word l), SX the integer sum of the lanes' sums (exact), DX = d:
// the bits of quantActsShader / normQuantActsShader (wgsl/matmul.ts), which the CPU adapter
// keeps (WebGpuKernels.actsLayout).
// Bindings as wgsl/matmul.ts's: 1 QX, 2 DX, 3 SX, 4 X (gate: 5 GB; norm: 5 OUT, 6 WV).
import { paramConsts } from '../params.js';
import { HEADER, rmsRowOpening } from './common.js';
import { QUANT_ACTS_BINDINGS, normQuantActsDecls, packQuad } from './matmul.js';

/** quant_lanes(t, b, valid, y): block b quantized by its 8 lanes (y: lane t & 7's 4 values;
 * `valid` false past the last block: it takes part in the barriers, writes nothing). Called
 * in uniform control flow by all 64 threads. */
export function quantLanesFn(packedBuiltin: boolean): string {
  return `var<workgroup> lane_max: array<f32, 64>;
var<workgroup> lane_sum: array<i32, 64>;
fn quant_lanes(t: u32, b: u32, valid: bool, y: vec4<f32>) {
  let lane = t & 7u;
  let b0 = t - lane;
  lane_max[t] = max(max(abs(y[0]), abs(y[1])), max(abs(y[2]), abs(y[3])));
  workgroupBarrier();
  var amax = 0.0;
  for (var i = 0u; i < 8u; i++) { amax = max(amax, lane_max[b0 + i]); }
  let d = amax / 127.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  var q: array<i32, 4>;
  var s = 0;
  for (var i = 0u; i < 4u; i++) { q[i] = i32(round(y[i] * id)); s += q[i]; }
  lane_sum[t] = s;
  workgroupBarrier();
  if (valid) {
    QX[b * 8u + lane] = ${packQuad(packedBuiltin)};
    if (lane == 0u) {
      var sx = 0;
      for (var i = 0u; i < 8u; i++) { sx += lane_sum[b0 + i]; }
      DX[b] = d;
      SX[b] = sx;
    }
  }
}`;
}

/** QUANT_ACTS with 8 lanes a block: grid ceil(M·nb / 8). `gate`: each lane first writes its
 * x ⊙ act(g) into X in place (ELEMENTWISE's expression, as quantActsShader). */
export function quantActsLanesShader(packedBuiltin: boolean, gate: 'silu' | 'sigmoid' | null = null): string {
  const load = gate ? `let a = X[xo + i];
      let g = GB[pu(P_gateOff) + e + i];
      var v: f32;
      v = a * ${gate}(g);
      X[xo + i] = v;
      y[i] = v;` : 'y[i] = X[xo + i];';
  return `${HEADER}
${paramConsts('quant_acts')}
${QUANT_ACTS_BINDINGS}
${gate ? '@group(0) @binding(5) var<storage, read_write> GB: array<f32>;' : ''}
${quantLanesFn(packedBuiltin)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let nb = pu(P_k) / 32u;
  let b = group_id(wid, nwg) * 8u + (t >> 3u);
  let valid = b < pu(P_m) * nb;
  let e = b * 32u + 4u * (t & 7u);
  let xo = pu(P_xOff) + e;
  var y = vec4<f32>(0.0);
  if (valid) {
    for (var i = 0u; i < 4u; i++) {
      ${load}
    }
  }
  quant_lanes(t, b, valid, y);
}`;
}

/** norm_quant_acts with 8 lanes a block: grid (ceil(nb / 8) block groups, 1, M rows). Each
 * workgroup forms its row's inv with NORM's loop and tree (rmsRowOpening: the row read whole
 * by every block group of it), writes NORM's y for its blocks' elements to OUT and quantizes
 * them from the same f32 values. */
export function normQuantActsLanesShader(packedBuiltin: boolean): string {
  return `${normQuantActsDecls()}
${quantLanesFn(packedBuiltin)}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${rmsRowOpening('P_m', 'P_k', 'row', 'wid.z')}
  let nb = d / 32u;
  let j = group_id(wid, nwg) * 8u + (t >> 3u);
  let valid = j < nb;
  let p0 = j * 32u + 4u * (t & 7u);
  var y = vec4<f32>(0.0);
  if (valid) {
    for (var i = 0u; i < 4u; i++) {
      let p = p0 + i;
      var v: f32;
      v = X[xo + p] * inv * select(WV[p], 1.0 + WV[p], pu(P_zeroCentered) == 1u);
      OUT[oo + p] = v;
      y[i] = v;
    }
  }
  quant_lanes(t, row * nb + j, valid, y);
}`;
}
