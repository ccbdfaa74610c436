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
// params: PARAMS.qmatmul_acts. Bindings: 1 OUT, 2 X (f32 [M, K] from xOff), 3 W (the part's
// blocks), gate: 4 GB (f32 [M, K] from gateOff).
import type { QuantType } from '../../quant/formats.js';
import { paramConsts } from '../params.js';
import { BYTES, HEADER } from './common.js';
import { laneTermChain, laneWeightWords, quantSumsDecl } from './matmul.js';
import { dot4Source, hasOffsetType, packedBias, packedBlockDecoder } from './quant.js';

/** Rows one workgroup of the activation-quantizing matmul holds (the largest M it serves). */
export const ACTS_TILE = 4;

/** Lane w's integer share from its packed word `a` and its own 4-element sum `s`. */
function laneShare(type: QuantType): string {
  if (type === 'q6_k') return 'let c = q6[i].x * dot4(qw[i], a) + q6[i].y * s - q6[i].z * s;';
  const bias = packedBias(type);
  return bias === 0 ? 'let c = dot4(qw[i], a);' : `let c = dot4(qw[i], a) - ${bias} * s;`;
}

/** The lanes' pack of q[0..3] into one word (QUANT_ACTS' QX word). */
function packLanes(packedBuiltin: boolean): string {
  return packedBuiltin ? 'pack4xI8(vec4<i32>(q[0], q[1], q[2], q[3]))'
    : '(u32(q[0]) & 0xffu) | ((u32(q[1]) & 0xffu) << 8u) | ((u32(q[2]) & 0xffu) << 16u) | ((u32(q[3]) & 0xffu) << 24u)';
}

/** act_at's body for a plain or gated input: x, or QUANT_ACTS' gated product (ELEMENTWISE's
 * expression); e is the element of X (and GB) past their offsets. */
export function plainOrGatedAct(gate: 'silu' | 'sigmoid' | null): string {
  return gate ? `let a = X[pu(P_xOff) + e];
  let g = GB[pu(P_gateOff) + e];
  var y: f32;
  y = a * ${gate}(g);
  return y;` : 'return X[pu(P_xOff) + e];';
}

/** The workgroup memory of the activation-quantizing body (TM = ACTS_TILE rows). */
export function actsWorkgroupDecls(type: QuantType): string {
  const tm = ACTS_TILE;
  return `const TM = ${tm}u;
${hasOffsetType(type) ? `var<workgroup> offt: array<f32, ${tm * 64}>;
var<workgroup> ssum: array<atomic<i32>, ${tm * 64}>;` : ''}
${quantSumsDecl(tm)}
var<workgroup> amx: array<atomic<u32>, ${tm * 64}>;`;
}

/** Output column `col` over the tile's rows (m0, rows; K, nb, t in scope): per chunk of 64
 * blocks the max pass, the quantizing pass with the lanes' integer shares, the f32 terms and
 * the chain. The input element e = (m0 + r)·K + p (row r of the tile, column p) is
 * act_at(e), or act_at(e, r, p) with `rowAndColumn`. Ends with the store to OUT at
 * P_outOff / P_outStride / P_col0. */
export function actsColumnBody(type: QuantType, packedBuiltin: boolean, accumulate: boolean, rowAndColumn = false): string {
  const offs = hasOffsetType(type);
  // element l of the lane's 4: act_at(e + l), or with its tile row and column (`rowAndColumn`)
  const at = (l: string): string => rowAndColumn ? `act_at(e + ${l}, r, p + ${l})` : `act_at(e + ${l})`;
  const pos = `let e = (m0 + r) * K + j * 32u + 4u * w;${rowAndColumn ? '\n          let p = j * 32u + 4u * w;' : ''}`;
  const q6 = type === 'q6_k';
  return `  let row = col * pu(P_rowBytes);
  let w = t & 7u;
  var acc = 0.0;
  for (var r = 0u; r < rows; r++) {
    atomicStore(&isum[r * 64u + t], 0);
    atomicStore(&amx[r * 64u + t], 0u);
    ${offs ? 'atomicStore(&ssum[r * 64u + t], 0);' : ''}
  }
  workgroupBarrier();
  for (var c0 = 0u; c0 < nb; c0 += 64u) {
${laneWeightWords(q6)}
    // each block's max |y| over its 8 lanes
    for (var r = 0u; r < rows; r++) {
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          ${pos}
          var mx = 0.0;
          for (var l = 0u; l < 4u; l++) { mx = max(mx, abs(${at('l')})); }
          atomicMax(&amx[r * 64u + jb], bitcast<u32>(mx));
        }
      }
    }
    workgroupBarrier();
    // the lane's 4 int8 (QUANT_ACTS' word w of the block) and its integer share
    for (var r = 0u; r < rows; r++) {
      for (var i = 0u; i < 8u; i++) {
        let jb = (t >> 3u) + 8u * i;
        let j = c0 + jb;
        if (j < nb) {
          ${pos}
          let d = bitcast<f32>(atomicLoad(&amx[r * 64u + jb])) / 127.0;
          let id = select(0.0, 1.0 / d, d != 0.0);
          var q: array<i32, 4>;
          var s = 0;
          for (var l = 0u; l < 4u; l++) { q[l] = i32(round(${at('l')} * id)); s += q[l]; }
          let a = ${packLanes(packedBuiltin)};
          ${laneShare(type)}
          atomicAdd(&isum[r * 64u + jb], c);
          ${offs ? 'atomicAdd(&ssum[r * 64u + jb], s);' : ''}
        }
      }
    }
    workgroupBarrier();
    let j = c0 + t;
    if (j < nb) {
      let sb = packed_head(row, j);
      for (var r = 0u; r < rows; r++) {
        let sumi = atomicLoad(&isum[r * 64u + t]);
        let dx = bitcast<f32>(atomicExchange(&amx[r * 64u + t], 0u)) / 127.0;
        atomicStore(&isum[r * 64u + t], bitcast<i32>((sb.scale * dx) * f32(sumi)));
        ${offs ? 'offt[r * 64u + t] = (sb.offset * dx) * f32(atomicExchange(&ssum[r * 64u + t], 0));' : ''}
      }
    }
${laneTermChain(offs)}
  }
  if (t < rows) { let o = pu(P_outOff) + (m0 + t) * pu(P_outStride) + pu(P_col0) + col; OUT[o] = ${accumulate ? 'OUT[o] + ' : ''}acc; }
`;
}

export function quantMatmulActsShader(type: QuantType, packedBuiltin: boolean, accumulate: boolean, gate: 'silu' | 'sigmoid' | null): string {
  return `${HEADER}
${paramConsts('qmatmul_acts')}
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> W: array<u32>;
${gate ? '@group(0) @binding(4) var<storage, read_write> GB: array<f32>;' : ''}
${BYTES}
${packedBlockDecoder(type)}
${dot4Source(packedBuiltin)}
${actsWorkgroupDecls(type)}
// element e of the input rows: x, or QUANT_ACTS' gated product
fn act_at(e: u32) -> f32 {
  ${plainOrGatedAct(gate)}
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let col = group_id(wid, nwg);
  if (col >= pu(P_rows)) { return; }
  let K = pu(P_k);
  let nb = K / 32u;
  let m0 = wid.z * TM;
  let rows = min(TM, pu(P_m) - m0);
${actsColumnBody(type, packedBuiltin, accumulate)}}`;
}
