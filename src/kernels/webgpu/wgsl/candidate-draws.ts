// Kernels.candidateDraws (kernels/candidate-draws.ts is the definition, f32 sums in the same
// order): one workgroup of 256 per row, up to MAX_DRAW_CANDIDATES entries. Every thread finds
// the first padding slot (the entries' count n) and the max over its entries; thread 0 combines
// them (a max is exact in any order; −0 and +0 weigh alike) and handles the non-finite row;
// every thread weighs its entries (exp32, min-p: w, 8 KiB of workgroup memory at 2048).
// Ranks by one bitonic sort, O(c log² c) compare-swaps over the workgroup (was O(c²) rank
// counts): the entries' indices (u16, two a word: 4 KiB) ordered by the definition's `before`
// — weight descending, index ascending — with every entry of weight ≤ 0 after the positive
// ones, so the entry at sorted position r has rank r among the npos positive entries, and
// rank_j < r ⟺ j sorts before the entry at r (a strict total order: no rank array needed).
//   top-k: kept ⟺ rank < K = min(topK or npos, npos);
//   top-p: an entry of rank r stays iff mass(r) < f(topP·T), mass(r) the f32 sum in id order
//     of the weights of rank < r. Adding a nonnegative term anywhere in an f32 sum never
//     lowers it (rounding is monotone), so mass is nondecreasing in r and the kept ranks are a
//     prefix [0, R): R, the first r with mass(r) ≥ the target, is found by a 16-way search
//     (16 threads test 16 ranks a round, each an id-order sum that stops at the target: ≤ 3
//     rounds at 2048), the same sums the definition compares;
//   the draw: thread 0 walks the ids of rank < min(K, R) in order with the uniform.
// Workgroup memory: 8 + 4 + 1 KiB and a few words (lavapipe and WebGPU's default: 16 KiB).
// Every binding is read as u32 (an int32 output may share a buffer with the candidates).
// The row table (TAB, 6 words a row): [draw (0: leave the slot), invT, topK, topP, minP, u]
// (f32 bits but the flag and topK). params: PARAMS.candidate_draws; negInf, inf: ±∞ (WGSL has
// no infinity literal).
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { EXP32 } from './sample.js';
import { MAX_DRAW_CANDIDATES } from '../../candidate-draws.js';

/** Words per row of the row table. */
export const CANDIDATE_DRAW_WORDS = 6;

const MAXC = MAX_DRAW_CANDIDATES;
/** Threads testing ranks in a round of the top-p search. */
const PROBES = 16;

/** Sorts S (positions [0, P), P a power of two ≥ 2, P ≤ MAXC) by `first`: one compare-swap
 * stage per barrier; a thread owns whole words (two positions), so no two threads write one. */
const BITONIC = /* wgsl */ `
fn pos_at(e: u32) -> u32 { return (S[e >> 1u] >> ((e & 1u) * 16u)) & 0xffffu; }
fn sort_stage(t: u32, p: u32, k: u32, j: u32) {
  if (j == 1u) {
    // both positions in one word
    for (var q = t; q < p / 2u; q += NT) {
      let a = S[q] & 0xffffu;
      let b = S[q] >> 16u;
      let up = ((2u * q) & k) == 0u;
      if (select(first(a, b), first(b, a), up)) { S[q] = b | (a << 16u); }
    }
    return;
  }
  // word q pairs with word q + jw (positions 2q, 2q + 1 with 2q + j, 2q + 1 + j)
  let jw = j >> 1u;
  for (var x = t; x < p / 4u; x += NT) {
    let q = (x / jw) * 2u * jw + (x % jw);
    let up = ((2u * q) & k) == 0u;
    let wa = S[q];
    let wb = S[q + jw];
    var a0 = wa & 0xffffu; var a1 = wa >> 16u;
    var b0 = wb & 0xffffu; var b1 = wb >> 16u;
    if (select(first(a0, b0), first(b0, a0), up)) { let s = a0; a0 = b0; b0 = s; }
    if (select(first(a1, b1), first(b1, a1), up)) { let s = a1; a1 = b1; b1 = s; }
    S[q] = a0 | (a1 << 16u);
    S[q + jw] = b0 | (b1 << 16u);
  }
}`;

