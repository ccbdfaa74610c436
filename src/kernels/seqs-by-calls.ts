// The plain forms of the Kernels calls that take several sequences of a batch at once
// (causalConvSeqs, gdnRecurrentSeqs, gdnChunkedSeqs): one per-sequence call each, for
// backends that do not run them as one dispatch (ref, wasm). Their results define the batched calls': a
// specialised backend must give the same bits as these loops.
import type { ConvSeq, GdnChunkSeq, GdnDims, GdnGating, GdnSeq, Kernels, Tensor, Weight } from './types.js';

/** causalConv of every sequence with t > 0, in order, on its rows of x / out ([rows, C],
 * C = w.rows). */
export function convSeqsByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'causalConv' | 'view'>, out: T, x: T, w: Weight,
  seqs: readonly ConvSeq<T>[]): void {
  const c = w.rows;
  for (const s of seqs) {
    if (s.t <= 0) continue;
    k.causalConv(k.view(out, s.row * c, s.t * c), k.view(x, s.row * c, s.t * c), s.window, w, s.t, s.scratch);
  }
}

/** gdnRecurrent of every sequence with t > 0, in order, on its rows of qkv ([rows,
 * 2·HK·dk + HV·dv]), g / beta ([rows, HV]) and out ([rows, HV·dv]). */
export function gdnSeqsByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'gdnRecurrent' | 'view'>, out: T, qkv: T, g: T, beta: T,
  dims: GdnDims, seqs: readonly GdnSeq<T>[]): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const width = 2 * hk * dk + hv * dv;
  for (const s of seqs) {
    if (s.t <= 0) continue;
    const rows = (buf: T, w: number): T => k.view(buf, s.row * w, s.t * w);
    k.gdnRecurrent(rows(out, hv * dv), rows(qkv, width), rows(g, hv), rows(beta, hv), s.state, dims, s.t, s.scratch);
  }
}

/** gdnChunked of every sequence with t > 0, in order, once per segment between its split
 * points (a segment's end is a chunk end), each segment at its own first position. */
export function gdnChunkedSeqsByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'gdnChunked' | 'view'>, out: T, qkv: T, g: T, beta: T,
  dims: GdnDims, seqs: readonly GdnChunkSeq<T>[]): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const width = 2 * hk * dk + hv * dv;
  for (const s of seqs) {
    if (s.t <= 0) continue;
    let from = 0;
    for (const end of [...chunkSplits(s), s.t]) {
      const seg = (buf: T, w: number): T => k.view(buf, (s.row + from) * w, (end - from) * w);
      k.gdnChunked(seg(out, hv * dv), seg(qkv, width), seg(g, hv), seg(beta, hv), s.state, dims, end - from, s.pos0 + from);
      from = end;
    }
  }
}

/** A chunked sequence's split points as token offsets in (0, t), ascending; a split outside
 * (pos0, pos0 + t) or out of order is the caller's error. */
export function chunkSplits(s: { readonly t: number; readonly pos0: number; readonly splits: readonly number[] }): number[] {
  const rel = s.splits.map((p) => p - s.pos0);
  rel.forEach((r, i) => {
    if (!(r > 0 && r < s.t) || (i > 0 && r <= rel[i - 1]!)) {
      throw new RangeError(`gdnChunkedSeqs: split ${s.splits[i]} is not an ascending position inside (${s.pos0}, ${s.pos0 + s.t})`);
    }
  });
  return rel;
}

/** Row runs [row, row + t) of the sequences with t > 0, adjacent sequences merged. */
export function rowRuns(seqs: readonly { readonly row: number; readonly t: number }[]): { row: number; t: number }[] {
  const runs: { row: number; t: number }[] = [];
  for (const s of seqs) {
    if (s.t <= 0) continue;
    const last = runs[runs.length - 1];
    if (last && last.row + last.t === s.row) last.t += s.t;
    else runs.push({ row: s.row, t: s.t });
  }
  return runs;
}

/** gdnRecurrentGatedSeqs as its plain calls: gdnGates on the sequences' rows,
 * gdnRecurrentSeqs, gatedRmsNorm of out on the same rows (in place, or with gating.perm
 * into perm.out with its head order; one call per run of adjacent rows: each op is
 * row-wise, so the split does not change a bit), then gating.project's matmulAdd. */
export function gdnGatedSeqsByCalls<T extends Tensor>(k: Pick<Kernels<T, Tensor>, 'gdnGates' | 'gdnRecurrentSeqs' | 'gatedRmsNorm' | 'matmulAdd' | 'view'>,
  out: T, qkv: T, gating: GdnGating<T>, dims: GdnDims, seqs: readonly GdnSeq<T>[]): void {
  const { numValueHeads: hv, valueDim: dv } = dims;
  const { a, b, g, beta, z, perm, project } = gating;
  const runs = rowRuns(seqs);
  const rows = (buf: T, r: { row: number; t: number }, w: number): T => k.view(buf, r.row * w, r.t * w);
  for (const r of runs) k.gdnGates(rows(g, r, hv), rows(beta, r, hv), rows(a, r, hv), rows(b, r, hv), gating.aLog, gating.dtBias, r.t);
  k.gdnRecurrentSeqs(out, qkv, g, beta, dims, seqs);
  const normed = perm?.out ?? out;
  for (const r of runs) {
    k.gatedRmsNorm(rows(normed, r, hv * dv), rows(out, r, hv * dv), rows(z, r, hv * dv), gating.norm, r.t * hv, gating.eps, perm?.order);
  }
  if (project) k.matmulAdd(project.x, normed, project.w, project.m, project.tmp);
}
