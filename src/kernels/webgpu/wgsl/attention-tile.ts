// Causal GQA attention for long query blocks (prefill): a workgroup of 256 threads per (KV
// head, tile) where a tile is up to QT queries = consecutive rows of ONE sequence × the G
// query heads of the KV head. K and V stream through workgroup memory in tiles of BC cache
// positions, each position loaded once per tile of queries (so a sequence's cache is read
// ⌈T / (QT / G)⌉ times per KV head, not ⌈T / (16 / G)⌉ as by ATTENTION_GROUP). Scores:
// thread t takes one position of the tile for QT·BC / 256 queries (a K element from the
// tile serves them all); output: thread t holds (query, element) pairs t + 256·a.
// Bits: every query keeps the per-(head, row) kernel's chains (wgsl/attention.ts attendRow):
// - score: Σ_d q_d·k_pd from d = 0 up, times scale, to SC (the same places);
// - max: over all its positions (max is exact, so any grouping gives the same value);
// - Σ exp(s_p − m): 64 partial sums, partial c over p ≡ c (mod 64) from p = c up, then the
//   64-wide tree (s = 32, 16, …, 1) — here one group of 64 threads per query;
// - output element d: Σ_p (e_p / total)·v_pd from p = 0 up (the weight e_p / total is
//   rounded once, into workgroup memory, then multiplied as the per-row kernel does).
// params: PARAMS.attention_group (the same block as ATTENTION_GROUP). Block table BT (i32,
// 2 words per block at blockTable: first row, rows); TB the step table (wgsl/batch.ts).
// Loop bounds that enclose barriers come from BT / TB (read-only: uniform).
// Bindings: 1 OUT, 2 Q, 3 KC, 4 VC, 5 TB (i32), 6 SC, 7 BT (i32).
// Every `var` is initialised where it is declared or by explicit stores before use (Dawn on
// lavapipe has kept a loop's `var` from the previous iteration; see ATTENTION_GROUP).
import { HEADER } from './common.js';
import { ATTENTION_GROUP_BINDINGS } from './attention-group.js';

/** Threads per workgroup: the WebGPU default maxComputeInvocationsPerWorkgroup. */
export const TILE_THREADS = 256;

/** A tile shape: QT queries per workgroup, BC cache positions per K/V tile, for head dim HD. */
export interface TileShape { readonly qt: number; readonly bc: number; readonly hd: number }

/** Workgroup bytes of a shape: the K/V tile (rows padded by one), the weights of a V tile,
 * the trees, per-query words. */
export function tileWorkgroupBytes(s: TileShape): number {
  return 4 * (s.bc * (s.hd + 1) + s.qt * s.bc + TILE_THREADS + 5 * s.qt);
}

/** Output accumulators per thread: (query, element) pairs ÷ threads. */
function accPerThread(s: TileShape): number {
  return Math.ceil((s.qt * s.hd) / TILE_THREADS);
}

/** The largest shape for head dim `hd` within `storageBytes` of workgroup memory: QT keeps
 * each thread's output accumulators ≤ 64 (QT = 128 up to hd 128, 64 at hd 256); BC, the
 * positions of a tile, is a power of two from 32 down that fits, with QT·BC ≥ the threads
 * (each thread scores QT·BC / 256 ≤ 16 queries); null when none fits. */
export function tileShapeFor(hd: number, storageBytes: number): TileShape | null {
  const qt = Math.max(8, Math.min(128, 2 ** Math.floor(Math.log2((64 * TILE_THREADS) / hd))));
  for (let bc = 32; qt * bc >= TILE_THREADS; bc /= 2) {
    if (tileWorkgroupBytes({ qt, bc, hd }) <= storageBytes) return { qt, bc, hd };
  }
  return null;
}

