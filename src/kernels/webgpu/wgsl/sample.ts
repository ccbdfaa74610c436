// Sampling over one logits row per dispatch (workgroup of 256): the definition of
// kernels/ref/sampling.ts with f32 sums in a fixed order instead of its f64 ones —
// logprob normaliser and top-N raw logits; penalty patches; w_i = exp32((s_i − max)·invT)
// (the Cephes polynomial of the ref, f32), min-p; top-k then top-p as a kept set
// {w > τ} ∪ {w = τ, id ≤ lim} (weight bits compared as integers, ties in id order), found
// by bisection over the bits with exact counts / fixed-order masses; the kept mass and the
// draw walk ids in order. Thread t owns the contiguous ids [t·cs, (t+1)·cs): every sum is
// its chunk in id order, then the threads in a fixed tree (or in order, for walks).
// params: PARAMS.sample (params.ts); flags: 1 draw, 2 logprobs, 4 dist; inf: +∞ (WGSL has
// no infinity literal).
// Result words at resultOff: token, rawMax, rawSumExp, keptMass, topIds[20], topVals[20].
import { paramConsts } from '../params.js';
import { HEADER } from './common.js';

export const SAMPLE_RESULT_WORDS = 44;

/** exp32 of kernels/ref/sampling.ts in f32 (Cephes' polynomial; 0 below −87 or NaN): one text
 * for every shader that weighs logits (sample.ts, candidate-draws.ts). */
export const EXP32 = /* wgsl */ `
fn exp32(y: f32) -> f32 {
  if (!(y >= -87.0)) { return 0.0; }
  let k = round(y * 1.44269504088896341);
  var r = y - k * 0.693359375;
  r = r - k * -2.12194440e-4;
  let z = r * r;
  var p = 1.9875691500e-4 * r + 1.3981999507e-3;
  p = p * r + 8.3334519073e-3;
  p = p * r + 4.1665795894e-2;
  p = p * r + 1.6666665459e-1;
  p = p * r + 5.0000001201e-1;
  p = p * z + r;
  p = p + 1.0;
  return ldexp(p, i32(k));
}
`;

