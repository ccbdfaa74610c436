/// <reference types="@webgpu/types" />
// Grouped MoE experts on the GPU (the boundary's moeExperts): the routing stays on the
// device and only routed experts' weights are read. Per layer:
//   1 MOE_PLAN: the router's ids → per-expert counts, first positions and the (row, slot)
//     entries sorted by expert (wgsl/moe.ts), plus the layer's read tally; with
//     MoeFusion.route and ≤ 64 rows the same workgroup routes first and (small inputs)
//     gathers or quantizes the input (planInput);
//   2 the gathered input xg [M·topK, H] (row of each entry, expert order);
//   3 gate and up over each expert's run of xg, every expert in one dispatch (the layer's
//     experts stacked, moe-stack.ts; per-expert dispatches when they cannot be): a fixed
//     grid where a workgroup of an unrouted expert (or a tile past its count) exits before
//     reading a weight. One workgroup per column runs all the expert's 16-row tiles, so each
//     routed weight is read once per call, in prefill too (quantized: each block decoded
//     once, a row's f32 chain continued in the output); float experts past WHOLE_K run
//     ceil(M/16) tiles instead, each reading the weights;
//   4 down over up ⊙ silu(gate) (folded into its loads or its activation quantization),
//     written straight to the entry's slot row; 5 MOE_COMBINE: each row's slots summed in
//     slot order (and MoeFusion.tail: + σ(logit)·shared, residual += the sum).
// Exactness: the GEMMs are row-invariant (a row's value never depends on its tile, slot or
// the other rows), so every (row, slot) gets the bits of its expert's MLP run alone and the
// combine keeps the slot order: a row alone == in a batch, and the bits of the former
// every-expert path. Invariant used: a row's topK ids are distinct (moeRoute's top-k), so
// no expert has more than M entries.
import { TM } from './wgsl/matmul.js';
import { MOE_MAX_EXPERTS, MOE_PLAN, moeCombineShader, moePlanShader } from './wgsl/moe.js';
import { packParams } from './params.js';
import { WHOLE_K } from './wgsl/matmul-group.js';
import type { MoeFusion, MoeTail } from '../types.js';
import { grid } from './wgsl/common.js';
import { isQuantType } from '../quant/formats.js';
import { view, type GpuTensor } from './tensor.js';
import { gpuWeightBytes, type GpuWeight } from './weights.js';
import type { GpuGatedInput, MoeGemm, QuantActs, WebGpuKernels } from './backend.js';
import type { StepEncoder } from './encoder.js';
import { stackedPartWeight, type GpuExpert, type MoeStacks, type StackedKind } from './moe-stack.js';

export type { GpuExpert } from './moe-stack.js';

/** One MoE layer's device tally: u32 [E, 2] = (row tiles run, routed at all) per expert,
 * and each expert's weight bytes (gate + up + down). */
export interface MoeLayerTally {
  readonly tally: GpuTensor;
  readonly bytes: readonly number[];
}

/** Expert weight bytes the grouped GEMMs read (each tile reads its expert's weights once)
 * against the routed-only ideal (each routed expert once per call), counted on the device
 * because only the device knows the routing. Keyed by the layer's first gate weight. */
export class MoeTally {
  private readonly layers = new Map<GpuWeight, MoeLayerTally>();

  constructor(private readonly g: WebGpuKernels) {}

  layer(experts: readonly GpuExpert[]): MoeLayerTally {
    const key = experts[0]!.gate;
    let l = this.layers.get(key);
    if (!l) {
      l = { tally: this.g.alloc.tensor([2 * experts.length], 'u32', 'moe_tally'),
        bytes: experts.map((e) => gpuWeightBytes(e.gate) + gpuWeightBytes(e.up) + gpuWeightBytes(e.down)) };
      this.layers.set(key, l);
    }
    return l;
  }

  /** Zero every layer's tally (queue-ordered: before the next submitted step). */
  restart(): void {
    for (const l of this.layers.values()) this.g.alloc.write(l.tally, new Uint32Array(l.tally.length));
  }

  all(): readonly MoeLayerTally[] {
    return [...this.layers.values()];
  }
}

/** Bytes read and the routed-only ideal from the tallies' read-back words (f32 views of u32). */
export function moeTallyBytes(layers: readonly MoeLayerTally[], words: readonly Float32Array[]): { read: number; ideal: number } {
  let read = 0;
  let ideal = 0;
  layers.forEach((l, i) => {
    const w = words[i]!;
    const u = new Uint32Array(w.buffer, w.byteOffset, w.length);
    l.bytes.forEach((b, e) => {
      read += b * u[2 * e]!;
      ideal += b * u[2 * e + 1]!;
    });
  });
  return { read, ideal };
}

