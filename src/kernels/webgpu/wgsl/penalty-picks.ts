// Kernels.penaltyPicks (kernels/penalty-picks.ts is the definition): one workgroup of 64 per
// row. Pass 1 scans the row for the untouched best (a table id or a draft counts as −∞);
// pass 2 gives each thread table entries, then drafts, penalising their raw logits in f32
// (counting the drafts as outputs) and gathering the raw values; both reduce with the
// argmax order of dense.ts (lowest id among equal maxima, NaN never wins); thread 0 writes
// the best, its raw logit and the pick (the better of the two). With P_apply, after a barrier
// (every read of X done), each thread writes the penalised values of its entries into X (a
// draft inside the table or repeated is written once, by its table entry or first slot).
// The table (packPenaltyTable, penalty-picks.ts) is u32 words: per row an 8-word header
// [rp, pp, fp (f32 bits), countsDrafts, nIds, entriesAt, maskAt, Σ_{rows before} (1 + nIds)]
// (row r's values start at valsOff + that + r·steps: the rows before it gather `steps` drafts
// each, whether they count them or not), entries of 4 words
// [id, bias (f32 bits), prompt, count] and the row's untouched mask. params: PARAMS.penalty_picks.
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';
import { ARGMAX_WORKGROUP } from './dense.js';

export const PENALTY_PICKS = /* wgsl */ `${HEADER}
${paramConsts('penalty_picks')}
@group(0) @binding(1) var<storage, read_write> IDS: array<i32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> VALS: array<f32>;
@group(0) @binding(4) var<storage, read_write> TAB: array<u32>;
${ARGMAX_WORKGROUP}
fn tab(i: u32) -> u32 { return TAB[pu(P_tableOff) + i]; }
fn untouched(maskAt: u32, p: u32) -> bool { return ((tab(maskAt + (p >> 5u)) >> (p & 31u)) & 1u) == 1u; }
fn draft(s: u32, row: u32) -> i32 { return IDS[pu(P_idsOff) + s * pu(P_idsStride) + row]; }
fn penalise(raw: f32, prompt: bool, count: u32, rp: f32, pp: f32, fp: f32) -> f32 {
  var v = raw;
  if (rp != 1.0 && (prompt || count > 0u)) { v = select(v * rp, v / rp, v > 0.0); }
  if (count > 0u) { v = (v - pp) - fp * f32(count); }
  return v;
}
/// Touched id e of a row: table entry e < nIds (id, bias, prompt flag, count), else draft e − nIds
/// (bias 0; skipped when masked or an earlier draft's id), its count raised by the drafts equal
/// to it. One text for the pick loop and the apply loop, so both see the same entries.
struct Entry { id: u32, bias: f32, prompt: bool, count: u32, skip: bool }
fn entry(row: u32, e: u32, nIds: u32, entAt: u32, maskAt: u32, steps: u32) -> Entry {
  var en = Entry(0u, 0.0, false, 0u, false);
  if (e < nIds) {
    en.id = tab(entAt + e * 4u);
    en.bias = bitcast<f32>(tab(entAt + e * 4u + 1u));
    en.prompt = tab(entAt + e * 4u + 2u) != 0u;
    en.count = tab(entAt + e * 4u + 3u);
  } else {
    let s0 = e - nIds;
    en.id = u32(draft(s0, row));
    en.skip = !untouched(maskAt, en.id);
    for (var s = 0u; s < s0; s++) { if (draft(s, row) == i32(en.id)) { en.skip = true; } }
  }
  for (var s = 0u; s < steps; s++) { if (draft(s, row) == i32(en.id)) { en.count += 1u; } }
  return en;
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let row = group_id(wid, nwg);
  if (row >= pu(P_m)) { return; }
  let h = row * 8u;
  let rp = bitcast<f32>(tab(h));
  let pp = bitcast<f32>(tab(h + 1u));
  let fp = bitcast<f32>(tab(h + 2u));
  let steps = select(0u, pu(P_steps), tab(h + 3u) != 0u);
  let nIds = tab(h + 4u);
  let entAt = tab(h + 5u);
  let maskAt = tab(h + 6u);
  let valsAt = pu(P_valsOff) + tab(h + 7u) + row * pu(P_steps);
  let base = pu(P_xOff) + row * pu(P_stride);
  var v = 0.0;
  var i = -1;
  for (var p = t; p < pu(P_n); p += 64u) {
    var ok = untouched(maskAt, p);
    for (var s = 0u; s < steps; s++) { if (draft(s, row) == i32(p)) { ok = false; } }
    let x = select(pf(P_negInf), X[base + p], ok);
    if (x == x && better(v, i, x, i32(p))) { v = x; i = i32(p); }
  }
  reduceBest(t, v, i);
  let uv = bv[0];
  let ui = bi[0];
  workgroupBarrier();
  v = 0.0;
  i = -1;
  for (var e = t; e < nIds + steps; e += 64u) {
    let en = entry(row, e, nIds, entAt, maskAt, steps);
    let raw = X[base + en.id];
    VALS[valsAt + 1u + e] = raw;
    let x = penalise(raw + en.bias, en.prompt, en.count, rp, pp, fp);
    if (!en.skip && x == x && better(v, i, x, i32(en.id))) { v = x; i = i32(en.id); }
  }
  reduceBest(t, v, i);
  if (t == 0u) {
    let best = max(ui, 0);
    VALS[valsAt] = X[base + u32(best)];
    IDS[pu(P_bestOff) + row] = best;
    IDS[pu(P_idsOff) + pu(P_steps) * pu(P_idsStride) + row] = max(select(ui, bi[0], better(uv, ui, bv[0], bi[0])), 0);
  }
  storageBarrier();
  workgroupBarrier();
  if (pu(P_apply) == 0u) { return; }
  for (var e = t; e < nIds + steps; e += 64u) {
    let en = entry(row, e, nIds, entAt, maskAt, steps);
    if (en.skip) { continue; }
    X[base + en.id] = penalise(VALS[valsAt + 1u + e] + en.bias, en.prompt, en.count, rp, pp, fp);
  }
}`;