export const SAMPLE = /* wgsl */ `${HEADER}
${paramConsts('sample')}
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> PIDS: array<i32>;
@group(0) @binding(3) var<storage, read_write> PVALS: array<f32>;
@group(0) @binding(4) var<storage, read_write> W: array<f32>;
@group(0) @binding(5) var<storage, read_write> RES: array<u32>;
@group(0) @binding(6) var<storage, read_write> DIST: array<f32>;
const NT = 256u;
var<workgroup> rf: array<f32, 256>;
var<workgroup> ru: array<u32, 256>;
var<workgroup> ri: array<i32, 256>;
var<workgroup> shared_i: i32;

${EXP32}
fn sum_f(t: u32, v: f32) -> f32 {
  rf[t] = v;
  workgroupBarrier();
  for (var s = NT / 2u; s > 0u; s >>= 1u) { if (t < s) { rf[t] = rf[t] + rf[t + s]; } workgroupBarrier(); }
  return workgroupUniformLoad(&rf[0]);
}
fn sum_u(t: u32, v: u32) -> u32 {
  ru[t] = v;
  workgroupBarrier();
  for (var s = NT / 2u; s > 0u; s >>= 1u) { if (t < s) { ru[t] = ru[t] + ru[t + s]; } workgroupBarrier(); }
  return workgroupUniformLoad(&ru[0]);
}
fn max_f(t: u32, v: f32) -> f32 {
  rf[t] = v;
  workgroupBarrier();
  for (var s = NT / 2u; s > 0u; s >>= 1u) { if (t < s && rf[t] < rf[t + s]) { rf[t] = rf[t + s]; } workgroupBarrier(); }
  return workgroupUniformLoad(&rf[0]);
}
// (value, id) with the best by value desc, id asc; id −1 = none.
fn best_pair(t: u32, v: f32, i: i32) -> i32 {
  rf[t] = v;
  ri[t] = i;
  workgroupBarrier();
  for (var s = NT / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      let j = ri[t + s];
      if (j >= 0 && (ri[t] < 0 || rf[t + s] > rf[t] || (rf[t + s] == rf[t] && j < ri[t]))) { rf[t] = rf[t + s]; ri[t] = j; }
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&ri[0]);
}
fn bits(i: u32) -> u32 { return bitcast<u32>(W[pu(P_wOff) + i]); }
fn kept(b: u32, i: u32, tau: u32, lim: i32) -> bool { return b > tau || (b == tau && i32(i) <= lim); }

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32) {
  let INF = pf(P_inf);
  let xo = pu(P_xOff); let n = pu(P_n); let flags = pu(P_flags); let wo = pu(P_wOff); let ro = pu(P_resultOff);
  let cs = (n + NT - 1u) / NT;
  let lo = min(t * cs, n);
  let hi = min(lo + cs, n);
  if ((flags & 2u) != 0u) {
    var m = -INF;
    for (var i = lo; i < hi; i++) { let x = X[xo + i]; if (m < x) { m = x; } }
    let M = max_f(t, m);
    let finite = M > -INF && M < INF;
    var s = 0.0;
    if (finite) { for (var i = lo; i < hi; i++) { s = s + exp32(X[xo + i] - M); } }
    let S = sum_f(t, s);
    if (t == 0u) { RES[ro + 1u] = bitcast<u32>(M); RES[ro + 2u] = bitcast<u32>(select(0.0, S, finite)); }
    var lastV = INF;
    var lastI = -1;
    for (var j = 0u; j < pu(P_topN); j++) {
      var bv = 0.0;
      var bi = -1;
      for (var i = lo; i < hi; i++) {
        let x = X[xo + i];
        if (x != x) { continue; }
        let after = lastI < 0 || x < lastV || (x == lastV && i32(i) > lastI);
        if (after && (bi < 0 || x > bv)) { bv = x; bi = i32(i); }
      }
      let b = best_pair(t, bv, bi);
      if (b >= 0) { lastI = b; lastV = X[xo + u32(b)]; }
      if (t == 0u) {
        RES[ro + 4u + j] = bitcast<u32>(b);
        RES[ro + 24u + j] = bitcast<u32>(select(-INF, lastV, b >= 0));
      }
    }
  }
  if ((flags & 5u) == 0u) { return; }
  for (var i = lo; i < hi; i++) { W[wo + i] = X[xo + i]; }
  storageBarrier();
  workgroupBarrier();
  for (var j = t; j < pu(P_patchCount); j += NT) { W[wo + u32(PIDS[pu(P_patchOff) + j])] = PVALS[pu(P_patchOff) + j]; }
  storageBarrier();
  workgroupBarrier();
  var m = -INF;
  for (var i = lo; i < hi; i++) { let w = W[wo + i]; if (m < w) { m = w; } }
  let M = max_f(t, m);
  var tau = 0u;
  var lim = -1;
  if (!(M > -INF && M < INF)) {
    // one-hot on the first id holding the maximum (all NaN: id 0)
    var first = i32(n);
    for (var i = lo; i < hi; i++) { if (W[wo + i] == M && i32(i) < first) { first = i32(i); } }
    ri[t] = first;
    workgroupBarrier();
    for (var s = NT / 2u; s > 0u; s >>= 1u) { if (t < s) { ri[t] = min(ri[t], ri[t + s]); } workgroupBarrier(); }
    let f = select(ri[0], 0, ri[0] == i32(n));
    for (var i = lo; i < hi; i++) { W[wo + i] = select(0.0, 1.0, i32(i) == f); }
  } else {
    let invT = pf(P_invT);
    let minP = pf(P_minP);
    for (var i = lo; i < hi; i++) {
      let e = exp32((W[wo + i] - M) * invT);
      W[wo + i] = select(e, 0.0, e < minP);
    }
  }
  storageBarrier();
  workgroupBarrier();
  let finite = M > -INF && M < INF;
  let topK = pu(P_topK);
  if (finite && topK > 0u && topK < n) {
    // τ: the largest bits b with #{kept, bits ≥ b} ≥ k (fewer kept than k: keep them all)
    var c = 0u;
    for (var i = lo; i < hi; i++) { if (kept(bits(i), i, tau, lim)) { c++; } }
    if (sum_u(t, c) > topK) {
      var blo = 0u;
      var bhi = 0x7f800001u;
      for (var it = 0u; it < 31u; it++) {
        let mid = blo + (bhi - blo) / 2u;
        var cc = 0u;
        for (var i = lo; i < hi; i++) { let b = bits(i); if (b >= mid && kept(b, i, tau, lim)) { cc++; } }
        if (sum_u(t, cc) >= topK) { blo = mid; } else { bhi = mid; }
      }
      var above = 0u;
      var eq = 0u;
      for (var i = lo; i < hi; i++) { let b = bits(i); if (kept(b, i, tau, lim)) { if (b > blo) { above++; } else if (b == blo) { eq++; } } }
      let nAbove = sum_u(t, above);
      ru[t] = eq;
      workgroupBarrier();
      if (t == 0u) {
        var need = topK - nAbove;
        var l = -1;
        for (var ch = 0u; ch < NT && need > 0u; ch++) {
          if (ru[ch] < need) { need -= ru[ch]; continue; }
          for (var i = min(ch * cs, n); i < min(ch * cs + cs, n); i++) {
            if (bits(i) == blo && kept(blo, i, tau, lim)) { need--; if (need == 0u) { l = i32(i); break; } }
          }
        }
        shared_i = l;
      }
      lim = workgroupUniformLoad(&shared_i);
      tau = blo;
    }
  }
  let topP = pf(P_topP);
  if (finite && topP < 1.0) {
    var ms = 0.0;
    for (var i = lo; i < hi; i++) { if (kept(bits(i), i, tau, lim)) { ms = ms + W[wo + i]; } }
    let goal = topP * sum_f(t, ms);
    var blo = 0u;
    var bhi = 0x7f800001u;
    for (var it = 0u; it < 31u; it++) {
      let mid = blo + (bhi - blo) / 2u;
      var mm = 0.0;
      for (var i = lo; i < hi; i++) { let b = bits(i); if (b >= mid && kept(b, i, tau, lim)) { mm = mm + W[wo + i]; } }
      if (sum_f(t, mm) >= goal) { blo = mid; } else { bhi = mid; }
    }
    var above = 0.0;
    var eqm = 0.0;
    for (var i = lo; i < hi; i++) { let b = bits(i); if (kept(b, i, tau, lim)) { if (b > blo) { above = above + W[wo + i]; } else if (b == blo) { eqm = eqm + W[wo + i]; } } }
    let mAbove = sum_f(t, above);
    rf[t] = eqm;
    workgroupBarrier();
    if (t == 0u) {
      var cum = mAbove;
      var l = -1;
      var done = false;
      for (var ch = 0u; ch < NT && !done; ch++) {
        if (cum + rf[ch] < goal) { cum = cum + rf[ch]; if (rf[ch] > 0.0) { l = i32(min(ch * cs + cs, n)) - 1; } continue; }
        for (var i = min(ch * cs, n); i < min(ch * cs + cs, n); i++) {
          if (bits(i) == blo && kept(blo, i, tau, lim)) { cum = cum + W[wo + i]; l = i32(i); if (cum >= goal) { done = true; break; } }
        }
      }
      if (!done) { l = lim; if (blo > tau) { l = i32(n) - 1; } }
      shared_i = l;
    }
    lim = workgroupUniformLoad(&shared_i);
    tau = blo;
  }
  // kept mass per chunk, the dist, the draw
  var cm = 0.0;
  for (var i = lo; i < hi; i++) {
    let k = kept(bits(i), i, tau, lim);
    let w = select(0.0, W[wo + i], k);
    cm = cm + w;
    if ((flags & 4u) != 0u) { DIST[pu(P_distOff) + i] = w; }
  }
  rf[t] = cm;
  workgroupBarrier();
  if (t == 0u) {
    var total = 0.0;
    for (var ch = 0u; ch < NT; ch++) { total = total + rf[ch]; }
    RES[ro + 3u] = bitcast<u32>(total);
    if ((flags & 1u) != 0u) {
      let goal = pf(P_u) * total;
      var cum = 0.0;
      var tok = -1;
      for (var ch = 0u; ch < NT && tok < 0; ch++) {
        if (!(cum + rf[ch] > goal)) { cum = cum + rf[ch]; continue; }
        var last = -1;
        for (var i = min(ch * cs, n); i < min(ch * cs + cs, n); i++) {
          if (!kept(bits(i), i, tau, lim)) { continue; }
          cum = cum + W[wo + i];
          last = i32(i);
          if (cum > goal) { tok = i32(i); break; }
        }
        if (tok < 0 && last >= 0) { tok = last; }
        if (tok < 0) { break; }
      }
      if (tok < 0) {
        tok = 0;
        for (var i = i32(n) - 1; i >= 0; i--) { if (kept(bits(u32(i)), u32(i), tau, lim)) { tok = i; break; } }
      }
      RES[ro] = bitcast<u32>(tok);
    }
  }
}`;
