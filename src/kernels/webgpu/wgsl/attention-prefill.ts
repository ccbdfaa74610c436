// Causal GQA prefill attention with a query per thread: a workgroup of WG threads per (KV
// head, block) where a block is up to QT = WG·QPT queries = consecutive rows of ONE sequence ×
// the G query heads of the KV head (query j: row r0 + j / G, head kh·G + j % G), thread t
// holding queries t + WG·m (m < QPT) whole: its scores, softmax state and HD output
// accumulators each. K and V stream through workgroup memory, each position loaded once per
// block of queries, in one of two variants:
// - together: a K and a V tile of BC positions (BC a multiple of the softmax block OB), two
//   barriers a tile (loaded; read by every thread);
// - split (where one block's K and V do not fit together: head dim 256 at 16 KiB): ONE tile
//   of OB positions holds the block's K, then its V; four barriers a block (K loaded; K read
//   by every thread; V loaded; V read). A query's weights and α of the block wait in the
//   thread's registers between the two phases.
// No barrier inside a phase: no query shares a score, a weight or an accumulator with another
// thread.
// Bits: every query runs the online softmax of wgsl/attention-online.ts (blocks of OB
// positions in order), the per-(head, row) kernel's chains: score Σ_d by ob_dot from d = 0 up,
// ob_scale; the block's fold by ob_block_r (the register twin of ob_block); acc_d rescaled by
// α, then + e_i·v_id for i = 0 up; out acc_d / l. Both variants run these ops in this order
// (the split one only moves a block's weights between registers), so they give the same bits.
// Loop bounds that enclose barriers come from BT / TB (read-only: uniform). Every `var` is
// initialised where it is declared or by explicit stores before use (Dawn on lavapipe has kept
// a loop's `var` from the previous iteration).
import { HEADER } from './common.js';
import { ATTENTION_BLOCK_HEAD, ATTENTION_GROUP_BINDINGS } from './attention-group.js';
import { ONLINE_BLOCK, ONLINE_SOFTMAX_CORE } from './attention-online.js';

/** A prefill shape: WG threads of QPT queries each, K/V tiles of BC positions, head dim HD;
 * `split`: K then V through one tile of OB positions (else a K and a V tile side by side). */
export interface PrefillShape { readonly wg: number; readonly qpt: number; readonly bc: number; readonly hd: number; readonly split: boolean }

/** Output accumulators a thread may hold (QPT·HD): 128 floats (hd 64: 2 queries a thread). */
export const PREFILL_MAX_ACC = 128;
/** Head dims a thread may hold whole (its HD accumulators; past it, the tile kernel). */
export const PREFILL_MAX_HD = 256;
/** Positions of a K/V tile at most (the tile loop's barrier pair serves BC / OB blocks). */
export const PREFILL_MAX_BC = 4 * ONLINE_BLOCK;

/** Workgroup bytes of a shape: a K and a V tile (one tile split), unpadded (every thread
 * reads the same element at once: a broadcast, no bank conflict). */
export function prefillWorkgroupBytes(s: PrefillShape): number {
  return (s.split ? 1 : 2) * 4 * s.bc * s.hd;
}

/** Queries per workgroup. */
export const prefillQueries = (s: PrefillShape): number => s.wg * s.qpt;

/** Barriers a workgroup passes per OB cache positions. */
export const prefillBarriersPerBlock = (s: PrefillShape): number => (s.split ? 4 : (2 * ONLINE_BLOCK) / s.bc);

/** The prefill shape for head dim `hd` on an adapter with `storageBytes` of workgroup memory
 * and `invocations` threads a workgroup: 256 threads (the WebGPU default limit), QPT = 2 up to
 * head dim 64 (PREFILL_MAX_ACC); K and V together in the largest multiple of OB up to
 * PREFILL_MAX_BC positions whose two tiles fit, else split (one block's K fits: BC = OB);
 * null past PREFILL_MAX_HD or when not even one block's K fits (then the tile kernel of
 * wgsl/attention-tile.ts serves). */
