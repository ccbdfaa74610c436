// Decoder layers as functions over a batch of sequences (rows of all sequences stacked:
// M = Σ T_i). Every tensor is a backend handle passed between kernels: nothing here reads
// or writes tensor elements (sub-ranges through Kernels.view, row moves through copyRows),
// so a backend whose memory is not JS-visible runs the same code. Scratch comes from the
// step arena (arena.ts).
import type { GroupNorm, Kernels, KvLayerView, StepBatch, Tensor } from '../kernels/types.js';
import type { StepArena } from './arena.js';
import type { ModelConfig } from './config.js';
import type { AttnWeights, ExpertWeights, GdnWeights, LayerWeights, MlpWeights, MoeWeights } from './weights.js';

/** Recurrent state of one Gated DeltaNet layer for one sequence (a view into a slot). */
export interface LinearStateView<T extends Tensor = Float32Array> {
  readonly conv: T; // [K−1, convDim]
  readonly ssm: T; // [HV, dk, dv] float32
}

/** Per-step verify scratch of one linear layer for one sequence (a view into the
 * sequence's batch-row scratch): the state after each step. */
export interface LinearScratchView<T extends Tensor = Float32Array> {
  readonly conv: T; // [T, K−1, convDim]
  readonly ssm: T; // [T, HV, dk, dv]
}

/** One sequence of a batch: T tokens at positions start..start+T−1. */
export interface SeqSpan<T extends Tensor = Float32Array> {
  readonly offset: number; // first row in the stacked batch
  readonly t: number;
  readonly start: number;
  readonly positions: Int32Array; // [T] (host)
  readonly pageTable: ArrayLike<number>;
  readonly kv: readonly KvLayerView<T>[]; // per full-attention layer (in full-layer order)
  readonly state: readonly LinearStateView<T>[]; // per linear layer (in linear-layer order)
  readonly scratch: readonly LinearScratchView<T>[] | null; // verify: per-step states
  readonly chunked: boolean; // Gated DeltaNet: chunked prefill vs step-by-step recurrence
  readonly splits: readonly number[]; // chunked: positions in (start, start+T) where a chunk also ends
}

export interface LayerCtx<T extends Tensor = Float32Array, I extends Tensor = Int32Array> {
  readonly k: Kernels<T, I>;
  readonly cfg: ModelConfig;
  readonly ws: StepArena<T, I>;
  readonly m: number; // rows in the batch
  readonly seqs: readonly SeqSpan<T>[];
  /** The step's batch (Kernels.stepBatch of seqs, in order): made once per forward. */
  readonly batch: StepBatch;
}

/** x ← x + mixer(norm1(x)); x ← x + mlp(norm2(x)). `index` is the layer's position among
 * layers of its kind (linear-layer index or full-layer index). x: [M, H]. Each norm is the
 * `norm` of the input projections' matmulGroup, and the residual adds are folded into the
 * mixer's and the dense MLP's last matmul (Kernels.matmulAdd; `mixed` is its scratch). */
export function decoderLayer<T extends Tensor, I extends Tensor>(ctx: LayerCtx<T, I>, w: LayerWeights, x: T, index: number): void {
  const { k, cfg, ws, m } = ctx;
  const normed = ws.normed.rows(m);
  const mixed = ws.mixed.rows(m);
  const norm1: GroupNorm<T> = { w: w.inputNorm, eps: cfg.rmsNormEps, zeroCentered: true, out: normed };
  if (w.mixer.kind === 'linear') gdnMixer(ctx, w.mixer, x, norm1, mixed, index);
  else attnMixer(ctx, w.mixer, x, norm1, mixed, index);
  mlp(ctx, w.mlp, x, { w: w.postNorm, eps: cfg.rmsNormEps, zeroCentered: true, out: normed }, mixed);
}

