// The vision tower's row-wise shaders: LayerNorm with weight and bias (one workgroup of 64
// per row: Σx, then Σ(x − μ)², each by thread-strided f32 sums and the shared fixed tree, so
// a row's result never depends on the batch) and a linear layer's bias add with the
// activation after it (a thread per element).
import { paramConsts } from '../params.js';
import { HEADER, treeSum } from './common.js';

// params: PARAMS.layer_norm. Bindings: 1 OUT, 2 X, 3 W [d], 4 B [d] (OUT may alias X).
export const LAYER_NORM = /* wgsl */ `${HEADER}
${paramConsts('layer_norm')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> W: array<f32>;
@group(0) @binding(4) var<storage, read_write> B: array<f32>;
${treeSum()}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_rows)) { return; }
  let d = pu(P_d);
  let xo = pu(P_xOff) + row * d;
  var s = 0.0;
  for (var p = t; p < d; p += 64u) { s = s + X[xo + p]; }
  let mean = tree_sum(t, s) / f32(d);
  var v = 0.0;
  for (var p = t; p < d; p += 64u) { let e = X[xo + p] - mean; v = v + e * e; }
  let inv = 1.0 / sqrt(tree_sum(t, v) / f32(d) + pf(P_eps));
  let oo = pu(P_outOff) + row * d;
  for (var p = t; p < d; p += 64u) {
    OUT[oo + p] = (X[xo + p] - mean) * inv * W[pu(P_wOff) + p] + B[pu(P_bOff) + p];
  }
}`;

// act: 0 none, 1 GELU tanh form (x·σ(2u), u = √(2/π)(x + 0.044715x³)), 2 exact GELU
// (x/2·(1 + erf(x/√2))).
// params: PARAMS.bias_act. Bindings: 1 OUT, 2 X, 3 BIAS [d] (OUT may alias X).
export const BIAS_ACT = /* wgsl */ `${HEADER}
${paramConsts('bias_act')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> BIAS: array<f32>;
// 1 + erf(z) = erfc(−z), erfc(a) = t·e^(−a² + P(t)), t = 1/(1 + a/2) (Numerical Recipes'
// erfcc fit, fractional error < 1.2e-7): no cancellation in the negative tail.
fn one_plus_erf(z: f32) -> f32 {
  let a = abs(z);
  let t = 1.0 / (1.0 + 0.5 * a);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807
    + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let erfc = t * exp(p - a * a);
  return select(erfc, 2.0 - erfc, z >= 0.0);
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let i = group_id(wid, nwg) * 64u + t;
  let d = pu(P_d);
  if (i >= pu(P_m) * d) { return; }
  let x = X[pu(P_xOff) + i] + BIAS[pu(P_biasOff) + i % d];
  var y: f32;
  switch (pu(P_act)) {
    case 0u: { y = x; }
    case 1u: { y = x * sigmoid(1.5957691216057308 * (x + 0.044715 * x * x * x)); }
    default: { y = 0.5 * x * one_plus_erf(0.7071067811865476 * x); }
  }
  OUT[pu(P_outOff) + i] = y;
}`;
