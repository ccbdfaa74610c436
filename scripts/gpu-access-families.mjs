// Kernel families of scripts/gpu-access-model.mjs: a recorded dispatch (key, WGSL, parameter
// words, grid) → the bytes it must move at batch 1 and its warps' load pattern
// (src/kernels/webgpu/access-model.ts); and the step's table.
import {
  COALESCED_F32, convChannelLoads, floatInputLoads, floatWeightLoads, gdnStageLoads, namedParams, quantActsIteration, quantIteration, warpIteration, workgroupBytes,
  workgroupSize,
} from '../dist/src/kernels/webgpu/access-model.js';
import { GDN_COLUMNS, GDN_COLUMN_THREADS, GDN_STAGE_LOADS } from '../dist/src/kernels/webgpu/wgsl/gdn-columns.js';

export const ASSUMPTIONS = [
  'batch 1, one decode step: model/forward (forwardHidden + lmHeadInto) as recorded on this machine; device argmax and read-back not counted',
  'recorded on a cut of the shape (a few decoder layers, a 4,096-token vocabulary) and scaled: each layer kind x its real count, the lm_head rows to the real vocabulary (one dispatch per recorded part: the split on an H100 binding limit is not modelled); Q4_K_M per-tensor types (Q6_K for some layers) follow the cut, not the 32-layer file',
  'bytes: weights once + f32 activations, state and KV each once; attention reads K and V of --context positions',
  'DRAM time = bytes / peak; latency bound (Little): SMs busy x resident warps/SM x DRAM bytes a warp has in flight per loop iteration x unroll / latency',
  'resident warps/SM: min(64, 32 workgroups, shared memory / the WGSL var<workgroup> bytes, launched warps / 132); registers assumed not limiting',
  'a warp has one loop iteration of loads in flight: float matmuls and the GDN state lo = 1 iteration, hi = 4 (the driver compiler may unroll the loop: no barrier inside); quantized matmuls 1 (a barrier ends each 64-block chunk); attention: a K or V tile (BC x HD / threads coalesced loads per thread); other kernels (coalesced f32 loops) lo 1, hi 4',
  'L1 bound: every load instruction costs its distinct 32-byte sectors; 4 sectors per SM per clock at 1.755 GHz; sectors shared by instructions of an iteration are fetched from DRAM once (L1 keeps them)',
  'GDN recurrence: the column launch (gdn_gated_columns, what a GPU adapter runs; --gdn-launch head models the one-workgroup-per-head kernel) stages each workgroup\'s state columns with 16 independent coalesced loads per thread (64 threads), one iteration; each column\'s serial chain (2 x dk dependent steps from workgroup memory per token, ~0.3-4 us at 4-30 cycles a step) is not modelled',
  'GDN causal conv: the channel launch (causal_conv_channels_<taps>, what a GPU adapter runs; --conv-launch thread models the 64-thread kernel) has one-warp workgroups whose every weight and row load of a token is in flight at once (taps unrolled): one iteration',
  'a fixed gap per dispatch (gpu.gapUs) for launch and the barrier between dependent dispatches of one pass',
  'host recording/encoding time is not in the fraction (the GPU side only); host_ms_at_30us_per_dispatch shows that bound separately',
];

const COAL = { iteration: COALESCED_F32 };

/** Output columns a workgroup of float matmul key `key` computes (…_cols<C>; else 1). */
export function floatColumnsOf(key) {
  return Number(/^matmul_group_.*_cols(\d+)$/.exec(key)?.[1] ?? 1);
}

/** An activation-quantizing matmul's key (qmatmul_acts_<type>[_c<C>][v][_g<S>]…[_norm|_silu|_sigmoid|
 * _headnorm<HV>], qmatmul-group.ts): its quant type, output columns a workgroup and input
 * (FusedActsInput). A head norm (GDN's gated norm of o) is priced as gated and normed: o and z
 * in each pass, o once more for the inverses (its dv-wide norm weight: L1 hits, not counted). */