export const CANDIDATE_DRAWS = /* wgsl */ `${HEADER}
${paramConsts('candidate_draws')}
@group(0) @binding(1) var<storage, read_write> OUT: array<u32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(3) var<storage, read_write> VALS: array<u32>;
@group(0) @binding(4) var<storage, read_write> TAB: array<u32>;
const NT = 256u;
const PROBES = ${PROBES}u;
${EXP32}
var<workgroup> w: array<f32, ${MAXC}>;
// entry indices by rank, two u16 a word
var<workgroup> S: array<u32, ${MAXC / 2}>;
var<workgroup> red: array<f32, NT>;
var<workgroup> firstPad: atomic<u32>;
var<workgroup> positives: atomic<u32>;
// 0: entries n, 1: go on (1) or done (0), 2: f(topP·T) bits, 3: the max's bits, 4, 5: the
// top-p search's [lo, hi], 6: K, the kept ranks
var<workgroup> info: array<u32, 8>;
var<workgroup> probe: array<u32, PROBES>;
fn val(o: u32, j: u32) -> f32 { return bitcast<f32>(VALS[o + j]); }
fn cid(o: u32, j: u32) -> i32 { return bitcast<i32>(IDS[o + j]); }
/// The sort key: the weight of an entry of positive weight, else −1 (after every positive one).
fn key(j: u32) -> f32 { return select(-1.0, w[j], j < info[0] && w[j] > 0.0); }
/// Does entry a sort before entry b (the definition's before: weight descending, index ascending)?
fn first(a: u32, b: u32) -> bool { let ka = key(a); let kb = key(b); return ka > kb || (ka == kb && a < b); }
/// rank_j < r (r ≤ the positive count np).
fn ranked_before(j: u32, r: u32, np: u32) -> bool {
  if (r >= np) { return w[j] > 0.0 && j < info[0]; }
  return r > 0u && first(j, pos_at(r));
}
/// !(mass(r) < target): the f32 sum in id order of the weights of rank < r, stopped at the target.
fn mass_reaches(r: u32, n: u32, np: u32, goal: f32) -> bool {
  var mass = 0.0;
  for (var j = 0u; j < n && mass < goal; j++) { if (ranked_before(j, r, np)) { mass = mass + w[j]; } }
  return !(mass < goal);
}
${BITONIC}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let c = pu(P_c);
  let o = pu(P_idsOff) + row * c;
  let ov = pu(P_valsOff) + row * c;
  let h = pu(P_tableOff) + row * ${CANDIDATE_DRAW_WORDS}u;
  let at = pu(P_outOff) + row;
  let invT = bitcast<f32>(TAB[h + 1u]);
  let topK = TAB[h + 2u];
  let topP = bitcast<f32>(TAB[h + 3u]);
  let minP = bitcast<f32>(TAB[h + 4u]);
  let u = bitcast<f32>(TAB[h + 5u]);
  if (t == 0u) { atomicStore(&firstPad, c); atomicStore(&positives, 0u); }
  workgroupBarrier();
  // the entries come first, padding (id −1) after them
  for (var j = t; j < c; j += NT) { if (cid(o, j) < 0) { atomicMin(&firstPad, j); } }
  workgroupBarrier();
  let n = atomicLoad(&firstPad);
  var lm = pf(P_negInf);
  for (var j = t; j < n; j += NT) { let v = val(ov, j); if (v > lm) { lm = v; } }
  red[t] = lm;
  workgroupBarrier();
  if (t == 0u) {
    var m = pf(P_negInf);
    for (var j = 0u; j < NT; j++) { if (red[j] > m) { m = red[j]; } }
    var go = 1u;
    if (TAB[h] == 0u) { go = 0u; }
    else if (n == 0u) { OUT[at] = 0u; go = 0u; }
    else if (!(m > pf(P_negInf) && m < pf(P_inf))) {
      var pick = IDS[o];
      for (var j = n; j > 0u; j--) { if (val(ov, j - 1u) == m) { pick = IDS[o + j - 1u]; } }
      OUT[at] = pick;
      go = 0u;
    }
    info[0] = n;
    info[1] = go;
    info[3] = bitcast<u32>(m);
  }
  if (workgroupUniformLoad(&info[1]) == 0u) { return; }
  let m = bitcast<f32>(info[3]);
  for (var j = t; j < n; j += NT) {
    let e = exp32((val(ov, j) - m) * invT);
    let wj = select(e, 0.0, e < minP);
    w[j] = wj;
    if (wj > 0.0) { atomicAdd(&positives, 1u); }
  }
  // positions [0, p): the entries, then padding positions (key −1, after every positive entry)
  var p = 2u;
  while (p < c) { p = p * 2u; }
  for (var q = t; q < p / 2u; q += NT) { S[q] = (2u * q) | ((2u * q + 1u) << 16u); }
  workgroupBarrier();
  for (var k = 2u; k <= p; k = k * 2u) {
    for (var j = k / 2u; j > 0u; j = j / 2u) {
      sort_stage(t, p, k, j);
      workgroupBarrier();
    }
  }
  let np = atomicLoad(&positives);
  let kk = select(min(topK, np), np, topK == 0u);
  if (t == 0u) {
    // top-p's target: f(topP · T), T the kept mass in id order
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (ranked_before(j, kk, np)) { total = total + w[j]; } }
    info[2] = bitcast<u32>(topP * total);
    info[4] = 0u;
    info[5] = select(0u, kk, topP < 1.0);
    info[6] = kk;
  }
  // the first rank r in [lo, hi] whose mass reaches the target (hi: none before it does)
  loop {
    let lo = workgroupUniformLoad(&info[4]);
    let hi = workgroupUniformLoad(&info[5]);
    if (lo >= hi) { break; }
    let step = (hi - lo + PROBES - 1u) / PROBES;
    if (t < PROBES) {
      let r = lo + t * step;
      probe[t] = select(1u, select(0u, 1u, mass_reaches(r, n, np, bitcast<f32>(info[2]))), r < hi);
    }
    workgroupBarrier();
    if (t == 0u) {
      // the first probe reached (none: past the last probe, which is below hi)
      var i = 0u;
      while (i < PROBES && probe[i] == 0u) { i++; }
      info[5] = min(lo + i * step, hi);
      if (i > 0u) { info[4] = lo + (i - 1u) * step + 1u; }
    }
  }
  if (t == 0u) {
    let kept = min(info[6], select(kk, info[5], topP < 1.0));
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (ranked_before(j, kept, np)) { total = total + w[j]; } }
    let goal = u * total;
    var cum = 0.0;
    var pick = -1;
    for (var j = 0u; j < n; j++) {
      if (!ranked_before(j, kept, np)) { continue; }
      cum = cum + w[j];
      pick = cid(o, j);
      if (cum > goal) { break; }
    }
    OUT[at] = bitcast<u32>(select(pick, cid(o, 0u), pick < 0));
  }
}
`;
