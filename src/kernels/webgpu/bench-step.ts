/// <reference types="@webgpu/types" />
// A synthetic decode / verify step of a hybrid model shape on the webgpu kernels, for the
// GPU benchmark (scripts/bench-webgpu.mjs): every layer's ops at the model's real shapes
// on random weights, M rows (M sequences of one token, each with `ctx` cached tokens), the
// final norm, lm_head and argmax — and the traffic accounting a GPU rewards:
//  - weight bytes each matmul streams: the weight once per tile of TM rows (the kernel's
//    design), against the ideal of each weight byte once per step;
//  - KV bytes attention reads; dispatches per step.
import type { WebGpuKernels, GpuKvLayer } from './backend.js';
import { ropeTable } from './backend.js';
import type { StepEncoder } from './encoder.js';
import type { GpuTensor } from './tensor.js';
import { gpuWeightBytes, gpuRowBytes, type GpuWeight, type GpuWeightDType } from './weights.js';
import { TM } from './wgsl/matmul.js';
import { isQuantType, QUANT_FORMATS } from '../quant/formats.js';

export interface StepShape {
  readonly hidden: number; readonly layers: number; readonly vocab: number; readonly intermediate: number;
  readonly fullAttentionInterval: number;
  readonly heads: number; readonly kvHeads: number; readonly headDim: number; readonly partialRotary: number;
  readonly linKeyHeads: number; readonly linValueHeads: number; readonly linKeyDim: number; readonly linValueDim: number;
  readonly convKernel: number;
}

interface Layer {
  readonly full: boolean;
  readonly mats: Record<string, GpuWeight>;
  readonly norm: GpuTensor;
  readonly kv: GpuKvLayer | null;
  readonly conv: GpuTensor | null;
  /** A_log and dt_bias of a linear layer ([HV] each). */
  readonly gates: [GpuTensor, GpuTensor] | null;
}

/** Random bytes of a weight, with every f16 scale field set to a small normal value. */
function randomWeightBytes(dtype: GpuWeightDType, rows: number, cols: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(rows * gpuRowBytes(dtype, cols));
  let s = seed >>> 0;
  for (let i = 0; i < bytes.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    bytes[i] = s >>> 24;
  }
  const scale = 0x2000; // f16 2^-7
  if (isQuantType(dtype)) {
    const { blockBytes } = QUANT_FORMATS[dtype];
    const fields = dtype === 'q6_k' ? [208] : dtype === 'q4_1' || dtype === 'q5_1' || dtype.endsWith('_k') ? [0, 2] : [0];
    for (let b = 0; b < bytes.length; b += blockBytes) for (const f of fields) { bytes[b + f] = scale & 0xff; bytes[b + f + 1] = scale >> 8; }
  } else if (dtype === 'bf16' || dtype === 'f16') {
    const v = new Uint16Array(bytes.buffer);
    for (let i = 0; i < v.length; i++) v[i] = dtype === 'bf16' ? 0x3c00 | (v[i]! & 0x80ff) : 0x2000 | (v[i]! & 0x83ff);
  } else {
    const v = new Float32Array(bytes.buffer);
    for (let i = 0; i < v.length; i++) v[i] = ((i * 2654435761) % 1000) / 1e5;
  }
  return bytes;
}

export class BenchModel {
  readonly layers: Layer[] = [];
  readonly lmHead: GpuWeight;
  readonly finalNorm: GpuTensor;
  /** Weight bytes on the GPU (every matmul operand). */
  weightBytes = 0;

