// WGSL shared by every kernel: the parameter block (binding 0, 64 words; kernels read
// u32 word i with pu(i) and f32 with pf(i)), the 2-D workgroup grid (a large 1-D
// dispatch is folded into x·y groups), and the weight element readers.

/** Parameter block and the linear workgroup id. */
export const HEADER = /* wgsl */ `
struct Params { w: array<vec4<u32>, 16> }
@group(0) @binding(0) var<uniform> P: Params;
fn pu(i: u32) -> u32 { return P.w[i / 4u][i % 4u]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(pu(i)); }
fn pf(i: u32) -> f32 { return bitcast<f32>(pu(i)); }
fn group_id(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + wid.y * nwg.x; }
fn silu(x: f32) -> f32 { return x / (1.0 + exp(-x)); }
fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
`;

/** A 64-wide workgroup buffer `buf` and tree_sum(t, v): Σ of the 64 threads' v by the fixed
 * tree (halving strides 32..1), the result read by every thread before the buffer is reused.
 * One text for every kernel that sums this way, so they round alike. */
export function treeSum(buf = 'red'): string {
  return `var<workgroup> ${buf}: array<f32, 64>;
fn tree_sum(t: u32, v: f32) -> f32 {
  ${buf}[t] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (t < s) { ${buf}[t] = ${buf}[t] + ${buf}[t + s]; }
    workgroupBarrier();
  }
  let r = ${buf}[0];
  workgroupBarrier();
  return r;
}`;
}

/** `count` (WGSL) 64-wide trees side by side in `buf` (tree q at q·64, `t` in scope), each
 * summed by tree_sum's halving tree (at stride s, lane l < s adds lane l + s): each tree's
 * bits are tree_sum's. Every level's adds are spread over the 64 threads, so all the trees
 * take 6 barriers; a loop over the trees inside `if (t < s)` made lavapipe's compile of a
 * kernel with it 2× longer. */
export function sideBySideTrees(buf: string, count: string): string {
  return `for (var tb = 5i; tb >= 0i; tb--) {
    let ts = 1u << u32(tb);
    for (var ti = t; ti < ${count} * ts; ti += 64u) { let tj = ((ti >> u32(tb)) << 6u) + (ti & (ts - 1u)); ${buf}[tj] = ${buf}[tj] + ${buf}[tj + ts]; }
    workgroupBarrier();
  }`;
}

/** The RMS inverse of one row of `dim` elements, as every norm here forms it: thread t's
 * Σ v² over p ≡ t (mod 64) (`read`: the element, WGSL in p), tree_sum (in scope with t),
 * then 1/√(total / dim + eps) as `target` (a `let` name, or an lvalue with `assign`). */
function rmsInverse(read: string, dim: string, target: string, assign = false): string {
  return `var ss = 0.0;
    for (var p = t; p < ${dim}; p += 64u) { let v = ${read}; ss = ss + v * v; }
    let total = tree_sum(t, ss);
    ${assign ? '' : 'let '}${target} = 1.0 / sqrt(total / f32(${dim}) + pf(P_eps));`;
}

/** Each tile row's RMS inverse into `inv[r]` for r < rows (`inv`, `rows`, `t`, K and tree_sum
 * in scope; `read` the element, WGSL in r and p) — rmsRowOpening's bits. A loop over the rows:
 * one unrolled per row made lavapipe's compile of the 8-column float kernel 2.5× longer. */
export function rowInvs(read: string): string {
  return `for (var r = 0u; r < rows; r++) {
    ${rmsInverse(read, 'K', 'inv[r]', true)}
  }`;
}

/** Heads whose 64-wide trees sum side by side in a head norm's inverse pass (workgroup
 * floats HEAD_TREES · 64: the same adds per head as one tree, fewer barriers). */
export const HEAD_TREES = 8;

/** Workgroup bytes of headInvDecls' reduction trees alone (whatever the tile). */
export function headTreeBytes(heads: number): number {
  return Math.min(heads, HEAD_TREES) * 64 * 4;
}

/** Workgroup bytes of headInvDecls: the trees and a tile of `tm` rows' inverses. */
export function headInvBytes(heads: number, tm: number): number {
  return tm * heads * 4 + headTreeBytes(heads);
}

