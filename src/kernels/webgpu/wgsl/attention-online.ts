// The online softmax every webgpu attention kernel computes (wgsl/attention.ts per (head,
// row), wgsl/batch.ts ATTENTION_BATCH, wgsl/attention-tile.ts for decode / verify blocks and
// prefill tiles). One definition of a query's f32 operations, so a query's output bits depend
// only on (query, its context), never on the kernel, block or batch that computed it — what
// keeps prefix hit == cold, MTP on == off and batch == alone exact on webgpu.
//
// A query attends positions 0..n−1 in FIXED blocks of ONLINE_BLOCK positions, in position
// order (block b: positions [b·B, min(n, (b + 1)·B)), cnt of them). State: running max m
// (from −FLT_MAX), running sum l (from 0), accumulator acc_d (from 0) per output element d.
// Per block:
//   s_i   = ob_scale(Σ_d q_d·k_id by ob_dot from 0.0, d = 0 up)        (score of position i)
//   m'    = max(m, max_i s_i)                   (max is exact: its order does not matter)
//   α     = exp(m − m')
//   e_i   = exp(s_i − m')
//   l'    = l·α, then + e_i for i = 0 up        (ob_block)
//   acc'_d = acc_d·α, then + e_i·v_id for i = 0 up   (ob_rescale, ob_acc)
// Output: acc_d / l (ob_out). Positions past n take no part (never a zero weight: 0·v of an
// unwritten cache row may be NaN). A kernel may spread the scores, a block's positions or a
// query's elements over threads, but each of the chains above runs in one thread in this order.
// ob_block reads and writes `w` (a workgroup array<f32> the kernel declares) where a
// block's scores, then weights, of a query lie at w[at .. at + cnt); ob_block_r is the same
// fold, op for op, over a thread's own array (kernels where one thread holds a query's block:
// wgsl/attention-prefill.ts). Both texts are here, side by side, so they stay one chain.

/** Positions per online-softmax block (every kernel; the tile kernels' K/V tiles divide it). */
export const ONLINE_BLOCK = 16;

/** The helpers every kernel shares (WGSL): no workgroup memory. */
export const ONLINE_SOFTMAX_CORE = /* wgsl */ `
const OB = ${ONLINE_BLOCK}u;
const OB_MIN = -3.40282346e38;
fn ob_dot(s: f32, q: f32, k: f32) -> f32 { return s + q * k; }
fn ob_scale(s: f32) -> f32 { return s * pf(P_scale); }
// a query's block in a thread's array: scores s[0 .. cnt) become weights; (m, l) → (m', l', α)
fn ob_block_r(s: ptr<function, array<f32, ${ONLINE_BLOCK}>>, cnt: u32, ml: vec2<f32>) -> vec3<f32> {
  var mb = ml.x;
  for (var i = 0u; i < cnt; i++) { mb = max(mb, (*s)[i]); }
  let alpha = exp(ml.x - mb);
  var l = ml.y * alpha;
  for (var i = 0u; i < cnt; i++) { let e = exp((*s)[i] - mb); (*s)[i] = e; l = l + e; }
  return vec3<f32>(mb, l, alpha);
}
fn ob_rescale(acc: f32, alpha: f32) -> f32 { return acc * alpha; }
fn ob_acc(acc: f32, e: f32, v: f32) -> f32 { return acc + e * v; }
fn ob_out(acc: f32, l: f32) -> f32 { return acc / l; }
`;

/** The helper functions (WGSL); the kernel declares `var<workgroup> w: array<f32, N>`. */
export const ONLINE_SOFTMAX = /* wgsl */ `${ONLINE_SOFTMAX_CORE}
// a query's block: scores w[at .. at + cnt) become weights; (m, l) → (m', l', α) (as ob_block_r)
fn ob_block(at: u32, cnt: u32, ml: vec2<f32>) -> vec3<f32> {
  var mb = ml.x;
  for (var i = 0u; i < cnt; i++) { mb = max(mb, w[at + i]); }
  let alpha = exp(ml.x - mb);
  var l = ml.y * alpha;
  for (var i = 0u; i < cnt; i++) { let e = exp(w[at + i] - mb); w[at + i] = e; l = l + e; }
  return vec3<f32>(mb, l, alpha);
}
`;