/** out [M, H] = Σ_s weights[i, s]·expert_{ids[i, s]}(x[i]) in slot order; slot: [M·topK, H]. */
export function groupedMoeExperts(g: WebGpuKernels, enc: StepEncoder, tally: MoeTally, stacks: MoeStacks, out: GpuTensor, x: GpuTensor, ids: GpuTensor,
  weights: GpuTensor, m: number, topK: number, experts: readonly GpuExpert[], slot: GpuTensor, fused?: MoeFusion<GpuTensor>): void {
  if (m <= 0 || experts.length === 0) return;
  const ne = experts.length;
  if (ne > MOE_MAX_EXPERTS) throw new RangeError(`moeExperts: ${ne} experts > ${MOE_MAX_EXPERTS}`);
  const { cols: h, rows: ie } = experts[0]!.gate;
  const n = m * topK;
  const plan = g.scratchTensor('moe_plan', 2 * ne + 2 * n, 'i32');
  const t = tally.layer(experts);
  // whole-expert workgroups (each weight read once per call): quantized experts, and float
  // ones whose K fits the registers
  const whole = (h <= WHOLE_K && ie <= WHOLE_K) || experts.every((e) => [e.gate, e.up, e.down].every((w) => isQuantType(w.dtype)));
  const xg = g.scratchTensor('moe_x', n * h);
  const quantGateUp = experts.every((e) => isQuantType(e.gate.dtype) && isQuantType(e.up.dtype));
  const planned = planInput(g, enc, stacks, { plan, ids, weights, x, xg, tally: t.tally, m, n, h, ne, topK, whole }, fused?.route, quantGateUp);
  // gate rows then up rows in one scratch (the stacked gate+up GEMM writes both)
  const gateUp = g.scratchTensor('moe_gate_up', 2 * n * ie);
  const [gate, up] = [view(gateUp, 0, n * ie), view(gateUp, n * ie, n * ie)];
  const tiles = whole ? 1 : Math.ceil(m / TM);
  const gemm = (expert: number, rows: 'gather' | 'scatter'): MoeGemm => ({ plan, expert, experts: ne, rows, whole });
  const stacked = stacks.of(experts);
  const gateUpActs = planned ?? (experts.some((e) => isQuantType(e.gate.dtype) || isQuantType(e.up.dtype)) ? g.quantActs(enc, xg, n, h) : null);
  const gemms = (kinds: readonly { out: GpuTensor; kind: 'gate' | 'up' | 'down' }[], input: GpuTensor, acts: QuantActs | null, k: number, rows: 'gather' | 'scatter',
    gated?: GpuGatedInput): void => {
    const x = { x: input, acts, gated };
    if (stacked) stackedGemms(g, enc, x, rows === 'gather' ? stacked.gateUp : stacked.down, kinds[0]!.out, n, k, tiles, gemm(0, rows));
    else experts.forEach((e, i) => expertGemms(g, enc, x, kinds.map(({ out, kind }) => ({ out, w: e[kind] })), n, k, tiles, gemm(i, rows)));
  };
  // stacked: gate and up as one stack (the up rows land n rows after the gate's: up)
  gemms([{ out: gate, kind: 'gate' }, { out: up, kind: 'up' }], xg, gateUpActs, h, 'gather');
  // the down input up ⊙ silu(gate), folded where the bits allow: into the activation
  // quantization (quantized experts: quantActs' gate) or the float GEMM's loads (its gate)
  const downQuant = experts.filter((e) => isQuantType(e.down.dtype)).length;
  const silu: GpuGatedInput = { b: gate, act: 'silu' };
  if (downQuant > 0 && downQuant < ne) g.mulSilu(enc, up, up, gate, n * ie);
  const downActs = downQuant === 0 ? null : g.quantActs(enc, up, n, ie, downQuant === ne ? silu : undefined);
  gemms([{ out: slot, kind: 'down' }], up, downActs, ie, 'scatter', downQuant === 0 ? silu : undefined);
  combine(g, enc, out, slot, weights, m, topK, h, fused?.tail);
}

/** out = each row's slots summed in slot order; tail: + σ(logit)·shared, residual += out. */
function combine(g: WebGpuKernels, enc: StepEncoder, out: GpuTensor, slot: GpuTensor, weights: GpuTensor, m: number, topK: number, h: number,
  tail: MoeTail<GpuTensor> | undefined): void {
  const kind = tail ? (tail.shared ? 'shared' : 'residual') : null;
  const sh = tail?.shared;
  g.run(enc, `moe_combine${kind ? `_${kind}` : ''}`, () => moeCombineShader(kind), packParams('moe_combine', { m, topK, h, outOff: out.offset, slotOff: slot.offset,
    wOff: weights.offset, resOff: tail?.residual.offset ?? 0, yOff: sh?.y.offset ?? 0, gOff: sh?.logit.offset ?? 0 }), null,
  [out.buffer, slot.buffer, weights.buffer, ...(tail ? [tail.residual.buffer] : []), ...(sh ? [sh.y.buffer, sh.logit.buffer] : [])], grid(Math.ceil((m * h) / 64)), 'moe_combine');
}

interface PlanOperands {
  readonly plan: GpuTensor; readonly ids: GpuTensor; readonly weights: GpuTensor; readonly x: GpuTensor; readonly xg: GpuTensor; readonly tally: GpuTensor;
  readonly m: number; readonly n: number; readonly h: number; readonly ne: number; readonly topK: number; readonly whole: boolean;
}

