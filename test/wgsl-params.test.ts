// The WGSL parameter table (src/kernels/webgpu/params.ts) against the shaders: every tabled
// kernel's source reads exactly the table's fields, each through its type's reader (pu for
// u32, pi for i32, pf for f32), names every slot (no pu(3u) by number), declares the slot constants in
// table order, and packParams writes each named value into its slot. No GPU needed: the
// shaders are strings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PARAMS, packParams, type ParamKernel, type ParamType } from '../src/kernels/webgpu/params.js';
import { ATTENTION_BATCH, ATTENTION_INPUTS, KV_WRITE_BATCH, ROPE_BATCH } from '../src/kernels/webgpu/wgsl/batch.js';
import { CAUSAL_CONV, CAUSAL_CONV_SEQS, GDN_RECURRENT, GDN_RECURRENT_SEQS } from '../src/kernels/webgpu/wgsl/gdn.js';
import { gdnGatedShader } from '../src/kernels/webgpu/wgsl/gdn-gated.js';
import { GDN_GATED_COLUMNS, GDN_RECURRENT_COLUMNS, gdnGatedNormShader } from '../src/kernels/webgpu/wgsl/gdn-columns.js';
import { attentionTileShader } from '../src/kernels/webgpu/wgsl/attention-tile.js';
import { attentionPrefillShader } from '../src/kernels/webgpu/wgsl/attention-prefill.js';
import { ADD_SIGMOID_SCALED, COPY_ROWS, FILL, GATHER_ROWS, MOE_COMBINE, MOE_SCATTER } from '../src/kernels/webgpu/wgsl/rows.js';
import { ARGMAX, ELEMENTWISE, MOE_ROUTE, NORM, ROPE, embedFloatShader, embedQuantShader } from '../src/kernels/webgpu/wgsl/dense.js';
import { GDN_GATES } from '../src/kernels/webgpu/wgsl/gdn.js';
import { FILL_RUNS } from '../src/kernels/webgpu/fill-runs.js';
import { GDN_CHUNKED, GDN_CHUNKED_SEQS } from '../src/kernels/webgpu/wgsl/gdn-chunked.js';
import { MOE_PLAN, moeCombineShader, moePlanShader } from '../src/kernels/webgpu/wgsl/moe.js';
import { ARGMAX_MASKED, GATHER_PICKED } from '../src/kernels/webgpu/wgsl/argmax-masked.js';
import { TOP_CANDIDATES, TOP_MERGE } from '../src/kernels/webgpu/wgsl/top-candidates.js';
import { PENALTY_PICKS } from '../src/kernels/webgpu/wgsl/penalty-picks.js';
import { CANDIDATE_DRAWS } from '../src/kernels/webgpu/wgsl/candidate-draws.js';
import { ATTENTION, KV_WRITE } from '../src/kernels/webgpu/wgsl/attention.js';
import { SAMPLE } from '../src/kernels/webgpu/wgsl/sample.js';
import { quantMatmulGroupShader } from '../src/kernels/webgpu/wgsl/qmatmul-group.js';
import { normQuantActsShader, quantActsShader, quantMatmulShader } from '../src/kernels/webgpu/wgsl/matmul.js';
import { quantMatmulActsShader } from '../src/kernels/webgpu/wgsl/qmatmul-acts.js';
import { normQuantActsLanesShader, quantActsLanesShader } from '../src/kernels/webgpu/wgsl/quant-acts-lanes.js';
import { quantMatmulActsGroupShader } from '../src/kernels/webgpu/wgsl/qmatmul-acts-group.js';
import { GROUP_SEGMENTS, floatMatmulGroupShader } from '../src/kernels/webgpu/wgsl/matmul-group.js';
import { HEADER } from '../src/kernels/webgpu/wgsl/common.js';
import { BIAS_ACT, LAYER_NORM } from '../src/kernels/webgpu/wgsl/tower.js';
import { PARAM_SLOT_BYTES } from '../src/kernels/webgpu/encoder.js';
import { GATED_NORM_PERM } from '../src/kernels/webgpu/wgsl/gated-norm.js';
import { mtpInputsShader } from '../src/kernels/webgpu/wgsl/mtp-inputs.js';

const READER: Record<ParamType, string> = { u32: 'pu', i32: 'pi', f32: 'pf' };

/** Each kernel's shader source, or its variants (one block shared by its dtype / MoE
 * variants: each variant reads only table fields, and every field is read by some variant). */
