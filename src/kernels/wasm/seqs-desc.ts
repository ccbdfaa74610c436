// Descriptor tables of the batched per-sequence commands (CONV_SEQS, GDN_RECURRENT_SEQS):
// one row of i32 pointers per sequence, resolved in the call's arena (in place, or staged
// and copied back by Operands). Row layouts are those assembly/gdn.ts causalConvSeqs and
// gdnRecurrentSeqs read.
import type { ConvSeq, GdnDims, GdnSeq } from '../types.js';
import * as cpu from '../cpu-ops.js';
import type { Operands } from './operands.js';

let rowsBuf = new Int32Array(64);

/** A descriptor table of n i32 (reused across calls: Operands.ints copies it into the
 * arena before the next call can overwrite it). */
function table(n: number): Int32Array {
  if (rowsBuf.length < n) rowsBuf = new Int32Array(2 * n);
  return rowsBuf.subarray(0, n);
}

/** Per sequence [out, x, window, scratch, t] (scratch 0: the window is updated in place);
 * rows = Σ t. ch: channels; hist: (K−1)·ch window floats. */
export function convSeqsDesc(c: Operands, out: Float32Array, x: Float32Array, ch: number, hist: number,
  live: readonly ConvSeq<Float32Array>[]): { desc: Int32Array; rows: number } {
  const desc = table(5 * live.length);
  let rows = 0;
  live.forEach((s, i) => {
    const n = s.t * ch;
    desc[5 * i] = c.out(cpu.view(out, s.row * ch, n), n);
    desc[5 * i + 1] = c.in(cpu.view(x, s.row * ch, n), n);
    desc[5 * i + 2] = s.scratch ? c.in(s.window, hist) : c.inout(s.window, hist);
    desc[5 * i + 3] = s.scratch ? c.out(s.scratch, s.t * hist) : 0;
    desc[5 * i + 4] = s.t;
    rows += s.t;
  });
  return { desc, rows };
}

/** Per sequence [out, qkv, g, beta, state, scratch, t] (scratch 0: the state is updated in
 * place); rows = Σ t. */
export function gdnSeqsDesc(c: Operands, out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array,
  dims: GdnDims, live: readonly GdnSeq<Float32Array>[]): { desc: Int32Array; rows: number } {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const ss = hv * dk * dv;
  const width = 2 * hk * dk + hv * dv;
  const desc = table(7 * live.length);
  let rows = 0;
  live.forEach((s, i) => {
    const rowsOf = (buf: Float32Array, w: number): number => c.in(cpu.view(buf, s.row * w, s.t * w), s.t * w);
    desc[7 * i] = c.out(cpu.view(out, s.row * hv * dv, s.t * hv * dv), s.t * hv * dv);
    desc[7 * i + 1] = rowsOf(qkv, width);
    desc[7 * i + 2] = rowsOf(g, hv);
    desc[7 * i + 3] = rowsOf(beta, hv);
    desc[7 * i + 4] = s.scratch ? c.in(s.state, ss) : c.inout(s.state, ss);
    desc[7 * i + 5] = s.scratch ? c.out(s.scratch, s.t * ss) : 0;
    desc[7 * i + 6] = s.t;
    rows += s.t;
  });
  return { desc, rows };
}