export function attentionTileShader(s: TileShape): string {
  const { qt: QT, bc: BC, hd: HD } = s;
  const WG = TILE_THREADS;
  return /* wgsl */ `${HEADER}
${ATTENTION_GROUP_BINDINGS}const QT = ${QT}u;
const BC = ${BC}u;
const HD = ${HD}u;
const WG = ${WG}u;
const KS = ${HD + 1}u; // a K/V row's stride in kv (padded: the BC threads of a group read different banks)
const KG = ${WG / BC}u; // query groups in the score phase
const QPT = ${(QT * BC) / WG}u; // queries per thread in the score phase
const ACC = ${accPerThread(s)}u;
var<workgroup> kv: array<f32, ${BC * (HD + 1)}>;
var<workgroup> w: array<f32, ${QT * BC}>;
var<workgroup> red: array<f32, ${WG}>;
var<workgroup> qn: array<u32, ${QT}>;
var<workgroup> qo: array<u32, ${QT}>;
var<workgroup> qsb: array<u32, ${QT}>;
var<workgroup> qmax: array<f32, ${QT}>;
var<workgroup> qtot: array<f32, ${QT}>;
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
  // query j: row r0 + j / G, head kh·G + j % G; qn its positions, qo its q, qsb its scores
  if (t < QT) {
    var n = 0u;
    var o = 0u;
    var b = 0u;
    if (t < nq) {
      let r = r0 + t / G;
      let h = kh * G + t % G;
      n = u32(TB[rt + 4u * r + 1u]) + 1u;
      o = pu(P_qOff) + r * pu(P_qStride) + h * HD;
      b = nH * u32(TB[rt + 4u * r + 2u]) + h * n;
    }
    qn[t] = n;
    qo[t] = o;
    qsb[t] = b;
  }
  workgroupBarrier();
  // scores: thread t takes position k0 + ki of each tile for queries qg + m·KG (m < QPT): a
  // K element read from the tile once serves QPT queries, whose q elements are the same
  // address across the BC threads of a query group
  let ki = t % BC;
  let qg = t / BC;
  var qoff: array<u32, QPT>;
  var mx: array<f32, QPT>;
  for (var m = 0u; m < QPT; m++) { qoff[m] = qo[qg + m * KG]; mx[m] = -3.40282346e38; }
  for (var k0 = 0u; k0 < nmax; k0 += BC) {
    for (var e = t; e < BC * HD; e += WG) {
      let p = k0 + e / HD;
      if (p < nmax) { kv[(e / HD) * KS + e % HD] = KC[pu(P_kcOff) + (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * HD + e % HD]; }
    }
    workgroupBarrier();
    var s: array<f32, QPT>;
    for (var m = 0u; m < QPT; m++) { s[m] = 0.0; }
    for (var d = 0u; d < HD; d++) {
      let kd = kv[ki * KS + d];
      for (var m = 0u; m < QPT; m++) { s[m] = s[m] + Q[qoff[m] + d] * kd; }
    }
    let p = k0 + ki;
    for (var m = 0u; m < QPT; m++) {
      let j = qg + m * KG;
      if (p < qn[j]) {
        let v = s[m] * pf(P_scale);
        SC[qsb[j] + p] = v;
        mx[m] = max(mx[m], v);
      }
    }
    workgroupBarrier();
  }
  // each query's max over its BC threads' maxima (max is exact: any order gives the same)
  for (var m = 0u; m < QPT; m++) {
    red[t] = mx[m];
    workgroupBarrier();
    if (ki == 0u) {
      var x = red[t];
      for (var l = 1u; l < BC; l++) { x = max(x, red[t + l]); }
      qmax[qg + m * KG] = x;
    }
    workgroupBarrier();
  }
  storageBarrier();
  workgroupBarrier();
  // Σ exp: WG / 64 queries at a time, a group of 64 threads each (lane c: p ≡ c mod 64)
  let grp = t / 64u;
  let c = t % 64u;
  for (var j0 = 0u; j0 < nq; j0 += WG / 64u) {
    let j = j0 + grp;
    var sum = 0.0;
    if (j < nq) {
      let n = qn[j];
      let sb = qsb[j];
      let m = qmax[j];
      for (var p = c; p < n; p += 64u) { let e = exp(SC[sb + p] - m); SC[sb + p] = e; sum = sum + e; }
    }
    red[t] = sum;
    workgroupBarrier();
    for (var st = 32u; st > 0u; st >>= 1u) {
      if (c < st) { red[t] = red[t] + red[t + st]; }
      workgroupBarrier();
    }
    if (c == 0u && j < nq) { qtot[j] = red[t]; }
    workgroupBarrier();
  }
  storageBarrier();
  workgroupBarrier();
  // output: thread t holds pairs t + WG·a = (query j, element d), summed over positions in order
  var acc: array<f32, ACC>;
  for (var a = 0u; a < ACC; a++) { acc[a] = 0.0; }
  for (var k0 = 0u; k0 < nmax; k0 += BC) {
    for (var e = t; e < BC * HD; e += WG) {
      let p = k0 + e / HD;
      if (p < nmax) { kv[(e / HD) * KS + e % HD] = VC[pu(P_vcOff) + (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * HD + e % HD]; }
    }
    for (var e = t; e < QT * BC; e += WG) {
      let j = e / BC;
      let p = k0 + e % BC;
      var x = 0.0;
      if (j < nq && p < qn[j]) { x = SC[qsb[j] + p] / qtot[j]; }
      w[e] = x;
    }
    workgroupBarrier();
    for (var a = 0u; a < ACC; a++) {
      let j = (t + WG * a) / HD;
      let d = (t + WG * a) % HD;
      if (j < nq) {
        let n = qn[j];
        for (var i = 0u; i < BC; i++) {
          if (k0 + i < n) { acc[a] = acc[a] + w[j * BC + i] * kv[i * KS + d]; }
        }
      }
    }
    workgroupBarrier();
  }
  for (var a = 0u; a < ACC; a++) {
    let j = (t + WG * a) / HD;
    let d = (t + WG * a) % HD;
    if (j < nq) {
      let r = r0 + j / G;
      let h = kh * G + j % G;
      OUT[pu(P_outOff) + (r * nH + h) * HD + d] = acc[a];
    }
  }
}`;
}
