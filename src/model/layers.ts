// Decoder layers as functions over a batch of sequences (rows of all sequences stacked:
// M = Σ T_i). Activations come from a Workspace so the hot path does not allocate.
import type { Kernels, KvLayerView } from '../kernels/types.js';
import type { ModelConfig } from './config.js';
import { convDim } from './config.js';
import { ropeScaled } from './rope-scaling.js';
import type { AttnWeights, ExpertWeights, GdnWeights, LayerWeights, MlpWeights, MoeWeights } from './weights.js';

/** Named scratch buffers reused across calls; grown on demand, never shrunk. */
export class Workspace {
  private readonly f32 = new Map<string, Float32Array>();
  private readonly i32 = new Map<string, Int32Array>();
  constructor(private readonly kernels: Kernels) {}
  buf(name: string, n: number): Float32Array {
    let b = this.f32.get(name);
    if (!b || b.length < n) {
      b = this.kernels.alloc(Math.max(n, 16));
      this.f32.set(name, b);
    }
    return b.subarray(0, n);
  }
  ints(name: string, n: number): Int32Array {
    let b = this.i32.get(name);
    if (!b || b.length < n) {
      b = this.kernels.allocI32(Math.max(n, 16));
      this.i32.set(name, b);
    }
    return b.subarray(0, n);
  }
}

/** Recurrent state of one Gated DeltaNet layer for one sequence (a view into a slot). */
export interface LinearStateView {
  readonly conv: Float32Array; // [K−1, convDim]
  readonly ssm: Float32Array; // [HV, dk, dv] float32
}

/** Per-step verify scratch of one linear layer for one sequence (a view into the
 * sequence's batch-row scratch): the state after each step. */
export interface LinearScratchView {
  readonly conv: Float32Array; // [T, K−1, convDim]
  readonly ssm: Float32Array; // [T, HV, dk, dv]
}

/** One sequence of a batch: T tokens at positions start..start+T−1. */
export interface SeqSpan {
  readonly offset: number; // first row in the stacked batch
  readonly t: number;
  readonly start: number;
  readonly positions: Int32Array; // [T]
  readonly pageTable: ArrayLike<number>;
  readonly kv: readonly KvLayerView[]; // per full-attention layer (in full-layer order)
  readonly state: readonly LinearStateView[]; // per linear layer (in linear-layer order)
  readonly scratch: readonly LinearScratchView[] | null; // verify: per-step states
  readonly chunked: boolean; // Gated DeltaNet: chunked prefill vs step-by-step recurrence
  readonly splits: readonly number[]; // chunked: positions in (start, start+T) where a chunk also ends
}

export interface LayerCtx {
  readonly k: Kernels;
  readonly cfg: ModelConfig;
  readonly ws: Workspace;
  readonly m: number; // rows in the batch
  readonly seqs: readonly SeqSpan[];
}

/** x ← x + mixer(norm1(x)); x ← x + mlp(norm2(x)). `index` is the layer's position among
 * layers of its kind (linear-layer index or full-layer index). x: [M, H]. */
export function decoderLayer(ctx: LayerCtx, w: LayerWeights, x: Float32Array, index: number): void {
  const { k, cfg, ws, m } = ctx;
  const h = cfg.hiddenSize;
  const normed = ws.buf('normed', m * h);
  k.rmsNorm(normed, x, w.inputNorm, m, cfg.rmsNormEps, true);
  const mixed = ws.buf('mixed', m * h);
  if (w.mixer.kind === 'linear') gdnMixer(ctx, w.mixer, normed, mixed, index);
  else attnMixer(ctx, w.mixer, normed, mixed, index);
  k.add(x, x, mixed, m * h);
  k.rmsNorm(normed, x, w.postNorm, m, cfg.rmsNormEps, true);
  mlp(ctx, w.mlp, normed, mixed);
  k.add(x, x, mixed, m * h);
}

