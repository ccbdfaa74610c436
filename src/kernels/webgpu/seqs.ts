// A batch's causal convs and recurrent Gated DeltaNet steps in one dispatch per layer
// (Kernels.causalConvSeqs, gdnRecurrentSeqs, gdnChunkedSeqs): a descriptor per sequence (first row, t,
// window / state offset, scratch offset, scratch or not) goes up through the upload arena,
// and every sequence runs the single-sequence kernel's body (wgsl/gdn.ts) on its rows.
// One dispatch per distinct (window or state buffer, scratch buffer) pair: sequences whose
// slots share a buffer run together: the engine's StatePool keeps consecutive slots in one
// chunk, so a serve batch is one dispatch per layer.
import type { ConvSeq, GdnChunkSeq, GdnDims, GdnSeq } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { QuantActs } from './backend-types.js';
import type { GpuTensor } from './tensor.js';
import { CAUSAL_CONV_SEQS, CONV_CHANNEL_THREADS, GDN_RECURRENT_SEQS, convChannelsShader } from './wgsl/gdn.js';
import { convLaunchFor } from './conv-launch.js';
import { packParams } from './params.js';
import { CHUNKED_SEQ_WORDS, GDN_CHUNKED_SEQS, chunkedScratchPer } from './wgsl/gdn-chunked.js';
import { chunkSplits } from '../seqs-by-calls.js';
import { GDN_GATED_BINDINGS, destHeads, gdnGatedShader, gdnGatedThreads } from './wgsl/gdn-gated.js';
import { gdnGatedColumnsRun } from './gdn-columns.js';
import { GDN_COLUMNS, GDN_RECURRENT_COLUMNS } from './wgsl/gdn-columns.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

interface SeqCommon { readonly row: number; readonly t: number; readonly scratch?: GpuTensor | undefined }

/** The live sequences grouped by the buffers of their own tensor and scratch, in order
 * of first appearance. */
function byBuffers<S extends SeqCommon>(live: readonly S[], own: (s: S) => GpuTensor): { own: GPUBuffer; scratch: GPUBuffer | null; seqs: S[] }[] {
  const groups: { own: GPUBuffer; scratch: GPUBuffer | null; seqs: S[] }[] = [];
  for (const s of live) {
    const scratch = s.scratch?.buffer ?? null;
    const g = groups.find((x) => x.own === own(s).buffer && (scratch === null || x.scratch === null || x.scratch === scratch));
    if (g) {
      g.seqs.push(s);
      g.scratch ??= scratch;
    } else groups.push({ own: own(s).buffer, scratch, seqs: [s] });
  }
  return groups;
}

function descriptor<S extends SeqCommon>(live: readonly S[], own: (s: S) => GpuTensor): number[] {
  return live.flatMap((s) => [s.row, s.t, own(s).offset, s.scratch?.offset ?? 0, s.scratch ? 1 : 0]);
}

/** The batch's convs: one dispatch per buffer group, launched as the adapter's conv launch
 * (conv-launch.ts): 64 channels per workgroup, or CONV_CHANNEL_THREADS with the taps compiled in. */
export function convSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, x: GpuTensor, wc: GpuTensor,
  c: number, seqs: readonly ConvSeq<GpuTensor>[], dummy: GPUBuffer): void {
  const taps = wc.length / c;
  const channels = convLaunchFor(g, taps) === 'channels';
  const per = channels ? CONV_CHANNEL_THREADS : 64;
  if (Math.ceil(c / per) > 65535) throw new RangeError(`causalConvSeqs: ${c} channels exceed the dispatch grid`);
  const key = channels ? `causal_conv_channels_${taps}` : 'causal_conv_seqs';
  const shader = channels ? () => convChannelsShader(taps) : () => CAUSAL_CONV_SEQS;
  for (const grp of byBuffers(seqs.filter((s) => s.t > 0), (s) => s.window)) {
    const ds = put(descriptor(grp.seqs, (s) => s.window), 'i32');
    g.run(enc, key, shader,
      packParams('causal_conv_seqs', { c, taps, outOff: out.offset, xOff: x.offset, seqTable: ds.offset }), null,
      [out.buffer, x.buffer, grp.own, wc.buffer, grp.scratch ?? dummy, ds.buffer], [Math.ceil(c / per), grp.seqs.length, 1], 'causal_conv');
  }
}