export function actsInputOf(key) {
  const m = /^qmatmul_acts_(q\d_[0-9k])(?:_c(\d+))?(_?v)?(?:_|$)/.exec(key);
  if (!m) throw new Error(`access model: "${key}" is not an activation-quantizing matmul key`);
  const headNorm = /_headnorm\d+$/.test(key);
  return { type: m[1], columns: Number(m[2] ?? 1), input: { gated: headNorm || /_(silu|sigmoid)$/.test(key), norm: headNorm || /_norm$/.test(key), vec: m[3] !== undefined } };
}

/** The causal conv a float matmul folds (key …_conv<K>m<mask>…, wgsl/conv-fold.ts): its taps
 * and channels (the conv segments' rows), or null. */
export function convFoldOf(key, p) {
  const m = /^matmul_group_.*_conv(\d+)m(\d+)/.exec(key);
  if (!m) return null;
  let channels = 0;
  for (let s = 0; s < p.segments; s++) if ((Number(m[2]) >> s) & 1) channels += p[`seg${s}Rows`];
  return { taps: Number(m[1]), channels };
}

/** A folded conv's bytes at one row: the f32 taps' weights, the row's window read and written
 * (the post-conv row replaces the matmul's stored row: counted there). */
export function convFoldBytes(key, p) {
  const f = convFoldOf(key, p);
  return f ? 4 * f.channels * (f.taps + 2 * (f.taps - 1)) : 0;
}

