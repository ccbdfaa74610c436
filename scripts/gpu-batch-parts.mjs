// What each recorded dispatch's work scales with at M > 1 rows (src/kernels/webgpu/
// access-batch.ts BatchParts / BatchUse), from its key, parameter words and grid; the
// batch-1 dispatch comes from gpu-access-families.mjs modelDispatch. Every kernel family a
// recording holds has one rule here (BATCH_RULES, in order: the first whose key matches);
// a dispatch no rule matches is an error, never a silent default (test/gpu-batch-model
// records the tiny models in BF16, Q8_0 and Q4_K_M and checks every dispatch is modelled).
import { COALESCED_F32, floatInputLoads, loadFacts, namedParams, quantActLoads, quantFusedActLoads, workgroupSize } from '../dist/src/kernels/webgpu/access-model.js';
import { batchBytes, estimateAtBatch } from '../dist/src/kernels/webgpu/access-batch.js';
import { actsInputOf, convFoldOf, floatColumnsOf, modelDispatch } from './gpu-access-families.mjs';

const sectorsOf = (loads) => loads.reduce((a, l) => a + loadFacts(l).sectors.size, 0);
/** One row's activation L1 sectors per 64-block chunk, per warp (the mean of the workgroup's 2
 * warps, as quantIteration): the tiled body's int8 words QX, DX (SX for the offset types). */
const quantRowL1 = (type) => (sectorsOf(quantActLoads(type, 0)) + sectorsOf(quantActLoads(type, 1))) / 2;
/** …and the activation-quantizing matmul's f32 input (and gate or norm weight; a norm's inv pass), read in the max pass and again in the quantizing pass. */
const quantFusedRowL1 = (input) => (sectorsOf(quantFusedActLoads(input, 0)) + sectorsOf(quantFusedActLoads(input, 1))) / 2;
const ZERO = { weightBytes: 0, rowBytes: 0, seqBytes: 0, tokenStateBytes: 0, macsPerRow: 0, rowL1Sectors: 0 };
const ONE = { rows: 1, seqs: 1, tiles: 1 };
/** d.bytes already counts every row (its parameters do). */
const fixed = (d) => ({ d, parts: { ...ZERO, rowBytes: d.bytes }, use: ONE });
/** d.bytes is one row's; `rows` rows. */
const perRow = (d, rows) => ({ d, parts: { ...ZERO, rowBytes: d.bytes }, use: { ...ONE, rows } });
/** Output rows (N) of a matmul's weight parts: `rows`, or the segments' sum (…_group_), × the vocabulary scale. */
function matmulRows(p, vocabScale) {
  if (p.segments === undefined) return p.rows * vocabScale;
  let rows = 0;
  for (let s = 0; s < p.segments; s++) rows += p[`seg${s}Rows`];
  return rows * vocabScale;
}

/** The float matmul (matmul_group_<dtype>_<segments>_tm<T>_…, …_cols<C>). */
function floatMatmul(r, d, p, { vocabScale, floatPlan }) {
  const dtype = r.key.split('_')[2];
  const elem = dtype === 'f32' ? 4 : 2;
  const rows = matmulRows(p, vocabScale);
  // the GDN head norm (…_headnorm<HV>): z loaded as a gate, x once more (the inverses' pass), its weight as a norm's
  const headNorm = /_headnorm\d+/.test(r.key);
  const gate = /_(silu|sigmoid)/.test(r.key) || headNorm ? 1 : 0;
  // a row's x loads per iteration as the shader's load width makes them (wgsl/float-chunks.ts; the key's last field)
  const widths = /_(vec4w?|element)(?:_cols\d+)?$/.exec(r.key)?.[1] ?? 'element';
  const xSectors = sectorsOf(floatInputLoads(dtype, widths));
  // the folded norm's weight: loaded once an iteration for every row (and, in a …_cols<C> workgroup, for its C columns)
  const normSectors = r.key.includes('_norm') || headNorm ? sectorsOf(floatInputLoads(dtype, widths === 'element' ? 'element' : 'vec4')) : 0;
  // a multi-column workgroup (…_cols<C>) loads each row's x once for its C columns: per column, 1/C
  const columns = floatColumnsOf(r.key);
  // …the first row's too (modelDispatch counts it once a column)
  const rowX = xSectors * (1 + gate + (headNorm ? 1 : 0));
  const weightBytes = rows * p.k * elem;
  if (columns > 1 && floatPlan) return plannedColumns(r, d, p, { weightBytes, rows, rowX, normSectors, plan: floatPlan });
  if (columns > 1) d = { ...d, iteration: { ...d.iteration, l1Sectors: d.iteration.l1Sectors - (rowX + normSectors) * (1 - 1 / columns) } };
  return { d, parts: { ...ZERO, weightBytes, rowBytes: 4 * p.k + 4 * rows, macsPerRow: rows * p.k, rowL1Sectors: rowX / columns },
    use: { ...ONE, rows: p.m, tiles: r.groups[2] } };
}

