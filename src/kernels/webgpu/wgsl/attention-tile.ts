// Causal GQA attention over blocks of queries: a workgroup of WG threads per (KV head, block)
// where a block is up to QT queries = consecutive rows of ONE sequence × the G query heads of
// the KV head. Two shapes of the one text: decode / verify blocks (QT = ATTENTION_QMAX, 64
// threads) and prefill tiles (QT = 128 up to head dim 128, 64 at 256; 256 threads). K and V
// stream through workgroup memory in tiles of BC cache positions, each position loaded once
// per block of queries, K and V once each: no score scratch in device memory.
// Bits: every query runs the online softmax of wgsl/attention-online.ts over blocks of OB
// positions (BC divides OB), the per-(head, row) kernel's chains (wgsl/attention.ts):
// - score: thread t takes position ki = t mod BC of a K tile for queries qg + m·KG: Σ_d by
//   ob_dot from d = 0 up, ob_scale, into w[j·OB + i] (a K element read once serves QPT queries);
// - the block's fold (max, α, weights, l): thread j < nq for query j, by ob_block;
// - output: thread t holds (query, element) pairs t + WG·a; at a block's first V tile it
//   rescales by α, then adds e_i·v_id over the block's positions in order.
// Loop bounds that enclose barriers come from BT / TB (read-only: uniform).
// Every `var` is initialised where it is declared or by explicit stores before use (Dawn on
// lavapipe has kept a loop's `var` from the previous iteration).
import { HEADER } from './common.js';
import { ATTENTION_GROUP_BINDINGS, ATTENTION_QMAX } from './attention-group.js';
import { ONLINE_BLOCK, ONLINE_SOFTMAX } from './attention-online.js';

/** Threads of a prefill tile: the WebGPU default maxComputeInvocationsPerWorkgroup. */
export const TILE_THREADS = 256;

/** A block shape: WG threads, QT queries per workgroup, BC cache positions per K/V tile, head dim HD. */
export interface TileShape { readonly wg: number; readonly qt: number; readonly bc: number; readonly hd: number }

/** Workgroup bytes of a shape: the K/V tile (rows padded by one), a block's scores of every
 * query, per-query words (positions, q offset, m, l, α). */
export function tileWorkgroupBytes(s: TileShape): number {
  return 4 * (s.bc * (s.hd + 1) + s.qt * ONLINE_BLOCK + 5 * s.qt);
}

/** Output accumulators per thread: (query, element) pairs ÷ threads. */
function accPerThread(s: TileShape): number {
  return Math.ceil((s.qt * s.hd) / s.wg);
}

/** The K/V tile for (wg, qt, hd): BC a power of two from OB down whose bytes fit. */
function fitBc(wg: number, qt: number, hd: number, storageBytes: number): TileShape | null {
  for (let bc = ONLINE_BLOCK; bc >= 1; bc /= 2) {
    if (tileWorkgroupBytes({ wg, qt, bc, hd }) <= storageBytes) return { wg, qt, bc, hd };
  }
  return null;
}

/** The prefill tile for head dim `hd` within `storageBytes` of workgroup memory: QT keeps
 * each thread's output accumulators ≤ 64 (QT = 128 up to hd 128, 64 at hd 256); null when
 * none fits. */
export function tileShapeFor(hd: number, storageBytes: number): TileShape | null {
  const qt = Math.max(8, Math.min(128, 2 ** Math.floor(Math.log2((64 * TILE_THREADS) / hd))));
  return fitBc(TILE_THREADS, qt, hd, storageBytes);
}

/** The decode / verify block for head dim `hd`: ATTENTION_QMAX queries, 64 threads (256 past
 * head dim 256, keeping ≤ 64 accumulators a thread up to hd 1024); null when none fits. */
export function groupShapeFor(hd: number, storageBytes: number): TileShape | null {
  return fitBc(hd <= 256 ? 64 : TILE_THREADS, ATTENTION_QMAX, hd, storageBytes);
}

