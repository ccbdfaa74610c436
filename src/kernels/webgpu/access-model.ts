// A GPU memory-access model of recorded webgpu dispatches (scripts/gpu-access-model.mjs):
// per dispatch the bytes it must move, the workgroups it launches against a GPU's SMs, and
// the pattern of its weight loads — bytes per 32-lane warp per load instruction and the
// 32-byte sectors those touch — read off the WGSL (wgsl/matmul-group.ts, matmul.ts,
// quant.ts): each weight-load site is re-enumerated here lane by lane with the shader's own
// index expressions. From those, an attainable fraction of the GPU's DRAM bandwidth:
//   time = max(bytes / peak,                       (DRAM)
//              bytes / (SMs · warps/SM · inflight / latency),   (Little's law: loads in flight)
//              L1 sectors / (SMs · sectors per clock · clock))  (the load/store unit)
//          + a fixed gap per dispatch (launch and the barrier between dependent dispatches).
// A model, not a measurement: docs/kernels.md "GPU memory-access model" states every
// assumption, and the JSON repeats them.
import type { QuantType } from '../quant/formats.js';
import { floatChunkElems, type FloatLoads } from './wgsl/float-chunks.js';

/** A GPU's figures the model uses (public spec sheets; latency and gap: assumptions). */
export interface GpuSpec {
  readonly name: string;
  readonly sms: number;
  readonly peakBytesPerS: number;
  /** Loaded DRAM latency (ns): a warp's load waits this long. */
  readonly latencyNs: number;
  readonly clockHz: number;
  /** 32-byte L1 sectors an SM's load/store unit serves per clock. */
  readonly l1SectorsPerClock: number;
  readonly maxWarpsPerSm: number;
  readonly maxBlocksPerSm: number;
  readonly sharedBytesPerSm: number;
  /** GPU time between two dependent dispatches of one pass (drain, barrier, launch), µs. */
  readonly gapUs: number;
}

export const GPUS: Readonly<Record<'h100' | 'h200', GpuSpec>> = {
  h100: { name: 'H100 SXM (HBM3 3.35 TB/s)', sms: 132, peakBytesPerS: 3.35e12, latencyNs: 650, clockHz: 1.755e9, l1SectorsPerClock: 4,
    maxWarpsPerSm: 64, maxBlocksPerSm: 32, sharedBytesPerSm: 228 * 1024, gapUs: 2 },
  h200: { name: 'H200 (HBM3e 4.8 TB/s)', sms: 132, peakBytesPerS: 4.8e12, latencyNs: 650, clockHz: 1.755e9, l1SectorsPerClock: 4,
    maxWarpsPerSm: 64, maxBlocksPerSm: 32, sharedBytesPerSm: 228 * 1024, gapUs: 2 },
};

/** One load instruction of a warp: the byte ranges its active lanes read (start, length). */
export type WarpLoad = readonly (readonly [number, number])[];

/** Bytes a warp load asks for (distinct) and the 32-byte sectors it touches. */
export function loadFacts(load: WarpLoad): { bytes: number; sectors: Set<number> } {
  const bytes = new Set<number>();
  const sectors = new Set<number>();
  for (const [start, len] of load) for (let b = start; b < start + len; b++) { bytes.add(b); sectors.add(Math.floor(b / 32)); }
  return { bytes: bytes.size, sectors };
}

const lanes = (f: (lane: number) => readonly [number, number] | null): WarpLoad =>
  Array.from({ length: 32 }, (_, l) => f(l)).filter((r): r is readonly [number, number] => r !== null);
const word = (i: number): readonly [number, number] => [4 * i, 4];

/** The weight loads of one loop iteration of warp 0 (threads 0..31) of a float matmul,
 * column 1, iteration 0. Unit loads (matmul-group.ts / float-chunks.ts 'vec4', 'vec4w':
 * `for (var u0 = t; u0 < ku; u0 += 128u) { ... w0 = wu(col * ku + u0); ... w1 = wu(col * ku + u1)`,
 * ku = K / 4, u1 = u0 + 64): wu reads W[u], a vec2<u32> (bf16, f16: 8 bytes) or a
 * vec4<u32> (f32: 16 bytes). 'element' (`for (var k = t; k < K; k += 64u) { let w =
 * wf(col * K + k); ...`): wf reads u32 word i >> 1 (bf16, f16) or i (f32). */