/** The float matmul with the GDN causal conv folded into its stores (…_conv<K>m<mask>…):
 * the matmul's parts, plus the taps' f32 weights once a dispatch and, per row (decode: a
 * sequence a row), its window's K − 1 rows read and written for each conv channel. */
function convFoldedMatmul(r, d, p, opts) {
  const { taps, channels } = convFoldOf(r.key, p);
  const m = floatMatmul(r, d, p, opts);
  return { ...m, parts: { ...m.parts, weightBytes: m.parts.weightBytes + 4 * taps * channels, rowBytes: m.parts.rowBytes + 8 * (taps - 1) * channels } };
}

/** A what-if for the multi-column matmul (gpu-batch-model.mjs --float-plan C,T,l2|dram): C
 * columns a workgroup over tiles of T rows (C · T accumulators a thread), in place of the
 * recorded C and tile. Each tile's workgroups read the weights through L1 (per tile: the
 * weight sectors, the row-independent loads, T rows' x ÷ C); the tiles after the first read
 * them from DRAM again ('dram') or from L2 ('l2': DRAM bytes once, L2 bandwidth not modelled). */
function plannedColumns(r, d, p, { weightBytes, rows, rowX, normSectors, plan }) {
  const tiles = Math.ceil(p.m / plan.tileRows);
  const rowsPerTile = p.m / tiles;
  // per tile: the weights' sectors, the norm weight's ÷ C, each row's x ÷ C
  const perTile = d.iteration.l1Sectors - rowX - normSectors + (normSectors + rowX * rowsPerTile) / plan.columns;
  const workgroups = (d.workgroups / r.groups[2]) * tiles;
  const l2 = plan.secondTiles === 'l2';
  // l2: the DRAM iterations are the weights' once, each run by every tile's workgroups
  const it = { ...d.iteration, l1Sectors: l2 ? tiles * perTile : perTile };
  return { d: { ...d, workgroups, iteration: it }, parts: { ...ZERO, weightBytes: l2 ? weightBytes / tiles : weightBytes, rowBytes: 4 * p.k + 4 * rows,
    macsPerRow: rows * p.k, rowL1Sectors: 0 }, use: { ...ONE, rows: p.m, tiles } };
}

/** The tiled quantized matmul, one weight part or a group of segments (qmatmul_<type>_tm…,
 * qmatmul_group_<type>_<S>_tm…[_cols<C>]). A …_cols<C> workgroup (wgsl/qmatmul-columns.ts,
 * the recorded grid: a workgroup per C columns) runs the C columns' weight loads of a chunk
 * and each row's activation loads once: per chunk C × the one-column weight sectors and DRAM
 * bytes, one row's activation sectors — the activation L1 per weight byte ÷ C. */
function quantMatmul(r, d, p, { vocabScale }) {
  const type = /^qmatmul_(?:group_)?(q\d_[0-9k])/.exec(r.key)[1];
  const rows = matmulRows(p, vocabScale);
  const columns = Number(/_cols(\d+)$/.exec(r.key)?.[1] ?? 1);
  const act = quantRowL1(type);
  if (columns > 1) d = { ...d, iteration: { ...d.iteration, dramBytes: columns * d.iteration.dramBytes, l1Sectors: columns * (d.iteration.l1Sectors - act) + act } };
  return { d, parts: { ...ZERO, weightBytes: rows * p.rowBytes, rowBytes: 1.25 * p.k + 4 * rows, macsPerRow: rows * p.k, rowL1Sectors: act },
    use: { ...ONE, rows: p.m, tiles: r.groups[2] } };
}

/** The activation-quantizing matmul (qmatmul_acts_<type>[_c<C>][v][_g<S>][_acc][_norm|_silu|_sigmoid], M ≤ ACTS_TILE rows a
 * workgroup of C columns). A further row's input loads are once per workgroup iteration, shared by its C columns (d's
 * iteration holds the C columns' weight loads: modelDispatch). */
function quantActsMatmul(r, d, p, { vocabScale }) {
  const { input } = actsInputOf(r.key);
  const rows = matmulRows(p, vocabScale);
  return { d, parts: { ...ZERO, weightBytes: rows * p.rowBytes, rowBytes: (input.gated ? 8 : 4) * p.k + 4 * rows, macsPerRow: rows * p.k, rowL1Sectors: quantFusedRowL1(input) },
    use: { ...ONE, rows: p.m, tiles: r.groups[2] } };
}

