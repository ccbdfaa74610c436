// Matmul shaders: out[m, col0 + n] = Σ_k x[m, k] · W[n, k] over one weight part.
// One workgroup per (output column, tile of `tm` rows of x): the weight row is read
// once per tile. The tile is chosen per dispatch (matmulTile: the smallest of 16, 32, 64
// that holds M and whose workgroup memory the adapter allows; a pipeline variant each), so
// up to 32 or 64 rows read each weight once per step. Batch invariance: the value of (m, n)
// is computed by the same instructions in the same order whatever M, the tile size or the
// slot of m in it — thread t sums k ≡ t (mod 64) in order, then a fixed tree.
// Quantized weights: the exact integer arithmetic of kernels/ref/quant.ts. Activations
// are first quantized per 32-block to int8 (QUANT_ACTS); then per sub-block j the integer
// dot product is exact (8 lanes share a block, each adding its integer share: any split
// and order give the same i32), its f32 terms go to workgroup memory, and thread m adds
// them in j order: acc = f32(acc + f32(f32(scale·d)·Σ)) (+ the offset term) — one f32 chain.
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER, rmsRowOpening, treeSum } from './common.js';
import { dot4Source, hasOffsetType, packedBias, packedBlockDecoder } from './quant.js';

/** The base tile (MoE GEMMs, and M ≤ 16). */
export const TM = 16;
/** The tile sizes a dense matmul may use (each ≤ 64: the quantized path sums row t in thread t). */
export const MATMUL_TILES = [16, 32, 64] as const;

/** The tile of a dense matmul of M rows: the smallest tile ≥ M whose workgroup memory
 * (bytesPerRow · tile + extraBytes) fits the adapter's limit, else the largest that fits
 * (16 always: every adapter allows 16 KiB). */
export function matmulTile(m: number, bytesPerRow: number, extraBytes: number, limitBytes: number): number {
  let best: number = TM;
  for (const tile of MATMUL_TILES) {
    if (tile * bytesPerRow + extraBytes > limitBytes) break;
    best = tile;
    if (tile >= m) break;
  }
  return best;
}

/** Workgroup bytes per tile row of the quantized matmul: the integer sums of 64 blocks, then
 * their f32 terms in the same words (isum), and the offset terms of the offset types. */
export function quantTileRowBytes(type: QuantType): number {
  return 64 * 4 * (hasOffsetType(type) ? 2 : 1);
}

/** Workgroup bytes of a float matmul tile (wgsl/matmul-group.ts): per row, 64 f32 partial
 * sums (RED), plus the folded norm's 64-wide tree buffer. */
export function floatTileBytes(norm: boolean): { perRow: number; extra: number } {
  return { perRow: 64 * 4, extra: norm ? 64 * 4 : 0 };
}

/** The tile of a dense matmul of M rows: float (true: with the folded norm) or a quantized
 * type, under a workgroup memory limit. */
export function denseMatmulTile(m: number, kind: boolean | QuantType, limitBytes: number): number {
  if (typeof kind !== 'boolean') return matmulTile(m, quantTileRowBytes(kind), 0, limitBytes);
  const { perRow, extra } = floatTileBytes(kind);
  return matmulTile(m, perRow, extra, limitBytes);
}

/** Grouped MoE rows (wgsl/moe.ts): where a GEMM's output rows go. */
export type MoeRows = 'gather' | 'scatter';

/** PLAN (the MoE plan, read-only: its counts are uniform, so a tile exits before any barrier). */
export function moePlanBinding(binding: number): string {
  return `@group(0) @binding(${binding}) var<storage, read> PLAN: array<i32>;`;
}

/** rows (this tile's), rb (first input row): plain M rows from row 0, or the expert's run
 * of the plan (an empty tile returns before reading a weight). */
export function moeRowsPrelude(moe: MoeRows | null, expert: string, e: string, m: string): string {
  if (!moe) return `let rb = 0u;\n  let rows = min(TM, ${m} - m0);`;
  return `let cnt = u32(PLAN[${expert}]);
  if (m0 >= cnt) { return; }
  let rb = u32(PLAN[${e} + ${expert}]);
  let rows = min(TM, cnt - m0);
  let pe = 2u * ${e};`;
}