function gdnMixer(ctx: LayerCtx, w: GdnWeights, x: Float32Array, out: Float32Array, li: number): void {
  const { k, cfg, ws, m } = ctx;
  const c = convDim(cfg);
  const hv = cfg.linNumValueHeads;
  const vd = hv * cfg.linValueDim;
  const dims = { numKeyHeads: cfg.linNumKeyHeads, numValueHeads: hv, keyDim: cfg.linKeyDim, valueDim: cfg.linValueDim };
  const qkv = ws.buf('gdn.qkv', m * c); // [M, convDim] pre-conv
  const z = ws.buf('gdn.z', m * vd); // [M, HV·dv]
  const b = ws.buf('gdn.b', m * hv); // [M, HV]
  const a = ws.buf('gdn.a', m * hv);
  k.matmul(qkv, x, w.inProjQkv, m);
  k.matmul(z, x, w.inProjZ, m);
  k.matmul(b, x, w.inProjB, m);
  k.matmul(a, x, w.inProjA, m);
  const conv = ws.buf('gdn.conv', m * c); // [M, convDim] post-conv
  const g = ws.buf('gdn.g', m * hv);
  const beta = ws.buf('gdn.beta', m * hv);
  k.gdnGates(g, beta, a, b, w.aLog, w.dtBias, m);
  const o = ws.buf('gdn.o', m * vd); // [M, HV, dv]
  for (const s of ctx.seqs) {
    if (s.t === 0) continue;
    const st = s.state[li]!;
    const sc = s.scratch?.[li];
    const rows = (buf: Float32Array, width: number): Float32Array => buf.subarray(s.offset * width, (s.offset + s.t) * width);
    k.causalConv(rows(conv, c), rows(qkv, c), st.conv, w.conv, s.t, sc?.conv);
    if (s.chunked && !sc) {
      // one call per segment between split points: a call's end is a chunk boundary
      let from = 0;
      for (const end of [...s.splits.map((p) => p - s.start), s.t]) {
        const seg = (buf: Float32Array, width: number): Float32Array => buf.subarray((s.offset + from) * width, (s.offset + end) * width);
        k.gdnChunked(seg(o, vd), seg(conv, c), seg(g, hv), seg(beta, hv), st.ssm, dims, end - from, s.start + from);
        from = end;
      }
    } else k.gdnRecurrent(rows(o, vd), rows(conv, c), rows(g, hv), rows(beta, hv), st.ssm, dims, s.t, sc?.ssm);
  }
  k.gatedRmsNorm(o, o, z, w.norm, m * hv, cfg.rmsNormEps);
  const order = w.outProjHeadOrder;
  k.matmul(out, order ? permuteHeads(ws.buf('gdn.o.perm', m * vd), o, order, m, cfg.linValueDim) : o, w.outProj, m);
}

/** out[i, j·dv + c] = o[i, order[j]·dv + c]: head blocks in out_proj's stored column order.
 * o, out: [M, HV·dv]. */
function permuteHeads(out: Float32Array, o: Float32Array, order: Int32Array, m: number, dv: number): Float32Array {
  const width = order.length * dv;
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < order.length; j++) {
      const src = i * width + order[j]! * dv;
      out.set(o.subarray(src, src + dv), i * width + j * dv);
    }
  }
  return out;
}

function attnMixer(ctx: LayerCtx, w: AttnWeights, x: Float32Array, out: Float32Array, fi: number): void {
  const { k, cfg, ws, m } = ctx;
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = cfg;
  const qd = nh * hd;
  const kvd = nkv * hd;
  const qg = ws.buf('attn.qg', m * 2 * qd); // [M, nH, 2·hd]: query then gate per head
  const kk = ws.buf('attn.k', m * kvd); // [M, nKV, hd]
  const vv = ws.buf('attn.v', m * kvd);
  k.matmul(qg, x, w.qProj, m);
  k.matmul(kk, x, w.kProj, m);
  k.matmul(vv, x, w.vProj, m);
  const gated = cfg.attnOutputGate !== false;
  const q = gated ? ws.buf('attn.q', m * qd) : qg; // [M, nH, hd]
  const gate = gated ? ws.buf('attn.gate', m * qd) : null; // [M, nH, hd]
  if (gate) {
    for (let r = 0; r < m * nh; r++) {
      q.set(qg.subarray(r * 2 * hd, r * 2 * hd + hd), r * hd);
      gate.set(qg.subarray(r * 2 * hd + hd, (r + 1) * 2 * hd), r * hd);
    }
  }
  k.rmsNorm(q, q, w.qNorm, m * nh, cfg.rmsNormEps, true);
  k.rmsNorm(kk, kk, w.kNorm, m * nkv, cfg.rmsNormEps, true);
  const o = ws.buf('attn.o', m * qd);
  for (const s of ctx.seqs) {
    if (s.t === 0) continue;
    const qs = q.subarray(s.offset * qd, (s.offset + s.t) * qd);
    const ks = kk.subarray(s.offset * kvd, (s.offset + s.t) * kvd);
    if (cfg.ropeScaling) {
      ropeScaled(qs, s.positions, s.t, nh, hd, cfg.rotaryDim, cfg.ropeScaling, qd);
      ropeScaled(ks, s.positions, s.t, nkv, hd, cfg.rotaryDim, cfg.ropeScaling, kvd);
    } else {
      k.rope(qs, s.positions, s.t, nh, hd, cfg.rotaryDim, cfg.ropeTheta, qd);
      k.rope(ks, s.positions, s.t, nkv, hd, cfg.rotaryDim, cfg.ropeTheta, kvd);
    }
    const kv = s.kv[fi]!;
    k.kvWrite(kv, s.pageTable, s.start, ks, vv.subarray(s.offset * kvd, (s.offset + s.t) * kvd), s.t, kvd);
    k.attention(o.subarray(s.offset * qd, (s.offset + s.t) * qd), qs, qd, kv, s.pageTable, s.start, s.t,
      { numHeads: nh, numKvHeads: nkv, headDim: hd });
  }
  if (gate) k.mulSigmoid(o, o, gate, m * qd);
  k.matmul(out, o, w.oProj, m);
}