export function floatWeightLoads(dtype: 'f32' | 'bf16' | 'f16', k: number, loads: FloatLoads = 'vec4'): WarpLoad[] {
  const col = 1;
  if (loads !== 'element') {
    const ku = k / floatChunkElems(dtype);
    const bytes = dtype === 'f32' ? 16 : 8;
    return [0, 64].map((h) => lanes((t) => [bytes * (col * ku + h + t), bytes]));
  }
  return [lanes((t) => word(dtype === 'f32' ? col * k + t : (col * k + t) >> 1))];
}

/** The loads of one f32 input array (x; the gate and the folded norm's weight alike) per
 * tile row in one loop iteration of warp 0: unit loads read unit u's 4 elements from
 * element 4u — xq(xo + 4u·u0), xq(xo + 4u·u1): a vec4<f32> each ('vec4') or 4 scalars each
 * ('vec4w'); the element path reads element t (coalesced). Byte offsets within the array. */
export function floatInputLoads(_dtype: 'f32' | 'bf16' | 'f16', loads: FloatLoads): WarpLoad[] {
  if (loads === 'element') return [lanes((t) => word(t))];
  const out: WarpLoad[] = [];
  for (const h of [0, 64]) {
    if (loads === 'vec4') out.push(lanes((t) => [16 * (h + t), 16]));
    else for (let i = 0; i < 4; i++) out.push(lanes((t) => word(4 * (h + t) + i)));
  }
  return out;
}

/** word_at(off) of quant.ts: W[off >> 2], and W[(off >> 2) + 1] in a second (divergent)
 * load for the lanes whose off is not 4-aligned. */
function wordAt(offs: readonly number[]): WarpLoad[] {
  const first = offs.map((o) => word(o >> 2));
  const second = offs.filter((o) => (o & 3) !== 0).map((o) => word((o >> 2) + 1));
  return second.length > 0 ? [first, second] : [first];
}
/** b8(i): the word W[i >> 2]. */
const b8 = (offs: readonly number[]): WarpLoad[] => [offs.map((o) => word(o >> 2))];
/** f16at(i): b8(i), b8(i + 1). */
const f16at = (offs: readonly number[]): WarpLoad[] => [...b8(offs), ...b8(offs.map((o) => o + 1))];

/** The lanes of warp `warp` (0 or 1) of the tiled quantized matmul (matmul.ts quantTiledBody)
 * in iteration i of its word loop: thread t = 32·warp + lane reads word w = t & 7 of block
 * jb = (t >> 3) + 8i of the first 64-block chunk. */
function laneBlocks(warp: number, i: number): { jb: number; w: number }[] {
  return Array.from({ length: 32 }, (_, lane) => { const t = 32 * warp + lane; return { jb: (t >> 3) + 8 * i, w: t & 7 }; });
}

/** The weight loads of one 64-block chunk by warp `warp` of the tiled quantized matmul
 * (column 1, row = rowBytes): the 8 word loads per lane (packed_word, quant.ts PACKED_BODIES,
 * word w of block jb), Q6_K's per-lane int scales (packed_q6), then the block heads thread t
 * decodes for block t (packed_head). Types the decode shapes use. */
