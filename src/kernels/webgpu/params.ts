// The table of WGSL kernels' parameter blocks (binding 0: 64 u32 words; a shader reads word
// i with pu(i), pi(i) or pf(i), wgsl/common.ts HEADER). For each webgpu kernel: its fields
// in slot order and their types. The host fills a block by name (`packParams`), the shader
// names its slots through `paramConsts` (`const P_<field> = <slot>u;`), so neither side
// spells a position; test/wgsl-params.test.ts checks that every shader (each variant of a
// shared block) reads only its fields, each with its type's reader, no slot by number, and
// every field in some variant.

export type ParamType = 'u32' | 'i32' | 'f32';

function fields<const F extends Record<string, ParamType>>(f: F): F {
  return f;
}

/** The activation-quantizing group's leading fields: qmatmul_group's with the output columns. */
const ACTS_GROUP_SEGMENTS = {
  rows: 'u32', k: 'u32', m: 'u32', rowBytes: 'u32', segments: 'u32',
  seg0Start: 'u32', seg0Rows: 'u32', seg0OutOff: 'u32', seg0OutStride: 'u32', seg0Col0: 'u32',
  seg1Start: 'u32', seg1Rows: 'u32', seg1OutOff: 'u32', seg1OutStride: 'u32', seg1Col0: 'u32',
  seg2Start: 'u32', seg2Rows: 'u32', seg2OutOff: 'u32', seg2OutStride: 'u32', seg2Col0: 'u32',
  seg3Start: 'u32', seg3Rows: 'u32', seg3OutOff: 'u32', seg3OutStride: 'u32', seg3Col0: 'u32',
} as const;

