// A quantized matmul of few rows (M ≤ ACTS_TILE) that quantizes its own activations: one
// dispatch where quant_acts + qmatmul were two (issue #47: decode dispatches per layer).
// Every workgroup quantizes the 32-blocks of the tile's rows it needs, chunk by chunk, with
// QUANT_ACTS' expressions (wgsl/matmul.ts quant_block; the gated product is ELEMENTWISE's,
// as quantActsShader's): the block maximum |y| is a max over the block's 8 lanes (exact in
// any order; |y| ≥ 0 orders as its bits, so atomicMax on them), then d = amax / 127 and each
// lane quantizes and packs its 4 elements — word w of the block, QX's word — and pairs it with
// its weight word (the tiled body's lanes, quantTiledBody). The integer shares add up to
// quantTerms' sumi as there (the bias and Q6_K SX terms distributed over the lanes' own sums:
// Σ_w s_w = SX), the f32 terms and the j-order chain are the tiled body's: the bits of
// quantActs then the qmatmul. x is left as it was (Kernels.matmulAdd allows it). Each input
// element is formed twice (act_at in the max pass and in the quantizing pass): keeping the
// lane's 32 values in registers across the barrier made lavapipe's compile take 7–120 s.
// C columns a workgroup (`cols`; ACTS_COLUMNS on a GPU adapter): the max pass, the
// quantizing and packing are done once for C output columns — each lane pairs its int8 word
// with the C columns' weight words — where a one-column workgroup redid them per column
// (the input's f32 loads, ~4–8 bytes per weight element at C = 1, ÷ C). Each column's
// integer sums, f32 terms and j-order chain are the one-column kernel's: the same bits.
// With `vec` (xOff, gateOff ≡ 0 mod 4) a lane's 4 elements are one vec4<f32> load.
// params: PARAMS.qmatmul_acts. Bindings: 1 OUT, 2 X (f32 [M, K] from xOff), 3 W (the part's
// blocks), gate: 4 GB (f32 [M, K] from gateOff).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER } from './common.js';
import { convFoldSteps, convFoldStore, type ConvFoldShape } from './conv-fold.js';
import { quantSumsDecl } from './matmul.js';
import { dot4Source, hasOffsetType, packedBias, packedBlockDecoder } from './quant.js';

/** Rows one workgroup of the activation-quantizing matmul holds (a tile; grid z the tiles). */
export const ACTS_TILE = 4;

/** The most rows the activation-quantizing matmuls serve (an MTP verify of k ≤ 7 drafts),
 * ACTS_TILE a workgroup: past one tile each tile reads the weights again, which costs less
 * than the quantized activations' own dispatches (`norm_quant_acts` / `quant_acts`, ~5 a
 * layer) on a step bound by the host's time per dispatch (docs/kernels.md "Batch M > 1"). */
export const ACTS_FOLD_ROWS = 2 * ACTS_TILE;

/** Output columns a GPU adapter's activation-quantizing workgroup computes (C): its rows'
 * per-workgroup input work — the norm's inv, the block maxima, the quantizing and packing —
 * is done once for C columns (each lane pairs its int8 word with C weight words). 8: the
 * batch model's pick (docs/kernels.md; 4b and 0.8b grids keep ≥ 128 workgroups a dispatch). */
export const ACTS_COLUMNS = 8;

/** The tile of a conv fold's steps variant whose sequences cross an ACTS_TILE boundary (a
 * verify of 5 rows, three streams' 4-row verifies): every row of M ≤ ACTS_FOLD_ROWS in one
 * workgroup (TM = 8, C·TM ≤ 64 chains), so a sequence's first-row thread sees all its rows. */
export const CONV_STEPS_TILE = ACTS_FOLD_ROWS;

/** Workgroup bytes of the activation-quantizing kernel at C = `cols`, `tm` rows a tile
 * (actsWorkgroupDecls, and the folded norm's 64-float tree). */
export function actsWorkgroupBytes(type: QuantType, cols: number, tm = ACTS_TILE): number {
  const perColumn = (hasOffsetType(type) ? 2 : 1) * tm * 64 * 4;
  return cols * perColumn + (hasOffsetType(type) ? 2 : 1) * tm * 64 * 4 + 64 * 4;
}

/** The most columns ≤ `cols` (halving) whose workgroup memory fits `limitBytes` (an offset
 * type's C = 8 needs ~18 KB: past WebGPU's 16 KB default limit, within a GPU's 32–48 KB). */
export function actsColumnsWithin(type: QuantType, cols: number, limitBytes: number, tm = ACTS_TILE): number {
  let c = cols;
  while (c > 1 && (actsWorkgroupBytes(type, c, tm) > limitBytes || c * tm > 64)) c = Math.max(1, Math.floor(c / 2));
  return c;
}