/** Bytes and pattern of one recorded dispatch. `config`: the model's config (head dims). */
export function modelDispatch(r, { context, vocabScale, config }) {
  const p = namedParams(r.wgsl, r.words);
  const threads = workgroupSize(r.wgsl);
  const wgBytes = workgroupBytes(r.wgsl);
  // a multi-column float matmul (key …_cols<C>, wgsl/matmul-columns.ts) as the one-column
  // dispatch it replaces: C workgroups of one column each (its x-load saving: gpu-batch-parts.mjs)
  const workgroups = r.groups[0] * r.groups[1] * r.groups[2] * vocabScale * floatColumnsOf(r.key);
  const base = { key: r.key, threadsPerWorkgroup: threads, workgroupBytes: wgBytes, workgroups };
  if (r.key.startsWith('matmul_group_')) {
    const dtype = r.key.split('_')[2];
    const elem = dtype === 'f32' ? 4 : 2;
    let rows = 0;
    for (let s = 0; s < p.segments; s++) rows += p[`seg${s}Rows`];
    rows *= vocabScale;
    // the load widths (wgsl/float-chunks.ts FloatLoads): the key's last field
    const widths = /_(vec4w?|element)(?:_cols\d+)?$/.exec(r.key)?.[1] ?? 'element';
    const x = floatInputLoads(dtype, widths);
    // per iteration: x (one tile row at batch 1), the norm weight (vec4 in the chunked paths), the gate;
    // the GDN head norm (…_headnorm<HV>, gated-norm.ts): its weight, z as a gate and x again (the inverses' pass)
    const headNorm = /_headnorm\d+/.test(r.key);
    const extra = [...x, ...(r.key.includes('_norm') || headNorm ? floatInputLoads(dtype, widths === 'element' ? 'element' : 'vec4') : []),
      ...(/_(silu|sigmoid)/.test(r.key) || headNorm ? x : []), ...(headNorm ? x : [])];
    const it = warpIteration(floatWeightLoads(dtype, p.k, widths), extra);
    return { ...base, weight: true, bytes: rows * p.k * elem + 4 * p.k + 4 * rows + convFoldBytes(r.key, p), iteration: it, unroll: [1, 4] };
  }
  if (r.key.startsWith('qmatmul_acts_')) {
    // weight parts quantizing their own f32 input (x, the gate's x ⊙ act(g), or the normed x);
    // rows ≤ 4; C columns a workgroup (…_c<C>), its input loads once for the C (actsInputOf)
    const { type, columns, input } = actsInputOf(r.key);
    let rows = 0;
    if (p.segments === undefined) rows = p.rows;
    else for (let s = 0; s < p.segments; s++) rows += p[`seg${s}Rows`];
    rows *= vocabScale;
    return { ...base, weight: true, bytes: rows * p.rowBytes + (input.gated ? 8 : 4) * p.k + 4 * rows, iteration: quantActsIteration(type, p.rowBytes, input, columns),
      unroll: [1, 1] };
  }
  if (r.key.startsWith('qmatmul_')) {
    // qmatmul_<type>_tm.. (one weight part) or qmatmul_group_<type>_<segments>_tm.. (segments)
    const group = /^qmatmul_group_(\w+?)_(\d+)_tm/.exec(r.key);
    const type = group ? group[1] : r.key.slice('qmatmul_'.length, r.key.indexOf('_tm'));
    let rows = p.rows;
    if (group) { rows = 0; for (let s = 0; s < p.segments; s++) rows += p[`seg${s}Rows`]; }
    rows *= vocabScale;
    return { ...base, weight: true, bytes: rows * p.rowBytes + 1.25 * p.k + 4 * rows, iteration: quantIteration(type, p.rowBytes), unroll: [1, 1] };
  }
  const coal = (bytes) => ({ ...base, weight: false, bytes, ...COAL, unroll: [1, 4] });
  if (r.key.startsWith('embed_')) return coal(8 * p.d);
  if (r.key === 'norm') return coal(4 * p.d * (p.gated ? 4 : 3));
  // a row of each half: the embedding (4 B an element as embed_) and the hidden row read, the two norm weights,
  // the raw half written to cat and read back, the normed half written (one row's: the batch rule scales by rows)
  if (r.key.startsWith('mtp_inputs_')) return coal(40 * p.d);
  if (r.key.startsWith('quant_acts')) return coal(p.k * (4 + 1) + 8 * (p.k / 32));
  // x, the norm weight and the normed row (f32), the int8 row and its block scales and sums
  if (r.key.startsWith('norm_quant_acts')) return coal(p.m * (p.k * (3 * 4 + 1) + 8 * (p.k / 32)));
  if (r.key === 'elementwise') return coal(12 * p.n);
  if (r.key === 'copy_rows' || r.key === 'gather_rows') return coal(8 * p.rows * p.width);
  if (r.key.startsWith('causal_conv_channels')) {
    // the channel launch: every weight and row load of a token issued at once (taps unrolled)
    return { ...base, weight: false, bytes: 4 * p.c * (2 * p.taps + 2 * (p.taps - 1) + 2), iteration: warpIteration(convChannelLoads(p.taps), []), unroll: [1, 1] };
  }
  if (r.key.startsWith('causal_conv')) return coal(4 * p.c * (2 * p.taps + 2 * (p.taps - 1) + 2));
  if (r.key === 'gdn_gated_columns' || r.key === 'gdn_recurrent_columns') {
    // the column launch: a workgroup stages its columns' state with GDN_STAGE_LOADS
    // independent coalesced loads per thread (all of a dk ≤ 128 block in one iteration)
    const width = 2 * p.hk * p.dk + p.hv * p.dv;
    const it = warpIteration(gdnStageLoads(p.dv, GDN_COLUMNS, GDN_COLUMN_THREADS, GDN_STAGE_LOADS), []);
    return { ...base, weight: false, bytes: 2 * 4 * p.hv * p.dk * p.dv + 4 * (width + p.hv * p.dv), iteration: it, unroll: [1, 1] };
  }
  // the quantizing pass (gated-norm.ts normQuantFolds) stores int8 rows and a block's scale and sum
  if (r.key.startsWith('gdn_gated_norm_quant')) return coal(4 * (2 * p.hv * p.dv + p.dv) + 1.25 * p.hv * p.dv);
  if (r.key.startsWith('gdn_gated_norm')) return coal(4 * (3 * p.hv * p.dv + p.dv));
  if (r.key.startsWith('gdn_gated_seqs') || r.key.startsWith('gdn_recurrent')) {
    const width = 2 * p.hk * p.dk + p.hv * p.dv;
    // thread c reads S[so + a·dv + c] for a < dk: coalesced, independent over a (no barrier)
    return coal(2 * 4 * p.hv * p.dk * p.dv + 4 * (width + 3 * p.hv * p.dv));
  }
  if (r.key.startsWith('attention_tile') || r.key.startsWith('attention_group') || r.key === 'attention') {
    // a block's K (then V) tile of BC positions × HD is loaded by the workgroup together:
    // BC·HD / threads independent coalesced loads per thread (key: attention_tile_<HD>_<QT>_<BC>_...)
    const hd = config.headDim;
    const bc = Number(r.key.split('_')[4]) || 16;
    // …_fold: the attention inputs folded in (attention-fold.ts): attention_inputs' bytes too
    const inputs = r.key.endsWith('_fold') ? attentionInputsBytes(p) : 0;
    return { ...coal(2 * 4 * p.nKV * hd * context + 8 * p.nH * hd + inputs), unroll: [Math.max(1, (bc * hd) / threads), Math.max(1, (bc * hd) / threads)] };
  }
  if (r.key === 'attention_inputs') return coal(attentionInputsBytes(p));
  return coal(4 * 64 * workgroups);
}

