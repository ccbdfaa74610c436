// Model forward over a batch of sequences, the LM head, and the MTP head.
// The caller (runner/engine) passes views of KV pages and state slots as arguments:
// there is no global mutable context.
import type { KvLayerView, Weight } from '../kernels/types.js';
import { decoderLayer, type LayerCtx, type LinearScratchView, type LinearStateView, type SeqSpan, Workspace } from './layers.js';
import type { Model } from './model.js';

/** One sequence's part of a forward call. */
export interface SeqInput {
  readonly tokens: ArrayLike<number>; // [T] token ids at positions start..start+T−1
  readonly start: number; // tokens before `start` are already in KV/state
  readonly pageTable: ArrayLike<number>;
  readonly kv: readonly KvLayerView[]; // per full-attention layer
  readonly state: readonly LinearStateView[]; // per linear layer: the working slot
  /** Verify: per linear layer, per-step states are written here and `state` stays the
   * committed state (read only). */
  readonly scratch?: readonly LinearScratchView[] | null;
  /** Gated DeltaNet chunked form (prefill) rather than step-by-step recurrence. */
  readonly chunked: boolean;
  /** Chunked form: absolute positions in (start, start+T) where a chunk must end besides
   * the multiples of GDN_CHUNK (message ends; ascending). */
  readonly splits?: readonly number[];
}

export interface ForwardResult {
  readonly hidden: Float32Array; // [M, H] after the final norm
  readonly offsets: readonly number[]; // first row of each sequence
}

function spans(ws: Workspace, seqs: readonly SeqInput[], kvOf: (s: SeqInput) => readonly KvLayerView[]): SeqSpan[] {
  const m = seqs.reduce((n, s) => n + s.tokens.length, 0);
  const positions = ws.ints('positions', m);
  let offset = 0;
  return seqs.map((s) => {
    const t = s.tokens.length;
    const pos = positions.subarray(offset, offset + t);
    for (let i = 0; i < t; i++) pos[i] = s.start + i;
    const span: SeqSpan = {
      offset, t, start: s.start, positions: pos, pageTable: s.pageTable, kv: kvOf(s),
      state: s.state, scratch: s.scratch ?? null, chunked: s.chunked, splits: s.splits ?? [],
    };
    offset += t;
    return span;
  });
}

/** Run every decoder layer over the stacked tokens of all sequences. */
export function forwardHidden(model: Model, ws: Workspace, seqs: readonly SeqInput[]): ForwardResult {
  const { config: cfg, weights: w, kernels: k } = model;
  const seqSpans = spans(ws, seqs, (s) => s.kv);
  const m = seqSpans.reduce((n, s) => n + s.t, 0);
  const h = cfg.hiddenSize;
  const x = ws.buf('x', m * h); // [M, H] residual stream
  const ids = ws.ints('ids', m);
  seqs.forEach((s, i) => ids.set(Array.from(s.tokens), seqSpans[i]!.offset));
  k.embed(x, w.embed, ids);
  const ctx: LayerCtx = { k, cfg, ws, m, seqs: seqSpans };
  let linear = 0;
  let full = 0;
  w.layers.forEach((layer) => {
    decoderLayer(ctx, layer, x, layer.mixer.kind === 'linear' ? linear++ : full++);
  });
  const hidden = ws.buf('hidden', m * h);
  k.rmsNorm(hidden, x, w.finalNorm, m, cfg.rmsNormEps, true);
  return { hidden, offsets: seqSpans.map((s) => s.offset) };
}

/** logits[i] = lm_head(hidden[rows[i]]) → [rows.length, V] (a fresh buffer per call
 * when `out` is not given). `head`: a row prefix of the lm_head (MTP drafts over the first
 * head.rows ids); then V = head.rows. */
export function lmHead(model: Model, ws: Workspace, hidden: Float32Array, rows: readonly number[], out?: Float32Array,
  head: Weight = model.weights.lmHead): Float32Array {
  const h = model.config.hiddenSize;
  const v = head.rows;
  const picked = ws.buf('head.in', rows.length * h);
  rows.forEach((r, i) => picked.set(hidden.subarray(r * h, (r + 1) * h), i * h));
  const logits = out ?? new Float32Array(rows.length * v);
  const tmp = out ? out : ws.buf('head.out', rows.length * v);
  model.kernels.matmul(tmp, picked, head, rows.length);
  if (!out) logits.set(tmp);
  return logits;
}

/** One sequence's part of an MTP forward: MTP position t is built from (hidden h_t,
 * token x_{t+1}) and predicts x_{t+2}; positions start..start+T−1. */
export interface MtpSeqInput {
  readonly tokens: ArrayLike<number>; // [T] x_{t+1}
  readonly hidden: Float32Array; // [T, H] main post-norm hidden h_t (or the MTP's own output)
  readonly start: number;
  readonly pageTable: ArrayLike<number>;
  readonly kv: KvLayerView; // the MTP layer's own cache
}

/** MTP head: z = fc([norm_e(embed(x_{t+1})) ; norm_h(h_t)]), one full-attention decoder
 * layer, then mtp.norm. Returns [M, H] (feed to lmHead for draft logits). */
export function mtpForward(model: Model, ws: Workspace, seqs: readonly MtpSeqInput[], layer = 0): Float32Array {
  const { config: cfg, weights: w, kernels: k } = model;
  const mtp = w.mtp[layer];
  if (!mtp) throw new Error(`model has no MTP layer ${layer}`);
  const h = cfg.hiddenSize;
  const seqInputs: SeqInput[] = seqs.map((s) => ({
    tokens: s.tokens, start: s.start, pageTable: s.pageTable, kv: [s.kv], state: [], chunked: false,
  }));
  const seqSpans = spans(ws, seqInputs, (s) => s.kv);
  const m = seqSpans.reduce((n, s) => n + s.t, 0);
  const ids = ws.ints('mtp.ids', m);
  const cat = ws.buf('mtp.cat', m * 2 * h); // [M, 2H]: normed embedding | normed hidden
  const e = ws.buf('mtp.e', m * h);
  const hid = ws.buf('mtp.h', m * h);
  seqs.forEach((s, i) => {
    ids.set(Array.from(s.tokens), seqSpans[i]!.offset);
    hid.set(s.hidden.subarray(0, s.tokens.length * h), seqSpans[i]!.offset * h);
  });
  k.embed(e, w.embed, ids);
  k.rmsNorm(e, e, mtp.normEmbedding, m, cfg.rmsNormEps, true);
  k.rmsNorm(hid, hid, mtp.normHidden, m, cfg.rmsNormEps, true);
  for (let i = 0; i < m; i++) {
    cat.set(e.subarray(i * h, (i + 1) * h), i * 2 * h);
    cat.set(hid.subarray(i * h, (i + 1) * h), i * 2 * h + h);
  }
  const x = ws.buf('mtp.x', m * h);
  k.matmul(x, cat, mtp.fc, m);
  decoderLayer({ k, cfg, ws, m, seqs: seqSpans }, mtp.layer, x, 0);
  const out = ws.buf('mtp.out', m * h);
  k.rmsNorm(out, x, mtp.norm, m, cfg.rmsNormEps, true);
  return out;
}
