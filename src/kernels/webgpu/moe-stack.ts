/// <reference types="@webgpu/types" />
// A MoE layer's experts stacked on the GPU, so one dispatch runs every expert's gate and up,
// and one every expert's down (moe.ts): the gate weights then the up weights (2E stacked
// experts: s < E is gate s, s ≥ E up s − E), and the down weights, copied back to back
// into parts of whole experts, stacked expert s at bytes (s − first of its part)·expertBytes
// of its part — the rows a MoE GEMM reads for expert ex (wgsl/matmul.ts moeWeightRow; the
// plan's expert is ex mod E and an up's output rows follow the gate's, moeOutRow). The per-expert buffers are copied on
// the queue (ordered after their uploads, before any later submit) and destroyed: the
// stacked copy is the only one, so device memory does not grow. A stacked expert's own
// handle is then refused by the plain matmuls (WebGpuBoundaryKernels.gpuWeight).
import type { WebGpuKernels } from './backend.js';
import type { GpuWeight } from './weights.js';

export interface GpuExpert {
  readonly gate: GpuWeight;
  readonly up: GpuWeight;
  readonly down: GpuWeight;
}

/** One weight part of stacked experts first .. first + count − 1. */
export interface StackedPart {
  readonly buffer: GPUBuffer;
  readonly first: number;
  readonly count: number;
}

export interface StackedKind {
  readonly like: GpuWeight;
  readonly parts: readonly StackedPart[];
}

export interface StackedExperts {
  /** 2E stacked experts: every gate, then every up. */
  readonly gateUp: StackedKind;
  readonly down: StackedKind;
}

const KINDS = ['gate', 'up', 'down'] as const;

/** Why a layer's experts cannot be stacked (they then run one dispatch per expert), or null. */
export function unstackableReason(experts: readonly GpuExpert[], maxBinding: number): string | null {
  const { gate, up } = experts[0]!;
  if (gate.dtype !== up.dtype || gate.rows !== up.rows || gate.cols !== up.cols) return 'gate and up differ in type or shape';
  for (const kind of KINDS) {
    const w0 = experts[0]![kind];
    for (const e of experts) {
      const w = e[kind];
      if (w.dtype !== w0.dtype || w.rows !== w0.rows || w.cols !== w0.cols) return `${kind}: experts differ in type or shape`;
      if (w.parts.length !== 1) return `${kind}: an expert is split in parts`;
    }
    const bytes = w0.rows * w0.rowBytes;
    if (bytes % 4 !== 0) return `${kind}: ${bytes} bytes per expert is not a whole number of words`;
    if (bytes > maxBinding) return `${kind}: one expert exceeds the storage binding limit`;
  }
  return null;
}

/** Stacked experts per layer (keyed by the layer's first gate weight); moved: the
 * per-expert weights whose buffers were stacked and destroyed. */
export class MoeStacks {
  private readonly layers = new Map<GpuWeight, StackedExperts | null>();
  private readonly moved = new WeakSet<GpuWeight>();
  /** false: layers first seen now run one dispatch per expert (the tests' per-expert path). */
  enabled = true;
  /** Bytes per stacked part (default: the storage binding limit); smaller splits a layer's
   * experts over more parts (tests). */
  partBytes: number | null = null;
  /** A moeExperts call that routes (MoeFusion.route) routes and plans in one workgroup up
   * to this many rows (the router's own dispatch holds 64), and also gathers its input up to
   * this many elements (a decode step's few rows; more keep the wide gather dispatch). */
  fusedRouteRows = 64;
  fusedGatherElements = 1 << 16;

  constructor(private readonly g: WebGpuKernels) {}

  isMoved(w: GpuWeight): boolean {
    return this.moved.has(w);
  }

  /** The layer's stacked experts (stacking them on first use), or null: per-expert dispatches. */
  of(experts: readonly GpuExpert[]): StackedExperts | null {
    const key = experts[0]!.gate;
    if (this.layers.has(key)) return this.layers.get(key)!;
    const maxBinding = this.partBytes ?? this.g.adapter.limits.maxStorageBufferBindingSize;
    const stackable = this.enabled && !experts.some((e) => KINDS.some((k) => this.moved.has(e[k]))) && unstackableReason(experts, maxBinding) === null;
    const stacked = stackable ? this.stack(experts, maxBinding) : null;
    this.layers.set(key, stacked);
    return stacked;
  }

  private stack(experts: readonly GpuExpert[], maxBinding: number): StackedExperts {
    const enc = this.g.device.createCommandEncoder({ label: 'moe_stack' });
    const kind = (label: string, weights: readonly GpuWeight[]): StackedKind => {
      const like = weights[0]!;
      const bytes = like.rows * like.rowBytes;
      const perPart = Math.floor(maxBinding / bytes);
      const parts: StackedPart[] = [];
      for (let first = 0; first < weights.length; first += perPart) {
        const count = Math.min(perPart, weights.length - first);
        const buffer = this.g.alloc.buffer(count * bytes, `experts_${label}[${first}..${first + count})`);
        for (let i = 0; i < count; i++) enc.copyBufferToBuffer(weights[first + i]!.parts[0]!.buffer, 0, buffer, i * bytes, bytes);
        parts.push({ buffer, first, count });
      }
      return { like, parts };
    };
    const stacked = { gateUp: kind('gate_up', [...experts.map((e) => e.gate), ...experts.map((e) => e.up)]), down: kind('down', experts.map((e) => e.down)) };
    this.g.device.queue.submit([enc.finish()]);
    // destroyed after the submit: the copies already queued still read them
    for (const e of experts) {
      for (const k of KINDS) {
        this.moved.add(e[k]);
        this.g.alloc.free(e[k].parts[0]!.buffer);
      }
    }
    return stacked;
  }
}

/** Part p of a stacked kind as a one-expert-wide weight (rows = one expert's), its buffer
 * holding the part's experts back to back: the MoE GEMMs' operand with MoeGemm.span. */
export function stackedPartWeight(kind: StackedKind, part: StackedPart): GpuWeight {
  const w = kind.like;
  return { dtype: w.dtype, rows: w.rows, cols: w.cols, rowBytes: w.rowBytes, parts: [{ buffer: part.buffer, row0: 0, rows: w.rows }] };
}