const SOURCES: Record<ParamKernel, string | readonly string[]> = {
  rope_batch: ROPE_BATCH,
  kv_write_batch: KV_WRITE_BATCH,
  attention_batch: ATTENTION_BATCH,
  attention_group: [attentionTileShader({ wg: 32, qt: 16, bc: 16, hd: 256, stage: false, order: 'element', ub: 4 }), attentionTileShader({ wg: 256, qt: 128, bc: 16, hd: 64, stage: true, order: 'query' }),
    attentionPrefillShader({ wg: 256, qpt: 2, bc: 64, hd: 64, split: false }), attentionPrefillShader({ wg: 256, qpt: 1, bc: 16, hd: 256, split: true })],
  attention_fold: [attentionTileShader({ wg: 32, qt: 16, bc: 16, hd: 256, stage: false, order: 'element', ub: 4 }, true)],
  attention_inputs: ATTENTION_INPUTS,
  causal_conv: CAUSAL_CONV,
  causal_conv_seqs: CAUSAL_CONV_SEQS,
  gdn_recurrent: GDN_RECURRENT,
  gdn_recurrent_seqs: [GDN_RECURRENT_SEQS, GDN_RECURRENT_COLUMNS],
  gdn_gated_seqs: [gdnGatedShader(128), GDN_GATED_COLUMNS, gdnGatedNormShader(128)],
  gated_norm_perm: GATED_NORM_PERM,
  copy_rows: COPY_ROWS,
  fill: FILL,
  fill_runs: FILL_RUNS,
  gather_rows: GATHER_ROWS,
  add_sigmoid_scaled: ADD_SIGMOID_SCALED,
  moe_scatter: MOE_SCATTER,
  moe_combine: [MOE_COMBINE, moeCombineShader('residual'), moeCombineShader('shared')],
  norm: NORM,
  elementwise: ELEMENTWISE,
  rope: ROPE,
  argmax: ARGMAX,
  moe_route: MOE_ROUTE,
  gdn_gates: GDN_GATES,
  gdn_chunked: GDN_CHUNKED,
  gdn_chunked_seqs: GDN_CHUNKED_SEQS,
  moe_plan: MOE_PLAN,
  moe_route_plan: [moePlanShader('route'), moePlanShader('gather'), moePlanShader('quant', true)],
  sample: SAMPLE,
  embed_float: embedFloatShader('bf16'),
  embed_quant: embedQuantShader('q4_k'),
  embed_part_float: embedFloatShader('f16', true),
  embed_part_quant: embedQuantShader('q6_k', true),
  mtp_inputs_float: [mtpInputsShader('bf16'), mtpInputsShader('f32')],
  mtp_inputs_quant: [mtpInputsShader('q4_k'), mtpInputsShader('q8_0')],
  argmax_masked: ARGMAX_MASKED,
  gather_picked: GATHER_PICKED,
  top_candidates: TOP_CANDIDATES,
  top_merge: TOP_MERGE,
  penalty_picks: PENALTY_PICKS,
  candidate_draws: CANDIDATE_DRAWS,
  kv_write: KV_WRITE,
  layer_norm: LAYER_NORM,
  bias_act: BIAS_ACT,
  attention: ATTENTION,
  quant_acts: [quantActsShader(true), quantActsShader(false, 'sigmoid'), quantActsLanesShader(true, 'silu'), quantActsLanesShader(false)],
  qmatmul_acts: [quantMatmulActsShader('q4_k', true, true, 'silu'), quantMatmulActsShader('q8_0', false, false, null)],
  norm_quant_acts: [normQuantActsShader(true), normQuantActsShader(false), normQuantActsLanesShader(true), normQuantActsLanesShader(false)],
  qmatmul: [quantMatmulShader('q4_k', true), quantMatmulShader('q6_k', false, true), quantMatmulShader('q8_0', true, false, 'gather'),
    quantMatmulShader('q5_1', true, false, 'scatter', true)],
  qmatmul_group: [quantMatmulGroupShader('q4_k', GROUP_SEGMENTS, true), quantMatmulGroupShader('q6_k', 2, false, true, 32)],
  qmatmul_acts_group: [quantMatmulActsGroupShader('q4_k', GROUP_SEGMENTS, true, false, 'norm'), quantMatmulActsGroupShader('q6_k', 1, false, true, 'silu'),
    quantMatmulActsGroupShader('q8_0', 2, true, false, 'plain'), quantMatmulActsGroupShader('q8_0', 1, true, true, 'headnorm', 8, true, 32),
    quantMatmulActsGroupShader('q4_k', 1, false, true, 'headnorm', 4, false, 4)],
  qmatmul_acts_group_conv: [quantMatmulActsGroupShader('q8_0', GROUP_SEGMENTS, true, false, 'norm', 8, true, 0, { taps: 4, mask: 1 }),
    quantMatmulActsGroupShader('q4_k', 2, false, false, 'plain', 1, false, 0, { taps: 3, mask: 2, steps: true })],
  matmul_group: [floatMatmulGroupShader('bf16', GROUP_SEGMENTS, true, true, true), floatMatmulGroupShader('f16', 1, false, false, false, 'silu'),
    floatMatmulGroupShader('f32', 2, false, false, false, null, 'scatter', true), floatMatmulGroupShader('bf16', GROUP_SEGMENTS, true, false, true, null, null, false, 16, 'vec4', 0, { taps: 4, mask: 1 })],
  matmul_head_norm: [floatMatmulGroupShader('bf16', 1, false, true, false, null, null, false, 16, 'vec4', 32),
    floatMatmulGroupShader('f32', 1, true, true, false, null, null, false, 16, 'vec4w', 4)],
};

