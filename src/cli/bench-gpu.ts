// `bench --kernels webgpu`: what a GPU rewards, per timed step — dispatches, weight bytes
// the matmuls stream against the ideal of each weight byte once per step, KV bytes
// attention reads against each cached row once — and where a step's time goes:
// - host: recording the dispatches (JS) and encoding them into Dawn (bind groups, passes,
//   queue.submit), per step and per dispatch: what bounds a small model at batch 1;
// - submits per step (chunked: the GPU runs a chunk while the host records the next);
// - GPU: timestamp queries around each submit's passes where the adapter has timestamp-query
//   (the step as it runs, first pass to last, and busy: each submit's span summed; null with
//   the reason where absent), and always the host clock from the last queue.submit to the
//   read-back mapped (GPU time still queued plus driver latency: the fallback);
// - bind groups set per step, how many of them were created (cache misses: none once warm),
//   and the host time getting them;
// - the Dawn toggles in force (DELTASERVE_DAWN_TOGGLES, kernels/webgpu-node.ts).
// `dispatchProfile`: one more run with a timed pass per dispatch (passes change the step, so
// its total is reported apart). The counted run is one of bench's timed runs (its last).
import type { AnyKernels } from '../kernels/types.js';
import type { WebGpuBoundaryKernels } from '../kernels/webgpu/kernels.js';

/** The webgpu backend's counters, or null on a CPU backend. */
export function gpuCounters(k: AnyKernels): WebGpuBoundaryKernels | null {
  return k.name === 'webgpu' && 'counters' in k ? (k as unknown as WebGpuBoundaryKernels) : null;
}

type Counters = WebGpuBoundaryKernels['counters'];
interface Snapshot extends Counters { wRead: number; wIdeal: number; kvRead: number; kvIdeal: number }

function snap(k: WebGpuBoundaryKernels): Snapshot {
  const t = k.g.traffic;
  return { ...k.counters, wRead: t.weightBytesRead, wIdeal: t.weightBytesIdeal, kvRead: t.kvBytesRead, kvIdeal: t.kvBytesIdeal };
}

type Run = (onTimed: () => void) => Promise<{ steps: number; recordMs: number; threadCpuMs: number | null }>;

/** A run with `timing` on, counted from its timed steps: the counters' differences and the
 * run's own figures. */
async function countedRun(k: WebGpuBoundaryKernels, run: Run, timing: WebGpuBoundaryKernels['timing']):
  Promise<{ d: Snapshot; steps: number; recordMs: number; threadCpuMs: number | null }> {
  let from: Snapshot | null = null;
  k.timing = timing;
  try {
    const r = await run(() => { from = snap(k); k.moeTally.restart(); });
    const to = snap(k);
    const a: Snapshot = from ?? to;
    const d = Object.fromEntries(Object.entries(to).map(([key, v]) => [key, v - a[key as keyof Snapshot]])) as unknown as Snapshot;
    return { d, steps: Math.max(1, r.steps), recordMs: r.recordMs, threadCpuMs: r.threadCpuMs };
  } finally {
    k.timing = 'none';
  }
}

/** `run` counted from its timed steps (step timestamps on); then `dispatchProfile`, when
 * given, with a timed pass per dispatch. */
export async function gpuStepReport(k: WebGpuBoundaryKernels, run: Run, dispatchProfile: Run | null): Promise<Record<string, unknown>> {
  const timestamps = k.g.adapter.features.timestamps;
  const { d, steps, recordMs, threadCpuMs } = await countedRun(k, run, timestamps ? 'step' : 'none');
  const moe = await k.moeWeightBytes(); // since the timed steps began (a read-back after the run)
  const per = (x: number): number => x / steps;
  const dispatches = per(d.dispatches);
  // chunked submits (submit-chunks.ts) encode while recording: that share of recordMs is encoding
  const pureRecordMs = recordMs - d.chunkEncodeMs;
  const hostMs = per(pureRecordMs + d.encodeMs);
  const gpuMs = timestamps && d.timedSteps > 0 ? d.gpuNs / d.timedSteps / 1e6 : null;
  const gpuBusyMs = timestamps && d.timedSteps > 0 ? d.gpuBusyNs / d.timedSteps / 1e6 : null;
  let profiled: number | null = null;
  if (dispatchProfile && timestamps) {
    const p = await countedRun(k, dispatchProfile, 'dispatch');
    profiled = p.d.timedSteps > 0 ? p.d.gpuNs / p.d.timedSteps / 1e6 : null;
  }
  return {
    read_backs_per_step: per(d.steps),
    read_back_bytes_per_step: per(d.readBackBytes),
    dispatches_per_step: dispatches,
    // command buffers submitted a step (1, or the chunks of submit_chunks)
    submits_per_step: per(d.submits),
    submit_chunks: k.g.submitChunks,
    // the host's share: recording a step (JS, before its read-back; chunk submits excluded) +
    // encoding it into Dawn (every submit's, the chunks' made while recording included)
    host_record_ms_per_step: per(pureRecordMs),
    host_encode_ms_per_step: per(d.encodeMs),
    host_us_per_dispatch: dispatches > 0 ? (1000 * hostMs) / dispatches : null,
    // the same on this thread's CPU clock: immune to waiting and to the machine's load
    host_cpu_ms_per_step: threadCpuMs === null ? null : per(threadCpuMs),
    host_cpu_us_per_dispatch: threadCpuMs === null || dispatches === 0 ? null : (1000 * per(threadCpuMs)) / dispatches,
    bind_groups_per_step: per(d.bindGroups),
    bind_groups_created_per_step: per(d.bindGroupsCreated),
    host_bind_group_us_per_step: per(1000 * d.bindGroupMs),
    weight_bytes_read_per_step: per(d.wRead),
    weight_bytes_ideal_per_step: per(d.wIdeal),
    weight_read_ratio: d.wIdeal > 0 ? d.wRead / d.wIdeal : null,
    kv_bytes_read_per_step: per(d.kvRead),
    kv_bytes_ideal_per_step: per(d.kvIdeal),
    kv_read_ratio: d.kvIdeal > 0 ? d.kvRead / d.kvIdeal : null,
    // MoE expert weights the grouped GEMMs read vs each routed expert once (device tally)
    moe_weight_bytes_read_per_step: per(moe.read),
    moe_weight_bytes_routed_ideal_per_step: per(moe.ideal),
    moe_weight_read_ratio: moe.ideal > 0 ? moe.read / moe.ideal : null,
    gpu_ms_per_step: gpuMs,
    // of gpu_ms_per_step, the submits' own spans summed: the GPU's idle gaps between a step's submits left out
    gpu_busy_ms_per_step: gpuBusyMs,
    gpu_time_source: gpuMs !== null ? 'timestamp queries: the first submit\'s first pass begins to the last submit\'s last pass ends, each timed step'
      : timestamps ? 'unavailable: no step was timed' : 'unavailable: the adapter has no timestamp-query feature (see queue_done_ms_per_step)',
    // the last submit → read-back mapped on the host clock: GPU time still queued + driver latency, host encode excluded
    queue_done_ms_per_step: per(d.doneMs),
    ...(dispatchProfile ? { gpu_ms_per_step_pass_per_dispatch: profiled } : {}),
    // imported here, not at the top: the CPU path never loads kernels/webgpu-node (kernels-messages)
    dawn_toggles: (await import('../kernels/webgpu-node.js')).dawnToggles(),
  };
}