/** Lane w's integer share `v` from its packed word `a`, its own 4-element sum `s` and the
 * weight word qw[k] (Q6_K: its scales q6[k]). */
function laneShare(type: QuantType, k: string, v: string): string {
  if (type === 'q6_k') return `let ${v} = q6[${k}].x * dot4(qw[${k}], a) + q6[${k}].y * s - q6[${k}].z * s;`;
  const bias = packedBias(type);
  return bias === 0 ? `let ${v} = dot4(qw[${k}], a);` : `let ${v} = dot4(qw[${k}], a) - ${bias} * s;`;
}

/** The lanes' pack of q[0..3] into one word (QUANT_ACTS' QX word). */
function packLanes(packedBuiltin: boolean): string {
  return packedBuiltin ? 'pack4xI8(vec4<i32>(q[0], q[1], q[2], q[3]))'
    : '(u32(q[0]) & 0xffu) | ((u32(q[1]) & 0xffu) << 8u) | ((u32(q[2]) & 0xffu) << 16u) | ((u32(q[3]) & 0xffu) << 24u)';
}

/** The f32 input X (and gate GB) bindings and their readers: xs(i) element i, and with `vec`
 * (the input's offsets ≡ 0 mod 4) the arrays are of vec4<f32>, so a lane's 4 elements are
 * one 16-byte load (x4(i), g4(i): elements i..i+3, i ≡ 0 mod 4). */
export function actsInputDecls(xBinding: number, gateBinding: number | null, vec: boolean): string {
  const arr = (name: string, binding: number): string => `@group(0) @binding(${binding}) var<storage, read_write> ${name}: array<${vec ? 'vec4<f32>' : 'f32'}>;`;
  return `${arr('X', xBinding)}
${gateBinding === null ? '' : arr('GB', gateBinding)}
fn xs(i: u32) -> f32 { return X[${vec ? 'i >> 2u][i & 3u' : 'i'}]; }
${vec ? `fn x4(i: u32) -> vec4<f32> { return X[i >> 2u]; }
${gateBinding === null ? '' : 'fn g4(i: u32) -> vec4<f32> { return GB[i >> 2u]; }'}` : ''}`;
}

/** act_at's body for a plain or gated input: x, or QUANT_ACTS' gated product (ELEMENTWISE's
 * expression); e is the element of X (and GB) past their offsets. Scalar bindings only. */
export function plainOrGatedAct(gate: 'silu' | 'sigmoid' | null): string {
  return gate ? `let a = X[pu(P_xOff) + e];
  let g = GB[pu(P_gateOff) + e];
  var y: f32;
  y = a * ${gate}(g);
  return y;` : 'return X[pu(P_xOff) + e];';
}

/** act4's body over vec4 bindings for a plain or gated input: elements e..e+3 (e ≡ 0 mod 4),
 * each the scalar act_at's value (the same product per component). */
export function plainOrGatedAct4(gate: 'silu' | 'sigmoid' | null): string {
  return gate ? `let a = x4(pu(P_xOff) + e);
  let g = g4(pu(P_gateOff) + e);
  var y: vec4<f32>;
  for (var l = 0u; l < 4u; l++) { y[l] = a[l] * ${gate}(g[l]); }
  return y;` : 'return x4(pu(P_xOff) + e);';
}

/** The workgroup memory of the activation-quantizing body (TM = `tm` rows, ACTS_TILE but for
 * CONV_STEPS_TILE; C columns): the integer sums and offset terms per (column, row, block), the
 * block maxima and (offset types) the blocks' activation sums per (row, block). */
export function actsWorkgroupDecls(type: QuantType, cols = 1, tm = ACTS_TILE): string {
  if (cols * tm > 64) throw new RangeError(`quant acts: ${cols} columns × ${tm} rows past the 64 chain threads`);
  return `const TM = ${tm}u;
const C = ${cols}u;
${hasOffsetType(type) ? `var<workgroup> offt: array<f32, ${cols * tm * 64}>;
var<workgroup> ssum: array<atomic<i32>, ${tm * 64}>;` : ''}
${quantSumsDecl(cols * tm)}
var<workgroup> amx: array<atomic<u32>, ${tm * 64}>;`;
}