/** A grouped MoE GEMM's expert \`ex\` (moe only): the grid's z spans (expert of the
 * dispatch, row tile), so ex = P_expert (the weight part's first expert) + wid.z / P_tiles;
 * a one-expert dispatch has z < P_tiles, so ex = P_expert. A stack may hold each expert
 * twice (gate then up: ex in [0, 2E)): \`pex\` = ex mod E is the plan's expert, and the
 * second copy's rows go ex / E whole inputs (P_m rows) further in the output (moeOutRow). */
export function moeExpertLine(moe: MoeRows | null): string {
  return moe ? 'let ex = pu(P_expert) + wid.z / pu(P_tiles);\n  let pex = ex % pu(P_experts);' : '';
}

/** m0 (the tile's first row) and, for MoE, \`ex\` (moeExpertLine): the tile is wid.z, or
 * wid.z mod P_tiles when z also spans the experts. */
export function moeTileStart(moe: MoeRows | null): string {
  return moe ? `${moeExpertLine(moe)}\n  let m0 = (wid.z % pu(P_tiles)) * TM;` : 'let m0 = wid.z * TM;';
}

/** The weight row of output column \`col\`: a MoE part stacks its experts' rows (\`rows\`
 * each, expert P_expert first), so expert ex's column col is row (ex − P_expert)·rows + col. */
export function moeWeightRow(moe: MoeRows | null, col: string, rows: string): string {
  return moe ? `((ex - pu(P_expert)) * ${rows} + ${col})` : col;
}

/** The output row of tile row t (gather: P_m rows further per copy of the experts, moeExpertLine). */
export function moeOutRow(moe: MoeRows | null): string {
  if (moe === 'gather') return '((ex / pu(P_experts)) * pu(P_m) + rb + m0 + t)';
  return moe === 'scatter' ? 'u32(PLAN[pe + rb + m0 + t])' : '(rb + m0 + t)';
}

// Float weights: wgsl/matmul-group.ts (one weight or several in one dispatch).

// params: PARAMS.quant_acts (params.ts). Bindings: 1 QX (u32 [M, K/4]: 4 int8 lanes, element 4w + lane),
// 2 DX f32 [M, K/32], 3 SX i32 [M, K/32], 4 X, gate: 5 GB.
/** `gate` (a quantized matmulAdd's gated input): the thread first writes its block's
 * x ⊙ act(g) into X in place (ELEMENTWISE's expression, wgsl/dense.ts) and quantizes what
 * it wrote — the bits of the element-wise dispatch then QUANT_ACTS. */
export function quantActsShader(packedBuiltin: boolean, gate: 'silu' | 'sigmoid' | null = null): string {
  const gated = gate ? `
  let go = pu(P_gateOff) + b * 32u;
  for (var l = 0u; l < 32u; l++) {
    let a = X[xo + l];
    let g = GB[go + l];
    var y: f32;
    y = a * ${gate}(g);
    X[xo + l] = y;
  }` : '';
  return `${HEADER}
${paramConsts('quant_acts')}
${QUANT_ACTS_BINDINGS}
${gate ? '@group(0) @binding(5) var<storage, read_write> GB: array<f32>;' : ''}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let b = group_id(wid, nwg) * 64u + t;
  let K = pu(P_k);
  let nb = K / 32u;
  if (b >= pu(P_m) * nb) { return; }
  let xo = pu(P_xOff) + b * 32u;${gated}
  quant_block(b, xo);
}
${quantBlockFn('X', packedBuiltin)}`;
}

export const QUANT_ACTS_BINDINGS = `@group(0) @binding(1) var<storage, read_write> QX: array<u32>;
@group(0) @binding(2) var<storage, read_write> DX: array<f32>;
@group(0) @binding(3) var<storage, read_write> SX: array<i32>;
@group(0) @binding(4) var<storage, read_write> X: array<f32>;`;

