// The adapter description in plain data, free of WebGPU API types: the public
// declarations (kernels/index.ts → gpuAdapterOf) reach it, and they must compile without
// @webgpu/types installed.

/** What the kernels need to know about the device, and what `ready` / `bench` print. */
export interface GpuAdapterSummary {
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  /** Subgroup sizes the adapter may use (0 when unknown). */
  readonly subgroupMinSize: number;
  readonly subgroupMaxSize: number;
  /** A CPU emulation (lavapipe / llvmpipe, SwiftShader, WARP, a fallback adapter). */
  readonly cpuEmulation: boolean;
  readonly features: { readonly shaderF16: boolean; readonly subgroups: boolean; readonly timestamps: boolean;
    /** WGSL dot4I8Packed / pack4xI8 (language feature packed_4x8_integer_dot_product). */
    readonly dot4I8: boolean };
  readonly limits: {
    readonly maxStorageBufferBindingSize: number;
    readonly maxBufferSize: number;
    readonly maxComputeWorkgroupStorageSize: number;
    readonly maxComputeInvocationsPerWorkgroup: number;
    readonly maxComputeWorkgroupsPerDimension: number;
    readonly maxStorageBuffersPerShaderStage: number;
    readonly minStorageBufferOffsetAlignment: number;
    readonly minUniformBufferOffsetAlignment: number;
  };
}
