// Model forward over a batch of sequences, the LM head, and the MTP head.
// The caller (runner/engine) passes views of KV pages and state slots as arguments:
// there is no global mutable context. Tensors are backend handles (see layers.ts).
import type { BatchMrope, KvLayerView, StepBatch, Tensor, Weight } from '../kernels/types.js';
import type { StepArena } from './arena.js';
import { decoderLayer, type LayerCtx, type LinearScratchView, type LinearStateView, type SeqSpan } from './layers.js';
import type { Model } from './model.js';
import { ropeTableOf } from './rope-scaling.js';

/** One sequence's part of a forward call. */
export interface SeqInput<T extends Tensor = Float32Array> {
  readonly tokens: ArrayLike<number>; // [T] token ids at positions start..start+T−1
  readonly start: number; // tokens before `start` are already in KV/state
  readonly pageTable: ArrayLike<number>;
  readonly kv: readonly KvLayerView<T>[]; // per full-attention layer
  readonly state: readonly LinearStateView<T>[]; // per linear layer: the working slot
  /** Verify: per linear layer, per-step states are written here and `state` stays the
   * committed state (read only). */
  readonly scratch?: readonly LinearScratchView<T>[] | null;
  /** Gated DeltaNet chunked form (prefill) rather than step-by-step recurrence. */
  readonly chunked: boolean;
  /** Chunked form: absolute positions in (start, start+T) where a chunk must end besides
   * the multiples of GDN_CHUNK (message ends; ascending). */
  readonly splits?: readonly number[];
  /** A request with images: image rows over the token embeddings and multimodal RoPE. */
  readonly vision?: SeqVision;
}

/** The image side of one sequence's tokens (engine/vision-rows.ts builds it). */
export interface SeqVision {
  /** Rotary positions of the T tokens per axis (kernels' BatchMrope). */
  readonly mrope: BatchMrope;
  /** Rows (0-based within the T tokens) whose embedding is an image token's: `values`
   * ([H]) replaces the token embedding. */
  readonly rows: readonly ImageRow[];
}

export interface ImageRow {
  readonly row: number;
  readonly values: Float32Array;
  /** Deepstack features of this image token: [j] is added to its hidden state after
   * decoder layer j (empty: none). */
  readonly deepstack: readonly Float32Array[];
}

export interface ForwardResult<T extends Tensor = Float32Array> {
  readonly hidden: T; // [M, H] after the final norm
  readonly offsets: readonly number[]; // first row of each sequence
}

type SpanInput<T extends Tensor> = Omit<SeqInput<T>, 'kv' | 'chunked'> & { readonly chunked: boolean };

function spans<T extends Tensor>(positions: Int32Array, seqs: readonly SpanInput<T>[], kvOf: (i: number) => readonly KvLayerView<T>[]): SeqSpan<T>[] {
  let offset = 0;
  return seqs.map((s, i) => {
    const t = s.tokens.length;
    const pos = positions.subarray(offset, offset + t);
    for (let j = 0; j < t; j++) pos[j] = s.start + j;
    const span: SeqSpan<T> = {
      offset, t, start: s.start, positions: pos, pageTable: s.pageTable, kv: kvOf(i),
      state: s.state, scratch: s.scratch ?? null, chunked: s.chunked, splits: s.splits ?? [],
    };
    offset += t;
    return span;
  });
}

/** The step's batch of these spans (one per forward: a GPU backend uploads it once). */
function stepBatchOf<T extends Tensor, I extends Tensor>(model: Model<T, I>, spans: readonly SeqSpan<T>[],
  mrope: readonly (BatchMrope | undefined)[] = []): StepBatch {
  return model.kernels.stepBatch(spans.map((s, i) => {
    const m = mrope[i];
    return { row: s.offset, t: s.t, start: s.start, pageTable: s.pageTable, ...(m ? { mrope: m } : {}) };
  }), ropeTableOf(model.config));
}

/** Image rows over the token embeddings in x ([M, H]). */
function writeImageRows<T extends Tensor, I extends Tensor>(model: Model<T, I>, x: T, seqs: readonly SeqInput<T>[], spans: readonly SeqSpan<T>[]): void {
  const h = model.config.hiddenSize;
  seqs.forEach((s, i) => {
    for (const r of s.vision?.rows ?? []) model.kernels.write(x, (spans[i]!.offset + r.row) * h, r.values);
  });
}

/** Deepstack: add feature `layer` of every image row to x after that decoder layer. */
function addDeepstack<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>, x: T, seqs: readonly SeqInput<T>[],
  spans: readonly SeqSpan<T>[], layer: number): void {
  const h = model.config.hiddenSize;
  const k = model.kernels;
  seqs.forEach((s, i) => {
    for (const r of s.vision?.rows ?? []) {
      const f = r.deepstack[layer];
      if (!f) continue;
      const row = k.view(x, (spans[i]!.offset + r.row) * h, h);
      const tmp = ws.hit.hidden.rows(1);
      k.write(tmp, 0, f);
      k.add(row, row, tmp, h);
    }
  });
}