/** The GDN recurrence: every sequence's state read once, a state written per token. */
function gdnState(r, d, p, { seqs, tokensPerSeq }) {
  const state = 4 * p.hv * p.dk * p.dv;
  return { d, parts: { ...ZERO, seqBytes: state, tokenStateBytes: state, rowBytes: d.bytes - 2 * state }, use: { rows: seqs * tokensPerSeq, seqs, tiles: 1 } };
}

/** The GDN causal conv: the taps' weights and window per sequence, the row in and out per token. */
function causalConv(r, d, p, { seqs, tokensPerSeq }) {
  const seq = 4 * p.c * (2 * p.taps + 2 * (p.taps - 1));
  return { d, parts: { ...ZERO, seqBytes: seq, rowBytes: d.bytes - seq }, use: { rows: seqs * tokensPerSeq, seqs, tiles: 1 } };
}

/** Attention: K and V of --context positions once per sequence; the query rows' q and out per row. */
function attention(r, d, p, { context, config, tokensPerSeq }) {
  const hd = config.headDim;
  const prefill = r.key.startsWith('attention_prefill');
  if (prefill) {
    // one sequence's rows as a query block; K and V of --context positions read once
    const bc = Number(r.key.split('_')[4]) || 16;
    const unroll = Math.max(1, (bc * hd) / workgroupSize(r.wgsl));
    d = { ...d, bytes: 2 * 4 * p.nKV * hd * context + 8 * p.nH * hd, iteration: COALESCED_F32, unroll: [unroll, unroll] };
  }
  const seqBytes = 2 * 4 * p.nKV * hd * context;
  const seqs = prefill ? 1 : r.groups[1];
  return { d, parts: { ...ZERO, seqBytes, rowBytes: d.bytes - seqBytes, macsPerRow: 2 * p.nH * hd * context },
    use: { ...ONE, rows: prefill ? tokensPerSeq : seqs, seqs } };
}

/** Attention with its inputs folded in (attention_tile_…_fold, kernels/webgpu/attention-fold.ts: every
 * sequence one decode / verify block, grid y): K and V of --context positions once per sequence; the
 * inputs (attention_inputs' bytes), q and out per row — every row of every block. */
function attentionFolded(r, d, p, { context, config, tokensPerSeq }) {
  const seqBytes = 2 * 4 * p.nKV * config.headDim * context;
  const seqs = r.groups[1];
  return { d, parts: { ...ZERO, seqBytes, rowBytes: d.bytes - seqBytes, macsPerRow: 2 * p.nH * config.headDim * context },
    use: { ...ONE, rows: seqs * tokensPerSeq, seqs } };
}