function mlp(ctx: LayerCtx, w: MlpWeights, x: Float32Array, out: Float32Array): void {
  if (w.kind === 'dense') expertMlp(ctx, w, x, out, ctx.m, 'mlp');
  else moe(ctx, w, x, out);
}

/** down(up(x) ⊙ silu(gate(x))). x: [n, H], out: [n, H]. */
function expertMlp(ctx: LayerCtx, w: ExpertWeights, x: Float32Array, out: Float32Array, n: number, tag: string): void {
  const { k, ws } = ctx;
  const inter = w.gate.rows;
  const gate = ws.buf(`${tag}.gate`, n * inter);
  const up = ws.buf(`${tag}.up`, n * inter);
  k.matmul(gate, x, w.gate, n);
  k.matmul(up, x, w.up, n);
  k.mulSilu(up, up, gate, n * inter);
  k.matmul(out, up, w.down, n);
}

/** Routed experts (softmax → top-k → renormalise) plus the sigmoid-gated shared expert.
 * Each row sums its experts in top-k slot order, then the shared expert: the result of a
 * row never depends on which other rows share the batch. */
function moe(ctx: LayerCtx, w: MoeWeights, x: Float32Array, out: Float32Array): void {
  const { k, ws, m, cfg } = ctx;
  const h = cfg.hiddenSize;
  const e = w.router.rows;
  const topK = w.topK;
  const logits = ws.buf('moe.logits', m * e);
  k.matmul(logits, x, w.router, m);
  const ids = ws.ints('moe.ids', m * topK);
  const wts = ws.buf('moe.w', m * topK);
  k.moeRoute(ids, wts, logits, m, e, topK, w.normTopkProb);
  const slotOut = ws.buf('moe.slot', m * topK * h); // [M, topK, H]
  const rowsIn = ws.buf('moe.in', m * h);
  const rowsOut = ws.buf('moe.out', m * h);
  const sel = ws.ints('moe.sel', m * topK);
  for (let ex = 0; ex < e; ex++) {
    let n = 0;
    for (let i = 0; i < m * topK; i++) if (ids[i] === ex) sel[n++] = i;
    if (n === 0) continue;
    for (let j = 0; j < n; j++) {
      const row = Math.floor(sel[j]! / topK);
      rowsIn.set(x.subarray(row * h, (row + 1) * h), j * h);
    }
    expertMlp(ctx, w.experts[ex]!, rowsIn, rowsOut, n, 'moe.expert');
    for (let j = 0; j < n; j++) slotOut.set(rowsOut.subarray(j * h, (j + 1) * h), sel[j]! * h);
  }
  out.fill(0);
  for (let i = 0; i < m; i++) {
    const o = out.subarray(i * h, (i + 1) * h);
    for (let s = 0; s < topK; s++) {
      const wgt = wts[i * topK + s]!;
      const src = slotOut.subarray((i * topK + s) * h, (i * topK + s + 1) * h);
      for (let d = 0; d < h; d++) o[d] = o[d]! + wgt * src[d]!;
    }
  }
  if (w.shared && w.sharedGate) {
    expertMlp(ctx, w.shared, x, rowsOut, m, 'moe.shared');
    const sg = ws.buf('moe.sg', m);
    k.matmul(sg, x, w.sharedGate, m);
    for (let i = 0; i < m; i++) {
      const gate = 1 / (1 + Math.exp(-sg[i]!));
      for (let d = 0; d < h; d++) out[i * h + d] = out[i * h + d]! + gate * rowsOut[i * h + d]!;
    }
  }
}
