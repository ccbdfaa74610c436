// Kernels.topCandidates (kernels/top-candidates.ts is the definition): one workgroup of 256
// per row. Only compares and copies bits (every binding is read as u32), so it is exact:
//  1. count the row's non-NaN ids; take = min(c, count);
//  2. four radix passes over the order key (bits 31..24, 23..16, 15..8, 7..0): a workgroup
//     histogram of the keys that match the prefix so far, walked from the top bin down by
//     thread 0, find T = the take-th largest key and `ties` = how many ids of key T the set
//     holds (the lowest ids of key T);
//  3. each thread counts, over its contiguous chunk of ids, the keys > T and = T; exclusive
//     prefix sums give every thread its first output slot, so the set is written in
//     ascending id order; slots [take, c) get id −1 and −∞.
// params: PARAMS.top_candidates (params.ts).
import { HEADER } from './common.js';
import { paramConsts } from '../params.js';

export const TOP_CANDIDATES = /* wgsl */ `${HEADER}
${paramConsts('top_candidates')}
@group(0) @binding(1) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(2) var<storage, read_write> VALS: array<u32>;
@group(0) @binding(3) var<storage, read_write> X: array<u32>;
const WG = 256u;
var<workgroup> hist: array<atomic<u32>, 256>;
// 0: key prefix, 1: its mask, 2: ids of key T still to take, 3: the set's size
var<workgroup> sel: array<u32, 4>;
var<workgroup> above: array<u32, 256>;
var<workgroup> ties: array<u32, 256>;
fn is_nan(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }
// −∞ → 0x007fffff (the least valid key), −0 just below +0, +∞ the greatest
fn order_key(b: u32) -> u32 { return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u); }
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let n = pu(P_n);
  let c = pu(P_c);
  let base = pu(P_xOff) + row * pu(P_stride);
  var valid = 0u;
  for (var p = t; p < n; p += WG) { if (!is_nan(X[base + p])) { valid++; } }
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
    for (var p = t; p < n; p += WG) {
      let b = X[base + p];
      let k = order_key(b);
      if (!is_nan(b) && (k & mask) == prefix) { atomicAdd(&hist[(k >> shift) & 255u], 1u); }
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
  let len = (n + WG - 1u) / WG;
  let lo = min(t * len, n);
  let hi = min(lo + len, n);
  var a = 0u;
  var e = 0u;
  for (var p = lo; p < hi; p++) {
    let b = X[base + p];
    if (is_nan(b)) { continue; }
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
  let io = pu(P_idsOff) + row * c;
  let vo = pu(P_valsOff) + row * c;
  if (size > 0u) {
    var seen = ties[t];
    var pos = above[t] + min(seen, take);
    for (var p = lo; p < hi; p++) {
      let b = X[base + p];
      if (is_nan(b)) { continue; }
      let k = order_key(b);
      if (k > T || (k == T && seen < take)) {
        IDS[io + pos] = p;
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
