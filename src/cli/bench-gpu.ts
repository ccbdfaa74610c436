// `bench --kernels webgpu`: what a GPU rewards, per timed step — dispatches, weight bytes
// the matmuls stream against the ideal of each weight byte once per step, KV bytes
// attention reads against each cached row once, and GPU time from timestamp queries (a
// separate profiled run: per-dispatch timestamps put every dispatch in its own pass), and
// the host time of recording a step (per dispatch: what bounds a small model at batch 1).
import type { AnyKernels } from '../kernels/types.js';
import type { WebGpuBoundaryKernels } from '../kernels/webgpu/kernels.js';

/** The webgpu backend's counters, or null on a CPU backend. */
export function gpuCounters(k: AnyKernels): WebGpuBoundaryKernels | null {
  return k.name === 'webgpu' && 'counters' in k ? (k as unknown as WebGpuBoundaryKernels) : null;
}

interface Snapshot { steps: number; readBackBytes: number; dispatches: number; gpuNs: number; timedSteps: number; wRead: number; wIdeal: number; kvRead: number; kvIdeal: number }

function snap(k: WebGpuBoundaryKernels): Snapshot {
  const c = k.counters;
  const t = k.g.traffic;
  return { steps: c.steps, readBackBytes: c.readBackBytes, dispatches: c.dispatches, gpuNs: c.gpuNs, timedSteps: c.timedSteps,
    wRead: t.weightBytesRead, wIdeal: t.weightBytesIdeal, kvRead: t.kvBytesRead, kvIdeal: t.kvBytesIdeal };
}

/** One more run counted from its timed steps; then a profiled run for GPU time. */
export async function gpuStepReport(k: WebGpuBoundaryKernels, run: (onTimed: () => void) => Promise<{ steps: number; recordMs: number }>):
  Promise<Record<string, unknown>> {
  let from: Snapshot | null = null;
  const r = await run(() => { from = snap(k); k.moeTally.restart(); });
  const to = snap(k);
  const moe = await k.moeWeightBytes(); // since the timed steps began (a read-back after `to`)
  const a = from ?? to;
  const steps = Math.max(1, r.steps);
  let gpuMs: number | null = null;
  if (k.g.adapter.features.timestamps) {
    k.profile = true;
    let p0: Snapshot | null = null;
    try {
      await run(() => { p0 = snap(k); });
    } finally {
      k.profile = false;
    }
    const p1 = snap(k);
    const timed = p1.timedSteps - (p0 ?? p1).timedSteps;
    gpuMs = timed > 0 ? (p1.gpuNs - (p0 ?? p1).gpuNs) / timed / 1e6 : null;
  }
  const wRead = (to.wRead - a.wRead) / steps;
  const wIdeal = (to.wIdeal - a.wIdeal) / steps;
  const kvRead = (to.kvRead - a.kvRead) / steps;
  const kvIdeal = (to.kvIdeal - a.kvIdeal) / steps;
  const dispatches = (to.dispatches - a.dispatches) / steps;
  return {
    read_backs_per_step: (to.steps - a.steps) / steps,
    read_back_bytes_per_step: (to.readBackBytes - a.readBackBytes) / steps,
    dispatches_per_step: dispatches,
    // the host's share: recording a step (encoding every dispatch) before its read-back
    host_record_ms_per_step: r.recordMs / steps,
    host_us_per_dispatch: dispatches > 0 ? (1000 * r.recordMs) / steps / dispatches : null,
    weight_bytes_read_per_step: wRead,
    weight_bytes_ideal_per_step: wIdeal,
    weight_read_ratio: wIdeal > 0 ? wRead / wIdeal : null,
    kv_bytes_read_per_step: kvRead,
    kv_bytes_ideal_per_step: kvIdeal,
    kv_read_ratio: kvIdeal > 0 ? kvRead / kvIdeal : null,
    // MoE expert weights the grouped GEMMs read vs each routed expert once (device tally)
    moe_weight_bytes_read_per_step: moe.read / steps,
    moe_weight_bytes_routed_ideal_per_step: moe.ideal / steps,
    moe_weight_read_ratio: moe.ideal > 0 ? moe.read / moe.ideal : null,
    gpu_ms_per_step: gpuMs,
    gpu_time_source: gpuMs === null ? 'unavailable (no timestamp-query)' : 'timestamp queries, one pass per dispatch (a profiled run)',
  };
}
