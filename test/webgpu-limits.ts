/// <reference types="@webgpu/types" />
// A GPU whose adapters report at most `cap` bytes of workgroup memory, so a device requested
// through it (kernels/webgpu/device.ts asks for the adapter's limits) gets that limit: on
// lavapipe (32 KiB) this runs the kernels a 16 KiB device (WebGPU's default minimum, many
// integrated GPUs) picks, and Dawn rejects any shader that declares more. Used by
// test/webgpu-attention-tile.test.ts and scripts/ab-webgpu-attention.mjs (--workgroup-storage).

/** `gpu` with each adapter's maxComputeWorkgroupStorageSize capped at `cap` bytes. */
export function gpuWithWorkgroupStorage(gpu: GPU, cap: number): GPU {
  const requestAdapter = async (opts?: GPURequestAdapterOptions): Promise<GPUAdapter | null> => {
    const a = await gpu.requestAdapter(opts);
    if (!a) return null;
    const limits = new Proxy(a.limits, {
      get: (l, name) => (name === 'maxComputeWorkgroupStorageSize' ? Math.min(cap, l.maxComputeWorkgroupStorageSize) : l[name as keyof GPUSupportedLimits]),
    });
    return { info: a.info, features: a.features, limits, isFallbackAdapter: (a as { isFallbackAdapter?: boolean }).isFallbackAdapter,
      requestDevice: (d?: GPUDeviceDescriptor) => a.requestDevice(d) } as unknown as GPUAdapter;
  };
  return { requestAdapter, getPreferredCanvasFormat: () => gpu.getPreferredCanvasFormat(), wgslLanguageFeatures: gpu.wgslLanguageFeatures } as GPU;
}