/** Storage buffers of the fused plan that also quantizes (wgsl/moe.ts 'quant'). */
const QUANT_PLAN_BINDINGS = 9;

/** The plan and the gate/up input: with a routing call of at most fusedRouteRows rows, one
 * workgroup routes, plans and, for a small input (fusedGatherElements), gathers it (float
 * gate/up) or quantizes the gathered rows (every gate/up quantized, where the device binds
 * 9 storage buffers): that quantization is returned; else the router (if asked), the plan
 * and the gather run apart, and null is returned (moeExperts quantizes xg). */
function planInput(g: WebGpuKernels, enc: StepEncoder, stacks: MoeStacks, p: PlanOperands, route: MoeFusion<GpuTensor>['route'],
  quantGateUp: boolean): QuantActs | null {
  const { plan, ids, weights, x, xg, tally, m, n, h, ne, topK, whole } = p;
  const planParams = { n, e: ne, idsOff: ids.offset, rowsPerRead: whole ? 0 : TM, topK };
  if (!route || m > stacks.fusedRouteRows) {
    if (route) g.moeRoute(enc, ids, weights, route.logits, m, ne, topK, route.renormalize);
    g.run(enc, 'moe_plan', () => MOE_PLAN, packParams('moe_plan', planParams), null, [plan.buffer, ids.buffer, tally.buffer], [1, 1, 1], 'moe_plan');
    g.gatherRows(enc, xg, x, view(plan, 2 * ne + n, n), n, h);
    return null;
  }
  const small = n * h <= stacks.fusedGatherElements;
  const kind = !small ? 'route' : quantGateUp && g.adapter.limits.maxStorageBuffersPerShaderStage >= QUANT_PLAN_BINDINGS ? 'quant' : 'gather';
  const dot4 = g.adapter.features.dot4I8;
  const acts = kind === 'quant' ? g.actScratch(n, h) : null;
  const buffers = kind === 'quant' ? [x.buffer, acts!.qx.buffer, acts!.dx.buffer, acts!.sx.buffer] : kind === 'gather' ? [x.buffer, xg.buffer] : [];
  g.run(enc, `moe_route_plan_${kind}${kind === 'quant' && !dot4 ? '_nodot4' : ''}`, () => moePlanShader(kind, dot4), packParams('moe_route_plan', { ...planParams, m,
    renormalize: route.renormalize ? 1 : 0, wOff: weights.offset, logitsOff: route.logits.offset, h, xOff: x.offset, xgOff: xg.offset }), null,
  [plan.buffer, ids.buffer, tally.buffer, weights.buffer, route.logits.buffer, ...buffers], [1, 1, 1], 'moe_plan');
  if (kind === 'route') g.gatherRows(enc, xg, x, view(plan, 2 * ne + n, n), n, h);
  return acts;
}

/** A GEMM input: the rows, their quantization (quantized weights), and the float
 * weights' gated input (x ⊙ act(b), read in the loads). */
interface GemmInput {
  readonly x: GpuTensor;
  readonly acts: QuantActs | null;
  readonly gated: GpuGatedInput | undefined;
}

/** One expert's matmuls of one input: float weights of a dtype as segments of one dispatch,
 * quantized ones over the shared quantized activations. */
function expertGemms(g: WebGpuKernels, enc: StepEncoder, input: GemmInput, mats: readonly { out: GpuTensor; w: GpuWeight }[],
  n: number, k: number, tiles: number, moe: MoeGemm): void {
  for (const { out, w } of mats) {
    if (w.cols !== k) throw new RangeError(`moeExperts: expert ${moe.expert} has ${w.cols} input columns, not ${k}`);
    if (isQuantType(w.dtype)) g.quantWeightMatmul(enc, input.acts!, out, w, n, k, tiles, false, moe);
  }
  for (const dtype of ['f32', 'bf16', 'f16'] as const) {
    const segs = mats.filter((s) => s.w.dtype === dtype).flatMap((s) => s.w.parts.map((part) => ({ out: s.out, n: s.w.rows, part })));
    for (let i = 0; i < segs.length; i += g.groupSegments) {
      g.floatSegments(enc, input.x, n, k, tiles, dtype, segs.slice(i, i + g.groupSegments), false, undefined, input.gated, moe);
    }
  }
}

/** Every stacked expert's matmul of one input at once: one dispatch per part of the stack
 * (per quantized weight, or the float dtype's), its grid z spanning the part's experts (an
 * expert without routed rows exits before reading a weight). */
function stackedGemms(g: WebGpuKernels, enc: StepEncoder, input: GemmInput, kind: StackedKind, out: GpuTensor, n: number, k: number, tiles: number,
  moe: MoeGemm): void {
  for (const part of kind.parts) expertGemms(g, enc, input, [{ out, w: stackedPartWeight(kind, part) }], n, k, tiles, { ...moe, expert: part.first, span: part.count });
}