/** x += out_proj(GDN(norm(x))); tmp: [M, H] scratch. */
function gdnMixer<T extends Tensor, I extends Tensor>(ctx: LayerCtx<T, I>, w: GdnWeights, x: T, norm: GroupNorm<T>, tmp: T, li: number): void {
  const { k, cfg, ws, m } = ctx;
  const hv = cfg.linNumValueHeads;
  const vd = hv * cfg.linValueDim;
  const dims = { numKeyHeads: cfg.linNumKeyHeads, numValueHeads: hv, keyDim: cfg.linKeyDim, valueDim: cfg.linValueDim };
  const qkv = ws.gdn.qkv.rows(m); // [M, convDim] pre-conv
  const z = ws.gdn.z.rows(m); // [M, HV·dv]
  const b = ws.gdn.b.rows(m); // [M, HV]
  const a = ws.gdn.a.rows(m);
  const conv = ws.gdn.conv.rows(m); // [M, convDim] post-conv
  // the four input projections of x in one kernel call (bits as four matmul calls), then
  // every sequence's conv of the qkv rows, each with its own window (a backend may fold it
  // into the matmul: qkv then stays unwritten)
  const convSeqs = ctx.seqs.map((s) => ({ row: s.offset, t: s.t, window: s.state[li]!.conv, scratch: s.scratch?.[li]?.conv }));
  k.matmulGroup(x, m, [{ out: qkv, w: w.inProjQkv }, { out: z, w: w.inProjZ }, { out: b, w: w.inProjB }, { out: a, w: w.inProjA }], norm,
    { out: conv, w: w.conv, seqs: convSeqs });
  const g = ws.gdn.g.rows(m);
  const beta = ws.gdn.beta.rows(m);
  const o = ws.gdn.o.rows(m); // [M, HV, dv]
  const chunked = (s: SeqSpan<T>): boolean => s.t > 0 && s.chunked && !s.scratch?.[li];
  const prefills = ctx.seqs.filter(chunked);
  // the chunked prefills' gates (all rows in one call; the recurrent rows compute their own)
  if (prefills.length > 0) k.gdnGates(g, beta, a, b, w.aLog, w.dtBias, m);
  // the gated norm's rows, head blocks in out_proj's stored order (a GGUF's
  // outProjHeadOrder: the norm writes each head's block where out_proj reads it)
  const order = w.outProjHeadOrder;
  const normed = order ? ws.gdn.oPerm.rows(m) : o; // [M, HV·dv]
  if (prefills.length > 0) {
    // every chunked prefill in one call (a split point ends a chunk), then the gated norm in
    // one call over the span of their rows: a recurrent sequence's rows inside the span are
    // rewritten whole by the recurrent call below (the norm is row-wise: no bit depends on
    // which rows share the call)
    k.gdnChunkedSeqs(o, conv, g, beta, dims, prefills.map((s) => ({ row: s.offset, t: s.t, state: s.state[li]!.ssm, pos0: s.start, splits: s.splits })));
    const first = Math.min(...prefills.map((s) => s.offset));
    const span = Math.max(...prefills.map((s) => s.offset + s.t)) - first;
    const rows = (buf: T): T => k.view(buf, first * vd, span * vd);
    k.gatedRmsNorm(rows(normed), rows(o), rows(z), w.norm, span * hv, cfg.rmsNormEps, order);
  }
  // the recurrent sequences' gates, GDN and gated norm in one call; with no chunked rows,
  // out_proj too (a backend may fold the norm into its input)
  const project = prefills.length === 0 ? { x, w: w.outProj, m, tmp } : undefined;
  k.gdnRecurrentGatedSeqs(o, conv, { a, b, aLog: w.aLog, dtBias: w.dtBias, g, beta, z, norm: w.norm, eps: cfg.rmsNormEps,
    ...(order ? { perm: { order, out: normed } } : {}), ...(project ? { project } : {}) }, dims,
  ctx.seqs.filter((s) => s.t > 0 && !chunked(s)).map((s) => ({ row: s.offset, t: s.t, state: s.state[li]!.ssm, scratch: s.scratch?.[li]?.ssm })));
  if (!project) k.matmulAdd(x, normed, w.outProj, m, tmp);
}

/** x += o_proj(attention(norm(x))); tmp: [M, H] scratch. */
function attnMixer<T extends Tensor, I extends Tensor>(ctx: LayerCtx<T, I>, w: AttnWeights, x: T, norm: GroupNorm<T>, tmp: T, fi: number): void {
  const { k, cfg, ws, m } = ctx;
  const { numHeads: nh, numKvHeads: nkv, headDim: hd } = cfg;
  const qd = nh * hd;
  const gated = cfg.attnOutputGate !== false;
  const qg = ws.attn.qg.rows(m); // [M, nH, 2·hd]: query then gate per head
  const kk = ws.attn.k.rows(m); // [M, nKV, hd]
  const vv = ws.attn.v.rows(m);
  k.matmulGroup(x, m, [{ out: qg, w: w.qProj }, { out: kk, w: w.kProj }, { out: vv, w: w.vProj }], norm);
  const q = gated ? ws.attn.q.rows(m) : qg; // [M, nH, hd]
  const gate = gated ? ws.attn.gate.rows(m) : null; // [M, nH, hd]
  const o = ws.attn.o.rows(m);
  // the whole batch in one call: the attention inputs (every sequence writes its own KV rows,
  // at positions ≥ its start, in pages no other sequence of the step writes) before any
  // attention reads (a backend may fold them into the attention: Kernels.attentionBatch)
  const kvs = ctx.seqs.map((s) => s.kv[fi]!);
  k.attentionBatch(o, q, qd, kvs, ctx.batch, { numHeads: nh, numKvHeads: nkv, headDim: hd },
    { qg, gated, q, gate, k: kk, v: vv, qNorm: w.qNorm, kNorm: w.kNorm, eps: cfg.rmsNormEps, kv: kvs });
  k.matmulAdd(x, o, w.oProj, m, tmp, gate ? { b: gate, act: 'sigmoid' } : undefined);
}

