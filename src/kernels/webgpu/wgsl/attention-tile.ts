// Causal GQA attention over blocks of queries: a workgroup of WG threads per (KV head, block)
// where a block is up to QT queries = consecutive rows of ONE sequence × the G query heads of
// the KV head. Two shapes of the one text: decode / verify blocks (QT = ATTENTION_QMAX, 16 to
// 128 threads, K and V read from the cache, passes of UB = 4 softmax blocks between barriers)
// and prefill tiles where the query-per-thread kernel (wgsl/attention-prefill.ts) does not
// fit (QT = 128 up to head dim 128, 64 at 256; 256 threads; K and V staged through workgroup
// memory in tiles of BC positions, one block a pass). No score scratch in device memory.
// Bits: every query runs the online softmax of wgsl/attention-online.ts over blocks of OB
// positions (BC divides OB), the per-(head, row) kernel's chains (wgsl/attention.ts):
// - score: thread t takes position ki = t mod BC of a K tile for queries qg + m·KG: Σ_d by
//   ob_dot from d = 0 up, ob_scale, into w[(u·QT + j)·OB + i] for block u of the pass (a K
//   element read once serves QPT queries);
// - the pass's folds (max, α, weights, l): thread j < nq for query j, block by block in
//   order, by ob_block (α of block u kept at qa[u·QT + j]);
// - output: thread t holds (query, element) pairs t + WG·a; block by block, at a block's
//   first V tile it rescales by the block's α, then adds e_i·v_id over its positions in order.
// Loop bounds that enclose barriers come from BT / TB (read-only: uniform).
// Every `var` is initialised where it is declared or by explicit stores before use (Dawn on
// lavapipe has kept a loop's `var` from the previous iteration).
import { HEADER } from './common.js';
import { ATTENTION_BLOCK_HEAD, ATTENTION_QMAX, attentionGroupBindings } from './attention-group.js';
import { headInputsDecls, headNormRope, type HeadInputs } from './head-inputs.js';
import { ONLINE_BLOCK, ONLINE_SOFTMAX } from './attention-online.js';

/** Threads of a prefill tile: the WebGPU default maxComputeInvocationsPerWorkgroup. */
export const TILE_THREADS = 256;

/** A block shape: WG threads, QT queries per workgroup, BC cache positions per K/V tile, head
 * dim HD; `stage`: K and V go through workgroup memory (prefill tiles: a row serves QT
 * queries), else each thread reads them from the cache (decode / verify: a row serves few). */
export interface TileShape {
  readonly wg: number; readonly qt: number; readonly bc: number; readonly hd: number; readonly stage: boolean;
  /** The output phase's loop order (elementOrder / queryOrder below): speed only, same bits. */
  readonly order: 'element' | 'query';
  /** Softmax blocks a pass between barriers (unstaged only; 1 when absent): a pass scores
   * UB blocks, folds them in order, then sums them, two barriers a pass. */
  readonly ub?: number;
}

/** Softmax blocks per pass of a decode / verify block (4: 64 positions between barriers). */
export const GROUP_PASS_BLOCKS = 4;

/** Workgroup bytes of a shape: the K/V tile (rows padded by one) or a pass's cache rows, a
 * pass's scores of every query (two passes' unstaged: alternate halves spare a barrier),
 * per-query words (positions, q offset, m, l; α per block of a pass). */
export function tileWorkgroupBytes(s: TileShape): number {
  const ub = s.ub ?? 1;
  return 4 * ((s.stage ? s.bc * (s.hd + 1) : ub * ONLINE_BLOCK) + (s.stage ? 1 : 2) * ub * s.qt * ONLINE_BLOCK + (4 + ub) * s.qt);
}

/** The output phase's split: groups of TPG threads (DG of them), a thread DPT elements of
 * QPG queries (DPT·QPG accumulators). */
function outputSplit(s: TileShape): { tpg: number; dg: number; dpt: number; qpg: number } {
  const tpg = Math.min(s.hd, s.wg);
  const dg = Math.floor(s.wg / tpg);
  return { tpg, dg, dpt: Math.ceil(s.hd / tpg), qpg: Math.ceil(s.qt / dg) };
}

/** Output accumulators per thread. */
export function accPerThread(s: TileShape): number {
  const o = outputSplit(s);
  return o.dpt * o.qpg;
}

/** The K/V tile for (wg, qt, hd): BC a power of two from OB down whose bytes fit. */
function fitBc(wg: number, qt: number, hd: number, storageBytes: number): TileShape | null {
  for (let bc = ONLINE_BLOCK; bc >= 1; bc /= 2) {
    const s = { wg, qt, bc, hd, stage: true, order: 'query' } as const;
    if (tileWorkgroupBytes(s) <= storageBytes) return s;
  }
  return null;
}