/** Output columns cb..min(cb + C, last + 1) − 1 over the tile's rows (cb, last, m0, rows, K,
 * nb, t in scope): per chunk of 64 blocks the C columns' weight words, the max pass, the
 * quantizing pass (each lane's word paired with its C weight words), the f32 terms and the
 * chains — thread c·TM + r chains column c's row r in j order, as thread r did for one
 * column. The input words are act4(e), or act4(e, r, p) with `rowAndColumn`: elements
 * e..e+3, e = (m0 + r)·K + p (row r of the tile, column p of x). Ends with the stores to OUT
 * at P_outOff / P_outStride / P_col0 (`conv`: through the conv fold, actsStore). Columns
 * past `last` (the part's last row) repeat its weights and are not stored. `tm`: TM, as
 * actsWorkgroupDecls'. */
export function actsColumnBody(type: QuantType, packedBuiltin: boolean, accumulate: boolean, rowAndColumn = false, cols = 1,
  conv: ConvFoldShape | null = null, tm = ACTS_TILE): string {
  return `${actsColumnSums(type, packedBuiltin, rowAndColumn, cols, tm)}
${actsStore(accumulate, conv)}`;
}

/** actsColumnBody up to its stores: each thread's chain ends in `acc`. */
export function actsColumnSums(type: QuantType, packedBuiltin: boolean, rowAndColumn = false, cols = 1, tm = ACTS_TILE): string {
  if (!Number.isInteger(cols) || cols < 1) throw new RangeError(`quant acts: ${cols} columns`);
  const offs = hasOffsetType(type);
  const q6 = type === 'q6_k';
  const act = rowAndColumn ? 'act4(e, r, p)' : 'act4(e)';
  const pos = `let e = (m0 + r) * K + j * 32u + 4u * w;${rowAndColumn ? '\n          let p = j * 32u + 4u * w;' : ''}`;
  return `  let w = t & 7u;
  var acc = 0.0;
  for (var r = 0u; r < rows; r++) {
    for (var cc = 0u; cc < C; cc++) { atomicStore(&isum[(cc * TM + r) * 64u + t], 0); }
    atomicStore(&amx[r * 64u + t], 0u);
    ${offs ? 'atomicStore(&ssum[r * 64u + t], 0);' : ''}
  }
  workgroupBarrier();
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
    // word w of blocks (t >> 3) + 8i (i < 8) of each column's weight row: qw[cc·8 + i]
    var qw: array<u32, ${8 * cols}>;
    ${q6 ? `var q6: array<vec3<i32>, ${8 * cols}>;` : ''}
    for (var cc = 0u; cc < C; cc++) {
      let row = min(cb + cc, last) * pu(P_rowBytes);
      for (var i = 0u; i < 8u; i++) {
        let j = c0 + (t >> 3u) + 8u * i;
        if (j < nb) {
          qw[cc * 8u + i] = packed_word(row, j, w);
          ${q6 ? 'let sc = packed_q6(row, j);\n          q6[cc * 8u + i] = vec3<i32>(select(sc.y, sc.x, w < 4u), select(0, 32 * (sc.y - sc.x), w < 4u), 32 * sc.y);' : ''}
        }
      }
    }
    // each block's max |y| over its 8 lanes
    for (var r = 0u; r < rows; r++) {
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          ${pos}
          let y = ${act};
          var mx = 0.0;
          for (var l = 0u; l < 4u; l++) { mx = max(mx, abs(y[l])); }
          atomicMax(&amx[r * 64u + jb], bitcast<u32>(mx));
        }
      }
    }
    workgroupBarrier();
    // the lane's 4 int8 (QUANT_ACTS' word w of the block) and its integer share of each column
    for (var r = 0u; r < rows; r++) {
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          ${pos}
          let y = ${act};
          let d = bitcast<f32>(atomicLoad(&amx[r * 64u + jb])) / 127.0;
          let id = select(0.0, 1.0 / d, d != 0.0);
          var q: array<i32, 4>;
          var s = 0;
          for (var l = 0u; l < 4u; l++) { q[l] = i32(round(y[l] * id)); s += q[l]; }
          let a = ${packLanes(packedBuiltin)};
          for (var cc = 0u; cc < C; cc++) {
            ${laneShare(type, 'cc * 8u + i', 'c')}
            atomicAdd(&isum[(cc * TM + r) * 64u + jb], c);
          }
          ${offs ? 'atomicAdd(&ssum[r * 64u + jb], s);' : ''}
        }
      }
    }
    workgroupBarrier();
    // thread t: block c0 + t's f32 terms, per column and row, in place of the integer sums
    let j = c0 + t;
    if (j < nb) {
      var dx: array<f32, ${tm}>;
      ${offs ? `var sx: array<f32, ${tm}>;` : ''}
      for (var r = 0u; r < rows; r++) {
        dx[r] = bitcast<f32>(atomicExchange(&amx[r * 64u + t], 0u)) / 127.0;
        ${offs ? 'sx[r] = f32(atomicExchange(&ssum[r * 64u + t], 0));' : ''}
      }
      for (var cc = 0u; cc < C; cc++) {
        let sb = packed_head(min(cb + cc, last) * pu(P_rowBytes), j);
        for (var r = 0u; r < rows; r++) {
          let slot = (cc * TM + r) * 64u + t;
          let sumi = atomicLoad(&isum[slot]);
          atomicStore(&isum[slot], bitcast<i32>((sb.scale * dx[r]) * f32(sumi)));
          ${offs ? 'offt[slot] = (sb.offset * dx[r]) * sx[r];' : ''}
        }
      }
    }
    // thread c·TM + r (r < rows) adds column c's row r terms of the chunk in block order
    workgroupBarrier();
    if (t < C * TM && t % TM < rows) {
      let n = min(64u, nb - c0);
      for (var jj = 0u; jj < n; jj++) {
        acc = acc + bitcast<f32>(atomicExchange(&isum[t * 64u + jj], 0));
        ${offs ? 'acc = acc + offt[t * 64u + jj];' : ''}
      }
    }
    workgroupBarrier();
  }`;
}

