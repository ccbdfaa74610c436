// The multi-column float matmul (Kernels.matmul / matmulGroup at M > 1 on a GPU): one
// workgroup computes FLOAT_COLUMNS output columns of one segment for its tile of rows
// (floatColumnsTile: columns × rows ≤ COLUMN_ACCUMULATORS), so
// each x unit a thread loads is multiplied against the columns' weight units (x read from
// L1 once per C columns, not once per column). Plain, accumulating, with the folded norm or
// a gated input; chunked loads; no MoE (wgsl/matmul-group.ts keeps MoE and element loads).
// Invariant (the same bits as floatMatmulGroupShader): each (row, column)'s sum is formed by
// the same f32 operations in the same order — thread t's units u ≡ t (mod 64), two an
// iteration (u0, then u0 + 64), each unit's 4 products added in element order into that
// (row, column)'s own sum (a named scalar: the tile's rows are unrolled, so a compiler can
// keep the C × tile sums in registers); then, column by column, the same fixed tree (or
// subgroupAdd and the subgroups' sums in order) through the same 64-wide buffer per row.
// The workgroup memory is the one-column kernel's (the columns are reduced one after
// another through it; the norm's tree buffer as there); the tile of rows is matmulTile's
// capped by the accumulators (floatColumnsTile). The norm's inverse RMS per row: the
// one-column kernel's loop and tree. The head norm (out_proj after the GDN column launch,
// `headNorm` = HV, 2 ≤ M ≤ 16): each tile row's per-head inverses formed once a workgroup by
// the one-column kernel's headNormInvs, the input element its (((o·inv)·w)·silu(z)) read
// through out_proj's head order (float-chunks.ts chunkSumLoopHeadNorm's expression): the bits
// of the gated norm pass then this kernel.
// Only the weight loads and put_out (the binding a store goes to) branch on the segment; its
// output fields are hoisted once (a store block per segment and column made lavapipe's
// compile of a 4-part group 1.25–1.4× longer at 16 rows, 2.5× at one).
// Segment s owns workgroup columns [seg<s>Start, seg<s>Start + ceil(seg<s>Rows / C)) and
// its workgroup j the columns j·C .. j·C + C − 1; a column ≥ seg<s>Rows loads a valid
// row (the last one) and is never stored.
import { paramConsts } from '../params.js';
import { HEADER, rowInvs, sideBySideTrees, treeSum } from './common.js';
import { headNormInvs, f32Input, floatChunkReader, floatMatmulEntry, headNormDecls, type FloatDType } from './float-chunks.js';
import { MATMUL_TILES, TM } from './matmul.js';
import { segmentPut } from './matmul-group.js';
import { convFoldDecls, convFoldSteps, convFoldStore, convSegment, type ConvFoldShape } from './conv-fold.js';

/** Output columns a multi-column workgroup computes. */
export const FLOAT_COLUMNS = 8;

/** The f32 accumulators a thread of a multi-column workgroup keeps, columns × tile rows, at
 * most, on a GPU (a register budget: 4 columns × 32 rows before, 8 × 16 now); a CPU adapter
 * takes fewer (launches.ts floatColumnAccumulators: its compile grows with them). */
export const COLUMN_ACCUMULATORS = 128;

/** The tiles of rows a multi-column workgroup may take: the dense matmul's, and below them
 * the small ones a smaller accumulator budget needs. */
export const COLUMN_TILES: readonly number[] = [4, 8, ...MATMUL_TILES];

/** The tile of rows of a `columns`-column workgroup: the dense matmul's tile `tm`
 * (matmulTile), or the largest tile of COLUMN_TILES that keeps columns × tile within
 * `accumulators` (8 columns within 128: 16 rows, so M = 32 runs two tiles, each reading the
 * weights: twice the weight traffic for half the x re-reads of 4 columns × 32 rows). */