/** The workgroup memory of rowHeadInvs for `heads` heads and a tile of `tm` rows. */
export function headInvDecls(heads: number, tm: number): string {
  return `var<workgroup> gred: array<f32, ${Math.min(heads, HEAD_TREES) * 64}>;
var<workgroup> ginv: array<f32, ${tm * heads}>;`;
}

/** Each tile row's inverse per head h into ginv[r · GH + h] (r < rows; GH heads of
 * gdv = K / GH elements; headInvDecls' memory; `read` the element at offset o of row r, WGSL
 * in r and o), as the GDN gated norm forms it (wgsl/gdn-gated.ts gatedNormRow: thread t sums
 * o² over p ≡ t mod 64 of the head, the halving tree, 1/√(Σ / gdv + eps)); HEAD_TREES heads'
 * trees side by side. */
export function rowHeadInvs(heads: number, read: (o: string) => string): string {
  const hr = Math.min(heads, HEAD_TREES);
  return `let gdv = K / GH;
  for (var r = 0u; r < rows; r++) {
    for (var h0 = 0u; h0 < GH; h0 += ${hr}u) {
      for (var hh = 0u; hh < ${hr}u; hh++) {
        var sq2 = 0.0;
        if (h0 + hh < GH) { for (var p = t; p < gdv; p += 64u) { let v = ${read('(h0 + hh) * gdv + p')}; sq2 = sq2 + v * v; } }
        gred[hh * 64u + t] = sq2;
      }
      workgroupBarrier();
      ${sideBySideTrees('gred', `${hr}u`)}
      if (t < ${hr}u && h0 + t < GH) { ginv[r * GH + h0 + t] = 1.0 / sqrt(gred[t * 64u] / f32(gdv) + pf(P_eps)); }
      workgroupBarrier();
    }
  }`;
}

/** `W` (binding given) as u32 words, and `wf(i)`: element i of a float weight of `dtype`. */
export function floatWeightReader(dtype: 'f32' | 'bf16' | 'f16', binding: number): string {
  const body = dtype === 'f32' ? 'return bitcast<f32>(W[i]);'
    : dtype === 'bf16' ? 'let word = W[i >> 1u]; return bitcast<f32>(select(word << 16u, word & 0xffff0000u, (i & 1u) == 1u));'
    : 'let h = unpack2x16float(W[i >> 1u]); return select(h.x, h.y, (i & 1u) == 1u);';
  return `@group(0) @binding(${binding}) var<storage, read_write> W: array<u32>;
fn wf(i: u32) -> f32 { ${body} }
`;
}

/** Byte reader over `W` (GGML blocks are not 4-byte aligned). */
export const BYTES = /* wgsl */ `
fn b8(i: u32) -> u32 { return (W[i >> 2u] >> ((i & 3u) * 8u)) & 0xffu; }
fn s8(i: u32) -> i32 { return (bitcast<i32>(b8(i)) << 24u) >> 24u; }
fn f16at(i: u32) -> f32 { return unpack2x16float(b8(i) | (b8(i + 1u) << 8u)).x; }
fn u32at(i: u32) -> u32 { return b8(i) | (b8(i + 1u) << 8u) | (b8(i + 2u) << 16u) | (b8(i + 3u) << 24u); }
`;

/** Grid of workgroups for `n` groups: x ≤ 65535 (the portable limit), y as needed. */
export function grid(n: number, z = 1): [number, number, number] {
  const x = Math.min(Math.max(n, 1), 32768);
  return [x, Math.ceil(Math.max(n, 1) / x), z];
}

/** The opening of a one-workgroup-per-row RMSNorm (after tree_sum): `row` (returning past the
 * rows in param `rows`), `d` (param `dim`), `xo` the row in X, `inv` = 1/√(mean(x²) + eps),
 * `oo` the row in OUT. One text for NORM and norm_quant_acts, so their normed rows are the
 * same bits. `src`: the row of X read (WGSL in `row`, `d`; default the row itself); `rowOf`:
 * the row's WGSL (default the workgroup's linear id; a uniform value: tree_sum follows). */
export function rmsRowOpening(rows: string, dim: string, src = 'row', rowOf = 'group_id(wid, nwg)'): string {
  return `  let row = ${rowOf};
  if (row >= pu(${rows})) { return; }
  let d = pu(${dim});
  let xo = pu(P_xOff) + (${src}) * d;
  ${rmsInverse('X[xo + p]', 'd', 'inv')}
  let oo = pu(P_outOff) + row * d;`;
}