/** x [M, H] = the embeddings of stacked ids some of which are on the kernels (DeviceRows):
 * the host ids' rows and the kernels' span of ids are embedded into one scratch, [M + span,
 * H] (host rows first; a row whose id is on the kernels embeds its placeholder there), and
 * one gather puts each row's embedding in place. Three calls for any number of rows. */
function embedMixed<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>, x: T, hostIds: Int32Array,
  device: DeviceTokens<I>, at: DeviceRows): void {
  const { kernels: k, weights: w } = model;
  const m = hostIds.length;
  const h = model.config.hiddenSize;
  if (at.index.length !== m) throw new RangeError(`embed: ${at.index.length} device-row indices for ${m} rows`);
  const scratch = ws.mixedEmbed.rows(m + at.span);
  k.embed(k.view(scratch, 0, m * h), w.embed, hostIds);
  k.embedIds(k.view(scratch, m * h, at.span * h), w.embed, device.ids, device.offset, at.span);
  const rows = Array.from(at.index, (j, r) => {
    if (j >= at.span || j < -1) throw new RangeError(`embed: row ${r} takes device id ${j} of ${at.span}`);
    return j < 0 ? r : m + j;
  });
  k.gatherRows(x, scratch, rows, h);
}

/** The token ids of all sequences, stacked (host). */
function stackIds(out: Int32Array, seqs: readonly { readonly tokens: ArrayLike<number> }[]): Int32Array {
  let o = 0;
  for (const s of seqs) for (let i = 0; i < s.tokens.length; i++) out[o++] = s.tokens[i]!;
  return out;
}

function rowsOf(seqs: readonly { readonly tokens: ArrayLike<number> }[]): number {
  return seqs.reduce((n, s) => n + s.tokens.length, 0);
}

/** Token ids already on the kernels: rows [offset, offset + M) of `ids` are the stacked
 * tokens (an overlapped decode step embeds the previous step's picks: engine/overlap.ts), or,
 * with `at`, only some rows' tokens (a verify step whose drafts are still on the kernels:
 * engine/speculative/pending-drafts.ts). */
export interface DeviceTokens<I extends Tensor> {
  readonly ids: I;
  readonly offset: number;
  readonly at?: DeviceRows;
}

/** Which stacked rows take their id from the kernels: row r's is ids[offset + index[r]] when
 * index[r] ≥ 0, its sequence's host token when index[r] = −1. The `span` ids from `offset` are
 * all embedded (each a valid id: every index[r] < span). */
export interface DeviceRows {
  readonly index: Int32Array; // [M]
  readonly span: number;
}

/** A one-token sequence's `tokens` when its id is in kernel memory: only its length is read. */
export const DEVICE_TOKEN: ArrayLike<number> = { length: 1 };

/** Run every decoder layer over the stacked tokens of all sequences (`deviceTokens`: their
 * ids are on the kernels, and `seqs`' tokens only give each sequence's length). */
export function forwardHidden<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>,
  seqs: readonly SeqInput<T>[], deviceTokens: DeviceTokens<I> | null = null): ForwardResult<T> {
  const { config: cfg, weights: w, kernels: k } = model;
  const m = rowsOf(seqs);
  const seqSpans = spans(ws.host.positions.rows(m), seqs, (i) => seqs[i]!.kv);
  const x = ws.x.rows(m); // [M, H] residual stream
  if (deviceTokens?.at) embedMixed(model, ws, x, stackIds(ws.host.ids.rows(m), seqs), deviceTokens, deviceTokens.at);
  else if (deviceTokens) k.embedIds(x, w.embed, deviceTokens.ids, deviceTokens.offset, m);
  else k.embed(x, w.embed, stackIds(ws.host.ids.rows(m), seqs));
  const vision = seqs.some((s) => s.vision);
  if (vision) writeImageRows(model, x, seqs, seqSpans);
  const ctx: LayerCtx<T, I> = { k, cfg, ws, m, seqs: seqSpans, batch: stepBatchOf(model, seqSpans, seqs.map((s) => s.vision?.mrope)) };
  let linear = 0;
  let full = 0;
  w.layers.forEach((layer, j) => {
    decoderLayer(ctx, layer, x, layer.mixer.kind === 'linear' ? linear++ : full++);
    if (vision) addDeepstack(model, ws, x, seqs, seqSpans, j);
  });
  const hidden = ws.hidden.rows(m);
  k.rmsNorm(hidden, x, w.finalNorm, m, cfg.rmsNormEps, true);
  return { hidden, offsets: seqSpans.map((s) => s.offset) };
}

/** logits[i] = lm_head(hidden[rows[i]]) → [rows.length, V] written to `out`. `head`: a
 * row prefix of the lm_head (MTP drafts over the first head.rows ids); then V = head.rows.
 * Contiguous rows (a decode step's, a draft step's) are read through a view of `hidden`;
 * others are gathered into ws.head.in first (the same values: the matmul's bits per row do
 * not depend on where its input row lies). `out` must not overlap `hidden`. */