export function quantWeightLoads(type: QuantType, rowBytes: number, warp = 0): WarpLoad[] {
  const row = rowBytes;
  const out: WarpLoad[] = [];
  const words = (at: (jb: number, w: number) => number): void => {
    for (let i = 0; i < 8; i++) out.push(...wordAt(laneBlocks(warp, i).map(({ jb, w }) => at(jb, w))));
  };
  const heads = Array.from({ length: 32 }, (_, lane) => 32 * warp + lane);
  if (type === 'q8_0') {
    words((jb, w) => row + jb * 34 + 2 + 4 * w);
    out.push(...f16at(heads.map((j) => row + j * 34)));
  } else if (type === 'q4_k') {
    const p = (j: number): number => row + Math.floor(j / 8) * 144;
    words((jb, w) => p(jb) + 16 + ((jb % 8) >> 1) * 32 + 4 * w);
    // scale_min_k4(p + 4, s): s < 4 reads b8(p+4+s), b8(p+8+s); else 4 bytes (both branches run in a warp)
    out.push(...b8(heads.map((j) => p(j) + 4 + (j % 8))), ...b8(heads.map((j) => p(j) + 8 + (j % 8))));
    out.push(...b8(heads.map((j) => p(j) + 4 + (j % 8) + 4)), ...b8(heads.map((j) => p(j) + 4 + (j % 8) - 4)));
    out.push(...f16at(heads.map(p)), ...f16at(heads.map((j) => p(j) + 2)));
  } else if (type === 'q6_k') {
    const p = (j: number): number => row + Math.floor(j / 8) * 210;
    const e0 = (j: number): number => (j % 8) * 32;
    const ql = (j: number): number => p(j) + (e0(j) >> 7) * 64 + (((e0(j) & 127) >> 5) & 1) * 32;
    const qh = (j: number): number => p(j) + 128 + (e0(j) >> 7) * 32;
    for (let i = 0; i < 8; i++) {
      const lb = laneBlocks(warp, i);
      out.push(...wordAt(lb.map(({ jb, w }) => ql(jb) + 4 * w)), ...wordAt(lb.map(({ jb, w }) => qh(jb) + 4 * w)));
      out.push(...b8(lb.map(({ jb }) => p(jb) + 192 + (e0(jb) >> 4))), ...b8(lb.map(({ jb }) => p(jb) + 193 + (e0(jb) >> 4))));
    }
    out.push(...f16at(heads.map((j) => p(j) + 208)), ...b8(heads.map((j) => p(j) + 192 + (e0(j) >> 4))), ...b8(heads.map((j) => p(j) + 193 + (e0(j) >> 4))));
  } else {
    throw new RangeError(`access model: no load pattern for ${type} yet`);
  }
  return out;
}

/** The activation loads of one chunk by warp `warp`, one row (matmul.ts quantTiledBody):
 * per word-loop iteration QX[(j·32)/4 + w] (lane-consecutive words) and, where the lane's
 * share carries the bias or Q6_K term, SX[j] (select reads it on every lane); then thread t's
 * DX[t] (and SX[t] for the offset types). Byte offsets within each array. */
export function quantActLoads(type: QuantType, warp = 0): WarpLoad[] {
  const out: WarpLoad[] = [];
  const sxInShare = type !== 'q8_0' && type !== 'q4_1' && type !== 'q5_1' && type !== 'q4_k' && type !== 'q5_k';
  for (let i = 0; i < 8; i++) {
    const lb = laneBlocks(warp, i);
    out.push(lb.map(({ jb, w }) => word(jb * 8 + w)));
    if (sxInShare) out.push(lb.map(({ jb }) => word(jb)));
  }
  const heads = lanes((lane) => word(32 * warp + lane));
  out.push(heads);
  if (type === 'q4_1' || type === 'q5_1' || type === 'q4_k' || type === 'q5_k') out.push(heads);
  return out;
}

/** A chunk of the tiled quantized matmul averaged over the workgroup's 2 warps (DRAM sectors
 * the two share are fetched once). */
export function quantIteration(type: QuantType, rowBytes: number): WarpIteration {
  return warpIteration([0, 1].flatMap((w) => quantWeightLoads(type, rowBytes, w)), [0, 1].flatMap((w) => quantActLoads(type, w)), 2);
}

/** What the activation-quantizing matmul's input reads (wgsl/qmatmul-acts.ts): a gate (GB at
 * x's elements), a folded norm (the norm weight at x's columns, and each row's inv pass), a
 * lane's 4 elements as one vec4<f32> load (`vec`) or 4 scalar ones. */
export interface FusedActsInput { readonly gated?: boolean; readonly norm?: boolean; readonly vec?: boolean }

/** The input loads of one chunk (64 blocks: 2,048 elements of a row) by warp \`warp\` of the
 * activation-quantizing matmul, one row: act4(e), e = j·32 + 4w, in the max pass and again in
 * the quantizing pass — 4 f32 at a 16-byte stride across the lanes, or one vec4 — each
 * repeated for a gate or a norm weight (same elements / columns); a norm's inv pass reads the
 * row once more, coalesced (thread t: p ≡ t mod 64; a warp's share of 2,048 elements: 32
 * loads). `gated` as a boolean: FusedActsInput { gated }. */