/** QUANT_ACTS' QX word from q[0..3] (element 4w + i in byte i). */
export function packQuad(packedBuiltin: boolean): string {
  return packedBuiltin ? 'pack4xI8(vec4<i32>(q[0], q[1], q[2], q[3]))'
    : '(u32(q[0]) & 0xffu) | ((u32(q[1]) & 0xffu) << 8u) | ((u32(q[2]) & 0xffu) << 16u) | ((u32(q[3]) & 0xffu) << 24u)';
}

/** quant_block(b, xo): block b (32 elements of SRC from xo) quantized to int8 lanes, its
 * scale and its lanes' sum — the one QUANT_ACTS expression both shaders use. */
export function quantBlockFn(src: string, packedBuiltin: boolean): string {
  const pack = packQuad(packedBuiltin);
  return `fn quant_block(b: u32, xo: u32) {
  var amax = 0.0;
  for (var l = 0u; l < 32u; l++) { amax = max(amax, abs(${src}[xo + l])); }
  let d = amax / 127.0;
  let id = select(0.0, 1.0 / d, d != 0.0);
  var s = 0;
  for (var w = 0u; w < 8u; w++) {
    var q: array<i32, 4>;
    for (var i = 0u; i < 4u; i++) { q[i] = i32(round(${src}[xo + 4u * w + i] * id)); s += q[i]; }
    QX[b * 8u + w] = ${pack};
  }
  DX[b] = d;
  SX[b] = s;
}`;
}

/** The header, parameters, bindings and tree sum every norm_quant_acts layout declares. */
export function normQuantActsDecls(): string {
  return `${HEADER}
${paramConsts('norm_quant_acts')}
${QUANT_ACTS_BINDINGS}
@group(0) @binding(5) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(6) var<storage, read_write> WV: array<f32>;
${treeSum()}`;
}

// A matmulGroup's input norm and the activation quantization in one dispatch (quantized
// weights): one workgroup per row computes NORM's expression in NORM's order (wgsl/dense.ts:
// thread t sums p ≡ t mod 64, then the same tree) and stores the normed row to OUT as NORM
// does; after a storage barrier (the row is this workgroup's own) thread t quantizes blocks
// j ≡ t (mod 64) of it from OUT — the loads QUANT_ACTS makes after NORM, so the bits of the
// two dispatches.
// params: PARAMS.norm_quant_acts. Bindings: 1 QX, 2 DX, 3 SX, 4 X (the input), 5 OUT (the
// normed rows), 6 WV (the norm weight, f32 [K]).
export function normQuantActsShader(packedBuiltin: boolean): string {
  return `${normQuantActsDecls()}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${rmsRowOpening('P_m', 'P_k')}
  for (var p = t; p < d; p += 64u) {
    var y: f32;
    y = X[xo + p] * inv * select(WV[p], 1.0 + WV[p], pu(P_zeroCentered) == 1u);
    OUT[oo + p] = y;
  }
  storageBarrier();
  let nb = d / 32u;
  for (var j = t; j < nb; j += 64u) { quant_block(row * nb + j, oo + j * 32u); }
}
${quantBlockFn('OUT', packedBuiltin)}`;
}

/** The per-(row, block) integer dot products and their f32 terms into workgroup memory
 * (`term`, `offt`), for tile rows r < rows of column `col` (row byte `row`, block j). */
function quantTerms(type: QuantType): string {
  const offs = hasOffsetType(type);
  const q6 = type === 'q6_k';
  const sumi = q6
    ? `var s0 = 0;
        for (var w = 0u; w < 4u; w++) { s0 += dot4(0x01010101u, QX[xo + w]); }
        let s1 = SX[(rb + m0 + r) * nb + j] - s0;
        let sumi = sb.q6a * (d0 - 32 * s0) + sb.q6b * (d1 - 32 * s1);`
    : 'let sumi = d0 + d1 - sb.bias * SX[(rb + m0 + r) * nb + j];';
  // per (row r of the tile, this thread's block j): the integer dot product and its f32 terms
  const terms = `      for (var r = 0u; r < rows; r++) {
        let xo = ((rb + m0 + r) * K + j * 32u) / 4u;
        var d0 = 0;
        var d1 = 0;
        for (var w = 0u; w < 4u; w++) { d0 += dot4(QP[w], QX[xo + w]); d1 += dot4(QP[w + 4u], QX[xo + w + 4u]); }
        ${sumi}
        let dx = DX[(rb + m0 + r) * nb + j];
        term[r * 64u + t] = (sb.scale * dx) * f32(sumi);
        ${offs ? 'offt[r * 64u + t] = (sb.offset * dx) * f32(SX[(rb + m0 + r) * nb + j]);' : ''}
      }`;
  return terms;
}