export function floatColumnsTile(tm: number, columns: number, accumulators = COLUMN_ACCUMULATORS): number {
  const tile = [...COLUMN_TILES].reverse().find((t) => t <= tm && t * columns <= accumulators);
  if (tile === undefined) throw new RangeError(`matmul columns: no tile of ≤ ${tm} rows for ${columns} columns within ${accumulators} accumulators`);
  return tile;
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/** The unit loop of C columns over a tile of `tm` rows (`sg` (the segment, its weights
 * `wu<sg>`), `K`, `xb`, `rows`, `cb` (first column), `last` (the segment's last row) in
 * scope; `inv<r>` with the norm): `s<r>_<c>` is
 * (row r, column cb + c)'s sum. The rows are unrolled (row r's block runs where r < rows), so
 * every sum is a named scalar a compiler can keep in a register (a sum array indexed by a
 * runtime row would live in local memory). The input element is formed once for the C
 * columns by the one-column kernel's expression (`norm`: (x·inv)·w', `gate`: x·act(g)), so
 * each product is of the same two values, added in the one-column kernel's order. */
function columnsSumLoop(columns: number, tm: number, segments: number, norm: boolean, gate: 'silu' | 'sigmoid' | null, headNorm: boolean): string {
  const cs = range(columns);
  const comps = ['x', 'y', 'z', 'w'];
  const elem = (h: number, r: number, e: string): string => headNorm ? `(((x${h}.${e} * gi${h}) * nw${h}.${e}) * silu(z${h}.${e}))`
    : norm ? `((x${h}.${e} * inv${r}) * nw${h}.${e})` : gate ? `(x${h}.${e} * ${gate}(g${h}.${e}))` : `x${h}.${e}`;
  // the head norm's unit h: o and z at its source hs<h> (head ORD[k / dv]'s element), that head's inverse
  const load = (h: number, r: number): string => headNorm ? `let x${h} = xq(xo + hs${h}); let z${h} = zq(zo + hs${h}); let gi${h} = ginv[${r}u * GH + hs${h} / gdv];`
    : `let x${h} = xq(xo + 4u * u${h});${gate ? ` let g${h} = gq(go + 4u * u${h});` : ''}`;
  const input = (h: number, r: number): string => `${load(h, r)}
        let e${h} = vec4<f32>(${comps.map((e) => elem(h, r, e)).join(', ')});`;
  const adds = (h: number, r: number, c: number): string => comps.map((e) => `s${r}_${c} = s${r}_${c} + w${h}_${c}.${e} * e${h}.${e};`).join(' ');
  const row = (r: number): string => `if (${r}u < rows) {
        let xo = xb + ${r}u * K;
        ${gate ? 'let go = pu(P_gateOff) + xo - pu(P_xOff);' : headNorm ? 'let zo = pu(P_gnZOff) + xo - pu(P_xOff);' : ''}
        ${input(0, r)}
        ${cs.map((c) => adds(0, r, c)).join('\n        ')}
        if (has1) {
          ${input(1, r)}
          ${cs.map((c) => adds(1, r, c)).join('\n          ')}
        }
      }`;
  // the C columns' weight units from the segment's binding (wu<s>; the same loads for every segment's workgroups)
  const loads = range(segments).map((sg) => `${sg === 0 ? '' : 'else '}if (sg == ${sg}u) {
        ${cs.map((c) => `w0_${c} = wu${sg}(row${c} + u0); if (has1) { w1_${c} = wu${sg}(row${c} + u1); }`).join('\n        ')}
      }`).join(' ');
  return `let ku = K / 4u;
    for (var u0 = t; u0 < ku; u0 += 128u) {
      let u1 = u0 + 64u;
      let has1 = u1 < ku;
      ${cs.map((c) => `let row${c} = min(cb + ${c}u, last) * ku;
      var w0_${c} = vec4<f32>(0.0);
      var w1_${c} = vec4<f32>(0.0);`).join('\n      ')}
      ${loads}${norm ? `
      let nw0 = select(NW[u0], 1.0 + NW[u0], pu(P_zeroCentered) == 1u);
      var nw1 = vec4<f32>(0.0);
      if (has1) { nw1 = select(NW[u1], 1.0 + NW[u1], pu(P_zeroCentered) == 1u); }` : ''}${headNorm ? `
      let hs0 = head_src(4u * u0, gdv);
      let nw0 = NW[((4u * u0) % gdv) / 4u];
      var hs1 = 0u;
      var nw1 = vec4<f32>(0.0);
      if (has1) { hs1 = head_src(4u * u1, gdv); nw1 = NW[((4u * u1) % gdv) / 4u]; }` : ''}
      ${range(tm).map(row).join('\n      ')}
    }`;
}

/** The multi-column variant of floatMatmulGroupShader (plain or `accumulate`, chunked loads
 * `vec4` (x as vec4<f32>) or not (scalars); `conv` and `headNorm` (HV; 0: none) as there);
 * bindings and params as there, the segments' starts in workgroups (groupSegmentParams with `columns`). */
export function floatColumnsShader(dtype: FloatDType, segments: number, subgroups: boolean, accumulate: boolean, tm = TM, vec4 = true,
  columns = FLOAT_COLUMNS, norm = false, gate: 'silu' | 'sigmoid' | null = null, conv: ConvFoldShape | null = null, headNorm = 0): string {
  if (norm && gate) throw new Error('matmul columns: a norm and a gated input together');
  if (headNorm > 0 && (norm || gate || conv || segments !== 1)) throw new Error('matmul columns: the head norm input is alone, one segment');
  if (conv && accumulate) throw new Error('matmul columns: the conv fold is for a plain (not accumulating) group');
  if (!COLUMN_TILES.includes(tm)) throw new RangeError(`matmul columns: a tile of ${tm} rows`);
  if (!Number.isInteger(columns) || columns < 2) throw new RangeError(`matmul columns: ${columns} columns`);
  if (columns * tm > COLUMN_ACCUMULATORS) throw new RangeError(`matmul columns: ${columns} columns × ${tm} rows exceed ${COLUMN_ACCUMULATORS} accumulators`);
  const seg = (s: number, body: string): string => body.replace(/\bOUT\b/g, `OUT${s}`).replace(/\bwu\(/g, `wu${s}(`).replace(/\bSEG_/g, `P_seg${s}`);
  const readers = Array.from({ length: segments }, (_, s) =>
    floatChunkReader(dtype, 2 + segments + s).replace(/\bW\b/g, `W${s}`).replace(/\bwu\(/g, `wu${s}(`)).join('\n');
  const outs = Array.from({ length: segments }, (_, s) => `@group(0) @binding(${2 + s}) var<storage, read_write> OUT${s}: array<f32>;`).join('\n');
  // one store for every segment: its output fields hoisted (oOff, oStride, oCol0, segRows), the
  // binding chosen in put_out
  const plainPut = (v: string): string => `let o = oOff + (m0 + t) * oStride + oCol0 + col; put_out(sg, o, ${v});`;
  const store = subgroups ? `if (t < rows && col < segRows) {
      var sum = 0.0;
      for (var g = 0u; g < 64u / sgs; g++) { sum = sum + red[t * 64u + g]; }
      ${plainPut('sum')}
    }` : `if (t < rows && col < segRows) { ${plainPut('red[t * 64u]')} }`;
  // the conv of a conv segment's values (wgsl/conv-fold.ts), after the last barrier: thread t
  // reads back the pre-conv values it stored for its row and the C columns (its own writes),
  // (the steps variant: the first row's thread reads its sequence's rows, other threads'
  // stores, after a storageBarrier; a sequence's rows lie in one tile: M ≤ the tile),
  // one loop with nothing live across it (inline in each column's block, LLVM's coroutine
  // lowering of lavapipe's barriers spends minutes on the live sums)
  const convTail = (s: number): string => conv && convSegment(conv, s) ? `if (t < rows) {
    for (var cc0 = 0u; cc0 < ${columns}u; cc0++) {
      let col = cb + cc0;
      if (col < pu(SEG_Rows)) {
        let o = pu(SEG_OutOff) + (m0 + t) * pu(SEG_OutStride) + pu(SEG_Col0) + col;
        ${conv.steps ? convFoldSteps('(m0 + t)', conv.taps) : convFoldStore('OUT[o]', '(m0 + t)', conv.taps)}
      }
    }
  }` : '';
  // column c's sums through the one-column kernel's 64-wide buffer: the same subgroup sums or tree
  const reduce = (c: number): string => subgroups ? `${range(tm).map((r) => `if (${r}u < rows) {
      let v = subgroupAdd(s${r}_${c});
      if (sgi == 0u) { red[${r}u * 64u + t / sgs] = v; }
    }`).join('\n    ')}
    workgroupBarrier();` : `${range(tm).map((r) => `red[${r}u * 64u + t] = s${r}_${c};`).join(' ')}
    workgroupBarrier();
    ${sideBySideTrees('red', 'rows')}`;
  const branches = (body: string | ((s: number) => string)): string => Array.from({ length: segments }, (_, s) =>
    seg(s, `${s === 0 ? '' : 'else '}if (sg == ${s}u) { ${typeof body === 'string' ? body : body(s)} }`)).join(' ');
  const segmentOf = Array.from({ length: segments }, (_, s) => `if (${s}u < pu(P_segments) && gcol >= pu(P_seg${s}Start) && `
    + `gcol < pu(P_seg${s}Start) + (pu(P_seg${s}Rows) + ${columns - 1}u) / ${columns}u) { sg = ${s}u; }`).join('\n  ');
  return `${subgroups ? 'enable subgroups;' : ''}
${HEADER}
${paramConsts(headNorm > 0 ? 'matmul_head_norm' : 'matmul_group')}
${f32Input('X', 'x', 1, vec4)}
${outs}
${readers}
${gate ? f32Input('GB', 'g', 2 + 2 * segments, vec4) : ''}
${norm ? `@group(0) @binding(${2 + 2 * segments}) var<storage, read_write> NW: array<vec4<f32>>;
${treeSum('nred')}` : ''}${headNorm > 0 ? `
${headNormDecls(headNorm, tm, 2 + 2 * segments, vec4)}` : ''}${conv ? `
${convFoldDecls(2 + 2 * segments + (norm || gate ? 1 : 0), conv.steps)}` : ''}
${segmentPut(segments, accumulate)}
const TM = ${tm}u;
var<workgroup> red: array<f32, ${tm * 64}>;
${floatMatmulEntry(subgroups)}
  let m0 = wid.z * TM;
  var sg = ${segments}u;
  ${segmentOf}
  if (sg == ${segments}u) { return; }
  let rows = min(TM, pu(P_m) - m0);
  ${range(tm).map((r) => range(columns).map((c) => `var s${r}_${c} = 0.0;`).join(' ')).join('\n  ')}
  let xb = pu(P_xOff) + m0 * K;${norm ? `
  var inv: array<f32, ${tm}>;
  ${rowInvs('xs(xb + r * K + p)')}
  ${range(tm).map((r) => `let inv${r} = inv[${r}u];`).join(' ')}` : ''}${headNorm > 0 ? `
  ${headNormInvs(headNorm)}` : ''}
  // the segment's first column, last row and output fields
  var cb = 0u;
  var last = 0u;
  var segRows = 0u;
  var oOff = 0u;
  var oStride = 0u;
  var oCol0 = 0u;
  ${branches(`cb = (gcol - pu(SEG_Start)) * ${columns}u; segRows = pu(SEG_Rows); last = segRows - 1u;
    oOff = pu(SEG_OutOff); oStride = pu(SEG_OutStride); oCol0 = pu(SEG_Col0);`)}
  ${columnsSumLoop(columns, tm, segments, norm, gate, headNorm > 0)}
  // column by column through the one-column kernel's buffer and reduction
  ${range(columns).map((c) => `{
    ${reduce(c)}
    let col = cb + ${c}u;
    ${store}
    workgroupBarrier();
  }`).join('\n  ')}${conv ? `${conv.steps ? `
  storageBarrier();` : ''}
  ${branches(convTail)}` : ''}
}`;
}