/** The batch's recurrent GDN steps: one dispatch per buffer group, a workgroup per (value
 * head, 64 columns, sequence) or, as the adapter's launch (gdn-columns.ts), per (value head,
 * GDN_COLUMNS columns, sequence) with the block staged (wgsl/gdn-columns.ts): same bits. */
export function gdnSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, qkv: GpuTensor, gt: GpuTensor,
  beta: GpuTensor, dims: GdnDims, seqs: readonly GdnSeq<GpuTensor>[], dummy: GPUBuffer): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  if (dk > 256) throw new RangeError(`gdnRecurrentSeqs: key dim ${dk} > 256`);
  const columns = g.gdnLaunch === 'columns';
  for (const grp of byBuffers(seqs.filter((s) => s.t > 0), (s) => s.state)) {
    const ds = put(descriptor(grp.seqs, (s) => s.state), 'i32');
    const params = packParams('gdn_recurrent_seqs', { hk, hv, dk, dv, qkvOff: qkv.offset, gOff: gt.offset, outOff: out.offset, betaOff: beta.offset, seqTable: ds.offset });
    const buffers = [out.buffer, qkv.buffer, gt.buffer, beta.buffer, grp.own, grp.scratch ?? dummy, ds.buffer];
    if (columns) g.run(enc, 'gdn_recurrent_columns', () => GDN_RECURRENT_COLUMNS, params, null, buffers, [hv, Math.ceil(dv / GDN_COLUMNS), grp.seqs.length], 'gdn_recurrent');
    else g.run(enc, 'gdn_recurrent_seqs', () => GDN_RECURRENT_SEQS, params, null, buffers, [hv, Math.ceil(dv / 64), grp.seqs.length], 'gdn_recurrent');
  }
}

/** The gate and norm inputs of the fused recurrence, as device tensors (weights: vectors
 * starting their buffers). */
export interface GpuGating {
  readonly a: GpuTensor;
  readonly b: GpuTensor;
  readonly z: GpuTensor;
  readonly aLog: GpuTensor;
  readonly dtBias: GpuTensor;
  readonly norm: GpuTensor;
  readonly eps: number;
  /** Kernels' gating.perm: the normed rows to `out`, head blocks in `order`. */
  readonly perm?: { readonly order: Int32Array; readonly out: GpuTensor };
}

/** Whether this adapter runs the fused gated recurrence (gdnGatedSeqsDispatch) for these
 * dims. A device decides once for all its rows, so every recurrent row takes the same form. */
export function gdnGatedFits(g: WebGpuKernels, dims: GdnDims): boolean {
  const lim = g.adapter.limits;
  return dims.keyDim <= 256 && gdnGatedThreads(dims.valueDim) <= 256 && lim.maxStorageBuffersPerShaderStage >= GDN_GATED_BINDINGS;
}

/** The batch's recurrent GDN steps with their gates and gated RMSNorm, per buffer group as
 * the adapter's launch (gdn-columns.ts): one dispatch of a workgroup per (value head,
 * sequence) (wgsl/gdn-gated.ts), or the column launch's two (wgsl/gdn-columns.ts) — only the
 * recurrence where `normFolded` (the column launch: out_proj forms the norm, gated-norm.ts;
 * out gets the un-normed rows; activations: the norm pass quantizes the normed rows into
 * them, gated-norm.ts). */
