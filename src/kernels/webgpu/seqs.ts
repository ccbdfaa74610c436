// A batch's causal convs and recurrent Gated DeltaNet steps in one dispatch per layer
// (Kernels.causalConvSeqs, gdnRecurrentSeqs): a descriptor per sequence (first row, t,
// window / state offset, scratch offset, scratch or not) goes up through the upload arena,
// and every sequence runs the single-sequence kernel's body (wgsl/gdn.ts) on its rows.
// The windows (states) of one call must share a buffer, and so must the scratches: the
// engine's pools do; other callers (tests) run the per-sequence loop that defines the bits.
import type { ConvSeq, GdnDims, GdnSeq } from '../types.js';
import type { WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { CAUSAL_CONV_SEQS, GDN_RECURRENT_SEQS } from './wgsl/gdn.js';

type Put = (data: ArrayLike<number>, elem: 'f32' | 'i32') => GpuTensor;

interface SeqCommon { readonly row: number; readonly t: number; readonly scratch?: GpuTensor | undefined }

/** The shared buffers of the live sequences' own tensor and scratch, or null when they
 * are spread over several buffers. */
function sharedBuffers<S extends SeqCommon>(live: readonly S[], own: (s: S) => GpuTensor): { own: GPUBuffer; scratch: GPUBuffer | null } | null {
  const first = live[0];
  if (!first) return null;
  const ownBuf = own(first).buffer;
  const scratchBuf = live.find((s) => s.scratch)?.scratch?.buffer ?? null;
  const ok = live.every((s) => own(s).buffer === ownBuf && (!s.scratch || s.scratch.buffer === scratchBuf));
  return ok ? { own: ownBuf, scratch: scratchBuf } : null;
}

function descriptor<S extends SeqCommon>(live: readonly S[], own: (s: S) => GpuTensor): number[] {
  return live.flatMap((s) => [s.row, s.t, own(s).offset, s.scratch?.offset ?? 0, s.scratch ? 1 : 0]);
}

/** One dispatch for every live sequence; false when their buffers are not shared (the
 * caller then runs the per-sequence loop). */
export function convSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, x: GpuTensor, wc: GpuTensor,
  c: number, seqs: readonly ConvSeq<GpuTensor>[], dummy: GPUBuffer): boolean {
  const live = seqs.filter((s) => s.t > 0);
  if (live.length === 0) return true;
  const bufs = sharedBuffers(live, (s) => s.window);
  if (!bufs || Math.ceil(c / 64) > 65535) return false;
  const ds = put(descriptor(live, (s) => s.window), 'i32');
  g.run(enc, 'causal_conv_seqs', () => CAUSAL_CONV_SEQS, [0, c, wc.length / c, out.offset, x.offset, 0, 0, 0, ds.offset], null,
    [out.buffer, x.buffer, bufs.own, wc.buffer, bufs.scratch ?? dummy, ds.buffer], [Math.ceil(c / 64), live.length, 1], 'causal_conv');
  return true;
}

export function gdnSeqsDispatch(g: WebGpuKernels, enc: StepEncoder, put: Put, out: GpuTensor, qkv: GpuTensor, gt: GpuTensor,
  beta: GpuTensor, dims: GdnDims, seqs: readonly GdnSeq<GpuTensor>[], dummy: GPUBuffer): boolean {
  const { numKeyHeads: hk, numValueHeads: hv, keyDim: dk, valueDim: dv } = dims;
  const live = seqs.filter((s) => s.t > 0);
  if (live.length === 0) return true;
  if (dk > 256) throw new RangeError(`gdnRecurrentSeqs: key dim ${dk} > 256`);
  const bufs = sharedBuffers(live, (s) => s.state);
  if (!bufs) return false;
  const ds = put(descriptor(live, (s) => s.state), 'i32');
  g.run(enc, 'gdn_recurrent_seqs', () => GDN_RECURRENT_SEQS,
    [0, hk, hv, dk, dv, qkv.offset, gt.offset, out.offset, 0, 0, 0, beta.offset, ds.offset], null,
    [out.buffer, qkv.buffer, gt.buffer, beta.buffer, bufs.own, bufs.scratch ?? dummy, ds.buffer], [hv, Math.ceil(dv / 64), live.length], 'gdn_recurrent');
  return true;
}