/** The rules, first match wins: [name, key test, what the dispatch's bytes and L1 loads scale with, parts]. */
export const BATCH_RULES = [
  ['float matmul with the causal conv folded', (k) => /^matmul_group_.*_conv\d+m\d+/.test(k),
    'the float matmul\'s, plus the conv\'s f32 weights once a dispatch and each row\'s window (K − 1 rows a channel) read and written', convFoldedMatmul],
  ['float matmul', (k) => k.startsWith('matmul_group_'),
    'weights once per tile of rows (grid z); 4K + 4N activation bytes a row; each further row of a tile adds its x (and gate) loads to every main-loop iteration (L1), ÷ the columns of a …_cols<C> workgroup', floatMatmul],
  ['quantized matmul quantizing its input', (k) => k.startsWith('qmatmul_acts_'),
    'weights once per tile of ≤ 4 rows (grid z); f32 input (and gate) 4K (8K) + 4N bytes a row; each further row of a tile adds its f32 loads of both passes (4 f32 per lane at a 16-byte stride, or one vec4; a gate or norm weight again; a norm\'s inv pass: quantFusedActLoads) to every 64-block chunk (L1); a …_c<C> workgroup makes those loads once for its C columns (the rows\' quantization is the same for every column): ÷ C a column', quantActsMatmul],
  ['quantized matmul (tiled)', (k) => k.startsWith('qmatmul_'),
    'weights once per tile of rows (grid z; a group: the segments\' rows); int8 row, block scales and sums 1.25K + 4N bytes a row; each further row of a tile adds its QX words and DX (SX) loads (quantActLoads) to every 64-block chunk (L1), ÷ C for a …_cols<C> workgroup (an activation word loaded once for C columns\' weight words)', quantMatmul],
  ['GDN recurrence', (k) => /^gdn_(gated|recurrent)_(columns|seqs)|^gdn_recurrent$/.test(k),
    'each sequence\'s state read once, a state written per token (decode: its slot; verify: a scratch state a row); q, k, v, gates per row', gdnState],
  ['GDN causal conv', (k) => k.startsWith('causal_conv'), 'taps\' weights and the window once per sequence; the row in and out per token', causalConv],
  ['attention with its inputs folded', (k) => k.startsWith('attention_tile_') && k.endsWith('_fold'),
    'K and V of --context positions once per sequence (a sequence per grid row: one block each); the inputs (q/k norms, RoPE, gate split, KV write: attention_inputs\' bytes), q and out per row', attentionFolded],
  ['attention', (k) => (k.startsWith('attention_') && k !== 'attention_inputs') || k === 'attention',
    'K and V of --context positions once per sequence (decode: a sequence per grid row; verify: one query block); q and out per row', attention],
  ['attention inputs', (k) => k === 'attention_inputs', 'per row (grid y: the rows)', (r, d) => perRow(d, r.groups[1])],
  ['GDN gated norm', (k) => k.startsWith('gdn_gated_norm'), 'per row (grid y × z: tokens × sequences)', (r, d) => perRow(d, r.groups[1] * r.groups[2])],
  ['embedding', (k) => k.startsWith('embed_'), 'per token (parameter t)', (r, d, p) => perRow(d, p.t)],
  ['rms norm', (k) => k === 'norm', 'per row (parameter rows)', (r, d, p) => perRow(d, p.rows)],
  ['MTP head inputs', (k) => k.startsWith('mtp_inputs_'), 'per row (parameter rows): its embedding and hidden rows normed into cat', (r, d, p) => perRow(d, p.rows)],
  ['activation quantization', (k) => k.startsWith('quant_acts'), 'per row (parameter m); a gated one reads x and the gate, writes x', (r, d, p) => perRow(d, p.m)],
  ['norm + activation quantization', (k) => k.startsWith('norm_quant_acts'),
    'per row (one workgroup a row; the batch-1 bytes count the recorded m rows)', (r, d, p) => perRow({ ...d, bytes: d.bytes / p.m }, p.m)],
  ['rows copied or gathered, element-wise', (k) => k === 'copy_rows' || k === 'gather_rows' || k === 'elementwise',
    'as recorded: their parameters count every row', (r, d) => fixed(d)],
];

/** The rule for `key`, or null. */
export function ruleOf(key) {
  const rule = BATCH_RULES.find(([, test]) => test(key));
  return rule ? { name: rule[0], scales: rule[2], parts: rule[3] } : null;
}

/** The batch-1 modelled dispatch of record `r`, its BatchParts, BatchUse and rule name.
 * `seqs`, `tokensPerSeq`: the step's sequences and rows of each (GDN, conv: one dispatch for
 * all of them; verify attention: one sequence's query block). Throws for a key no rule covers. */
export function batchDispatch(r, { context, vocabScale, config, seqs, tokensPerSeq, floatPlan = null }) {
  const rule = ruleOf(r.key);
  if (!rule) throw new Error(`batch model: no rule for dispatch "${r.key}" (${r.label}): add one to scripts/gpu-batch-parts.mjs BATCH_RULES`);
  const p = namedParams(r.wgsl, r.words);
  const d = modelDispatch(r, { context, vocabScale, config });
  return { ...rule.parts(r, d, p, { context, vocabScale, config, seqs, tokensPerSeq, floatPlan }), rule: rule.name };
}

/** Record `r`'s GPU µs at each of its unrolls (lo, hi) on `gpu`, with its bytes, bound and
 * rule; throws where the figure is not a finite positive number (an unmodelled dispatch). */
export function dispatchCost(r, opts, gpu) {
  const { d, parts, use, rule } = batchDispatch(r, opts);
  const est = d.unroll.map((u) => estimateAtBatch({ ...d, unroll: u }, parts, use, gpu));
  const bytes = batchBytes(parts, use);
  for (const e of est) {
    if (!(Number.isFinite(e.us) && e.us > 0) || !(Number.isFinite(bytes) && bytes > 0)) {
      throw new Error(`batch model: dispatch "${r.key}" (${r.label}, rule ${rule}) is not modelled: ${e.us} µs, ${bytes} bytes (parts ${JSON.stringify(parts)}, use ${JSON.stringify(use)})`);
    }
  }
  return { us: est.map((e) => e.us), bound: est[0].bound, bytes, rule, d, parts, use };
}
