/// <reference types="@webgpu/types" />
// Compiled compute pipelines, one per WGSL source variant (created on first use and cached),
// with explicit bind-group layouts (binding 0: the parameter uniform, a 256-byte window at a
// dynamic offset (dispatch-memory.ts); every declared storage binding, used or not by the
// variant). WebGPU forbids one buffer in two writable bindings
// of a dispatch, so an op whose operands share a buffer (out aliasing an input, in-place
// norms) runs an alias variant: the later binding's name is rewritten to the earlier one's
// and its declaration dropped (offsets still come from the parameters).
// Also: grow-only scratch buffers per purpose (a step's dispatches run in order, so one
// scratch buffer serves every dispatch of a kind; a grown buffer replaces the old one only
// for later recordings — the old one lives until dispose).
import type { GpuAllocator, GpuTensor } from './tensor.js';

const STORAGE_DECL = /@group\(0\) @binding\((\d+)\) var<storage, read_write> (\w+)\s*:[^;]*;\n?/g;
/** Read-only storage bindings (descriptor tables whose values must be uniform per
 * workgroup: a loop bound around barriers). Never aliased with a written binding. */
const READ_DECL = /@group\(0\) @binding\((\d+)\) var<storage, read> (\w+)\s*:[^;]*;\n?/g;

export interface BoundPipeline {
  readonly pipeline: GPUComputePipeline;
  /** Its bind group layout (the one it was created with). */
  readonly layout: GPUBindGroupLayout;
  /** The buffers to bind at 1.., null where a binding was folded into an earlier one. */
  readonly buffers: readonly (GPUBuffer | null)[];
}

interface CompiledPipeline {
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

export class PipelineCache {
  private readonly cache = new Map<string, CompiledPipeline>();
  private readonly sources = new Map<string, string>();

  constructor(private readonly device: GPUDevice) {}

  /** The pipeline of `key` for these buffers (bindings 1.. in order), alias-folded. The
   * common case (no buffer bound twice) builds no string and no array. */
  bind(key: string, source: () => string, buffers: readonly GPUBuffer[]): BoundPipeline {
    if (!hasRepeat(buffers)) {
      const c = this.cache.get(key) ?? this.compileVariant(key, key, source, null);
      return { pipeline: c.pipeline, layout: c.layout, buffers };
    }
    const aliasOf = buffers.map((b, i) => buffers.indexOf(b) === i ? -1 : buffers.indexOf(b));
    const sig = `${key}|${aliasOf.join(',')}`;
    const c = this.cache.get(sig) ?? this.compileVariant(key, sig, source, aliasOf);
    return { pipeline: c.pipeline, layout: c.layout, buffers: buffers.map((b, i) => (aliasOf[i]! >= 0 ? null : b)) };
  }

  private compileVariant(key: string, sig: string, source: () => string, aliasOf: readonly number[] | null): CompiledPipeline {
    let src = this.sources.get(key);
    if (src === undefined) {
      src = source();
      this.sources.set(key, src);
    }
    const c = this.compile(sig, aliasOf ? foldAliases(src, aliasOf) : src);
    this.cache.set(sig, c);
    return c;
  }

  private compile(label: string, code: string): CompiledPipeline {
    const layout = this.device.createBindGroupLayout({ label, entries: layoutEntriesOf(code) });
    const module = this.device.createShaderModule({ code, label });
    const pipeline = this.device.createComputePipeline({
      label,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint: 'main' },
    });
    return { pipeline, layout };
  }

  /** WGSL compile errors of a source (tests). */
  async errors(key: string, source: string): Promise<string[]> {
    const module = this.device.createShaderModule({ code: source, label: key });
    const info = await module.getCompilationInfo();
    return info.messages.filter((m) => m.type === 'error').map((m) => `${key}:${m.lineNum}:${m.linePos} ${m.message}`);
  }
}

/** The bind-group layout of a source: binding 0 the parameter uniform (a dynamic offset),
 * then every declared storage binding, written or read-only. */
export function layoutEntriesOf(code: string): GPUBindGroupLayoutEntry[] {
  const bindings = [...code.matchAll(STORAGE_DECL)].map((m) => Number(m[1]));
  const readOnly = [...code.matchAll(READ_DECL)].map((m) => Number(m[1]));
  return [
    { binding: 0, visibility: 4 /* COMPUTE */, buffer: { type: 'uniform', hasDynamicOffset: true } },
    ...bindings.map((binding) => ({ binding, visibility: 4, buffer: { type: 'storage' as const } })),
    ...readOnly.map((binding) => ({ binding, visibility: 4, buffer: { type: 'read-only-storage' as const } })),
  ];
}

/** Some buffer appears twice (an aliased operand). */
function hasRepeat(buffers: readonly GPUBuffer[]): boolean {
  for (let i = 1; i < buffers.length; i++) {
    for (let j = 0; j < i; j++) if (buffers[i] === buffers[j]) return true;
  }
  return false;
}

/** Rewrite binding i+1 (aliasOf[i] ≥ 0) to the name of binding aliasOf[i]+1. */
function foldAliases(src: string, aliasOf: readonly number[]): string {
  const names = new Map<number, string>();
  for (const m of src.matchAll(STORAGE_DECL)) names.set(Number(m[1]), m[2]!);
  for (const m of src.matchAll(READ_DECL)) names.set(Number(m[1]), m[2]!); // two read-only tables in one upload buffer
  let out = src;
  aliasOf.forEach((a, i) => {
    if (a < 0) return;
    const from = names.get(i + 1);
    const to = names.get(a + 1);
    if (!from || !to) throw new Error(`alias variant: binding ${i + 1} or ${a + 1} not declared`);
    out = out.replace(new RegExp(`@group\\(0\\) @binding\\(${i + 1}\\) var<storage, read(_write)?> ${from}\\s*:[^;]*;\\n?`), '');
    out = out.replace(new RegExp(`\\b${from}\\[`, 'g'), `${to}[`);
  });
  return out;
}

export class ScratchBuffers {
  private readonly current = new Map<string, GpuTensor>();

  constructor(private readonly alloc: GpuAllocator) {}

  /** A tensor of at least `length` elements for `purpose` (contents undefined). */
  get(purpose: string, length: number, elem: 'f32' | 'i32' = 'f32'): GpuTensor {
    const have = this.current.get(purpose);
    if (have && have.length >= length) return have;
    const grown = Math.max(length, Math.ceil((have?.length ?? 0) * 1.5), 64);
    const t = this.alloc.tensor([grown], elem, `scratch:${purpose}`);
    this.current.set(purpose, t);
    return t;
  }
}