/** The body's end: thread c·TM + r stores column cb + c of row m0 + r, or with `conv` (a
 * conv segment, wgsl/conv-fold.ts) the conv of that value — that thread alone stores (row,
 * column), so it alone touches channel P_col0 + cb + c of the row's window; the steps variant
 * stores the pre-conv value, then after a storageBarrier the thread of a sequence's first
 * row runs the conv over its sequence's rows (all in this tile: convFoldPlan). */
export function actsStore(accumulate: boolean, conv: ConvFoldShape | null): string {
  if (conv && accumulate) throw new Error('quant acts: the conv fold is for a plain (not accumulating) matmul');
  // the fold's segment fields are the body's (SEG_OutStride = P_outStride, SEG_Col0 = P_col0)
  const fold = (text: string): string => text.replace(/\bSEG_(OutStride|Col0)\b/g, (_, f: string) => `P_${f[0]!.toLowerCase()}${f.slice(1)}`);
  const own = (text: string): string => `if (t < C * TM && t % TM < rows && cb + t / TM <= last) {
    let col = cb + t / TM;
    let o = pu(P_outOff) + (m0 + t % TM) * pu(P_outStride) + pu(P_col0) + col;
    ${text}
  }`;
  const plain = `OUT[o] = ${accumulate ? 'OUT[o] + ' : ''}acc;`;
  // (no conv: the text the kernels always had, so compiled pipelines stay cached)
  if (!conv) {
    return `  if (t < C * TM && t % TM < rows && cb + t / TM <= last) {
    let o = pu(P_outOff) + (m0 + t % TM) * pu(P_outStride) + pu(P_col0) + cb + t / TM;
    ${plain}
  }
`;
  }
  if (!conv.steps) return own(fold(convFoldStore('acc', '(m0 + t % TM)', conv.taps)));
  return `${own(plain)}
  storageBarrier();
  ${own(fold(convFoldSteps('(m0 + t % TM)', conv.taps)))}`;
}

/** The lone activation-quantizing matmul: C columns a workgroup (`cols`), vec4 input loads
 * with `vec` (xOff and gateOff ≡ 0 mod 4). */
export function quantMatmulActsShader(type: QuantType, packedBuiltin: boolean, accumulate: boolean, gate: 'silu' | 'sigmoid' | null, cols = 1, vec = false): string {
  return `${HEADER}
${paramConsts('qmatmul_acts')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
${actsInputDecls(2, gate ? 4 : null, vec)}
@group(0) @binding(3) var<storage, read_write> W: array<u32>;
${BYTES}
${packedBlockDecoder(type)}
${dot4Source(packedBuiltin)}
${actsWorkgroupDecls(type, cols)}
// elements e..e+3 of the input rows: x, or QUANT_ACTS' gated product
${vec ? `fn act4(e: u32) -> vec4<f32> {
  ${plainOrGatedAct4(gate)}
}` : `fn act_at(e: u32) -> f32 {
  ${plainOrGatedAct(gate)}
}
fn act4(e: u32) -> vec4<f32> { return vec4<f32>(act_at(e), act_at(e + 1u), act_at(e + 2u), act_at(e + 3u)); }`}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let cb = group_id(wid, nwg) * C;
  if (cb >= pu(P_rows)) { return; }
  let last = pu(P_rows) - 1u;
  let K = pu(P_k);
  let nb = K / 32u;
  let m0 = wid.z * TM;
  let rows = min(TM, pu(P_m) - m0);
${actsColumnBody(type, packedBuiltin, accumulate, false, cols)}}`;
}
