// How the batched causal conv (Kernels.causalConvSeqs) is launched on an adapter:
// 'thread', 64-thread workgroups with the tap count a parameter (CAUSAL_CONV_SEQS), or
// 'channels', one-warp workgroups with the taps compiled in and held in registers
// (convChannelsShader, wgsl/gdn.ts). Both give the same bits (test/webgpu-conv-channels.test.ts).
// The choice depends on the adapter only (and the tap count), never on the batch.
import type { WebGpuKernels } from './backend.js';
import { CONV_CHANNELS_MAX_TAPS } from './wgsl/gdn.js';

export type ConvLaunch = 'thread' | 'channels';

const forced = new WeakMap<WebGpuKernels, ConvLaunch>();

/** The launch on this adapter: 'thread' on CPU emulations (lavapipe: today's kernel, its
 * 64-thread workgroups already fill the cores), 'channels' on GPUs (C / 64 workgroups of
 * two warps each leave SMs idle and a warp one load in flight: docs/kernels.md
 * "GPU memory-access model"). */
export function convLaunch(g: WebGpuKernels): ConvLaunch {
  return forced.get(g) ?? (g.adapter.cpuEmulation ? 'thread' : 'channels');
}

/** The launch that runs `taps` taps: the adapter's, but 'thread' past CONV_CHANNELS_MAX_TAPS. */
export function convLaunchFor(g: WebGpuKernels, taps: number): ConvLaunch {
  return taps <= CONV_CHANNELS_MAX_TAPS ? convLaunch(g) : 'thread';
}

/** Set the launch of `g` (null: the adapter's default). For tests comparing the two and for
 * scripts/gpu-access-model.mjs, which records on lavapipe what a GPU would run. */
export function forceConvLaunch(g: WebGpuKernels, launch: ConvLaunch | null): void {
  if (launch === null) forced.delete(g);
  else forced.set(g, launch);
}