export function attentionTileShader(s: TileShape): string {
  const { wg: WG, qt: QT, bc: BC, hd: HD } = s;
  if (WG % BC !== 0 || QT > WG) throw new RangeError(`attention tile: ${BC} positions or ${QT} queries do not suit ${WG} threads`);
  return /* wgsl */ `${HEADER}
${ATTENTION_GROUP_BINDINGS}const QT = ${QT}u;
const BC = ${BC}u;
const HD = ${HD}u;
const WG = ${WG}u;
const KS = ${HD + 1}u; // a K/V row's stride in kv (padded: the BC threads of a group read different banks)
const KG = ${WG / BC}u; // query groups in the score phase
const QPT = ${Math.ceil((QT * BC) / WG)}u; // queries per thread in the score phase
const ACC = ${accPerThread(s)}u;
var<workgroup> kv: array<f32, ${BC * (HD + 1)}>;
var<workgroup> w: array<f32, ${QT * ONLINE_BLOCK}>;
var<workgroup> qn: array<u32, ${QT}>;
var<workgroup> qo: array<u32, ${QT}>;
var<workgroup> qm: array<f32, ${QT}>;
var<workgroup> ql: array<f32, ${QT}>;
var<workgroup> qa: array<f32, ${QT}>;
${ONLINE_SOFTMAX}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let kh = wid.x;
  let nH = pu(P_nH); let nKV = pu(P_nKV); let ps = pu(P_pageSize);
  let G = nH / nKV;
  let kvDim = nKV * HD;
  let r0 = u32(BT[pu(P_blockTable) + 2u * wid.y]);
  let rows = u32(BT[pu(P_blockTable) + 2u * wid.y + 1u]);
  let nq = rows * G;
  let rt = pu(P_rowTable);
  let seq = u32(TB[rt + 4u * r0]);
  let pt = rt + u32(TB[pu(P_seqTable) + 4u * seq + 3u]);
  // positions of the block: 0..(the last row's position); uniform (read-only tables)
  let nmax = u32(TB[rt + 4u * (r0 + rows - 1u) + 1u]) + 1u;
  // query j: row r0 + j / G, head kh·G + j % G; qn its positions, qo its q; (qm, ql) its state
  if (t < QT) {
    var n = 0u;
    var o = 0u;
    if (t < nq) {
      let r = r0 + t / G;
      n = u32(TB[rt + 4u * r + 1u]) + 1u;
      o = pu(P_qOff) + r * pu(P_qStride) + (kh * G + t % G) * HD;
    }
    qn[t] = n;
    qo[t] = o;
    qm[t] = OB_MIN;
    ql[t] = 0.0;
    qa[t] = 1.0;
  }
  workgroupBarrier();
  let ki = t % BC;
  let qg = t / BC;
  var qoff: array<u32, QPT>;
  for (var m = 0u; m < QPT; m++) { qoff[m] = qo[min(qg + m * KG, QT - 1u)]; }
  var acc: array<f32, ACC>;
  for (var a = 0u; a < ACC; a++) { acc[a] = 0.0; }
  for (var b0 = 0u; b0 < nmax; b0 += OB) {
    // the block's scores, a K tile at a time: w[j·OB + i] for position b0 + i of query j
    for (var s0 = b0; s0 < b0 + OB && s0 < nmax; s0 += BC) {
      ${loadTile('KC')}
      workgroupBarrier();
      var s: array<f32, QPT>;
      for (var m = 0u; m < QPT; m++) { s[m] = 0.0; }
      for (var d = 0u; d < HD; d++) {
        let kd = kv[ki * KS + d];
        for (var m = 0u; m < QPT; m++) { s[m] = ob_dot(s[m], Q[qoff[m] + d], kd); }
      }
      let p = s0 + ki;
      for (var m = 0u; m < QPT; m++) {
        let j = qg + m * KG;
        if (j < nq && p < qn[j]) { w[j * OB + p - b0] = ob_scale(s[m]); }
      }
      workgroupBarrier();
    }
    // each query folds its block (scores → weights; m, l, α)
    if (t < nq && b0 < qn[t]) {
      let r = ob_block(t * OB, min(OB, qn[t] - b0), vec2<f32>(qm[t], ql[t]));
      qm[t] = r.x;
      ql[t] = r.y;
      qa[t] = r.z;
    }
    workgroupBarrier();
    // values, a V tile at a time: pair (j, d) rescaled at the block's first tile, then Σ in order
    for (var s0 = b0; s0 < b0 + OB && s0 < nmax; s0 += BC) {
      ${loadTile('VC')}
      workgroupBarrier();
      for (var a = 0u; a < ACC; a++) {
        let j = (t + WG * a) / HD;
        if (j >= nq) { break; }
        let d = (t + WG * a) % HD;
        let n = qn[j];
        if (s0 < n) {
          var x = acc[a];
          if (s0 == b0) { x = ob_rescale(x, qa[j]); }
          let cnt = min(BC, n - s0);
          for (var i = 0u; i < cnt; i++) { x = ob_acc(x, w[j * OB + s0 - b0 + i], kv[i * KS + d]); }
          acc[a] = x;
        }
      }
      workgroupBarrier();
    }
  }
  for (var a = 0u; a < ACC; a++) {
    let j = (t + WG * a) / HD;
    if (j >= nq) { break; }
    let d = (t + WG * a) % HD;
    let r = r0 + j / G;
    let h = kh * G + j % G;
    OUT[pu(P_outOff) + (r * nH + h) * HD + d] = ob_out(acc[a], ql[j]);
  }
}`;
}

/** WGSL: cache positions [s0, s0 + BC) (those < nmax) of `src` (KC or VC) into kv. */
function loadTile(src: 'KC' | 'VC'): string {
  const off = src === 'KC' ? 'pu(P_kcOff)' : 'pu(P_vcOff)';
  return `for (var e = t; e < BC * HD; e += WG) {
        let p = s0 + e / HD;
        if (p < nmax) { kv[(e / HD) * KS + e % HD] = ${src}[${off} + (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * HD + e % HD]; }
      }`;
}
