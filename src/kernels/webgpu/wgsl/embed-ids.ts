// Embedding of one row part of a split table from token ids already on the device
// (Kernels.embedIds over a table past the binding limit): every part runs over all T ids
// and writes only the rows whose id falls in its range [row0, row0 + rows), so the parts
// together write each row exactly once, with the bits of the unsplit embed shaders
// (dense.ts: the same readers, the same dequantisation).
// params: PARAMS.embed_part_float / embed_part_quant (params.ts).
import { paramConsts } from '../params.js';
import { BYTES, HEADER, floatWeightReader } from './common.js';
import type { QuantType } from '../../quant/formats.js';
import { quantEmbedValue } from './dense.js';
import { subBlockDecoder } from './quant.js';

/** The id of token i relative to the part, or −1 when another part holds it. */
const LOCAL_ID = /* wgsl */ `
fn local_id(i: u32) -> i32 {
  let id = IDS[pu(P_idsOff) + i] - pi(P_row0);
  if (id < 0 || id >= pi(P_rows)) { return -1; }
  return id;
}`;

export function embedPartFloatShader(dtype: 'f32' | 'bf16' | 'f16'): string {
  return `${HEADER}
${paramConsts('embed_part_float')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;
${floatWeightReader(dtype, 3)}
${LOCAL_ID}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let D = pu(P_d);
  if (g >= pu(P_t) * D) { return; }
  let i = g / D;
  let e = g % D;
  let id = local_id(i);
  if (id < 0) { return; }
  OUT[pu(P_outOff) + g] = wf(u32(id) * D + e);
}`;
}

export function embedPartQuantShader(type: QuantType): string {
  const value = quantEmbedValue(type);
  return `${HEADER}
${paramConsts('embed_part_quant')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<i32>;
@group(0) @binding(3) var<storage, read_write> W: array<u32>;
${BYTES}
${subBlockDecoder(type)}
${LOCAL_ID}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = group_id(wid, nwg) * 64u + t;
  let D = pu(P_d);
  let nsb = D / 32u;
  if (g >= pu(P_t) * nsb) { return; }
  let i = g / nsb;
  let j = g % nsb;
  let id = local_id(i);
  if (id < 0) { return; }
  let sb = sub_block(u32(id) * pu(P_rowBytes), j);
  let o = pu(P_outOff) + i * D + j * 32u;
  for (var l = 0u; l < 32u; l++) { OUT[o + l] = ${value}; }
}`;
}
