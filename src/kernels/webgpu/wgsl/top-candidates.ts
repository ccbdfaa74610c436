// Kernels.topCandidates (kernels/top-candidates.ts is the definition) in one or two passes
// (kernels/webgpu/top-candidates.ts chooses): a workgroup of 256 selects the top c of a
// list of (id, bits) entries by (key desc, id asc), the entries in ascending id order.
//  - TOP_CANDIDATES: the list is segment `seg` of a logits row (ids [seg·L, min(seg·L + L, n)),
//    L = P_segLen; one segment: the whole row); its set goes to slot (row·S + seg)·c.
//  - TOP_MERGE: the list is a row's S·c survivors of the first pass (segment order, so
//    ascending ids; padding slots, id −1, are skipped); its set goes to slot row·c.
// Exact: every id of the row's set is in its segment's set (at most c − 1 entries of the row
// beat it, so fewer beat it in its segment), and the merge applies the same order to the
// survivors, whose ids are distinct. Only compares and copies bits (every binding is read as
// u32). Per list:
//  1. count the non-NaN entries; take = min(c, count);
//  2. four radix passes over the order key (bits 31..24, 23..16, 15..8, 7..0): a workgroup
//     histogram of the keys that match the prefix so far, walked from the top bin down by
//     thread 0, find T = the take-th largest key and `ties` = how many entries of key T the
//     set holds (the lowest ids of key T: the first in list order);
//  3. each thread counts, over its contiguous chunk of the list, the keys > T and = T;
//     exclusive prefix sums give every thread its first output slot, so the set is written
//     in ascending id order; slots [take, c) get id −1 and −∞.
// params: PARAMS.top_candidates, PARAMS.top_merge (params.ts).
import { HEADER } from './common.js';
import { paramConsts } from '../params.js';

/** The WGSL of one pass: `entry` reads list entry p of the workgroup (b: its bits, ok: it is
 * a candidate, id: its id), `prelude` sets base/first/cnt/io/vo (and returns past the rows). */
function topSelectShader(params: 'top_candidates' | 'top_merge', bindings: string, prelude: string, entry: (p: string) => string): string {
  return `${HEADER}
${paramConsts(params)}
@group(0) @binding(1) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(2) var<storage, read_write> VALS: array<u32>;
${bindings}
const WG = 256u;
var<workgroup> hist: array<atomic<u32>, 256>;
// 0: key prefix, 1: its mask, 2: entries of key T still to take, 3: the set's size
var<workgroup> sel: array<u32, 4>;
var<workgroup> above: array<u32, 256>;
var<workgroup> ties: array<u32, 256>;
fn is_nan(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }
// −∞ → 0x007fffff (the least valid key), −0 just below +0, +∞ the greatest
fn order_key(b: u32) -> u32 { return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u); }
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let c = pu(P_c);
  ${prelude}
  var valid = 0u;
  for (var p = t; p < cnt; p += WG) { ${entry('p')} if (ok) { valid++; } }
  above[t] = valid;
  workgroupBarrier();
  if (t == 0u) {
    var total = 0u;
    for (var j = 0u; j < WG; j++) { total += above[j]; }
    sel[0] = 0u;
    sel[1] = 0u;
    sel[2] = min(c, total);
    sel[3] = min(c, total);
  }
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    atomicStore(&hist[t], 0u);
    workgroupBarrier();
    let prefix = sel[0];
    let mask = sel[1];
    for (var p = t; p < cnt; p += WG) {
      ${entry('p')}
      let k = order_key(b);
      if (ok && (k & mask) == prefix) { atomicAdd(&hist[(k >> shift) & 255u], 1u); }
    }
    workgroupBarrier();
    if (t == 0u && sel[2] > 0u) {
      var need = sel[2];
      var bin = 255u;
      loop {
        let h = atomicLoad(&hist[bin]);
        if (h >= need || bin == 0u) { break; }
        need -= h;
        bin--;
      }
      sel[0] = prefix | (bin << shift);
      sel[1] = mask | (255u << shift);
      sel[2] = need;
    }
    workgroupBarrier();
  }
  let T = sel[0];
  let take = sel[2];
  let size = sel[3];
  let len = (cnt + WG - 1u) / WG;
  let lo = min(t * len, cnt);
  let hi = min(lo + len, cnt);
  var a = 0u;
  var e = 0u;
  for (var p = lo; p < hi; p++) {
    ${entry('p')}
    if (!ok) { continue; }
    let k = order_key(b);
    if (k > T) { a++; } else if (k == T) { e++; }
  }
  above[t] = a;
  ties[t] = e;
  workgroupBarrier();
  if (t == 0u) {
    var sa = 0u;
    var se = 0u;
    for (var j = 0u; j < WG; j++) {
      let x = above[j];
      above[j] = sa;
      sa += x;
      let y = ties[j];
      ties[j] = se;
      se += y;
    }
  }
  workgroupBarrier();
  if (size > 0u) {
    var seen = ties[t];
    var pos = above[t] + min(seen, take);
    for (var p = lo; p < hi; p++) {
      ${entry('p')}
      if (!ok) { continue; }
      let k = order_key(b);
      if (k > T || (k == T && seen < take)) {
        IDS[io + pos] = id;
        VALS[vo + pos] = b;
        pos++;
      }
      if (k == T) { seen++; }
    }
  }
  for (var j = size + t; j < c; j += WG) {
    IDS[io + j] = 0xffffffffu;
    VALS[vo + j] = 0xff800000u;
  }
}`;
}

/** Pass 1 (or the only pass): workgroup row·S + seg selects segment seg of row `row`. */
export const TOP_CANDIDATES = topSelectShader('top_candidates', '@group(0) @binding(3) var<storage, read_write> X: array<u32>;', `let flat = group_id(wid, nwg);
  let segs = pu(P_segments);
  let row = flat / segs;
  if (row >= pu(P_m)) { return; }
  let seg = flat % segs;
  let first = seg * pu(P_segLen);
  let cnt = select(0u, min(pu(P_segLen), pu(P_n) - first), first < pu(P_n));
  let base = pu(P_xOff) + row * pu(P_stride) + first;
  let io = pu(P_idsOff) + flat * c;
  let vo = pu(P_valsOff) + flat * c;`,
(p) => `let b = X[base + ${p}]; let ok = !is_nan(b); let id = first + ${p};`);

/** Pass 2: workgroup `row` merges the row's S·c survivors (SIDS, SVALS from pass 1). */
export const TOP_MERGE = topSelectShader('top_merge', `@group(0) @binding(3) var<storage, read_write> SIDS: array<u32>;
@group(0) @binding(4) var<storage, read_write> SVALS: array<u32>;`, `let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let cnt = pu(P_segments) * c;
  let ib = pu(P_srcIdsOff) + row * cnt;
  let vb = pu(P_srcValsOff) + row * cnt;
  let io = pu(P_idsOff) + row * c;
  let vo = pu(P_valsOff) + row * c;`,
(p) => `let id = SIDS[ib + ${p}]; let b = SVALS[vb + ${p}]; let ok = id != 0xffffffffu;`);
