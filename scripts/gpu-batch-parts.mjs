// What each recorded dispatch's work scales with at M > 1 rows (src/kernels/webgpu/
// access-batch.ts BatchParts / BatchUse), from its key, parameter words and grid; the
// batch-1 dispatch comes from gpu-access-families.mjs modelDispatch.
import { COALESCED_F32, floatInputLoads, loadFacts, namedParams, quantActLoads, workgroupSize } from '../dist/src/kernels/webgpu/access-model.js';
import { floatColumnsOf, modelDispatch } from './gpu-access-families.mjs';

// one warp's activation loads of one row per 64-block chunk (the 8-lane layout; Q8_0: no SX in the lane shares)
const QUANT_ROW_L1 = quantActLoads('q8_0').reduce((a, l) => a + loadFacts(l).sectors.size, 0);
const fixed = (d) => ({ parts: { weightBytes: 0, rowBytes: d.bytes, seqBytes: 0, tokenStateBytes: 0, macsPerRow: 0, rowL1Sectors: 0 }, use: { rows: 1, seqs: 1, tiles: 1 } });
const perRow = (d, rows) => ({ parts: { ...fixed(d).parts, rowBytes: d.bytes }, use: { rows, seqs: 1, tiles: 1 } });

/** The batch-1 modelled dispatch of record `r`, its BatchParts and BatchUse. `seqs`,
 * `tokensPerSeq`: the step's sequences and rows of each (GDN, conv: one dispatch for all of
 * them; verify attention: one sequence's query block). */
export function batchDispatch(r, { context, vocabScale, config, seqs, tokensPerSeq }) {
  const p = namedParams(r.wgsl, r.words);
  let d = modelDispatch(r, { context, vocabScale, config });
  const zero = { weightBytes: 0, rowBytes: 0, seqBytes: 0, tokenStateBytes: 0, macsPerRow: 0, rowL1Sectors: 0 };
  if (r.key.startsWith('matmul_group_')) {
    const elem = r.key.split('_')[2] === 'f32' ? 4 : 2;
    let rows = 0;
    for (let s = 0; s < p.segments; s++) rows += p[`seg${s}Rows`];
    rows *= vocabScale;
    const gate = /_(silu|sigmoid)/.test(r.key) ? 1 : 0;
    // a row's x loads per iteration as the shader's load width makes them (wgsl/float-chunks.ts; the key's last field)
    const xSectors = floatInputLoads(r.key.split('_')[2], /_(vec4w?|element)(?:_cols\d+)?$/.exec(r.key)?.[1] ?? 'element').reduce((a, l) => a + loadFacts(l).sectors.size, 0);
    // a multi-column workgroup (…_cols<C>) loads each row's x once for its C columns: per column, 1/C
    const columns = floatColumnsOf(r.key);
    // …the first row's too (modelDispatch counts it once a column)
    const rowX = xSectors * (1 + gate);
    if (columns > 1) d = { ...d, iteration: { ...d.iteration, l1Sectors: d.iteration.l1Sectors - rowX * (1 - 1 / columns) } };
    return { d, parts: { ...zero, weightBytes: rows * p.k * elem, rowBytes: 4 * p.k + 4 * rows, macsPerRow: rows * p.k, rowL1Sectors: rowX / columns },
      use: { rows: p.m, seqs: 1, tiles: r.groups[2] } };
  }
  if (r.key.startsWith('qmatmul_')) {
    const rows = p.rows * vocabScale;
    return { d, parts: { ...zero, weightBytes: rows * p.rowBytes, rowBytes: 1.25 * p.k + 4 * rows, macsPerRow: rows * p.k, rowL1Sectors: QUANT_ROW_L1 },
      use: { rows: p.m, seqs: 1, tiles: r.groups[2] } };
  }
  if (/^gdn_(gated|recurrent)_(columns|seqs)|^gdn_recurrent$/.test(r.key)) {
    // every sequence's state read once, a state written per token
    const state = 4 * p.hv * p.dk * p.dv;
    return { d, parts: { ...zero, seqBytes: state, tokenStateBytes: state, rowBytes: d.bytes - 2 * state }, use: { rows: seqs * tokensPerSeq, seqs, tiles: 1 } };
  }
  if (r.key.startsWith('causal_conv')) {
    const seq = 4 * p.c * (2 * p.taps + 2 * (p.taps - 1));
    return { d, parts: { ...zero, seqBytes: seq, rowBytes: d.bytes - seq }, use: { rows: seqs * tokensPerSeq, seqs, tiles: 1 } };
  }
  if (r.key.startsWith('attention_prefill')) {
    // one sequence's rows as a query block; K and V of --context positions read once
    const hd = config.headDim;
    const bc = Number(r.key.split('_')[4]) || 16;
    const unroll = Math.max(1, (bc * hd) / workgroupSize(r.wgsl));
    d = { ...d, bytes: 2 * 4 * p.nKV * hd * context + 8 * p.nH * hd, iteration: COALESCED_F32, unroll: [unroll, unroll] };
  }
  if ((r.key.startsWith('attention_') && r.key !== 'attention_inputs') || r.key === 'attention') {
    const hd = config.headDim;
    const seqBytes = 2 * 4 * p.nKV * hd * context;
    const prefill = r.key.startsWith('attention_prefill');
    const seqs = prefill ? 1 : r.groups[1];
    return { d, parts: { ...zero, seqBytes, rowBytes: d.bytes - seqBytes, macsPerRow: 2 * p.nH * hd * context },
      use: { rows: prefill ? tokensPerSeq : seqs, seqs, tiles: 1 } };
  }
  if (r.key === 'attention_inputs' || r.key.startsWith('gdn_gated_norm')) return { d, ...perRow(d, r.groups[1]) };
  if (r.key.startsWith('embed_')) return { d, ...perRow(d, p.t) };
  if (r.key === 'norm') return { d, ...perRow(d, p.rows) };
  if (r.key.startsWith('quant_acts') || r.key.startsWith('norm_quant_acts')) return { d, ...perRow(d, p.m) };
  // elementwise, copy_rows, gather_rows (their parameters count every row already) and the rest
  return { d, ...fixed(d) };
}