export function prefillShapeFor(hd: number, storageBytes: number, invocations: number): PrefillShape | null {
  if (hd > PREFILL_MAX_HD) return null;
  const wg = Math.min(256, invocations);
  const qpt = Math.max(1, Math.min(2, Math.floor(PREFILL_MAX_ACC / hd)));
  for (let bc = PREFILL_MAX_BC; bc >= ONLINE_BLOCK; bc -= ONLINE_BLOCK) {
    const s = { wg, qpt, bc, hd, split: false };
    if (prefillWorkgroupBytes(s) <= storageBytes) return s;
  }
  const split = { wg, qpt, bc: ONLINE_BLOCK, hd, split: true };
  return prefillWorkgroupBytes(split) <= storageBytes ? split : null;
}

export function attentionPrefillShader(s: PrefillShape): string {
  const { wg: WG, qpt: QPT, bc: BC, hd: HD } = s;
  if (BC % ONLINE_BLOCK !== 0) throw new RangeError(`attention prefill: a K/V tile of ${BC} positions does not hold whole blocks of ${ONLINE_BLOCK}`);
  if (s.split && BC !== ONLINE_BLOCK) throw new RangeError(`attention prefill: a split tile holds one block of ${ONLINE_BLOCK} positions, not ${BC}`);
  return /* wgsl */ `${HEADER}
${ATTENTION_GROUP_BINDINGS}const HD = ${HD}u;
const BC = ${BC}u;
const WG = ${WG}u;
const QPT = ${QPT}u;
${s.split ? `var<workgroup> kv: array<f32, ${BC * HD}>;` : `var<workgroup> kt: array<f32, ${BC * HD}>;
var<workgroup> vt: array<f32, ${BC * HD}>;`}
${ONLINE_SOFTMAX_CORE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
${ATTENTION_BLOCK_HEAD}  // this thread's queries m: qn positions (0: none), qo its q, ml its (max, sum)
  var qn: array<u32, QPT>;
  var qo: array<u32, QPT>;
  var ml: array<vec2<f32>, QPT>;
  for (var m = 0u; m < QPT; m++) {
    let j = t + WG * m;
    qn[m] = 0u;
    qo[m] = 0u;
    ml[m] = vec2<f32>(OB_MIN, 0.0);
    if (j < nq) {
      let r = r0 + j / G;
      qn[m] = u32(TB[rt + 4u * r + 1u]) + 1u;
      qo[m] = pu(P_qOff) + r * pu(P_qStride) + (kh * G + j % G) * HD;
    }
  }
  var acc: array<f32, ${QPT * HD}>;
  for (var a = 0u; a < ${QPT * HD}u; a++) { acc[a] = 0.0; }
  var s: array<f32, OB>;
  for (var i = 0u; i < OB; i++) { s[i] = 0.0; }
${s.split ? splitLoop() : togetherLoop()}
  for (var m = 0u; m < QPT; m++) {
    let j = t + WG * m;
    if (j < nq) {
      let r = r0 + j / G;
      let h = kh * G + j % G;
      for (var d = 0u; d < HD; d++) { OUT[pu(P_outOff) + (r * nH + h) * HD + d] = ob_out(acc[m * HD + d], ml[m].y); }
    }
  }
}`;
}

/** WGSL: cache positions [s0, s0 + BC) (those < nmax) of the caches `srcs` into the tiles
 * `dsts` (element e of a tile = position s0 + e / HD). */
function loadTiles(pairs: readonly (readonly [dst: string, src: 'KC' | 'VC'])[]): string {
  const off = (src: 'KC' | 'VC') => (src === 'KC' ? 'pu(P_kcOff)' : 'pu(P_vcOff)');
  return `    for (var e = t; e < BC * HD; e += WG) {
      let p = s0 + e / HD;
      if (p < nmax) {
        let at = (u32(TB[pt + p / ps]) * ps + p % ps) * kvDim + kh * HD + e % HD;
${pairs.map(([dst, src]) => `        ${dst}[e] = ${src}[${off(src)} + at];`).join('\n')}
      }
    }
    workgroupBarrier();`;
}

