/// <reference types="@webgpu/types" />
// WebGPU device acquisition and adapter description. Browser-ready: only the WebGPU API
// (the caller passes a `GPU` object: navigator.gpu in a browser, the Dawn binding in Node —
// see kernels/webgpu-node.ts).
//
// Limits: the device is requested with the adapter's own limits for the storage sizes a
// model needs (a default device is capped at 128 MiB bindings), and with the optional
// features the kernels use when present: shader-f16, subgroups, timestamp-query.

import type { GpuAdapterSummary } from './adapter-summary.js';
import type { SubmitChunks } from './submit-chunks.js';
import type { LaunchProfile } from './launches.js';
export type { GpuAdapterSummary };

export interface GpuContext {
  readonly device: GPUDevice;
  readonly adapter: GpuAdapterSummary;
}

const EMULATION = /llvmpipe|lavapipe|swiftshader|microsoft basic render|\bwarp\b|software/i;

/** Whether an adapter is a CPU emulation of a GPU: `auto` must not pick it. */
export function isCpuEmulation(info: Pick<GPUAdapterInfo, 'vendor' | 'architecture' | 'device' | 'description'> & { isFallbackAdapter?: boolean }): boolean {
  if (info.isFallbackAdapter === true) return true;
  return EMULATION.test([info.vendor, info.architecture, info.device, info.description].join(' '));
}

/** The limits requested: the adapter's own for every size the kernels depend on. */
const LIMITS_TO_RAISE = [
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxComputeWorkgroupsPerDimension',
  'maxStorageBuffersPerShaderStage',
] as const;

function summarize(gpu: GPU, adapter: GPUAdapter, device: GPUDevice): GpuAdapterSummary {
  const info = adapter.info;
  const l = device.limits;
  return {
    vendor: info.vendor,
    architecture: info.architecture,
    device: info.device,
    description: info.description,
    subgroupMinSize: (info as GPUAdapterInfo & { subgroupMinSize?: number }).subgroupMinSize ?? 0,
    subgroupMaxSize: (info as GPUAdapterInfo & { subgroupMaxSize?: number }).subgroupMaxSize ?? 0,
    cpuEmulation: isCpuEmulation(info as GPUAdapterInfo & { isFallbackAdapter?: boolean }),
    features: {
      shaderF16: device.features.has('shader-f16'),
      subgroups: device.features.has('subgroups'),
      timestamps: device.features.has('timestamp-query'),
      dot4I8: gpu.wgslLanguageFeatures?.has('packed_4x8_integer_dot_product') ?? false,
    },
    limits: {
      maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
      maxBufferSize: l.maxBufferSize,
      maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupsPerDimension: l.maxComputeWorkgroupsPerDimension,
      maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
      minStorageBufferOffsetAlignment: l.minStorageBufferOffsetAlignment,
      minUniformBufferOffsetAlignment: l.minUniformBufferOffsetAlignment,
    },
  };
}

export interface AcquireOptions {
  /** Accept a CPU emulation (tests, explicit `--kernels webgpu`). `auto` passes false. */
  readonly allowCpuEmulation: boolean;
  /** Disable optional features (to test the fallback shaders). */
  readonly disable?: readonly ('shader-f16' | 'subgroups' | 'timestamp-query' | 'dot4I8')[];
  readonly powerPreference?: GPUPowerPreference;
  /** On a CPU adapter, sleep through most of a submit's expected time before mapping its
   * read-backs instead of Dawn's busy-poll (readback-pacer.ts). Default true; no effect on a GPU. */
  readonly readbackPacing?: boolean;
  /** Dispatches per submit (submit-chunks.ts); default: chunked on a GPU, one submit on a CPU adapter. */
  readonly submitChunks?: SubmitChunks;
  /** The launch choices (launches.ts): default the adapter's own profile ('gpu' on a GPU,
   * 'cpu' on a CPU emulation); 'gpu' on lavapipe runs what a GPU runs. */
  readonly launches?: LaunchProfile;
  /** Quantized matmuls of M ≤ ACTS_FOLD_ROWS rows quantize (and norm) their own input
   * (Launches.foldQuantActs), overriding the profile's choice. */
  readonly foldQuantActs?: boolean;
}

