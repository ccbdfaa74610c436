// The WebGPU entry point in Node: Dawn's binding (npm `webgpu`, an optional dependency,
// loaded on first use only). Kept outside kernels/webgpu/ so that directory stays
// browser-ready (a browser passes navigator.gpu).
/// <reference types="@webgpu/types" />
import { parseSubmitChunks, type SubmitChunks } from './webgpu/submit-chunks.js';
import { LAUNCH_PROFILES, type LaunchProfile } from './webgpu/launches.js';

interface DawnModule { create(flags: string[]): GPU; globals: Record<string, unknown> }

let cached: GPU | null = null;

/** The optional package `webgpu` (or its native binding) could not be loaded. */
export class WebGpuPackageError extends Error {}

const loadDawn = async (): Promise<DawnModule> => (await import('webgpu')) as unknown as DawnModule;

/** Node's `GPU` object (Dawn), loaded on first use. Throws with the reason when the
 * `webgpu` package or its prebuilt dawn.node cannot be loaded on this platform.
 * `load`: the package loader (tests pass one that fails). */
export async function nodeGpu(load: () => Promise<DawnModule> = loadDawn): Promise<GPU> {
  if (cached && load === loadDawn) return cached;
  let mod: DawnModule;
  try {
    mod = await load();
  } catch (e) {
    throw new WebGpuPackageError(`the webgpu backend needs the optional npm package "webgpu" (Dawn's prebuilt binding) for ` +
      `${process.platform}-${process.arch}, which could not be loaded (${(e as Error).message.split('\n')[0]}); ` +
      'install it with `npm install webgpu@0.6.2`, or use --kernels cpu');
  }
  // The WebGPU constants (GPUBufferUsage, GPUMapMode, ...) the browser has as globals.
  for (const [k, v] of Object.entries(mod.globals)) if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  const gpu = mod.create(dawnFlags(dawnToggles()));
  if (load === loadDawn) cached = gpu;
  return gpu;
}

/** Dawn toggles to enable, from DELTASERVE_DAWN_TOGGLES (comma-separated, e.g.
 * skip_validation): for measuring what they save (docs/kernels.md "Dawn toggles"); none by
 * default. Read when the first GPU object is created. */
export function dawnToggles(env: NodeJS.ProcessEnv = process.env): string[] {
  const raw = env['DELTASERVE_DAWN_TOGGLES'] ?? '';
  const list = raw.split(',').map((t) => t.trim()).filter((t) => t !== '');
  for (const t of list) {
    if (!/^[a-z0-9_]+$/.test(t)) throw new WebGpuPackageError(`DELTASERVE_DAWN_TOGGLES: "${t}" is not a Dawn toggle name (lower_case_with_underscores)`);
  }
  return list;
}

/** Whether read-backs are paced on a CPU adapter (kernels/webgpu/readback-pacer.ts): on
 * unless DELTASERVE_READBACK_PACING=off (a measurement switch, docs/kernels.md). */
export function readbackPacing(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env['DELTASERVE_READBACK_PACING'] ?? 'on';
  if (raw !== 'on' && raw !== 'off') throw new WebGpuPackageError(`DELTASERVE_READBACK_PACING: "${raw}" is not on or off`);
  return raw === 'on';
}

/** Dispatches per submit from DELTASERVE_SUBMIT_CHUNK ("0": one submit a step, "N", or
 * "F,N": the first F then N; kernels/webgpu/submit-chunks.ts), or undefined: the adapter's default. */
export function submitChunks(env: NodeJS.ProcessEnv = process.env): SubmitChunks | undefined {
  const raw = env['DELTASERVE_SUBMIT_CHUNK'];
  if (raw === undefined || raw === '') return undefined;
  const p = parseSubmitChunks(raw);
  if (!p) throw new WebGpuPackageError(`DELTASERVE_SUBMIT_CHUNK: "${raw}" is not 0, N or F,N (dispatches a submit)`);
  return p;
}

/** Whether quantized matmuls of few rows quantize and norm their own input
 * (WebGpuKernels.foldQuantActs) from DELTASERVE_FOLD_QUANT_ACTS=on|off, or undefined: the
 * default (on for a GPU, off for a CPU adapter). A measurement switch: scripts/gpu-bench.sh
 * runs Q4_K_M decode both ways (decode-q4_k_m-unfolded: off). */
export function foldQuantActs(env: NodeJS.ProcessEnv = process.env): boolean | undefined {
  const raw = env['DELTASERVE_FOLD_QUANT_ACTS'];
  if (raw === undefined || raw === '') return undefined;
  if (raw !== 'on' && raw !== 'off') throw new WebGpuPackageError(`DELTASERVE_FOLD_QUANT_ACTS: "${raw}" is not on or off`);
  return raw === 'on';
}

/** The launch profile from DELTASERVE_LAUNCHES=gpu|cpu (kernels/webgpu/launches.ts), or
 * undefined: the adapter's own. `gpu` on lavapipe runs the kernels a GPU runs (the same bits,
 * slower there): scripts/gpu-bench.sh --dry-run uses it to run what the device will. */
export function launchProfile(env: NodeJS.ProcessEnv = process.env): LaunchProfile | undefined {
  const raw = env['DELTASERVE_LAUNCHES'];
  if (raw === undefined || raw === '') return undefined;
  if (!(LAUNCH_PROFILES as readonly string[]).includes(raw)) throw new WebGpuPackageError(`DELTASERVE_LAUNCHES: "${raw}" is not ${LAUNCH_PROFILES.join(' or ')}`);
  return raw as LaunchProfile;
}

/** The `webgpu` package's create() flags enabling `toggles`. */
export function dawnFlags(toggles: readonly string[]): string[] {
  return toggles.length > 0 ? [`enable-dawn-features=${toggles.join(',')}`] : [];
}