/** A row's attention inputs (q / gate, k, v in; q, gate, k, K and V cache rows out). */
export const attentionInputsBytes = (p) => 4 * (3 * p.nH * p.hd + 4 * p.nKV * p.hd);

const round = (v, d = 3) => +v.toFixed(d);

/** The step's table: per distinct (key, where) its count, bytes, workgroups, load facts and
 * estimates (lo / hi unroll), the step's GPU fraction and the kernels holding it below 0.5. */
export function stepSummary(rows, gpu, estimate) {
  const groups = new Map();
  let bytes = 0;
  const us = [0, 0];
  let dispatches = 0;
  for (const { key, label, where, times, d } of rows) {
    const est = d.unroll.map((u) => estimate({ ...d, unroll: u }, gpu));
    bytes += times * d.bytes;
    dispatches += times;
    est.forEach((e, i) => { us[i] += times * e.us; });
    const id = `${where} ${label} ${key} ${d.workgroups}`;
    const g = groups.get(id) ?? { where, label, key, per_step: 0, bytes_each: d.bytes, workgroups: d.workgroups, threads: d.threadsPerWorkgroup,
      workgroup_bytes: d.workgroupBytes, warps_per_sm: est[0].warpsPerSm, sms_busy: est[0].smsBusy,
      bytes_per_warp_load: round(d.iteration.bytesPerLoad, 1), sectors_per_warp_load: round(d.iteration.sectorsPerLoad, 1),
      dram_bytes_per_warp_iteration: d.iteration.dramBytes, l1_sectors_per_dram_sector: round(d.iteration.l1Sectors / (d.iteration.dramBytes / 32), 2),
      fraction: est.map((e) => round(e.fraction)), bound: est.map((e) => e.bound), us_each: est.map((e) => round(e.us, 2)), us_step: [0, 0] };
    g.per_step += times;
    est.forEach((e, i) => { g.us_step[i] += times * e.us; });
    groups.set(id, g);
  }
  const ideal = (1e6 * bytes) / gpu.peakBytesPerS;
  const table = [...groups.values()].map((g) => ({ ...g, per_step: round(g.per_step, 2), us_step: g.us_step.map((v) => round(v, 1)),
    share_of_step: g.us_step.map((v, i) => round(v / us[i])) })).sort((a, b) => b.us_step[0] - a.us_step[0]);
  // a kernel holds the step below 0.5 when its time beyond the 0.5-of-peak time of its bytes is large
  const holding = table.filter((g) => g.fraction[0] < 0.5 && g.share_of_step[0] >= 0.02).map((g) => `${g.where} ${g.label} (${g.key})`);
  return {
    dispatches_per_step: round(dispatches, 1), bytes_per_step: Math.round(bytes), ideal_us: round(ideal, 1),
    gpu_us: us.map((v) => round(v, 1)), fraction_of_peak: us.map((v) => round(ideal / v)),
    host_ms_at_30us_per_dispatch: round((dispatches * 30) / 1000, 2), holding_below_half: holding, table,
  };
}