/** Lane w's share of block j's integer sum for row xr (\`c\`, from its word qw[i] and the
 * activation word \`a\`): Σ over the 8 lanes is, in i32 (wrapping: a ring, so any split and
 * order), exactly quantTerms' sumi: d0 + d1 − bias·SX (lane 0 carries the SX term); Q6_K's
 * q6a·(d0 − 32·s0) + q6b·(d1 − 32·(SX − s0)) = Σ_{w<4} (q6a·dq + 32·(q6b − q6a)·s) +
 * Σ_{w≥4} q6b·dq − 32·q6b·SX, with the lane's factors (q6[i]: dq's, s's, SX's) made once
 * per block in the word loop. */
function laneShare(type: QuantType): string {
  const sx = 'SX[xr * nb + j]';
  if (type === 'q6_k') return `let c = q6[i].x * dot4(qw[i], a) + q6[i].y * dot4(0x01010101u, a) - select(0, q6[i].z * ${sx}, w == 0u);`;
  const bias = packedBias(type);
  return bias === 0 ? 'let c = dot4(qw[i], a);' : `let c = dot4(qw[i], a) - select(0, ${bias} * ${sx}, w == 0u);`;
}

/** The workgroup's integer sums per (tile row, block of the chunk): the tiled body's lanes add
 * their shares (integer adds: exact in any order); thread t then stores block t's f32 term's
 * bits in place, and thread m reads and zeroes its row's in the chain (the next chunk's sums
 * start at 0). */
export function quantSumsDecl(tm: number, layout: QuantLayout = 'lanes'): string {
  if (layout === 'block') return `var<workgroup> term: array<f32, ${tm * 64}>;`;
  return `var<workgroup> isum: array<atomic<i32>, ${tm * 64}>;`;
}

/** How a tiled quantized matmul's threads share the weight blocks: 'lanes' (8 lanes a block,
 * coalesced: what a GPU wants) or 'block' (thread t decodes block j ≡ t mod 64 whole, its
 * integer sums in the thread: CPU adapters, where lavapipe runs the lanes' workgroup atomics
 * at ~1.8× the CPU time). Both give the same bits: each block's integer sum is exact, and the
 * f32 chain over blocks is the same in both. */
export type QuantLayout = 'lanes' | 'block';

/** The 'block' layout's tiled body: thread t's block's integer sums and f32 terms for every
 * tile row (quantTerms), then thread m chains its row's terms in j order. */
function blockTiledBody(type: QuantType, accumulate: boolean, moe: MoeRows | null): string {
  const offs = hasOffsetType(type);
  return `  ${moeTileStart(moe)}
  ${moeRowsPrelude(moe, 'pex', 'pu(P_experts)', 'pu(P_m)')}
  let row = ${moeWeightRow(moe, 'col', 'pu(P_rows)')} * pu(P_rowBytes);
  var acc = 0.0;
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
    let j = c0 + t;
    if (j < nb) {
      let sb = packed_block(row, j);
${quantTerms(type)}
    }
    workgroupBarrier();
    if (t < rows) {
      let n = min(64u, nb - c0);
      for (var jj = 0u; jj < n; jj++) {
        acc = acc + term[t * 64u + jj];
        ${offs ? 'acc = acc + offt[t * 64u + jj];' : ''}
      }
    }
    workgroupBarrier();
  }
  if (t < rows) { let o = pu(P_outOff) + ${moeOutRow(moe)} * pu(P_outStride) + pu(P_col0) + col; OUT[o] = ${accumulate ? 'OUT[o] + ' : ''}acc; }
`;
}