export function lmHeadInto<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>, hidden: T,
  rows: readonly number[], out: T, head: Weight = model.weights.lmHead): T {
  const h = model.config.hiddenSize;
  const k = model.kernels;
  let picked: T;
  if (contiguous(rows) && (rows[0]! + rows.length) * h <= hidden.length) picked = k.view(hidden, rows[0]! * h, rows.length * h);
  else k.gatherRows((picked = ws.head.in.rows(rows.length)), hidden, rows, h);
  k.matmul(out, picked, head, rows.length);
  return out;
}

/** rows = r, r + 1, …, r + n − 1 (n ≥ 1): the head reads a view of them, no gather. */
function contiguous(rows: readonly number[]): boolean {
  if (rows.length === 0 || !(Number.isInteger(rows[0]) && rows[0]! >= 0)) return false;
  for (let i = 1; i < rows.length; i++) if (rows[i] !== rows[0]! + i) return false;
  return true;
}

/** lmHeadInto, read back into a fresh host array [rows.length, V] (inspection and tests:
 * needs a backend whose read-back is synchronous). */
export function lmHead<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>, hidden: T,
  rows: readonly number[], head: Weight = model.weights.lmHead): Float32Array {
  const out = lmHeadInto(model, ws, hidden, rows, ws.head.out.rows(rows.length), head);
  return readNow(model, out, rows.length * head.rows).slice();
}

/** The first n elements of t on the host, from a backend that reads back synchronously. */
export function readNow<T extends Tensor>(model: Model<T, Tensor>, t: T, n: number): Float32Array {
  const r = model.kernels.readBack([{ t, offset: 0, length: n }]);
  if (r instanceof Promise) throw new Error(`kernels ${model.kernels.name}: this path needs a synchronous read-back`);
  return r[0]!;
}

/** One sequence's part of an MTP forward: MTP position t is built from (hidden h_t,
 * token x_{t+1}) and predicts x_{t+2}; positions start..start+T−1. */
export interface MtpSeqInput<T extends Tensor = Float32Array> {
  readonly tokens: ArrayLike<number>; // [T] x_{t+1}
  /** Main post-norm hidden h_t (or the MTP's own output): rows [hiddenRow, hiddenRow + T)
   * of `hidden` ([*, H]); with `hiddenFirst`, that host row is h for the first position
   * and `hidden` gives the other T − 1 rows. */
  readonly hidden: T;
  readonly hiddenRow?: number;
  readonly hiddenFirst?: Float32Array | null;
  readonly start: number;
  readonly pageTable: ArrayLike<number>;
  readonly kv: KvLayerView<T>; // the MTP layer's own cache
}

/** The stacked token ids of an MTP forward, already in kernel memory: row i's x_{t+1} is
 * ids[offset + i] (drafts chained on the device); the seqs' `tokens` then give only their
 * lengths. */
export type MtpDeviceIds<I extends Tensor> = DeviceTokens<I>;

/** MTP head: z = fc([norm_e(embed(x_{t+1})) ; norm_h(h_t)]), one full-attention decoder
 * layer, then mtp.norm. Returns [M, H] (feed to lmHead for draft logits). */
export function mtpForward<T extends Tensor, I extends Tensor>(model: Model<T, I>, ws: StepArena<T, I>,
  seqs: readonly MtpSeqInput<T>[], layer = 0, deviceIds: MtpDeviceIds<I> | null = null): T {
  const { config: cfg, weights: w, kernels: k } = model;
  const mtp = w.mtp[layer];
  if (!mtp) throw new Error(`model has no MTP layer ${layer}`);
  const m = rowsOf(seqs);
  const seqSpans = spans(ws.host.positions.rows(m), seqs.map((s) => ({ ...s, state: [], chunked: false })), (i) => [seqs[i]!.kv]);
  const cat = ws.mtp.cat.rows(m); // [M, 2H]: normed embedding | normed hidden
  // one op (webgpu: one dispatch); e and hid ([M, H]) serve the backends that run its calls
  k.mtpInputs({
    cat, e: ws.mtp.e.rows(m), hid: ws.mtp.h.rows(m), table: w.embed,
    ids: deviceIds ? { device: deviceIds.ids, offset: deviceIds.offset } : { host: stackIds(ws.host.mtpIds.rows(m), seqs) },
    normEmbedding: mtp.normEmbedding, normHidden: mtp.normHidden, eps: cfg.rmsNormEps, zeroCentered: true,
    runs: seqs.map((s) => ({ src: s.hidden, row: s.hiddenRow ?? 0, n: s.tokens.length - (s.hiddenFirst ? 1 : 0), first: s.hiddenFirst ?? null })),
  });
  const x = ws.mtp.x.rows(m);
  k.matmul(x, cat, mtp.fc, m);
  decoderLayer({ k, cfg, ws, m, seqs: seqSpans, batch: stepBatchOf(model, seqSpans) }, mtp.layer, x, 0);
  const out = ws.mtp.out.rows(m);
  k.rmsNorm(out, x, mtp.norm, m, cfg.rmsNormEps, true);
  return out;
}