/** The prefill tile for head dim `hd` within `storageBytes` of workgroup memory: QT keeps
 * each thread's output accumulators ≤ 64 (QT = 128 up to hd 128, 64 at hd 256), halved
 * until a block's scores and a K/V tile fit; null when none fits. */
export function tileShapeFor(hd: number, storageBytes: number): TileShape | null {
  for (let qt = Math.max(8, Math.min(128, 2 ** Math.floor(Math.log2((64 * TILE_THREADS) / hd)))); qt >= 8; qt /= 2) {
    const s = fitBc(TILE_THREADS, qt, hd, storageBytes);
    if (s) return s;
  }
  return null;
}

/** The decode / verify block for head dim `hd`: ATTENTION_QMAX queries, OB threads (the score
 * phase: a thread per position, every query), more where a thread would hold over 128
 * output accumulators (past head dim 256; 128 threads at 1024; fewer threads measured
 * faster on lavapipe, a GPU may want more), K and V read from the cache (a block's rows in
 * one pass), the output in element order (each V element read once for the block's
 * queries); null when it does not fit. */
export function groupShapeFor(hd: number, storageBytes: number): TileShape | null {
  const wg = Math.max(ONLINE_BLOCK, Math.min(TILE_THREADS, 2 ** Math.ceil(Math.log2((ATTENTION_QMAX * hd) / 128))));
  const s = { wg, qt: ATTENTION_QMAX, bc: ONLINE_BLOCK, hd, stage: false, order: 'element', ub: GROUP_PASS_BLOCKS } as const;
  return tileWorkgroupBytes(s) <= storageBytes ? s : null;
}

/** Workgroup bytes of the folded decode / verify shape: the shape's, a head row and the 64 lanes. */
export function foldWorkgroupBytes(s: TileShape): number {
  return tileWorkgroupBytes(s) + 4 * (s.hd + 64);
}

/** The kernel text of shape `s`; `fold` (an unstaged decode / verify shape only): the block's
 * attention inputs first (foldedInputs). */