/** Lane w's weight words of blocks (t >> 3) + 8i (i < 8) of the chunk from c0, all loaded
 * before any is used (qw; Q6_K also its lane factors q6: laneShare's). Shared by the tiled
 * body and wgsl/qmatmul-acts.ts. */
export function laneWeightWords(q6: boolean): string {
  return `    var qw: array<u32, 8>;
    ${q6 ? 'var q6: array<vec3<i32>, 8>;' : ''}
    for (var i = 0u; i < 8u; i++) {
      let j = c0 + (t >> 3u) + 8u * i;
      if (j < nb) {
        qw[i] = packed_word(row, j, w);
        ${q6 ? 'let sc = packed_q6(row, j);\n        q6[i] = vec3<i32>(select(sc.y, sc.x, w < 4u), select(0, 32 * (sc.y - sc.x), w < 4u), 32 * sc.y);' : ''}
      }
    }`;
}

/** Thread m (< rows) adds its row's f32 terms of the chunk in block order, reading each
 * from isum (where thread t stored block c0 + t's term's bits) and zeroing it for the next
 * chunk's integer sums — the one f32 chain of the lanes' kernels (the tiled body and
 * wgsl/qmatmul-acts.ts), between the barriers that order it. */
export function laneTermChain(offs: boolean): string {
  return `    workgroupBarrier();
    if (t < rows) {
      let n = min(64u, nb - c0);
      for (var jj = 0u; jj < n; jj++) {
        acc = acc + bitcast<f32>(atomicExchange(&isum[t * 64u + jj], 0));
        ${offs ? 'acc = acc + offt[t * 64u + jj];' : ''}
      }
    }
    workgroupBarrier();`;
}

/** The tiled (not `whole`) body: tile wid.z of rows, the sum of column `col` in block order.
 * Per chunk of 64 blocks, 8 lanes share a block: lane t reads word w = t & 7 of blocks
 * (t >> 3) + 8i (i < 8), so a warp's load covers 4 blocks' consecutive bytes, and the
 * activation words it pairs with are consecutive too. Each lane adds its integer share into
 * isum (laneShare); then thread t forms block c0 + t's f32 terms from the exact sums, as
 * quantTerms does (stored in place of the sums), and thread m chains them in j order. */
export function quantTiledBody(type: QuantType, accumulate: boolean, moe: MoeRows | null, layout: QuantLayout = 'lanes'): string {
  if (layout === 'block') return blockTiledBody(type, accumulate, moe);
  const offs = hasOffsetType(type);
  const q6 = type === 'q6_k';
  return `  ${moeTileStart(moe)}
  ${moeRowsPrelude(moe, 'pex', 'pu(P_experts)', 'pu(P_m)')}
  let row = ${moeWeightRow(moe, 'col', 'pu(P_rows)')} * pu(P_rowBytes);
  let w = t & 7u;
  var acc = 0.0;
  for (var r = 0u; r < rows; r++) { atomicStore(&isum[r * 64u + t], 0); }
  workgroupBarrier();
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
${laneWeightWords(q6)}
    for (var r = 0u; r < rows; r++) {
      let xr = rb + m0 + r;
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          let a = QX[(xr * K + j * 32u) / 4u + w];
          ${laneShare(type)}
          atomicAdd(&isum[r * 64u + jb], c);
        }
      }
    }
    workgroupBarrier();
    let j = c0 + t;
    if (j < nb) {
      let sb = packed_head(row, j);
      for (var r = 0u; r < rows; r++) {
        let xr = rb + m0 + r;
        let sumi = atomicLoad(&isum[r * 64u + t]);
        let dx = DX[xr * nb + j];
        atomicStore(&isum[r * 64u + t], bitcast<i32>((sb.scale * dx) * f32(sumi)));
        ${offs ? 'offt[r * 64u + t] = (sb.offset * dx) * f32(SX[xr * nb + j]);' : ''}
      }
    }
${laneTermChain(offs)}
  }
  if (t < rows) { let o = pu(P_outOff) + ${moeOutRow(moe)} * pu(P_outStride) + pu(P_col0) + col; OUT[o] = ${accumulate ? 'OUT[o] + ' : ''}acc; }
`;
}

