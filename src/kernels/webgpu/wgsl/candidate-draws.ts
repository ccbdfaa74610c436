// Kernels.candidateDraws (kernels/candidate-draws.ts is the definition, f32 sums in the same
// order): one workgroup of 64 per row. Thread 0 counts the entries, finds the max and weighs
// them (exp32, min-p) into workgroup memory; every thread ranks its entries (top-k) against all
// the others; thread 0 sums the kept mass for top-p; every thread keeps its entries whose kept
// mass ranked before them is under f(topP·T); thread 0 walks the kept ids in order for the draw.
// Every binding is read as u32 (an int32 output may share a buffer with the candidates).
// The row table (TAB, 6 words a row): [draw (0: leave the slot), invT, topK, topP, minP, u]
// (f32 bits but the flag and topK). params: PARAMS.candidate_draws; negInf, inf: ±∞ (WGSL has
// no infinity literal).
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { EXP32 } from './sample.js';

/** Words per row of the row table. */
export const CANDIDATE_DRAW_WORDS = 6;

export const CANDIDATE_DRAWS = /* wgsl */ `${HEADER}
${paramConsts('candidate_draws')}
@group(0) @binding(1) var<storage, read_write> OUT: array<u32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(3) var<storage, read_write> VALS: array<u32>;
@group(0) @binding(4) var<storage, read_write> TAB: array<u32>;
const NT = 64u;
${EXP32}
var<workgroup> w: array<f32, 256>;
var<workgroup> kept: array<u32, 256>;
var<workgroup> inp: array<u32, 256>;
// 0: entries, 1: go on (1) or done (0), 2: f(topP·T) bits
var<workgroup> info: array<u32, 3>;
fn val(o: u32, j: u32) -> f32 { return bitcast<f32>(VALS[o + j]); }
fn cid(o: u32, j: u32) -> i32 { return bitcast<i32>(IDS[o + j]); }
fn before(j: u32, i: u32) -> bool { return w[i] > w[j] || (w[i] == w[j] && i < j); }
@compute @workgroup_size(64)
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
  if (t == 0u) {
    var n = 0u;
    while (n < c && cid(o, n) >= 0) { n++; }
    var m = pf(P_negInf);
    for (var j = 0u; j < n; j++) { if (val(ov, j) > m) { m = val(ov, j); } }
    var go = 1u;
    if (TAB[h] == 0u) { go = 0u; }
    else if (n == 0u) { OUT[at] = 0u; go = 0u; }
    else if (!(m > pf(P_negInf) && m < pf(P_inf))) {
      var pick = IDS[o];
      for (var j = n; j > 0u; j--) { if (val(ov, j - 1u) == m) { pick = IDS[o + j - 1u]; } }
      OUT[at] = pick;
      go = 0u;
    } else {
      for (var j = 0u; j < n; j++) {
        let e = exp32((val(ov, j) - m) * invT);
        w[j] = select(e, 0.0, e < minP);
      }
    }
    info[0] = n;
    info[1] = go;
  }
  if (workgroupUniformLoad(&info[1]) == 0u) { return; }
  let n = workgroupUniformLoad(&info[0]);
  for (var j = t; j < n; j += NT) {
    var rank = 0u;
    for (var i = 0u; i < n; i++) { if (before(j, i)) { rank++; } }
    kept[j] = select(0u, 1u, w[j] > 0.0 && (topK == 0u || rank < topK));
  }
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (kept[j] != 0u) { total = total + w[j]; } }
    info[2] = bitcast<u32>(topP * total);
  }
  workgroupBarrier();
  let target_p = bitcast<f32>(info[2]);
  for (var j = t; j < n; j += NT) {
    var mass = 0.0;
    if (kept[j] != 0u && topP < 1.0) {
      for (var i = 0u; i < n; i++) { if (kept[i] != 0u && before(j, i)) { mass = mass + w[i]; } }
    }
    inp[j] = select(0u, 1u, kept[j] != 0u && (!(topP < 1.0) || mass < target_p));
  }
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var j = 0u; j < n; j++) { if (inp[j] != 0u) { total = total + w[j]; } }
    let goal = u * total;
    var cum = 0.0;
    var pick = -1;
    for (var j = 0u; j < n; j++) {
      if (inp[j] == 0u) { continue; }
      cum = cum + w[j];
      pick = cid(o, j);
      if (cum > goal) { break; }
    }
    OUT[at] = bitcast<u32>(select(pick, cid(o, 0u), pick < 0));
  }
}
`;