export function attentionTileShader(s: TileShape, fold = false): string {
  const { wg: WG, qt: QT, bc: BC, hd: HD } = s;
  const UB = s.ub ?? 1;
  const out = outputSplit(s);
  const vAt = s.stage ? 'kv[i * KS + d]' : 'VC[pu(P_vcOff) + rowAt[u * OB + s0 - b0 + i] + d]';
  if (WG % BC !== 0 || QT > WG) throw new RangeError(`attention tile: ${BC} positions or ${QT} queries do not suit ${WG} threads`);
  if (s.stage && UB !== 1) throw new RangeError('attention tile: a staged shape passes one block at a time');
  if (fold && s.stage) throw new RangeError('attention tile: only the decode / verify shape folds its inputs');
  return /* wgsl */ `${HEADER}
${attentionGroupBindings(fold)}const QT = ${QT}u;
const BC = ${BC}u;
const HD = ${HD}u;
const WG = ${WG}u;
const KS = ${HD + 1}u; // a K/V row's stride in kv (padded: the BC threads of a group read different banks)
const KG = ${WG / BC}u; // query groups in the score phase
const QPT = ${Math.ceil((QT * BC) / WG)}u; // queries per thread in the score phase
// output: thread t takes elements d = c0 + TPG·c (c < DPT) of queries dg + DG·m (m < QPG),
// c0 = t mod TPG, dg = t / TPG: a V element read once serves its QPG queries
const TPG = ${out.tpg}u;
const DG = ${out.dg}u;
const DPT = ${out.dpt}u;
const QPG = ${out.qpg}u;
const UB = ${UB}u; // softmax blocks a pass
${s.stage ? `var<workgroup> kv: array<f32, ${BC * (HD + 1)}>;` : `var<workgroup> rowAt: array<u32, ${UB * ONLINE_BLOCK}>; // a pass's cache rows × kvDim + kh·HD`}
var<workgroup> w: array<f32, ${(s.stage ? 1 : 2) * UB * QT * ONLINE_BLOCK}>; // w[wo + (u·QT + j)·OB + i]: block u, query j, position i
var<workgroup> qn: array<u32, ${QT}>;
var<workgroup> qo: array<u32, ${QT}>;
var<workgroup> qm: array<f32, ${QT}>;
var<workgroup> ql: array<f32, ${QT}>;
var<workgroup> qa: array<f32, ${UB * QT}>; // α of block u of query j at u·QT + j
${ONLINE_SOFTMAX}${fold ? `\n${headInputsDecls(HD, 'WG')}` : ''}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${ATTENTION_BLOCK_HEAD}${fold ? foldedInputs() : ''}  // query j: row r0 + j / G, head kh·G + j % G; qn its positions, qo its q; (qm, ql) its state
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
    for (var u = 0u; u < UB; u++) { qa[u * QT + t] = 1.0; }
  }
  workgroupBarrier();
  let ki = t % BC;
  let qg = t / BC;
  var qoff: array<u32, QPT>;
  var mq = 0u; // this thread's queries in the score phase: qg + m·KG < nq for m < mq
  for (var m = 0u; m < QPT; m++) {
    qoff[m] = qo[min(qg + m * KG, QT - 1u)];
    if (qg + m * KG < nq) { mq = m + 1u; }
  }
  let c0 = t % TPG;
  let dg = t / TPG;
  var acc: array<f32, ${accPerThread(s)}>;
  for (var a = 0u; a < ${accPerThread(s)}u; a++) { acc[a] = 0.0; }
  for (var p0 = 0u; p0 < nmax; p0 += UB * OB) {
    let wo = ${s.stage ? '0u' : '((p0 / (UB * OB)) % 2u) * UB * QT * OB'};
    // the pass's scores, block by block, a K tile at a time: w[wo + (u·QT + j)·OB + i] for position b0 + i of query j
    for (var u = 0u; u < UB; u++) {
      let b0 = p0 + u * OB;
      if (b0 >= nmax) { break; }
      for (var s0 = b0; s0 < b0 + OB && s0 < nmax; s0 += BC) {
        ${s.stage ? `${loadTile('KC')}
        workgroupBarrier();` : ''}
        var s: array<f32, QPT>;
        for (var m = 0u; m < QPT; m++) { s[m] = 0.0; }${s.stage ? '' : `
        let kp = min(s0 + ki, nmax - 1u);
        let kb = pu(P_kcOff) + (u32(TB[pt + kp / ps]) * ps + kp % ps) * kvDim + kh * HD;`}
        for (var d = 0u; d < HD; d++) {
          let kd = ${s.stage ? 'kv[ki * KS + d]' : 'KC[kb + d]'};
          for (var m = 0u; m < mq; m++) { s[m] = ob_dot(s[m], Q[qoff[m] + d], kd); }
        }
        let p = s0 + ki;
        for (var m = 0u; m < mq; m++) {
          let j = qg + m * KG;
          if (j < nq && p < qn[j]) { w[wo + (u * QT + j) * OB + p - b0] = ob_scale(s[m]); }
        }${s.stage ? `
        workgroupBarrier();` : ''}
      }
    }${s.stage ? '' : `
    workgroupBarrier();`}
    // each query folds the pass's blocks in order (scores → weights; m, l, α per block)${s.stage ? '' : `
    for (var x = t; x < UB * OB; x += WG) { let p = min(p0 + x, nmax - 1u); rowAt[x] = (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * HD; }`}
    if (t < nq) {
      for (var u = 0u; u < UB; u++) {
        let b0 = p0 + u * OB;
        if (b0 >= qn[t]) { break; }
        let r = ob_block(wo + (u * QT + t) * OB, min(OB, qn[t] - b0), vec2<f32>(qm[t], ql[t]));
        qm[t] = r.x;
        ql[t] = r.y;
        qa[u * QT + t] = r.z;
      }
    }
    workgroupBarrier();
    // values, block by block, a V tile at a time: pair (j, d) rescaled at the block's first tile, then Σ in order
    for (var u = 0u; u < UB; u++) {
      let b0 = p0 + u * OB;
      if (b0 >= nmax) { break; }
      let wb = wo + u * QT * OB;
      for (var s0 = b0; s0 < b0 + OB && s0 < nmax; s0 += BC) {
        ${s.stage ? `${loadTile('VC')}
        workgroupBarrier();` : ''}
        let cmax = min(BC, nmax - s0);
        for (var c = 0u; c < DPT; c++) {
          let d = c0 + TPG * c;
          if (dg >= DG || d >= HD) { break; }
          ${s.order === 'element' ? elementOrder(vAt) : queryOrder(vAt)}
        }
        ${s.stage ? 'workgroupBarrier();' : '// w alternates halves by pass: the next pass writes the other, no barrier'}
      }
    }
  }
  for (var c = 0u; c < DPT; c++) {
    let d = c0 + TPG * c;
    if (dg >= DG || d >= HD) { break; }
    for (var m = 0u; m < QPG; m++) {
      let j = dg + DG * m;
      if (j >= nq) { break; }
      let r = r0 + j / G;
      let h = kh * G + j % G;
      OUT[pu(P_outOff) + (r * nH + h) * HD + d] = ob_out(acc[c * QPG + m], ql[j]);
    }
  }
}`;
}

/** The folded shape's operands of headNormRope (in scope: cs, the row's angles in TB). */
const FOLD_ROW: Omit<HeadInputs, 'src' | 'weight' | 'store'> = {
  cos: (f) => `bitcast<f32>(TB[cs + ${f} * 2u])`, sin: (f) => `bitcast<f32>(TB[cs + ${f} * 2u + 1u])`,
  hd: 'pu(P_hd)', half: 'pu(P_half)', eps: 'pf(P_eps)', threads: 'WG',
};

/** WGSL after the block head of a folded decode / verify block (Kernels.attentionBatch with
 * its inputs; every sequence of the step is one block, so this workgroup is the only one of
 * the dispatch on KV head kh of its sequence, and each query head belongs to one KV head):
 * for each row of the block, K head kh normed and rotated to K and the cache, V head kh to
 * the cache, then the G query heads normed and rotated to Q (a gated head's gate half to
 * GATE) — ATTENTION_INPUTS' text (wgsl/head-inputs.ts), so its bits; then a storage barrier
 * before the attention reads the cache and Q. Loop bounds from BT / params: uniform. */
function foldedInputs(): string {
  return `  let qgw = select(1u, 2u, pu(P_gated) == 1u); // qg's floats per head: query (and gate)
  for (var j = 0u; j < rows; j++) {
    let r = r0 + j;
    let pos = u32(TB[rt + 4u * r + 1u]);
    let crow = (u32(TB[pt + pos / ps]) * ps + pos % ps) * kvDim + kh * HD;
    let cs = pu(P_csOff) + r * pu(P_half) * 2u;
    let kr = pu(P_kOff) + r * kvDim + kh * HD;
    for (var p = t; p < HD; p += WG) { VC[pu(P_vcOff) + crow + p] = V[pu(P_vOff) + r * kvDim + kh * HD + p]; }
    ${headNormRope({ ...FOLD_ROW, src: (p) => `K[kr + ${p}]`, weight: 'KW', store: (p, o) => `K[kr + ${p}] = ${o}; KC[pu(P_kcOff) + crow + ${p}] = ${o};` })}
    for (var x = 0u; x < G; x++) {
      let h = kh * G + x;
      let src = pu(P_qgOff) + r * nH * HD * qgw + h * HD * qgw;
      if (qgw == 2u) {
        for (var p = t; p < HD; p += WG) { GATE[pu(P_gateOff) + (r * nH + h) * HD + p] = QG[src + HD + p]; }
      }
      ${headNormRope({ ...FOLD_ROW, src: (p) => `QG[src + ${p}]`, weight: 'QW', store: (p, o) => `Q[pu(P_qOff) + (r * nH + h) * HD + ${p}] = ${o};` })}
    }
  }
  storageBarrier();
  workgroupBarrier();
`;
}

/** WGSL, output phase of a tile (in scope: c, d, cmax, u, s0, b0, wb): element order reads each
 * V element once for the thread's queries (m inside i); query order keeps one query's sum in
 * a register (i inside m) and reads V once per query. The same chain per (query, element):
 * rescale at the block's first tile, then + e_i·v_id for i up. */
function elementOrder(vAt: string): string {
  return `for (var m = 0u; m < QPG; m++) {
          let j = dg + DG * m;
          if (j >= nq) { break; }
          if (s0 == b0 && s0 < qn[j]) { acc[c * QPG + m] = ob_rescale(acc[c * QPG + m], qa[u * QT + j]); }
        }
        for (var i = 0u; i < cmax; i++) {
          let v = ${vAt};
          for (var m = 0u; m < QPG; m++) {
            let j = dg + DG * m;
            if (j >= nq) { break; }
            if (s0 + i < qn[j]) { acc[c * QPG + m] = ob_acc(acc[c * QPG + m], w[wb + j * OB + s0 - b0 + i], v); }
          }
        }`;
}

function queryOrder(vAt: string): string {
  return `for (var m = 0u; m < QPG; m++) {
          let j = dg + DG * m;
          if (j >= nq) { break; }
          let n = qn[j];
          if (s0 < n) {
            var x = acc[c * QPG + m];
            if (s0 == b0) { x = ob_rescale(x, qa[u * QT + j]); }
            let cnt = min(cmax, n - s0);
            for (var i = 0u; i < cnt; i++) { x = ob_acc(x, w[wb + j * OB + s0 - b0 + i], ${vAt}); }
            acc[c * QPG + m] = x;
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