  constructor(readonly g: WebGpuKernels, readonly s: StepShape, readonly dtype: GpuWeightDType, readonly pageSize: number, readonly maxCtx: number) {
    let seed = 1;
    const mat = (rows: number, cols: number, label: string): GpuWeight => {
      const w = g.uploadWeightBytes(dtype, rows, cols, randomWeightBytes(dtype, rows, cols, seed++), label);
      this.weightBytes += gpuWeightBytes(w);
      return w;
    };
    const vec = (n: number): GpuTensor => g.alloc.upload(Float32Array.from({ length: n }, (_, i) => 1 + (i % 7) / 100));
    const H = s.hidden;
    const qkvW = 2 * s.linKeyHeads * s.linKeyDim + s.linValueHeads * s.linValueDim;
    for (let i = 0; i < s.layers; i++) {
      const full = (i + 1) % s.fullAttentionInterval === 0;
      const mats: Record<string, GpuWeight> = full
        ? { q: mat(2 * s.heads * s.headDim, H, 'q'), k: mat(s.kvHeads * s.headDim, H, 'k'), v: mat(s.kvHeads * s.headDim, H, 'v'), o: mat(H, s.heads * s.headDim, 'o') }
        : { qkv: mat(qkvW, H, 'qkv'), z: mat(s.linValueHeads * s.linValueDim, H, 'z'), b: mat(s.linValueHeads, H, 'b'), a: mat(s.linValueHeads, H, 'a'), out: mat(H, s.linValueHeads * s.linValueDim, 'out') };
      mats['gate'] = mat(s.intermediate, H, 'gate');
      mats['up'] = mat(s.intermediate, H, 'up');
      mats['down'] = mat(H, s.intermediate, 'down');
      const pages = Math.ceil(maxCtx / pageSize);
      const kvLen = pages * pageSize * s.kvHeads * s.headDim;
      const kv = full ? { k: g.alloc.tensor([kvLen]), v: g.alloc.tensor([kvLen]), pageSize } : null;
      const gates: [GpuTensor, GpuTensor] | null = full ? null : [vec(s.linValueHeads), vec(s.linValueHeads)];
      this.layers.push({ full, mats, norm: vec(H), kv, conv: full ? null : vec(qkvW * s.convKernel), gates });
    }
    this.finalNorm = vec(H);
    this.lmHead = mat(s.vocab, H, 'lm_head');
  }
}

export interface StepTraffic {
  /** Bytes of weights the matmuls stream (once per TM-row tile). */
  readonly weightBytesRead: number;
  /** The ideal: each weight byte once per step. */
  readonly weightBytesIdeal: number;
  readonly kvBytesRead: number;
}

/** Record one decode step of M sequences (each at position ctx). Returns the traffic. */
export function encodeStep(model: BenchModel, enc: StepEncoder, m: number, ctx: number, out: GpuTensor): StepTraffic {
  const { g, s } = model;
  const H = s.hidden;
  const scratch = stepScratch(model, m, ctx);
  let read = 0;
  let ideal = 0;
  let kvRead = 0;
  const mm = (o: GpuTensor, x: GpuTensor, w: GpuWeight) => {
    g.matmul(enc, o, x, w, m);
    read += gpuWeightBytes(w) * Math.ceil(m / TM);
    ideal += gpuWeightBytes(w);
  };
  const { x, h, t1, t2, t3, t4, g1, g2, pt, cs } = scratch;
  for (const L of model.layers) {
    g.rmsNorm(enc, h, x, L.norm, m, 1e-6, true);
    if (L.full && L.kv) {
      const qd = s.heads * s.headDim;
      const kvd = s.kvHeads * s.headDim;
      mm(t1, h, L.mats['q']!);
      mm(t2, h, L.mats['k']!);
      mm(t3, h, L.mats['v']!);
      g.rope(enc, t1, cs, m, s.heads, s.headDim, s.headDim * s.partialRotary, 2 * qd);
      g.rope(enc, t2, cs, m, s.kvHeads, s.headDim, s.headDim * s.partialRotary, kvd);
      for (let r = 0; r < m; r++) {
        const tab = view(pt, r * Math.ceil(model.maxCtx / model.pageSize), Math.ceil(model.maxCtx / model.pageSize));
        g.kvWrite(enc, L.kv, tab, ctx, view(t2, r * kvd, kvd), view(t3, r * kvd, kvd), 1, kvd);
        g.attention(enc, view(t4, r * qd, qd), view(t1, r * 2 * qd, 2 * qd), 2 * qd, L.kv, tab, ctx, 1, { numHeads: s.heads, numKvHeads: s.kvHeads, headDim: s.headDim });
        kvRead += 2 * (ctx + 1) * kvd * 4;
      }
      g.mulSigmoid(enc, t4, t4, t1, m * qd);
      mm(t1, t4, L.mats['o']!);
    } else {
      const qkvW = 2 * s.linKeyHeads * s.linKeyDim + s.linValueHeads * s.linValueDim;
      const vd = s.linValueHeads * s.linValueDim;
      mm(t1, h, L.mats['qkv']!);
      mm(t2, h, L.mats['z']!);
      mm(g1, h, L.mats['a']!);
      mm(g2, h, L.mats['b']!);
      g.gdnGates(enc, scratch.gG, scratch.gB, g1, g2, L.gates![0], L.gates![1], m);
      for (let r = 0; r < m; r++) {
        g.causalConv(enc, view(t3, r * qkvW, qkvW), view(t1, r * qkvW, qkvW), view(scratch.conv, r * 3 * qkvW, 3 * qkvW), L.conv!, qkvW, 1);
        g.gdnRecurrent(enc, view(t4, r * vd, vd), view(t3, r * qkvW, qkvW), view(scratch.gG, r * s.linValueHeads, s.linValueHeads),
          view(scratch.gB, r * s.linValueHeads, s.linValueHeads), view(scratch.state, r * scratch.stateLen, scratch.stateLen),
          { numKeyHeads: s.linKeyHeads, numValueHeads: s.linValueHeads, keyDim: s.linKeyDim, valueDim: s.linValueDim }, 1);
      }
      g.gatedRmsNorm(enc, t4, t4, t2, scratch.normV, m * s.linValueHeads, 1e-6);
      mm(t1, t4, L.mats['out']!);
    }
    g.add(enc, x, x, t1, m * H);
    g.rmsNorm(enc, h, x, L.norm, m, 1e-6, true);
    mm(t1, h, L.mats['gate']!);
    mm(t2, h, L.mats['up']!);
    g.mulSilu(enc, t1, t2, t1, m * s.intermediate);
    mm(t3, t1, L.mats['down']!);
    g.add(enc, x, x, t3, m * H);
  }
  g.rmsNorm(enc, h, x, model.finalNorm, m, 1e-6, true);
  mm(scratch.logits, h, model.lmHead);
  g.argmax(enc, out, scratch.logits, m, s.vocab);
  return { weightBytesRead: read, weightBytesIdeal: ideal, kvBytesRead: kvRead };
}

