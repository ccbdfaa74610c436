// Kernels.candidateDraws (kernels/candidate-draws.ts is the definition, f32 sums in the same
// order): one workgroup of 256 per row, up to MAX_DRAW_CANDIDATES entries (the weights in
// workgroup memory, 8 KiB at 2048; the kept flags as bitsets). Every thread finds the first
// padding slot (the entries' count) and the max over its entries; thread 0 combines them (a max
// is exact in any order; −0 and +0 weigh alike) and handles the non-finite row; every thread weighs its entries
// (exp32, min-p) and ranks them (top-k) against all the others; thread 0 sums the kept mass for
// top-p in id order; every thread keeps its entries whose kept mass ranked before them is under
// f(topP·T); thread 0 walks the kept ids in order for the draw.
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

export const CANDIDATE_DRAWS = /* wgsl */ `${HEADER}
${paramConsts('candidate_draws')}
@group(0) @binding(1) var<storage, read_write> OUT: array<u32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(3) var<storage, read_write> VALS: array<u32>;
@group(0) @binding(4) var<storage, read_write> TAB: array<u32>;
const NT = 256u;
${EXP32}
var<workgroup> w: array<f32, ${MAXC}>;
var<workgroup> kept: array<atomic<u32>, ${MAXC / 32}>;
var<workgroup> inp: array<atomic<u32>, ${MAXC / 32}>;
var<workgroup> red: array<f32, NT>;
var<workgroup> firstPad: atomic<u32>;
// 0: entries, 1: go on (1) or done (0), 2: f(topP·T) bits, 3: the max's bits
var<workgroup> info: array<u32, 4>;
fn val(o: u32, j: u32) -> f32 { return bitcast<f32>(VALS[o + j]); }
fn cid(o: u32, j: u32) -> i32 { return bitcast<i32>(IDS[o + j]); }
fn before(j: u32, i: u32) -> bool { return w[i] > w[j] || (w[i] == w[j] && i < j); }
fn is_kept(j: u32) -> bool { return ((atomicLoad(&kept[j >> 5u]) >> (j & 31u)) & 1u) != 0u; }
fn is_in(j: u32) -> bool { return ((atomicLoad(&inp[j >> 5u]) >> (j & 31u)) & 1u) != 0u; }
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
  if (t == 0u) { atomicStore(&firstPad, c); }
  for (var j = t; j < ${MAXC / 32}u; j += NT) {
    atomicStore(&kept[j], 0u);
    atomicStore(&inp[j], 0u);
  }
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
    info[1] = go;
    info[3] = bitcast<u32>(m);
  }
  if (workgroupUniformLoad(&info[1]) == 0u) { return; }
  let m = bitcast<f32>(info[3]);
  for (var j = t; j < n; j += NT) {
    let e = exp32((val(ov, j) - m) * invT);
    w[j] = select(e, 0.0, e < minP);
  }
  workgroupBarrier();
  for (var j = t; j < n; j += NT) {
    var rank = 0u;
    if (topK != 0u && w[j] > 0.0) {
      // past topK the entry is out whatever the rest: stop there
      for (var i = 0u; i < n && rank < topK; i++) { if (before(j, i)) { rank++; } }
    }
    if (w[j] > 0.0 && (topK == 0u || rank < topK)) { atomicOr(&kept[j >> 5u], 1u << (j & 31u)); }
  }
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (is_kept(j)) { total = total + w[j]; } }
    info[2] = bitcast<u32>(topP * total);
  }
  workgroupBarrier();
  let target_p = bitcast<f32>(info[2]);
  for (var j = t; j < n; j += NT) {
    var mass = 0.0;
    let k = is_kept(j);
    if (k && topP < 1.0) {
      // the f32 sum of nonnegative weights never decreases: once at the target, it stays out
      for (var i = 0u; i < n && mass < target_p; i++) { if (is_kept(i) && before(j, i)) { mass = mass + w[i]; } }
    }
    if (k && (!(topP < 1.0) || mass < target_p)) { atomicOr(&inp[j >> 5u], 1u << (j & 31u)); }
  }
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (is_in(j)) { total = total + w[j]; } }
    let goal = u * total;
    var cum = 0.0;
    var pick = -1;
    for (var j = 0u; j < n; j++) {
      if (!is_in(j)) { continue; }
      cum = cum + w[j];
      pick = cid(o, j);
      if (cum > goal) { break; }
    }
    OUT[at] = bitcast<u32>(select(pick, cid(o, 0u), pick < 0));
  }
}
`;
