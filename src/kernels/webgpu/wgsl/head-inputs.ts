// One attention head's input row, normed and rotated: the WGSL text that ATTENTION_INPUTS
// (wgsl/batch.ts, a workgroup of 64 threads per head and row) and the folded decode / verify
// attention (wgsl/attention-tile.ts, a workgroup of WG threads per KV head and block, heads
// in turn) both run, so their bits are one text's. The arithmetic is NORM's and ROPE_BATCH's:
// lane l < 64 sums x_p² for p ≡ l (mod 64) in order from 0.0; the 64 lanes are summed by the
// fixed tree (halving strides 32..1); inv = 1/√(Σ/hd + eps); y_p = (x_p·inv)·(1 + w_p) in
// workgroup memory; then pair f < half of the rotary dims: (y_f·c − y_{f+half}·s,
// y_{f+half}·c + y_f·s); the dims past 2·half pass through. Which thread runs a lane or an
// element changes no bit.

/** The workgroup memory of headNormRope (a head of up to `maxHd` floats, the 64 lanes) and
 * head_tree(t): Σ of hred's 64 lanes by the fixed tree, run by `threads` threads (each takes
 * lanes t, t + threads, …), read by every thread before hred is reused. */
export function headInputsDecls(maxHd: number, threads: string): string {
  return `var<workgroup> hy: array<f32, ${maxHd}>;
var<workgroup> hred: array<f32, 64>;
fn head_tree(t: u32) -> f32 {
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    for (var l = t; l < s; l += ${threads}) { hred[l] = hred[l] + hred[l + s]; }
    workgroupBarrier();
  }
  let r = hred[0];
  workgroupBarrier();
  return r;
}`;
}

/** WGSL operands of headNormRope, each an expression or statement text. */
export interface HeadInputs {
  /** Element `p` of the head's input row (read twice: the sum of squares, then the norm). */
  readonly src: (p: string) => string;
  /** The norm weight's array (f32 [hd], zero-centred: y = x·inv·(1 + w)). */
  readonly weight: string;
  /** Statements storing output element `p` (value `o`). */
  readonly store: (p: string, o: string) => string;
  /** The row's cos / sin of pair `f` (f32). */
  readonly cos: (f: string) => string;
  readonly sin: (f: string) => string;
  /** hd, half (rotary pairs), eps, threads: WGSL expressions (hd a runtime value, as NORM's). */
  readonly hd: string;
  readonly half: string;
  readonly eps: string;
  readonly threads: string;
}

/** Statements: one head row normed and rotated (in scope: t, the thread; uniform control
 * flow: barriers inside). Ends after the stores (hy is free once head_tree's first barrier
 * has passed in the next call). */
export function headNormRope(h: HeadInputs): string {
  return `{
    for (var l = t; l < 64u; l += ${h.threads}) {
      var ss = 0.0;
      for (var p = l; p < ${h.hd}; p += 64u) { let v = ${h.src('p')}; ss = ss + v * v; }
      hred[l] = ss;
    }
    let total = head_tree(t);
    let inv = 1.0 / sqrt(total / f32(${h.hd}) + ${h.eps});
    for (var p = t; p < ${h.hd}; p += ${h.threads}) { hy[p] = ${h.src('p')} * inv * (1.0 + ${h.weight}[p]); }
    workgroupBarrier();
    for (var p = t; p < ${h.hd}; p += ${h.threads}) {
      var o: f32 = hy[p];
      if (p < 2u * ${h.half}) {
        let f = p % ${h.half};
        let c = ${h.cos('f')};
        let s = ${h.sin('f')};
        if (p < ${h.half}) { o = hy[f] * c - hy[f + ${h.half}] * s; } else { o = hy[f + ${h.half}] * c + hy[f] * s; }
      }
      ${h.store('p', 'o')}
    }
  }`;
}
