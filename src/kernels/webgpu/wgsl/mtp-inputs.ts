// Kernels.mtpInputs as one dispatch: the MTP head's input rows cat [M, 2H] = [rmsNorm_e(embedding
// row of id i) | rmsNorm_h(hidden row i)]. A workgroup of 64 per (row, half): it first writes the
// half's raw row into its place in cat (the embedding row as embed's shaders read it — one text
// for the float reader and the quantized sub-block decoder; the hidden row copied from its source),
// then RMS-normalizes that place in place with NORM's reduction order and expression, so cat holds
// the bits of embed, rms_norm and copy_rows run one after another (mtp-inputs-by-calls.ts).
// params: PARAMS.mtp_inputs_float / mtp_inputs_quant (params.ts).
// Bindings: 1 OUT (cat), 2 IDS (i32 token ids), 3 W (the table), 4 WE, 5 WH (f32 [d] norm
// weights), 6 HID (the hidden rows' tensor), 7 FIRST (the uploaded first rows, f32 bits read as
// i32: the upload arena may also hold IDS and SRC, and aliased bindings share one declaration),
// 8 SRC (i32 [M]: row i's hidden row at HID[s], s ≥ 0, or FIRST[−1 − s]: element offsets).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER, floatWeightReader, treeSum } from './common.js';
import { quantEmbedValue } from './dense.js';
import { subBlockDecoder } from './quant.js';

/** The raw embedding row of id `id` into OUT[o, o + d): embed's float reader, element p by thread p mod 64. */
const FLOAT_ROW = `  for (var p = t; p < d; p += 64u) { OUT[o + p] = wf(id * d + p); }`;

/** …quantized: sub-block j by thread j mod 64, GGML's dequantisation as embedQuantShader writes it. */
function quantRow(type: QuantType): string {
  return `  for (var j = t; j < d / 32u; j += 64u) {
    let sb = sub_block(id * pu(P_rowBytes), j);
    let o32 = o + j * 32u;
    for (var l = 0u; l < 32u; l++) { OUT[o32 + l] = ${quantEmbedValue(type)}; }
  }`;
}

/** The shader for an embedding table of `dtype` (one part). */
export function mtpInputsShader(dtype: 'f32' | 'bf16' | 'f16' | QuantType): string {
  const quant = dtype !== 'f32' && dtype !== 'bf16' && dtype !== 'f16';
  return `${HEADER}
${paramConsts(quant ? 'mtp_inputs_quant' : 'mtp_inputs_float')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;
${quant ? `@group(0) @binding(3) var<storage, read_write> W: array<u32>;
${BYTES}
${subBlockDecoder(dtype as QuantType)}` : floatWeightReader(dtype as 'f32' | 'bf16' | 'f16', 3)}
@group(0) @binding(4) var<storage, read_write> WE: array<f32>;
@group(0) @binding(5) var<storage, read_write> WH: array<f32>;
@group(0) @binding(6) var<storage, read_write> HID: array<f32>;
@group(0) @binding(7) var<storage, read_write> FIRST: array<i32>;
@group(0) @binding(8) var<storage, read_write> SRC: array<i32>;
${treeSum()}
fn norm_weight(half: u32, p: u32) -> f32 {
  if (half == 0u) { return WE[p]; }
  return WH[p];
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg);
  let row = g / 2u;
  let half = g % 2u;
  if (row >= pu(P_rows)) { return; }
  let d = pu(P_d);
  let o = pu(P_outOff) + row * 2u * d + half * d;
  if (half == 0u) {
    let id = u32(IDS[pu(P_idsOff) + row]);
${quant ? quantRow(dtype as QuantType) : FLOAT_ROW}
  } else {
    let s = SRC[pu(P_srcOff) + row];
    if (s >= 0) {
      for (var p = t; p < d; p += 64u) { OUT[o + p] = HID[u32(s) + p]; }
    } else {
      let f = u32(-1 - s);
      for (var p = t; p < d; p += 64u) { OUT[o + p] = bitcast<f32>(FIRST[f + p]); }
    }
  }
  storageBarrier();
  // NORM (dense.ts) on OUT[o, o + d) in place
  var ss = 0.0;
  for (var p = t; p < d; p += 64u) { let v = OUT[o + p]; ss = ss + v * v; }
  let total = tree_sum(t, ss);
  let inv = 1.0 / sqrt(total / f32(d) + pf(P_eps));
  for (var p = t; p < d; p += 64u) {
    let wv = norm_weight(half, p);
    OUT[o + p] = OUT[o + p] * inv * select(wv, 1.0 + wv, pu(P_zeroCentered) == 1u);
  }
}`;
}
