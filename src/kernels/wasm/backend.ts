// The wasm Kernels backend: every hot op on AssemblyScript SIMD kernels (build/kernels.wasm),
// the big ones (matmul, attention, Gated DeltaNet, conv) split over a worker pool by output
// elements; small row-wise ops on the main thread. Same contracts as ../types.ts and the
// ref twin; every output element has a fixed reduction order (batch- and split-invariant).
// This file holds the row-wise, recurrent, attention, batched, MoE and sampling entry points;
// the matmul family is in backend-matmul.ts, memory and tensor management in
// backend-memory.ts (a class chain: WasmBackendMemory → WasmMatmulBackend → WasmKernels).
import { HOST_LIMITS } from '../types.js';
import type { BiasAct, AttentionDims, AttentionInputs, BatchSeq, StepBatch, ConvSeq, ExpertMats, GdnChunkSeq, GdnDims, GdnGating, GdnSeq, Kernels, KvLayerView, MoeFusion, MoeScratch, PenaltyPicksCall, CandidateDraw, RopeTable, SampleResult, SampleRow,
  MtpInputs, Weight } from '../types.js';
import { Cmd } from './exec.js';
import { packArgs } from './commands.js';
import * as cpu from '../cpu-ops.js';
import { topCandidates } from '../top-candidates.js';
import { penaltyPicks } from '../penalty-picks.js';
import { candidateDraws } from '../candidate-draws.js';
import { packSampleRows, readSampleResults } from './sample-desc.js';
import { convSeqsDesc, gdnSeqsDesc } from './seqs-desc.js';
import { gdnChunkedSeqsByCalls, gdnGatedSeqsByCalls } from '../seqs-by-calls.js';
import { attentionBlocking } from './attention-blocking.js';
import { attentionByCalls, attentionInputsByCalls, kvWriteByCalls, ropeByCalls, stepBatchOnHost } from '../batch-by-calls.js';
import { isBf16 } from './backend-memory.js';
import { mtpInputsByCalls } from '../mtp-inputs-by-calls.js';
import { WasmMatmulBackend } from './backend-matmul.js';

// Work below these sizes (~10–20 µs on one thread) runs on the main thread alone: a pool
// launch costs a few µs and, on a busy machine, far more (matmuls: matmul-group.ts).
const PAR_ATTN = 1 << 16; // units · keys · hd
const PAR_GDN = 1 << 16; // T · HV · dk · dv
// T · C: one decode token of the qwen3.5-0.8b shape (C = 6144) already gains on the pool
// (its window and taps come from memory: Intel Xeon, 0.82 → 0.59 ms per decode step)
const PAR_CONV = 1 << 12;
const PAR_ROWS = 1 << 15; // elements of an rmsNorm (prefill-sized: pool)
// a·silu(b) / a·sigmoid(b) and gated norms cost ~2 ns per element (an exp each): on the
// Intel Xeon (2 vCPUs) the pool halves them from 8K elements up (8 streams' or a 4-token
// verify's rows), where rmsNorm still loses to the launch
const PAR_EXP_ROWS = 1 << 13;
/** assembly/tower.ts biasAct's act codes, by index. */
const BIAS_ACTS: readonly BiasAct[] = ['none', 'geluTanh', 'geluErf'];

export class WasmKernels extends WasmMatmulBackend implements Kernels {
  readonly name = 'wasm';
  readonly limits = HOST_LIMITS;

  /** A tensor alloc / allocI32 returned back to its arena's free list, zeroed (memory.ts); a
   * later allocation it holds reuses it. Kernel calls here finish before they return, so no
   * recorded work can still read it. A view (or a tensor freed twice) is refused. */
  free(t: Float32Array | Int32Array): void {
    const arena = this.mem.locate(t);
    if (!arena) throw new RangeError('free: not a tensor of this wasm backend');
    arena.free(t.byteOffset, t.byteLength);
  }