/** x += mlp(norm(x)); tmp: [M, H] scratch. */
function mlp<T extends Tensor, I extends Tensor>(ctx: LayerCtx<T, I>, w: MlpWeights, x: T, norm: GroupNorm<T>, tmp: T): void {
  const { k, m } = ctx;
  if (w.kind === 'dense') {
    expertMlp(k, w, x, tmp, m, ctx.ws.mlp.gate.rows(m), ctx.ws.mlp.up.rows(m), { residual: x, norm });
    return;
  }
  // the routed experts read the normed rows several times: the norm runs on its own
  k.rmsNorm(norm.out, x, norm.w, m, norm.eps, norm.zeroCentered);
  moe(ctx, w, norm.out, tmp, x);
}

/** down(up(x) ⊙ silu(gate(x))). x: [n, H], out: [n, H]; gate, up: [n, I] scratch. `fused`:
 * x is normed first (the group's norm), and residual += the result instead (out is then the
 * matmulAdd's scratch). */
function expertMlp<T extends Tensor>(k: Kernels<T, Tensor>, w: ExpertWeights, x: T, out: T, n: number, gate: T, up: T,
  fused?: { readonly residual: T; readonly norm: GroupNorm<T> }): void {
  k.matmulGroup(x, n, [{ out: gate, w: w.gate }, { out: up, w: w.up }], fused?.norm);
  if (fused) {
    k.matmulAdd(fused.residual, up, w.down, n, out, { b: gate, act: 'silu' });
    return;
  }
  k.mulSilu(up, up, gate, n * w.gate.rows);
  k.matmul(out, up, w.down, n);
}

/** residual += routed experts (softmax → top-k → renormalise) plus the sigmoid-gated shared
 * expert. Each row sums its experts in top-k slot order, then the shared expert, then the
 * residual add: the result of a row never depends on which other rows share the batch. The
 * shared expert runs first (its own scratch), so one moeExperts call routes, runs the
 * routed experts and ends the layer (MoeFusion: fused on the GPU). out: [M, H] scratch. */
function moe<T extends Tensor, I extends Tensor>(ctx: LayerCtx<T, I>, w: MoeWeights, x: T, out: T, residual: T): void {
  const { k, ws, m } = ctx;
  const topK = w.topK;
  const logits = ws.moe.logits.rows(m);
  const sh = w.shared && w.sharedGate ? {
    mlp: w.shared, gateW: w.sharedGate, gate: ws.moe.sharedGate.rows(m), up: ws.moe.sharedUp.rows(m), y: ws.moe.sharedOut.rows(m), logit: ws.moe.sharedLogit.rows(m),
  } : null;
  // the router, the shared expert's gate logit and its gate and up: one matmul group
  k.matmulGroup(x, m, [{ out: logits, w: w.router },
    ...(sh ? [{ out: sh.logit, w: sh.gateW }, { out: sh.gate, w: sh.mlp.gate }, { out: sh.up, w: sh.mlp.up }] : [])]);
  const ids = ws.moe.ids.atLeast(m * topK);
  const wts = ws.moe.weights.rows(m);
  k.moeExperts(out, x, ids, wts, m, topK, w.experts, {
    slot: ws.moe.slot.rows(m), rowsIn: ws.moe.rowsIn.rows(m), rowsOut: ws.moe.rowsOut.rows(m), gate: ws.moe.gate.rows(m), up: ws.moe.up.rows(m),
  }, { route: { logits, renormalize: w.normTopkProb }, tail: { shared: sh ? { y: sh.y, logit: sh.logit, down: { w: sh.mlp.down, gate: sh.gate, up: sh.up } } : null, residual } });
}