test('every tabled shader reads exactly its table fields, by name, with the reader of its type', () => {
  assert.deepEqual(Object.keys(SOURCES).sort(), Object.keys(PARAMS).sort(), 'a source for every table entry');
  for (const [kernel, variants] of Object.entries(SOURCES) as [ParamKernel, string | string[]][]) {
    const table = PARAMS[kernel] as Record<string, ParamType>;
    const fieldsRead = new Set<string>();
    for (const src of typeof variants === 'string' ? [variants] : variants) {
      for (const field of shaderReads(kernel, table, src)) fieldsRead.add(field);
    }
    for (const field of Object.keys(table)) assert.ok(fieldsRead.has(field), `${kernel}: field ${field} is never read`);
    assert.ok(Object.keys(table).length <= 64, `${kernel}: the block holds 64 words`);
  }
});

/** The fields `src` reads, after checking each read's field and reader and the slot constants. */
function shaderReads(kernel: ParamKernel, table: Record<string, ParamType>, src: string): string[] {
  assert.doesNotMatch(src, /\bp[uif]\(\s*\d/, `${kernel}: a parameter read by slot number`);
  const reads = [...src.matchAll(/\b(pu|pf|pi)\(P_(\w+)\)/g)].map((m) => ({ reader: m[1]!, field: m[2]! }));
  for (const { reader, field } of reads) {
    assert.ok(field in table, `${kernel}: reads P_${field}, which the table does not have`);
    assert.equal(reader, READER[table[field]!], `${kernel}: P_${field} (${table[field]}) read with ${reader}`);
  }
  const consts = [...src.matchAll(/const P_(\w+) = (\d+)u;/g)].map((m) => [m[1], Number(m[2])]);
  assert.deepEqual(consts, Object.keys(table).map((f, i) => [f, i]), `${kernel}: slot constants in table order`);
  return reads.map((r) => r.field);
}

test('packParams: each value in its slot, f32 fields as their bits, and a field that is not a u32 refused by name', () => {
  const words = packParams('attention_batch', { rowBase: 1, nH: 2, nKV: 3, hd: 4, pageSize: 5, qOff: 6, qStride: 7, outOff: 8, rowTable: 9,
    seqTable: 10, scale: 0.125, kcOff: 12, vcOff: 13 });
  assert.deepEqual(words, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x3e000000, 12, 13]);
  assert.throws(() => packParams('rope_batch', { rowBase: -1, rows: 1, heads: 1, headDim: 2, half: 1, stride: 2, xOff: 0, csOff: 0 }),
    /rope_batch\.rowBase = -1 is not a u32/);
  assert.deepEqual(packParams('embed_part_float', { t: 1, d: 2, outOff: 3, idsOff: 4, row0: -1, rows: 6 }), [1, 2, 3, 4, 0xffffffff, 6], 'i32 fields: two\'s complement');
  assert.throws(() => packParams('embed_part_float', { t: 1, d: 2, outOff: 3, idsOff: 4, row0: 2 ** 31, rows: 6 }), /embed_part_float\.row0 = 2147483648 is not an i32/);
});

/** Bytes of the WGSL Params struct: `struct Params { w: array<vec4<u32>, N> }` → 16·N. */
function paramsStructBytes(header: string): number {
  const m = /struct Params \{ w: array<vec4<u32>, (\d+)> \}/.exec(header);
  assert.ok(m, 'HEADER declares struct Params as an array of vec4<u32>');
  return 16 * Number(m[1]);
}

test('ABI: the WGSL Params struct is the encoder\'s parameter slot, and each field is the 4-byte word at 4 × its slot', () => {
  const structBytes = paramsStructBytes(HEADER);
  assert.equal(structBytes, PARAM_SLOT_BYTES, 'Params struct size == bytes the encoder reserves per dispatch');
  for (const [kernel, table] of Object.entries(PARAMS) as [ParamKernel, Record<string, ParamType>][]) {
    const names = Object.keys(table);
    assert.ok(4 * names.length <= structBytes, `${kernel}: ${names.length} words fit the ${structBytes}-byte struct`);
    // distinct values per field (f32 fields: a value with a fraction), packed as the encoder uploads them
    const values = Object.fromEntries(names.map((n, i) => [n, table[n] === 'f32' ? i + 0.5 : table[n] === 'i32' ? -1000 - i : 1000 + i]));
    const words = packParams(kernel, values as never);
    const bytes = new DataView(new Uint32Array(words).buffer);
    for (const [i, n] of names.entries()) {
      const at = 4 * i; // P.w[i / 4][i % 4]: vec4 i/4 at 16·(i/4) bytes, lane i%4 at 4·(i%4)
      assert.equal(16 * Math.floor(i / 4) + 4 * (i % 4), at);
      const got = table[n] === 'f32' ? bytes.getFloat32(at, true) : table[n] === 'i32' ? bytes.getInt32(at, true) : bytes.getUint32(at, true);
      assert.equal(got, values[n], `${kernel}.${n}: the word at byte ${at}`);
    }
  }
});