  rmsNorm(out: Float32Array, x: Float32Array, w: Weight, m: number, eps: number, zeroCentered: boolean): void {
    if (m <= 0) return;
    const d = w.cols;
    const c = this.ops.begin(this.ops.target(x, out));
    const xp = c.in(x, m * d);
    const wp = c.weight(w);
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'RMS_NORM', { out: op, x: xp, w: wp, wBf16: isBf16(w), m, d, eps, zeroCentered: zeroCentered ? 1 : 0 });
    this.run(Cmd.RMS_NORM, c.arena, m > 1 && m * d >= PAR_ROWS, Math.min(m, 4 * this.threads));
    c.end();
  }

  /** headOrder: each out row reads its token's head headOrder[row mod HV] (the kernel's order table). */
  gatedRmsNorm(out: Float32Array, o: Float32Array, z: Float32Array, w: Weight, m: number, eps: number, headOrder?: Int32Array): void {
    if (m <= 0) return;
    const d = w.cols;
    const hv = headOrder?.length ?? 1;
    if (headOrder && m % hv !== 0) throw new RangeError(`gatedRmsNorm: ${m} rows are not whole tokens of ${hv} heads`);
    const c = this.ops.begin(this.ops.target(o, out));
    const opIn = c.in(o, m * d);
    const zp = c.in(z, m * d);
    const wp = c.weight(w);
    const order = headOrder ? c.ints(headOrder, hv) : 0;
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'GATED_RMS_NORM', { out: op, o: opIn, z: zp, w: wp, wBf16: isBf16(w), m, d, eps, order, hv });
    this.run(Cmd.GATED_RMS_NORM, c.arena, m > 1 && m * d >= PAR_EXP_ROWS, Math.min(m, 4 * this.threads));
    c.end();
  }

  rope(x: Float32Array, positions: ArrayLike<number>, t: number, heads: number, headDim: number,
    table: RopeTable, stride: number): void {
    if (t <= 0) return;
    const c = this.ops.begin(this.ops.target(x));
    const xp = c.inout(x, (t - 1) * stride + heads * headDim);
    const pp = c.ints(positions, t);
    const fp = c.f64(table.invFreq);
    c.arena.exports.rope(xp, pp, t, heads, headDim, fp, table.invFreq.length, table.scale, stride);
    c.end();
  }

  causalConv(out: Float32Array, x: Float32Array, window: Float32Array, w: Weight, t: number,
    scratch?: Float32Array): void {
    if (t <= 0) return;
    const ch = w.rows;
    const kw = w.cols;
    const hist = (kw - 1) * ch;
    const c = this.ops.begin(this.ops.target(x, window, out));
    packArgs(this.pool.args, 'CONV', {
      out: c.out(out, t * ch), x: c.in(x, t * ch), window: scratch ? c.in(window, hist) : c.inout(window, hist), w: c.weight(w),
      wBf16: isBf16(w), t, c: ch, kw, scratch: scratch ? c.out(scratch, t * hist) : 0,
    });
    this.run(Cmd.CONV, c.arena, t * ch >= PAR_CONV, Math.min(4 * this.threads, Math.ceil(ch / 16)));
    c.end();
  }

  causalConvSeqs(out: Float32Array, x: Float32Array, w: Weight, seqs: readonly ConvSeq<Float32Array>[]): void {
    const live = seqs.filter((s) => s.t > 0);
    if (live.length === 0) return;
    const ch = w.rows;
    const c = this.ops.begin(this.ops.target(x, live[0]!.window, out));
    const { desc, rows } = convSeqsDesc(c, out, x, ch, (w.cols - 1) * ch, live);
    packArgs(this.pool.args, 'CONV_SEQS', {
      desc: c.ints(desc, desc.length), count: live.length, w: c.weight(w), wBf16: isBf16(w), c: ch, kw: w.cols,
    });
    this.run(Cmd.CONV_SEQS, c.arena, rows * ch >= PAR_CONV, Math.min(4 * this.threads, Math.ceil(ch / 16)));
    c.end();
  }

  gdnGates(g: Float32Array, beta: Float32Array, a: Float32Array, b: Float32Array, aLog: Weight, dtBias: Weight,
    t: number): void {
    if (t <= 0) return;
    const hv = aLog.cols;
    const n = t * hv;
    const c = this.ops.begin(this.ops.target(a, g));
    const ap = c.in(a, n);
    const bp = c.in(b, n);
    const al = c.weight(aLog);
    const db = c.weight(dtBias);
    const gp = c.out(g, n);
    const bt = c.out(beta, n);
    c.arena.exports.gdnGates(gp, bt, ap, bp, al, isBf16(aLog), db, isBf16(dtBias), t, hv);
    c.end();
  }

  gdnRecurrent(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, state: Float32Array,
    dims: GdnDims, t: number, scratch?: Float32Array): void {
    if (t <= 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const ss = hv * dk * dv;
    const c = this.ops.begin(this.ops.target(state, qkv), (2 * dk + 2 * dv) * 4, this.threads);
    packArgs(this.pool.args, 'GDN_RECURRENT', {
      out: c.out(out, t * hv * dv), qkv: c.in(qkv, t * (2 * hk * dk + hv * dv)), g: c.in(g, t * hv), beta: c.in(beta, t * hv),
      state: scratch ? c.in(state, ss) : c.inout(state, ss), scratch: scratch ? c.out(scratch, t * ss) : 0,
      t, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride,
    });
    // contiguous runs of heads per chunk: one head per chunk, alternating between threads,
    // measured ~1.9× slower (T = 1, 16 heads of 128×128) than two runs per thread
    this.run(Cmd.GDN_RECURRENT, c.arena, hv > 1 && t * ss >= PAR_GDN, Math.min(hv, 2 * this.threads));
    c.end();
  }

  gdnRecurrentSeqs(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, dims: GdnDims,
    seqs: readonly GdnSeq<Float32Array>[]): void {
    const live = seqs.filter((s) => s.t > 0);
    if (live.length === 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const c = this.ops.begin(this.ops.target(live[0]!.state, qkv), (2 * dk + 2 * dv) * 4, this.threads);
    const { desc, rows } = gdnSeqsDesc(c, out, qkv, g, beta, dims, live);
    const units = live.length * hv;
    packArgs(this.pool.args, 'GDN_RECURRENT_SEQS', {
      desc: c.ints(desc, desc.length), count: live.length, units, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride,
    });
    // contiguous runs of (sequence, head) units per chunk, as gdnRecurrent's heads
    this.run(Cmd.GDN_RECURRENT_SEQS, c.arena, units > 1 && rows * hv * dk * dv >= PAR_GDN, Math.min(units, 2 * this.threads));
    c.end();
  }

  /** The plain form (gates, recurrence, norm as three calls). */
  gdnRecurrentGatedSeqs(out: Float32Array, qkv: Float32Array, gating: GdnGating<Float32Array>, dims: GdnDims, seqs: readonly GdnSeq<Float32Array>[]): void {
    gdnGatedSeqsByCalls(this, out, qkv, gating, dims, seqs);
  }

  /** One gdnChunked per segment (each already splits its heads over the pool). */
  gdnChunkedSeqs(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, dims: GdnDims, seqs: readonly GdnChunkSeq<Float32Array>[]): void {
    gdnChunkedSeqsByCalls(this, out, qkv, g, beta, dims, seqs);
  }

  gdnChunked(out: Float32Array, qkv: Float32Array, g: Float32Array, beta: Float32Array, state: Float32Array,
    dims: GdnDims, t: number, pos0 = 0): void {
    if (t <= 0) return;
    const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
    const ss = hv * dk * dv;
    const arena = this.ops.target(state, qkv);
    const c = this.ops.begin(arena, arena.exports.chunkedTmpBytes(dk, dv), this.threads);
    packArgs(this.pool.args, 'GDN_CHUNKED', {
      out: c.out(out, t * hv * dv), qkv: c.in(qkv, t * (2 * hk * dk + hv * dv)), g: c.in(g, t * hv), beta: c.in(beta, t * hv),
      state: c.inout(state, ss), t, hk, hv, dk, dv, tmpBase: c.tmp.base, tmpStride: c.tmp.stride, pos0,
    });
    this.run(Cmd.GDN_CHUNKED, c.arena, hv > 1 && t * ss >= PAR_GDN, hv);
    c.end();
  }

  kvWrite(kv: KvLayerView, pageTable: ArrayLike<number>, start: number, k: Float32Array, v: Float32Array, t: number,
    kvDim: number): void {
    const ps = kv.pageSize;
    for (let i = 0; i < t; i++) {
      const pos = start + i;
      const row = pageTable[Math.floor(pos / ps)]! * ps + (pos % ps);
      kv.k.set(k.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
      kv.v.set(v.subarray(i * kvDim, (i + 1) * kvDim), row * kvDim);
    }
  }

  attention(out: Float32Array, q: Float32Array, qStride: number, kv: KvLayerView, pageTable: ArrayLike<number>,
    start: number, t: number, dims: AttentionDims): void {
    if (t <= 0) return;
    const { numHeads: nH, numKvHeads: nKV, headDim: hd } = dims;
    const n = start + t;
    const { per, qb } = attentionBlocking(t, n, nH, nKV, this.threads);
    const units = Math.ceil(t / qb) * (nH / per);
    const arena = this.ops.target(kv.k, q);
    const c = this.ops.begin(arena, arena.exports.attentionTmpBytes(qb * per, n), this.threads);
    packArgs(this.pool.args, 'ATTENTION', {
      out: c.out(out, t * nH * hd), q: c.in(q, (t - 1) * qStride + nH * hd), qStride, kc: c.in(kv.k, kv.k.length),
      vc: c.in(kv.v, kv.v.length), pageTable: c.ints(pageTable, Math.floor((n - 1) / kv.pageSize) + 1), pageSize: kv.pageSize,
      start, nH, nKV, hd, units, tmpBase: c.tmp.base, tmpStride: c.tmp.stride, per, qb, t,
    });
    this.run(Cmd.ATTENTION, c.arena, units > 1 && t * nH * n * hd >= PAR_ATTN, Math.min(units, 16 * this.threads));
    c.end();
  }

  /** The batched calls run per sequence (each call already splits over the pool). */
  stepBatch(seqs: readonly BatchSeq[], rope: RopeTable | null): StepBatch {
    return stepBatchOnHost(seqs, rope);
  }
  ropeBatch(x: Float32Array, batch: StepBatch, heads: number, headDim: number, stride: number): void {
    ropeByCalls(this, x, batch, heads, headDim, stride);
  }
  kvWriteBatch(kv: readonly KvLayerView[], batch: StepBatch, k: Float32Array, v: Float32Array, kvDim: number): void {
    kvWriteByCalls(this, kv, batch, k, v, kvDim);
  }
  attentionBatch(out: Float32Array, q: Float32Array, qStride: number, kv: readonly KvLayerView[], batch: StepBatch, dims: AttentionDims, inputs?: AttentionInputs): void {
    if (inputs) attentionInputsByCalls(this, inputs, batch, dims);
    attentionByCalls(this, out, q, qStride, kv, batch, dims);
  }
  attentionInputs(a: AttentionInputs, batch: StepBatch, dims: AttentionDims): void {
    attentionInputsByCalls(this, a, batch, dims);
  }
  mtpInputs(a: MtpInputs): void {
    mtpInputsByCalls(this, a);
  }

  moeRoute(ids: Int32Array, weights: Float32Array, logits: Float32Array, m: number, e: number, topK: number,
    renormalize: boolean): void {
    if (m <= 0) return;
    const c = this.ops.begin(this.ops.target(logits), e * 9);
    const lp = c.in(logits, m * e);
    const ip = c.out(ids, m * topK);
    const wp = c.out(weights, m * topK);
    c.arena.exports.moeRoute(ip, wp, lp, m, e, topK, renormalize ? 1 : 0, c.tmp.base);
    c.end();
  }

  argmax(out: Int32Array, x: Float32Array, m: number, n: number, stride = n): void {
    if (m <= 0) return;
    if (n <= 0) throw new RangeError('argmax: empty rows');
    const c = this.ops.begin(this.ops.target(x));
    const xp = c.in(x, (m - 1) * stride + n);
    const op = c.out(out, m);
    c.arena.exports.argmax(op, xp, m, n, stride);
    c.end();
  }

  /** Host rows: the masked copies, then this backend's argmax. */
  argmaxRowsMasked(out: Int32Array, outOffset: number, x: Float32Array, m: number, n: number, stride: number,
    masks: readonly (Uint32Array | null)[]): void {
    cpu.argmaxRowsMasked((o, r, mm, nn, st) => this.argmax(o, r, mm, nn, st), out, outOffset, x, m, n, stride, masks);
  }

  /** Host rows: a copy per row. */
  gatherPicked(out: Float32Array, outOffset: number, x: Float32Array, ids: Int32Array, m: number, stride: number): void {
    cpu.gatherPicked(out, outOffset, x, ids, m, stride);
  }
  /** Over host memory (kernels/top-candidates.ts, the ref's bits): one pass per row. */
  topCandidates(ids: Int32Array, vals: Float32Array, outOffset: number, x: Float32Array, m: number, n: number, stride: number, c: number): void {
    topCandidates(ids, vals, outOffset, x, m, n, stride, c);
  }
  /** Over host memory (kernels/penalty-picks.ts, the ref's bits). */
  penaltyPicks(ids: Int32Array, x: Float32Array, vals: Float32Array, call: PenaltyPicksCall): void {
    penaltyPicks(ids, x, vals, call);
  }
  candidateDraws(out: Int32Array, outOffset: number, ids: Int32Array, vals: Float32Array, candOffset: number, c: number, rows: readonly (CandidateDraw | null)[]): void {
    candidateDraws(out, outOffset, ids, vals, candOffset, c, rows);
  }

  /** Ids are views of the arena's memory: embed over them. */
  embedIds(out: Float32Array, table: Weight, ids: Int32Array, idsOffset: number, m: number): void {
    this.embed(out, table, cpu.idsIn(ids, idsOffset, m));
  }

  /** Logits rows are views of the arena's memory: the same SIMD argmax as host rows. */
  argmaxRows(out: Int32Array, outOffset: number, x: Float32Array, m: number, n: number, stride: number): void {
    this.argmax(out.subarray(outOffset, outOffset + m), x, m, n, stride);
  }

  sample(rows: readonly SampleRow[], results: readonly SampleResult[]): void {
    const m = rows.length;
    if (m === 0) return;
    const maxN = rows.reduce((x, r) => Math.max(x, r.n), 0);
    const arena = this.ops.target(rows[0]!.logits);
    const c = this.ops.begin(arena, arena.exports.sampleTmpBytes(maxN), this.threads);
    const desc = packSampleRows(c, rows);
    packArgs(this.pool.args, 'SAMPLE', { desc: desc.ptr, rows: m, tmpBase: c.tmp.base, tmpStride: c.tmp.stride });
    this.run(Cmd.SAMPLE, c.arena, m > 1, m);
    readSampleResults(c.arena, desc, rows, results);
    c.end();
  }

  moeExperts(out: Float32Array, x: Float32Array, ids: Int32Array, weights: Float32Array, m: number, topK: number,
    experts: readonly ExpertMats[], scratch: MoeScratch, fused?: MoeFusion): void {
    cpu.moeExperts(this, out, x, ids, weights, m, topK, experts, scratch, fused);
  }

  addSigmoidScaled(out: Float32Array, y: Float32Array, g: Float32Array, m: number, d: number): void {
    cpu.addSigmoidScaled(out, y, g, m, d);
  }

  mulSilu(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 0);
  }

  mulSigmoid(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 1);
  }

  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    this.elementwise(out, a, b, n, 2);
  }

  layerNorm(out: Float32Array, x: Float32Array, w: Float32Array, b: Float32Array, m: number, d: number, eps: number): void {
    if (m <= 0) return;
    const c = this.ops.begin(this.ops.target(x, out));
    const xp = c.in(x, m * d);
    const wp = c.in(w, d);
    const bp = c.in(b, d);
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'LAYER_NORM', { out: op, x: xp, w: wp, b: bp, m, d, eps });
    this.run(Cmd.LAYER_NORM, c.arena, m > 1 && m * d >= PAR_ROWS, Math.min(m, 4 * this.threads));
    c.end();
  }

  biasAct(out: Float32Array, x: Float32Array, bias: Float32Array, m: number, d: number, act: BiasAct): void {
    if (m <= 0) return;
    const c = this.ops.begin(this.ops.target(x, out));
    const xp = c.in(x, m * d);
    const bp = c.in(bias, d);
    const op = c.out(out, m * d);
    packArgs(this.pool.args, 'BIAS_ACT', { out: op, x: xp, bias: bp, m, d, act: BIAS_ACTS.indexOf(act) });
    this.run(Cmd.BIAS_ACT, c.arena, m > 1 && m * d >= (act === 'none' ? PAR_ROWS : PAR_EXP_ROWS), Math.min(m, 4 * this.threads));
    c.end();
  }

  private elementwise(out: Float32Array, a: Float32Array, b: Float32Array, n: number, op: number): void {
    if (n <= 0) return;
    const c = this.ops.begin(this.ops.target(out, a));
    const ap = c.in(a, n);
    const bp = c.in(b, n);
    const o = c.out(out, n);
    if (op === 2) c.arena.exports.add(o, ap, bp, n);
    else {
      packArgs(this.pool.args, 'MUL_ACT', { out: o, a: ap, b: bp, n, sigmoid: op === 1 ? 1 : 0 });
      this.run(Cmd.MUL_ACT, c.arena, n >= PAR_EXP_ROWS, 4 * this.threads);
    }
    c.end();
  }
}