const scratchCache = new WeakMap<BenchModel, Map<number, ReturnType<typeof makeScratch>>>();

function stepScratch(model: BenchModel, m: number, ctx: number) {
  let byM = scratchCache.get(model);
  if (!byM) scratchCache.set(model, (byM = new Map()));
  let sc = byM.get(m);
  if (!sc) byM.set(m, (sc = makeScratch(model, m)));
  model.g.alloc.write(sc.cs, ropeTable(Array.from({ length: m }, () => ctx), m, model.s.headDim * model.s.partialRotary, 1e7));
  return sc;
}

function makeScratch(model: BenchModel, m: number) {
  const { s, g } = model;
  const a = g.alloc;
  const qkvW = 2 * s.linKeyHeads * s.linKeyDim + s.linValueHeads * s.linValueDim;
  const wide = Math.max(qkvW, 2 * s.heads * s.headDim, s.intermediate, s.hidden);
  const pagesPerSeq = Math.ceil(model.maxCtx / model.pageSize);
  const stateLen = s.linValueHeads * s.linKeyDim * s.linValueDim;
  return {
    x: a.upload(Float32Array.from({ length: m * s.hidden }, (_, i) => ((i * 7919) % 200) / 100 - 1)),
    h: a.tensor([m, s.hidden]), t1: a.tensor([m, wide]), t2: a.tensor([m, wide]), t3: a.tensor([m, wide]), t4: a.tensor([m, wide]),
    g1: a.tensor([m, s.linValueHeads]), g2: a.tensor([m, s.linValueHeads]),
    gG: a.tensor([m, s.linValueHeads]), gB: a.tensor([m, s.linValueHeads]),
    conv: a.tensor([m, 3, qkvW]),
    state: a.tensor([m * stateLen]), stateLen,
    normV: a.upload(new Float32Array(s.linValueDim).fill(1)),
    pt: a.upload(Int32Array.from({ length: m * pagesPerSeq }, (_, i) => i % pagesPerSeq)),
    cs: a.tensor([m * s.headDim * s.partialRotary]),
    logits: a.tensor([m, s.vocab]),
  };
}

function view(t: GpuTensor, start: number, length: number): GpuTensor {
  return { ...t, offset: t.offset + start, length, shape: [length] };
}