// params: PARAMS.qmatmul (params.ts): rows in the part, out row stride (N), expert and E
// (moe only; m: not moe).
// Bindings: 1 OUT, 2 QX, 3 DX, 4 SX, 5 W (the part's blocks). Per (row, sub-block) the
// integer sum is 8 dot4 of packed lanes minus bias·Σx (Q6_K: per 16-group, scaled) — the
// exact integer the ref forms; the f32 terms are then chained in sub-block order.
/** `accumulate`: out += the sum (Kernels.matmulAdd). */
/** `moe`, `whole`: floatMatmulGroupShader's (whole: any K); binding 6 PLAN. `tm`: rows per tile. */
export function quantMatmulShader(type: QuantType, packedBuiltin: boolean, accumulate = false, moe: MoeRows | null = null, whole = false, tm = TM,
  layout: QuantLayout = 'lanes'): string {
  if (!(MATMUL_TILES as readonly number[]).includes(tm)) throw new RangeError(`quant matmul: a tile of ${tm} rows`);
  if (whole && (!moe || accumulate)) throw new Error('quant matmul: whole-expert tiles are for MoE GEMMs without accumulate');
  const offs = hasOffsetType(type);
  const terms = quantTerms(type);
  const tiledBody = quantTiledBody(type, accumulate, moe, layout);
  // whole: one workgroup runs all of the expert's tiles; each block is decoded once (QP, sb
  // stay in the thread across tiles) and each row's f32 chain continues in OUT (stored and
  // reloaded exactly), in the tiled body's order
  const wholeBody = `  ${moeExpertLine(moe)}
  let cnt = u32(PLAN[pex]);
  if (cnt == 0u) { return; }
  let rb = u32(PLAN[pu(P_experts) + pex]);
  let pe = 2u * pu(P_experts);
  let row = ${moeWeightRow(moe, 'col', 'pu(P_rows)')} * pu(P_rowBytes);
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
    let j = c0 + t;
    var sb: PB;
    if (j < nb) { sb = packed_block(row, j); }
    for (var m0 = 0u; m0 < cnt; m0 += TM) {
      let rows = min(TM, cnt - m0);
      if (j < nb) {
  ${terms}
      }
      workgroupBarrier();
      if (t < rows) {
        let o = pu(P_outOff) + ${moeOutRow(moe)} * pu(P_outStride) + pu(P_col0) + col;
        var acc = select(OUT[o], 0.0, c0 == 0u);
        let n = min(64u, nb - c0);
        for (var jj = 0u; jj < n; jj++) {
          acc = acc + term[t * 64u + jj];
          ${offs ? 'acc = acc + offt[t * 64u + jj];' : ''}
        }
        OUT[o] = acc;
      }
      workgroupBarrier();
    }
  }
`;
  return `${HEADER}
${paramConsts('qmatmul')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> QX: array<u32>;
@group(0) @binding(3) var<storage, read_write> DX: array<f32>;
@group(0) @binding(4) var<storage, read_write> SX: array<i32>;
@group(0) @binding(5) var<storage, read_write> W: array<u32>;
${moe ? moePlanBinding(6) : ''}
${BYTES}
${packedBlockDecoder(type)}
${dot4Source(packedBuiltin)}
const TM = ${tm}u;
${whole ? `var<workgroup> term: array<f32, ${tm * 64}>;` : quantSumsDecl(tm, layout)}
${offs ? `var<workgroup> offt: array<f32, ${tm * 64}>;` : ''}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let col = group_id(wid, nwg);
  if (col >= pu(P_rows)) { return; }
  let K = pu(P_k);
  let nb = K / 32u;
${whole ? wholeBody : tiledBody}}`;
}