export function quantFusedActLoads(input: boolean | FusedActsInput, warp = 0): WarpLoad[] {
  const { gated = false, norm = false, vec = false } = typeof input === 'boolean' ? { gated: input } : input;
  const out: WarpLoad[] = [];
  const twice = gated || norm;
  for (let pass = 0; pass < 2; pass++) {
    for (let i = 0; i < 8; i++) {
      const lb = laneBlocks(warp, i);
      const loads: WarpLoad[] = vec ? [lb.map(({ jb, w }) => [4 * (jb * 32 + 4 * w), 16] as const)]
        : [0, 1, 2, 3].map((l) => lb.map(({ jb, w }) => word(jb * 32 + 4 * w + l)));
      for (const load of loads) out.push(load, ...(twice ? [load] : []));
    }
  }
  if (norm) for (let n = 0; n < 32; n++) out.push(lanes((lane) => word(64 * n + 32 * warp + lane)));
  return out;
}

/** quantIteration for the activation-quantizing matmul of \`columns\` output columns a
 * workgroup: each column's weight loads (rows \`rowBytes\` apart), the f32 input once for all
 * of them. */
export function quantActsIteration(type: QuantType, rowBytes: number, input: boolean | FusedActsInput, columns = 1): WarpIteration {
  const weights = [0, 1].flatMap((w) => Array.from({ length: columns }, (_, c) => quantWeightLoads(type, (c + 1) * rowBytes, w)).flat());
  return warpIteration(weights, [0, 1].flatMap((w) => quantFusedActLoads(input, w)), 2);
}

/** The GDN column launch's state loads (wgsl/gdn-columns.ts stageIn): warp 0 of the
 * workgroup of column block 1, its GDN_STAGE_LOADS loads of one staging iteration, load j
 * of lane t at element e = t + j·threads, state word (e / cols)·dv + cols + e mod cols. */
export function gdnStageLoads(dv: number, cols: number, threads: number, loads: number): WarpLoad[] {
  return Array.from({ length: loads }, (_, j) => lanes((t) => {
    const e = t + j * threads;
    return word(Math.floor(e / cols) * dv + cols + (e % cols));
  }));
}

/** The loads of warp 0 of the conv's channel launch (convChannelsShader, wgsl/gdn.ts) for
 * one decode token, all independent (taps unrolled, no barrier): lane l reads its `taps`
 * weights WC[l·taps + j] (strided: the warp's taps loads share 4·taps sectors), then
 * taps − 1 window rows and the x row, each coalesced (distinct buffers: laid apart). */
export function convChannelLoads(taps: number): WarpLoad[] {
  const weights = Array.from({ length: taps }, (_, j) => lanes((l) => word(l * taps + j)));
  const rowBase = 32 * taps; // words past warp 0's weights
  const rows = Array.from({ length: taps }, (_, r) => lanes((l) => word(rowBase + 32 * r + l)));
  return [...weights, ...rows];
}

/** What a warp does per iteration of its main loop: DRAM bytes it brings (distinct sectors of
 * the weight), L1 sectors its load instructions touch (all of them), and load instructions. */
export interface WarpIteration {
  readonly dramBytes: number;
  readonly l1Sectors: number;
  readonly loads: number;
  /** Distinct weight bytes per weight-load instruction (mean): the "bytes per warp-load". */
  readonly bytesPerLoad: number;
  readonly sectorsPerLoad: number;
}

/** `warps`: the loads are those of that many warps together (a workgroup's), and the
 * figures are per warp (their mean; DRAM sectors two warps share count once). */
export function warpIteration(weight: readonly WarpLoad[], other: readonly WarpLoad[], warps = 1): WarpIteration {
  const all = new Set<number>();
  let wSectors = 0;
  let wBytes = 0;
  for (const l of weight) {
    const f = loadFacts(l);
    wBytes += f.bytes;
    wSectors += f.sectors.size;
    for (const s of f.sectors) all.add(s);
  }
  const otherSectors = other.reduce((a, l) => a + loadFacts(l).sectors.size, 0);
  return { dramBytes: (32 * all.size) / warps, l1Sectors: (wSectors + otherSectors) / warps, loads: (weight.length + other.length) / warps,
    bytesPerLoad: wBytes / weight.length, sectorsPerLoad: wSectors / weight.length };
}