/** The reason no device could be had, for `auto` and for error messages. */
export class NoGpuError extends Error {}

/** Request an adapter and a device with the adapter's limits. Throws NoGpuError when there
 * is no adapter, or only a CPU emulation and `allowCpuEmulation` is false. */
export async function acquireGpu(gpu: GPU, opts: AcquireOptions): Promise<GpuContext> {
  const adapter = await gpu.requestAdapter({ powerPreference: opts.powerPreference ?? 'high-performance' });
  if (!adapter) throw new NoGpuError('no WebGPU adapter was found: no GPU driver answered, and on Linux without a GPU Mesa\'s lavapipe (mesa-vulkan-drivers 23 or later) provides one');
  const info = adapter.info as GPUAdapterInfo & { isFallbackAdapter?: boolean };
  if (!opts.allowCpuEmulation && isCpuEmulation(info)) {
    throw new NoGpuError(`the only WebGPU adapter, "${info.description || info.device || info.vendor}", is a CPU emulation, slower than the wasm kernels`);
  }
  const wanted: GPUFeatureName[] = ['shader-f16', 'subgroups', 'timestamp-query'];
  const requiredFeatures = wanted.filter((f) => adapter.features.has(f) && !(opts.disable ?? []).includes(f as never));
  const requiredLimits: Record<string, number> = {};
  for (const name of LIMITS_TO_RAISE) requiredLimits[name] = adapter.limits[name];
  const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
  device.addEventListener('uncapturederror', (e) => {
    // Validation errors are programming errors: surface them, never swallow them.
    const err = (e as GPUUncapturedErrorEvent).error;
    lastUncaptured = err.message;
  });
  const summary = summarize(gpu, adapter, device);
  if ((opts.disable ?? []).includes('dot4I8')) return { device, adapter: { ...summary, features: { ...summary.features, dot4I8: false } } };
  return { device, adapter: summary };
}

let lastUncaptured: string | null = null;

/** The last uncaptured device error since the previous call (tests assert it is null). */
export function takeUncapturedError(): string | null {
  const e = lastUncaptured;
  lastUncaptured = null;
  return e;
}

/** One line for logs: vendor, architecture, device, the limits that size a model. */
export function describeAdapter(a: GpuAdapterSummary): string {
  const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;
  const feats = Object.entries(a.features).filter(([, v]) => v).map(([k]) => k).join(',') || 'none';
  return `${a.vendor || '?'} ${a.architecture || '?'} "${a.description || a.device}"${a.cpuEmulation ? ' (CPU emulation)' : ''}` +
    ` binding ${mib(a.limits.maxStorageBufferBindingSize)}, buffer ${mib(a.limits.maxBufferSize)}, features ${feats}`;
}

/** What `--kernels auto` decides: webgpu on a real GPU adapter, else the CPU kernels, with
 * the reason (printed by `ready` / `bench`). Acquires and releases a device to check. */
export async function probeAuto(gpu: GPU | null): Promise<{ readonly pick: 'webgpu' | 'cpu'; readonly reason: string; readonly adapter: GpuAdapterSummary | null }> {
  if (!gpu) return { pick: 'cpu', reason: 'no WebGPU implementation', adapter: null };
  try {
    const ctx = await acquireGpu(gpu, { allowCpuEmulation: false });
    ctx.device.destroy();
    return { pick: 'webgpu', reason: describeAdapter(ctx.adapter), adapter: ctx.adapter };
  } catch (e) {
    if (e instanceof NoGpuError) return { pick: 'cpu', reason: e.message, adapter: null };
    throw e;
  }
}