export const PARAMS = {
  rope_batch: fields({ rowBase: 'u32', rows: 'u32', heads: 'u32', headDim: 'u32', half: 'u32', stride: 'u32', xOff: 'u32', csOff: 'u32' }),
  kv_write_batch: fields({
    rowBase: 'u32', rows: 'u32', kvDim: 'u32', pageSize: 'u32', kOff: 'u32', vOff: 'u32', kcOff: 'u32', vcOff: 'u32', rowTable: 'u32', seqTable: 'u32',
  }),
  attention_batch: fields({
    rowBase: 'u32', nH: 'u32', nKV: 'u32', hd: 'u32', pageSize: 'u32', qOff: 'u32', qStride: 'u32', outOff: 'u32', rowTable: 'u32',
    seqTable: 'u32', scale: 'f32', kcOff: 'u32', vcOff: 'u32',
  }),
  attention_group: fields({
    nH: 'u32', nKV: 'u32', pageSize: 'u32', qOff: 'u32', qStride: 'u32', outOff: 'u32', rowTable: 'u32', seqTable: 'u32',
    blockTable: 'u32', scale: 'f32', kcOff: 'u32', vcOff: 'u32',
  }),
  attention_fold: fields({
    nH: 'u32', nKV: 'u32', pageSize: 'u32', qOff: 'u32', qStride: 'u32', outOff: 'u32', rowTable: 'u32', seqTable: 'u32',
    blockTable: 'u32', scale: 'f32', kcOff: 'u32', vcOff: 'u32', hd: 'u32', half: 'u32', gated: 'u32', qgOff: 'u32', gateOff: 'u32',
    kOff: 'u32', vOff: 'u32', csOff: 'u32', eps: 'f32',
  }),
  attention_inputs: fields({
    nH: 'u32', nKV: 'u32', hd: 'u32', half: 'u32', gated: 'u32', qgOff: 'u32', qOff: 'u32', gateOff: 'u32', kOff: 'u32', vOff: 'u32',
    kcOff: 'u32', vcOff: 'u32', pageSize: 'u32', rowTable: 'u32', seqTable: 'u32', csOff: 'u32', eps: 'f32',
  }),
  causal_conv: fields({ t: 'u32', c: 'u32', taps: 'u32', outOff: 'u32', xOff: 'u32', windowOff: 'u32', scratchOff: 'u32', useScratch: 'u32' }),
  causal_conv_seqs: fields({ c: 'u32', taps: 'u32', outOff: 'u32', xOff: 'u32', seqTable: 'u32' }),
  gdn_recurrent: fields({
    t: 'u32', hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', qkvOff: 'u32', gOff: 'u32', outOff: 'u32', stateOff: 'u32', scratchOff: 'u32',
    mode: 'u32', betaOff: 'u32',
  }),
  gdn_recurrent_seqs: fields({ hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', qkvOff: 'u32', gOff: 'u32', outOff: 'u32', betaOff: 'u32', seqTable: 'u32' }),
  gdn_gated_seqs: fields({
    hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', qkvOff: 'u32', aOff: 'u32', bOff: 'u32', zOff: 'u32', outOff: 'u32', seqTable: 'u32', eps: 'f32',
    perm: 'u32', dstOff: 'u32',
  }),
  gated_norm_perm: fields({ d: 'u32', rows: 'u32', hv: 'u32', outOff: 'u32', xOff: 'u32', zOff: 'u32', orderOff: 'u32', eps: 'f32' }),
  copy_rows: fields({ rows: 'u32', width: 'u32', dstOff: 'u32', dstStride: 'u32', srcOff: 'u32', srcStride: 'u32' }),
  fill: fields({ n: 'u32', dstOff: 'u32', value: 'f32' }),
  fill_runs: fields({ runTable: 'u32', value: 'f32' }),
  gather_rows: fields({ rows: 'u32', width: 'u32', dstOff: 'u32', srcOff: 'u32', rowsOff: 'u32' }),
  add_sigmoid_scaled: fields({ m: 'u32', d: 'u32', outOff: 'u32', yOff: 'u32', gOff: 'u32' }),
  moe_scatter: fields({ m: 'u32', topK: 'u32', h: 'u32', e: 'u32', slotOff: 'u32', yOff: 'u32', idsOff: 'u32' }),
  moe_combine: fields({ m: 'u32', topK: 'u32', h: 'u32', outOff: 'u32', slotOff: 'u32', wOff: 'u32', resOff: 'u32', yOff: 'u32', gOff: 'u32' }),
  norm: fields({ d: 'u32', rows: 'u32', outOff: 'u32', xOff: 'u32', zOff: 'u32', zeroCentered: 'u32', gated: 'u32', eps: 'f32' }),
  layer_norm: fields({ d: 'u32', rows: 'u32', outOff: 'u32', xOff: 'u32', wOff: 'u32', bOff: 'u32', eps: 'f32' }),
  bias_act: fields({ m: 'u32', d: 'u32', act: 'u32', outOff: 'u32', xOff: 'u32', biasOff: 'u32' }),
  elementwise: fields({ n: 'u32', op: 'u32', outOff: 'u32', aOff: 'u32', bOff: 'u32' }),
  rope: fields({ t: 'u32', heads: 'u32', headDim: 'u32', half: 'u32', stride: 'u32', xOff: 'u32', csOff: 'u32' }),
  argmax: fields({ m: 'u32', n: 'u32', stride: 'u32', xOff: 'u32', outOff: 'u32' }),
  moe_route: fields({ m: 'u32', e: 'u32', topK: 'u32', renormalize: 'u32', idsOff: 'u32', wOff: 'u32', logitsOff: 'u32' }),
  gdn_gates: fields({ n: 'u32', hv: 'u32', gOff: 'u32', betaOff: 'u32', aOff: 'u32', bOff: 'u32' }),
  gdn_chunked_seqs: fields({ hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', qkvOff: 'u32', gOff: 'u32', betaOff: 'u32', outOff: 'u32', seqTable: 'u32', per: 'u32' }),
  gdn_chunked: fields({ t: 'u32', hk: 'u32', hv: 'u32', dk: 'u32', dv: 'u32', qkvOff: 'u32', gOff: 'u32', betaOff: 'u32', outOff: 'u32', stateOff: 'u32', pos0: 'u32', per: 'u32' }),
  argmax_masked: fields({ m: 'u32', n: 'u32', stride: 'u32', xOff: 'u32', outOff: 'u32', maskOff: 'u32', words: 'u32', negInf: 'f32' }),
  top_candidates: fields({ m: 'u32', n: 'u32', stride: 'u32', c: 'u32', xOff: 'u32', idsOff: 'u32', valsOff: 'u32', segments: 'u32', segLen: 'u32' }),
  top_merge: fields({ m: 'u32', c: 'u32', segments: 'u32', srcIdsOff: 'u32', srcValsOff: 'u32', idsOff: 'u32', valsOff: 'u32' }),
  gather_picked: fields({ m: 'u32', stride: 'u32', xOff: 'u32', idsOff: 'u32', outOff: 'u32' }),
  penalty_picks: fields({
    m: 'u32', n: 'u32', stride: 'u32', steps: 'u32', idsStride: 'u32', idsOff: 'u32', bestOff: 'u32', xOff: 'u32', valsOff: 'u32', tableOff: 'u32', negInf: 'f32', apply: 'u32',
  }),
  candidate_draws: fields({ m: 'u32', c: 'u32', idsOff: 'u32', valsOff: 'u32', outOff: 'u32', tableOff: 'u32', negInf: 'f32', inf: 'f32' }),
  kv_write: fields({ t: 'u32', kvDim: 'u32', start: 'u32', pageSize: 'u32', kOff: 'u32', vOff: 'u32', ptOff: 'u32', kcOff: 'u32', vcOff: 'u32' }),
  attention: fields({
    nH: 'u32', nKV: 'u32', hd: 'u32', start: 'u32', pageSize: 'u32', qOff: 'u32', qStride: 'u32', outOff: 'u32', ptOff: 'u32', scale: 'f32',
    kcOff: 'u32', vcOff: 'u32',
  }),
  embed_float: fields({ t: 'u32', d: 'u32', outOff: 'u32', idsOff: 'u32' }),
  embed_quant: fields({ t: 'u32', d: 'u32', outOff: 'u32', rowBytes: 'u32', idsOff: 'u32' }),
  embed_part_float: fields({ t: 'u32', d: 'u32', outOff: 'u32', idsOff: 'u32', row0: 'i32', rows: 'i32' }),
  embed_part_quant: fields({ t: 'u32', d: 'u32', outOff: 'u32', rowBytes: 'u32', idsOff: 'u32', row0: 'i32', rows: 'i32' }),
  mtp_inputs_float: fields({ rows: 'u32', d: 'u32', outOff: 'u32', idsOff: 'u32', srcOff: 'u32', zeroCentered: 'u32', eps: 'f32' }),
  mtp_inputs_quant: fields({ rows: 'u32', d: 'u32', outOff: 'u32', idsOff: 'u32', srcOff: 'u32', zeroCentered: 'u32', eps: 'f32', rowBytes: 'u32' }),
  sample: fields({
    xOff: 'u32', n: 'u32', invT: 'f32', topK: 'u32', topP: 'f32', minP: 'f32', u: 'f32', patchOff: 'u32', patchCount: 'u32', flags: 'u32', topN: 'u32',
    distOff: 'u32', wOff: 'u32', resultOff: 'u32', inf: 'f32',
  }),
  quant_acts: fields({ m: 'u32', k: 'u32', xOff: 'u32', gateOff: 'u32' }),
  norm_quant_acts: fields({ m: 'u32', k: 'u32', xOff: 'u32', outOff: 'u32', zeroCentered: 'u32', eps: 'f32' }),
  qmatmul: fields({ rows: 'u32', k: 'u32', m: 'u32', outOff: 'u32', outStride: 'u32', col0: 'u32', rowBytes: 'u32', expert: 'u32', experts: 'u32', tiles: 'u32' }),
  qmatmul_acts: fields({ rows: 'u32', k: 'u32', m: 'u32', outOff: 'u32', outStride: 'u32', col0: 'u32', rowBytes: 'u32', xOff: 'u32', gateOff: 'u32' }),
  // GROUP_SEGMENTS (wgsl/matmul-group.ts) = 4 segments
  matmul_group: fields({
    k: 'u32', m: 'u32', xOff: 'u32', segments: 'u32',
    seg0Start: 'u32', seg0Rows: 'u32', seg0OutOff: 'u32', seg0OutStride: 'u32', seg0Col0: 'u32',
    seg1Start: 'u32', seg1Rows: 'u32', seg1OutOff: 'u32', seg1OutStride: 'u32', seg1Col0: 'u32',
    seg2Start: 'u32', seg2Rows: 'u32', seg2OutOff: 'u32', seg2OutStride: 'u32', seg2Col0: 'u32',
    seg3Start: 'u32', seg3Rows: 'u32', seg3OutOff: 'u32', seg3OutStride: 'u32', seg3Col0: 'u32',
    eps: 'f32', zeroCentered: 'u32', gateOff: 'u32', expert: 'u32', experts: 'u32', tiles: 'u32', convOutOff: 'u32', convTable: 'u32',
  }),
  // one segment of matmul_group's, then the gated-norm input's (kernels/webgpu/gated-norm.ts)
  matmul_head_norm: fields({
    k: 'u32', m: 'u32', xOff: 'u32', segments: 'u32', seg0Start: 'u32', seg0Rows: 'u32', seg0OutOff: 'u32', seg0OutStride: 'u32', seg0Col0: 'u32',
    eps: 'f32', gnZOff: 'u32', gnOrderOff: 'u32',
  }),
  // GROUP_SEGMENTS segments, as matmul_group
  qmatmul_group: fields({
    k: 'u32', m: 'u32', rowBytes: 'u32', segments: 'u32',
    seg0Start: 'u32', seg0Rows: 'u32', seg0OutOff: 'u32', seg0OutStride: 'u32', seg0Col0: 'u32',
    seg1Start: 'u32', seg1Rows: 'u32', seg1OutOff: 'u32', seg1OutStride: 'u32', seg1Col0: 'u32',
    seg2Start: 'u32', seg2Rows: 'u32', seg2OutOff: 'u32', seg2OutStride: 'u32', seg2Col0: 'u32',
    seg3Start: 'u32', seg3Rows: 'u32', seg3OutOff: 'u32', seg3OutStride: 'u32', seg3Col0: 'u32',
  }),
  // rows: the dispatch's output columns (Σ segment rows); qmatmul_group's; the input's: x
  // (offset), the gate's offset, the norm's eps and kind
  qmatmul_acts_group: fields({ ...ACTS_GROUP_SEGMENTS, xOff: 'u32', gateOff: 'u32', eps: 'f32', zeroCentered: 'u32', orderOff: 'u32' }),
  // …with the GDN conv folded into its stores (a plain or normed input; wgsl/conv-fold.ts,
  // matmul_group's conv fields): a kind of its own, so the kernels without it keep their text
  qmatmul_acts_group_conv: fields({ ...ACTS_GROUP_SEGMENTS, xOff: 'u32', eps: 'f32', zeroCentered: 'u32', convOutOff: 'u32', convTable: 'u32' }),
  moe_plan: fields({ n: 'u32', e: 'u32', idsOff: 'u32', rowsPerRead: 'u32', topK: 'u32' }),
  // moe_plan's fields and moe_route's, and the gathered input's (wgsl/moe.ts moePlanShader)
  moe_route_plan: fields({ n: 'u32', e: 'u32', idsOff: 'u32', rowsPerRead: 'u32', topK: 'u32', m: 'u32', renormalize: 'u32', wOff: 'u32', logitsOff: 'u32',
    h: 'u32', xOff: 'u32', xgOff: 'u32' }),
} as const;

export type ParamKernel = keyof typeof PARAMS;
export type ParamValues<K extends ParamKernel> = { readonly [F in keyof (typeof PARAMS)[K]]: number };

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);

/** Each kernel's fields in slot order, listed once (packParams runs per dispatch). */
const FIELD_LISTS = new Map<ParamKernel, readonly (readonly [string, ParamType])[]>();

function fieldList(kernel: ParamKernel): readonly (readonly [string, ParamType])[] {
  let list = FIELD_LISTS.get(kernel);
  if (!list) {
    list = Object.entries(PARAMS[kernel] as Record<string, ParamType>);
    FIELD_LISTS.set(kernel, list);
  }
  return list;
}

/** The parameter words of `kernel` in slot order (u32 fields: non-negative integers;
 * i32 fields: integers, as their two's-complement bits; f32 fields: their bits). */
export function packParams<K extends ParamKernel>(kernel: K, values: ParamValues<K>): number[] {
  const list = fieldList(kernel);
  const out = new Array<number>(list.length);
  for (let i = 0; i < list.length; i++) {
    const [name, type] = list[i]!;
    const v = (values as Record<string, number>)[name]!;
    if (type === 'f32') {
      f32Bits[0] = v;
      out[i] = u32Bits[0]!;
    } else if (type === 'i32') {
      if (!(Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31)) throw new RangeError(`${kernel}.${name} = ${v} is not an i32`);
      out[i] = v >>> 0;
    } else {
      if (!(Number.isInteger(v) && v >= 0 && v < 2 ** 32)) throw new RangeError(`${kernel}.${name} = ${v} is not a u32`);
      out[i] = v;
    }
  }
  return out;
}

/** WGSL constants naming the slots of `kernel` (`const P_<field> = <slot>u;`). */
export function paramConsts(kernel: ParamKernel): string {
  return Object.keys(PARAMS[kernel]).map((name, i) => `const P_${name} = ${i}u;`).join('\n');
}