export function gdnGatedSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, qkv: GpuTensor, gating: GpuGating,
  dims: GdnDims, seqs: readonly GdnSeq<GpuTensor>[], dummy: GPUBuffer, normFolded: boolean | QuantActs = false): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  for (const [name, t] of [['A_log', gating.aLog], ['dt_bias', gating.dtBias], ['norm weight', gating.norm]] as const) {
    if (t.offset !== 0) throw new RangeError(`gdnRecurrentGatedSeqs: ${name} must start its buffer`);
  }
  const wg = gdnGatedThreads(dv);
  const launch = g.gdnLaunch;
  if (normFolded !== false && launch !== 'columns') throw new Error('gdnRecurrentGatedSeqs: only the column launch leaves its norm to out_proj');
  const { a, b, z, perm } = gating;
  const dest = perm ? destHeads(perm.order) : [];
  if (perm && perm.order.length !== hv) throw new RangeError(`gdnRecurrentGatedSeqs: a head order of ${perm.order.length} for ${hv} value heads`);
  // the normed rows' tensor: out in place, or perm.out (the head launch never stores the
  // un-normed rows, so it writes perm.out directly)
  const dst = perm?.out ?? out;
  for (const grp of byBuffers(seqs.filter((s) => s.t > 0), (s) => s.state)) {
    const table = descriptor(grp.seqs, (s) => s.state);
    const ds = put([...table, ...dest], 'i32');
    const rec = launch === 'columns' ? out : dst;
    const params = packParams('gdn_gated_seqs', { hk, hv, dk, dv, qkvOff: qkv.offset, aOff: a.offset, bOff: b.offset, zOff: z.offset, outOff: rec.offset,
      seqTable: ds.offset, eps: gating.eps, perm: perm ? table.length : 0, dstOff: dst.offset });
    const buffers = [rec.buffer, qkv.buffer, a.buffer, b.buffer, grp.own, grp.scratch ?? dummy, ds.buffer, gating.aLog.buffer, gating.dtBias.buffer, z.buffer,
      gating.norm.buffer, dst.buffer];
    if (launch === 'columns') gdnGatedColumnsRun(g, enc, params, buffers, { hv, dv }, grp.seqs.length, grp.seqs.reduce((m, s) => Math.max(m, s.t), 0), normFolded);
    else g.run(enc, `gdn_gated_seqs_${wg}`, () => gdnGatedShader(wg), params, null, buffers.slice(0, 11), [hv, 1, grp.seqs.length], 'gdn_recurrent');
  }
}

/** The batch's chunked prefills (Kernels.gdnChunkedSeqs): one dispatch per state buffer
 * (and per scratch binding's worth of sequences), one workgroup per (value head, block of
 * 64 state columns, sequence), each walking its sequence's chunks in order. */
export function gdnChunkedSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, qkv: GpuTensor, gt: GpuTensor,
  beta: GpuTensor, dims: GdnDims, seqs: readonly GdnChunkSeq<GpuTensor>[]): void {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const blocks = Math.ceil(dv / 64);
  const per = chunkedScratchPer(dk);
  const perSeq = per * hv * blocks;
  // the scratch stays within one binding even after the allocator's 1.5× growth
  const cap = Math.max(1, Math.min(65535, Math.floor(g.adapter.limits.maxStorageBufferBindingSize / 4 / 1.5 / perSeq)));
  for (const grp of byBuffers(seqs.filter((s) => s.t > 0), (s) => s.state)) {
    for (let first = 0; first < grp.seqs.length; first += cap) {
      const part = grp.seqs.slice(first, first + cap);
      const sc = g.scratchTensor('gdn_chunked_seqs', perSeq * part.length);
      const ds = put(chunkedDescriptor(part), 'i32');
      g.run(enc, 'gdn_chunked_seqs', () => GDN_CHUNKED_SEQS,
        packParams('gdn_chunked_seqs', { hk, hv, dk, dv, qkvOff: qkv.offset, gOff: gt.offset, betaOff: beta.offset, outOff: out.offset, seqTable: ds.offset, per }), null,
        [out.buffer, qkv.buffer, gt.buffer, beta.buffer, grp.own, sc.buffer, ds.buffer], [hv, blocks, part.length], 'gdn_chunked');
    }
  }
}

/** CHUNKED_SEQ_WORDS per sequence (row, t, state offset, pos0, where its splits start,
 * how many), then every sequence's splits as token offsets. Offsets into DS are relative
 * to the table's start (seqTable is added in the shader through `sp`). */
function chunkedDescriptor(seqs: readonly GdnChunkSeq<GpuTensor>[]): number[] {
  const head: number[] = [];
  const tail: number[] = [];
  for (const s of seqs) {
    const rel = chunkSplits(s);
    head.push(s.row, s.t, s.state.offset, s.pos0, seqs.length * CHUNKED_SEQ_WORDS + tail.length, rel.length);
    tail.push(...rel);
  }
  return [...head, ...tail];
}