/** A coalesced f32 stream (thread i reads element i): 128 bytes, 4 sectors per warp-load. */
export const COALESCED_F32: WarpIteration = { dramBytes: 128, l1Sectors: 4, loads: 1, bytesPerLoad: 128, sectorsPerLoad: 4 };

/** A dispatch as the model sees it. `unroll`: iterations of the main loop whose loads a warp
 * may have in flight together (1: none overlap — a barrier or a dependence between them). */
export interface ModelledDispatch {
  readonly key: string;
  readonly bytes: number;
  readonly workgroups: number;
  readonly threadsPerWorkgroup: number;
  readonly workgroupBytes: number;
  readonly iteration: WarpIteration;
  readonly unroll: number;
}

export interface DispatchEstimate {
  readonly warpsPerSm: number;
  readonly smsBusy: number;
  /** Attainable fraction of peak while the dispatch runs, and its bound. */
  readonly fraction: number;
  readonly bound: 'dram' | 'latency' | 'l1';
  /** µs including the dispatch gap. */
  readonly us: number;
}

export function estimate(d: ModelledDispatch, gpu: GpuSpec): DispatchEstimate {
  const warpsPerGroup = Math.ceil(d.threadsPerWorkgroup / 32);
  const bySmem = d.workgroupBytes > 0 ? Math.floor(gpu.sharedBytesPerSm / d.workgroupBytes) : gpu.maxBlocksPerSm;
  const groupsPerSm = Math.max(1, Math.min(gpu.maxBlocksPerSm, bySmem, Math.floor(gpu.maxWarpsPerSm / warpsPerGroup)));
  const smsBusy = Math.min(gpu.sms, d.workgroups);
  // the warps on a busy SM: its share of the workgroups, up to what fits at once
  const warpsPerSm = Math.min(groupsPerSm, Math.ceil(d.workgroups / gpu.sms)) * warpsPerGroup;
  const it = d.iteration;
  const dramS = d.bytes / gpu.peakBytesPerS;
  const inflight = smsBusy * warpsPerSm * it.dramBytes * d.unroll;
  const latencyS = d.bytes / (inflight / (gpu.latencyNs * 1e-9));
  const l1S = ((d.bytes / it.dramBytes) * it.l1Sectors) / (smsBusy * gpu.l1SectorsPerClock * gpu.clockHz);
  const s = Math.max(dramS, latencyS, l1S);
  const bound = s === dramS ? 'dram' : s === latencyS ? 'latency' : 'l1';
  return { warpsPerSm, smsBusy, fraction: dramS / s, bound, us: 1e6 * s + gpu.gapUs };
}

/** Workgroup memory a WGSL module declares (bytes of its var<workgroup> arrays of 4-byte elements, atomics too). */
export function workgroupBytes(wgsl: string): number {
  let n = 0;
  for (const m of wgsl.matchAll(/var<workgroup>\s+\w+\s*:\s*array<\s*(?:f32|i32|u32|atomic<[iu]32>)\s*,\s*(\d+)\s*>/g)) n += 4 * Number(m[1]);
  return n;
}

/** The workgroup size a WGSL module declares (x · y · z). */
export function workgroupSize(wgsl: string): number {
  const m = /@workgroup_size\(([^)]*)\)/.exec(wgsl);
  if (!m) throw new Error('access model: a shader without @workgroup_size');
  return m[1]!.split(',').map((v) => Number(v.trim().replace(/u$/, '')) || 1).reduce((a, b) => a * b, 1);
}

/** The u32 parameter words of a dispatch by name, from the shader's `const P_<name> = <slot>u;`. */
export function namedParams(wgsl: string, words: ArrayLike<number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of wgsl.matchAll(/const P_(\w+) = (\d+)u;/g)) out[m[1]!] = words[Number(m[2])] ?? 0;
  return out;
}