/** WGSL: a query's block of OB positions from b0 (cnt of them) scored against K tile `kt` at
 * k0 into s, folded (ml[m] updated; α in r.z). All OB scores are computed (a fixed trip
 * count: the compiler keeps s in registers); those past cnt are never read. */
function scoreBlock(kt: string): string {
  return `for (var i = 0u; i < OB; i++) { s[i] = 0.0; }
        for (var d = 0u; d < HD; d++) {
          let qd = Q[q0 + d];
          for (var i = 0u; i < OB; i++) { s[i] = ob_dot(s[i], qd, ${kt}[k0 + i * HD + d]); }
        }
        for (var i = 0u; i < cnt; i++) { s[i] = ob_scale(s[i]); }
        let r = ob_block_r(&s, cnt, ml[m]);
        ml[m] = r.xy;`;
}

/** WGSL: acc of query m (from a0) rescaled by `alpha`, then + w(i)·V tile `vt` at k0, i < cnt
 * (element outer: acc_d stays in a register over the block). */
function sumBlock(alpha: string, w: string, vt: string): string {
  return `for (var d = 0u; d < HD; d++) {
          var x = ob_rescale(acc[a0 + d], ${alpha});
          for (var i = 0u; i < cnt; i++) { x = ob_acc(x, ${w}, ${vt}[k0 + i * HD + d]); }
          acc[a0 + d] = x;
        }`;
}

/** WGSL: K and V tiles of BC positions side by side, each query's blocks of a tile scored,
 * folded and summed in order. */
function togetherLoop(): string {
  return `  for (var s0 = 0u; s0 < nmax; s0 += BC) {
${loadTiles([['kt', 'KC'], ['vt', 'VC']])}
    for (var m = 0u; m < QPT; m++) {
      let n = qn[m];
      let q0 = qo[m];
      let a0 = m * HD;
      // the tile's blocks this query attends, in order
      for (var b0 = s0; b0 < s0 + BC && b0 < n; b0 += OB) {
        let cnt = min(OB, n - b0);
        let k0 = (b0 - s0) * HD;
        ${scoreBlock('kt')}
        ${sumBlock('r.z', 's[i]', 'vt')}
      }
    }
    workgroupBarrier();
  }`;
}

/** WGSL: one block of OB positions at a time, its K then its V through the one tile kv; a
 * query's weights (wq) and α (aq) of the block are kept from the K phase to the V phase. */
function splitLoop(): string {
  return `  var wq: array<f32, ${ONLINE_BLOCK}u * QPT>;
  var aq: array<f32, QPT>;
  for (var i = 0u; i < OB * QPT; i++) { wq[i] = 0.0; }
  for (var m = 0u; m < QPT; m++) { aq[m] = 1.0; }
  for (var s0 = 0u; s0 < nmax; s0 += BC) {
${loadTiles([['kv', 'KC']])}
    for (var m = 0u; m < QPT; m++) {
      if (s0 < qn[m]) {
        let cnt = min(OB, qn[m] - s0);
        let q0 = qo[m];
        let k0 = 0u;
        ${scoreBlock('kv')}
        aq[m] = r.z;
        for (var i = 0u; i < OB; i++) { wq[m * OB + i] = s[i]; }
      }
    }
    workgroupBarrier();
${loadTiles([['kv', 'VC']])}
    for (var m = 0u; m < QPT; m++) {
      if (s0 < qn[m]) {
        let cnt = min(OB, qn[m] - s0);
        let a0 = m * HD;
        let k0 = 0u;
        ${sumBlock('aq[m]', 'wq[m * OB + i]', 'kv')}
      }
    }
    workgroupBarrier();
  }`;
}
