// The WebGPU entry point in Node: Dawn's binding (npm `webgpu`). Kept outside
// kernels/webgpu/ so that directory stays browser-ready (a browser passes navigator.gpu).
/// <reference types="@webgpu/types" />

let cached: GPU | null = null;

/** Node's `GPU` object (Dawn), loaded on first use. Throws with the reason when the
 * `webgpu` package or its prebuilt dawn.node cannot be loaded on this platform. */
export async function nodeGpu(): Promise<GPU> {
  if (cached) return cached;
  let mod: { create(flags: string[]): GPU; globals: Record<string, unknown> };
  try {
    mod = (await import('webgpu')) as unknown as typeof mod;
  } catch (e) {
    throw new Error(`the webgpu backend needs the npm package "webgpu" (Dawn) for ${process.platform}-${process.arch}: ${(e as Error).message}`);
  }
  // The WebGPU constants (GPUBufferUsage, GPUMapMode, ...) the browser has as globals.
  for (const [k, v] of Object.entries(mod.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  cached = mod.create([]);
  return cached;
}
