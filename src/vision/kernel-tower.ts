// The vision tower on a kernel backend (ref, wasm, webgpu): the linear layers through
// Kernels.matmul, the bidirectional attention through Kernels.attention and the blocks'
// GELU (tanh form) through Kernels.mulSigmoid; LayerNorm, biases, the 2D rotary, the
// mergers' exact GELU and the residual adds on the host (typed-array loops of ops.ts). Async: a GPU backend's read-backs are promises; on a
// CPU backend every await settles at once.
//
// Bidirectional attention on the causal paged kernel: for one head h, its frame's queries
// become the query heads of ONE token at position frameLen − 1, all in the GQA group of a
// single KV head whose cache holds head h's keys and values of the frame (page table [0],
// page size frameLen). That token sees every position 0..frameLen−1, so every query row
// attends the whole frame — exactly softmax(q·Kᵀ/√hd)·V — and each backend's kernel keeps its
// per-row arithmetic (its result never depends on how rows are grouped).
//
// Invariants:
// - Every linear layer is packed when the tower is made (bf16 where every value is a bf16 —
//   a BF16 checkpoint: exact — else f32); the tower keeps no reference to the f32 weight
//   matrices it was made from, so they are freed once their owner drops them.
// - Device scratch tensors are grow-only (the Kernels interface has no free), named by role;
//   towerScratchFloats gives their sizes for a number of tokens (the memory plan reads it).
import type { AnyKernels, Tensor, Weight } from '../kernels/types.js';
import { DeltaserveError } from '../util/errors.js';
import type { VisionConfig } from './config.js';
import { type ImageGrid, checkGrid, gridTokens, interpolatePosEmbed, rotaryAngles } from './grid.js';
import { addInPlace, applyInPlace, geluErf, layerNorm } from './ops.js';
import { type RotaryTables, applyRotary, rotaryTables, type VisionOutput } from './tower.js';
import { type LayerNormWeights, type Linear, type MergerWeights, type VisionWeights, patchDim } from './weights.js';

/** Query rows × keys per attention call at most (bounds a call's score scratch). */
export const SCORES_PER_CALL = 1 << 20;

export interface KernelTowerOptions {
  /** Query rows × keys per attention call at most (default SCORES_PER_CALL; tests lower it
   * to split a frame's queries over several calls). */
  readonly scoresPerCall?: number;
  /** Rows per matmul call (default LINEAR_ROWS; tests lower it). */
  readonly linearRows?: number;
}

/** 2·√(2/π): GELU's tanh form as a sigmoid. */
const TWO_GELU_C = 2 * Math.sqrt(2 / Math.PI);

/** Rows per matmul call: linear layers and the MLP run over blocks of this many tokens (a
 * kernel's rows never depend on their batch, so the bits are those of one call), which
 * bounds their scratch — device and host — for large images. */
export const LINEAR_ROWS = 2048;

/** Float32 elements of each device scratch tensor for an image of `tokens` patches
 * (one frame: an image). */
export function towerScratchFloats(cfg: VisionConfig, tokens: number, linearRows = LINEAR_ROWS): Record<string, number> {
  const d = cfg.hiddenSize;
  const hd = cfg.headDim;
  const merged = d * cfg.spatialMergeSize * cfg.spatialMergeSize;
  const rows = Math.min(tokens, linearRows);
  const widestIn = Math.max(patchDim(cfg), d, cfg.intermediateSize, merged);
  const widestOut = Math.max(3 * d, cfg.intermediateSize, merged, cfg.outHiddenSize);
  return { in: rows * widestIn, out: rows * widestOut, hid: rows * cfg.intermediateSize, gate: rows * cfg.intermediateSize, qkv: tokens * 3 * d,
    q: tokens * hd, k: tokens * hd, v: tokens * hd, o: tokens * hd, attn: tokens * d };
}

/** Bytes a tower pass holds at its peak for `tokens` patches: the device scratch plus the
 * host arrays alive at once (the residual, the first norm and qkv of a block, one row block
 * of the MLP, the rotary tables, the outputs). */
export function towerActivationBytes(cfg: VisionConfig, tokens: number): number {
  const device = Object.values(towerScratchFloats(cfg, tokens)).reduce((a, b) => a + b, 0) * 4;
  const d = cfg.hiddenSize;
  const rows = Math.min(tokens, LINEAR_ROWS);
  const outputs = (tokens / (cfg.spatialMergeSize * cfg.spatialMergeSize)) * cfg.outHiddenSize * (1 + cfg.deepstackVisualIndexes.length);
  const host = 4 * (5 * tokens * d + rows * (d + 2 * cfg.intermediateSize) + outputs) + 8 * tokens * cfg.headDim;
  return device + host;
}

/** Bytes of the tower's weights packed on the kernels (bf16 where the values are). */
export function towerPackedBytes(w: VisionWeights): number {
  let n = 0;
  const add = (l: Linear): void => { n += l.w.length * (allBf16(l.w) ? 2 : 4); };
  add(w.patchEmbed);
  for (const b of w.blocks) [b.qkv, b.proj, b.fc1, b.fc2].forEach(add);
  for (const m of [w.merger, ...w.deepstack]) [m.fc1, m.fc2].forEach(add);
  return n;
}

interface Slot { t: Tensor; size: number }

/** True when every value is exactly a bf16 (its low 16 bits are zero). */
function allBf16(w: Float32Array): boolean {
  const bits = new Uint32Array(w.buffer, w.byteOffset, w.length);
  for (let i = 0; i < bits.length; i++) if ((bits[i]! & 0xffff) !== 0) return false;
  return true;
}

/** A linear layer packed on the kernels: y = x·Wᵀ + b. */
interface PackedLinear { readonly w: Weight; readonly b: Float32Array; readonly outDim: number; readonly inDim: number }
interface PackedMerger { readonly norm: LayerNormWeights; readonly postShuffleNorm: boolean; readonly fc1: PackedLinear; readonly fc2: PackedLinear }
interface PackedBlock {
  readonly norm1: LayerNormWeights; readonly qkv: PackedLinear; readonly proj: PackedLinear;
  readonly norm2: LayerNormWeights; readonly fc1: PackedLinear; readonly fc2: PackedLinear;
}
interface PackedTower {
  readonly patchEmbed: PackedLinear; readonly posEmbed: Float32Array; readonly blocks: readonly PackedBlock[];
  readonly merger: PackedMerger; readonly deepstack: readonly PackedMerger[];
}

/** The tower's weights with every linear layer packed by `pack`. */
function packTower(w: VisionWeights, pack: (l: Linear) => PackedLinear): PackedTower {
  const merger = (m: MergerWeights): PackedMerger => ({ norm: m.norm, postShuffleNorm: m.postShuffleNorm, fc1: pack(m.fc1), fc2: pack(m.fc2) });
  return {
    patchEmbed: pack(w.patchEmbed), posEmbed: w.posEmbed,
    blocks: w.blocks.map((b) => ({ norm1: b.norm1, qkv: pack(b.qkv), proj: pack(b.proj), norm2: b.norm2, fc1: pack(b.fc1), fc2: pack(b.fc2) })),
    merger: merger(w.merger), deepstack: w.deepstack.map(merger),
  };
}

export class KernelTower {
  private readonly slots = new Map<string, Slot>();
  private readonly scoresPerCall: number;
  private readonly linearRows: number;
  private readonly w: PackedTower;

  /** Packs every linear layer of `weights` on `k` now (the engine makes its tower at load:
   * the memory plan counted the packed copy, and no image pays for packing). */
  constructor(private readonly k: AnyKernels, readonly cfg: VisionConfig, weights: VisionWeights, opts: KernelTowerOptions = {}) {
    this.scoresPerCall = opts.scoresPerCall ?? SCORES_PER_CALL;
    this.linearRows = opts.linearRows ?? LINEAR_ROWS;
    this.w = packTower(weights, (l) => ({ w: this.pack(l), b: l.b, outDim: l.outDim, inDim: l.inDim }));
  }

  /** Encode one image (or clip); same contract as tower.ts encodeImage. */
  async encode(patches: Float32Array, grid: ImageGrid): Promise<VisionOutput> {
    const { cfg, w } = this;
    checkGrid(cfg, grid);
    const n = gridTokens(grid);
    if (patches.length !== n * patchDim(cfg)) {
      throw new DeltaserveError('bad_request', `image patches: ${patches.length} values for a ${grid.t}×${grid.h}×${grid.w} grid (expected ${n * patchDim(cfg)})`);
    }
    // size every scratch tensor for this image up front: one allocation per growth
    for (const [name, floats] of Object.entries(towerScratchFloats(cfg, n, this.linearRows))) this.tensor(name, floats);
    const x = await this.linear(patches, n, w.patchEmbed);
    addInPlace(x, interpolatePosEmbed(cfg, w.posEmbed, grid));
    const angles = rotaryTables(rotaryAngles(cfg, grid));
    const deepstack: Float32Array[] = [];
    for (let l = 0; l < cfg.depth; l++) {
      await this.block(w.blocks[l]!, x, n, grid.h * grid.w, angles);
      const j = cfg.deepstackVisualIndexes.indexOf(l);
      if (j >= 0) deepstack.push(await this.merge(w.deepstack[j]!, x, n));
    }
    return { embeds: await this.merge(w.merger, x, n), tokens: n / (cfg.spatialMergeSize * cfg.spatialMergeSize), deepstack };
  }

  private async block(b: PackedBlock, x: Float32Array, n: number, frameLen: number, angles: RotaryTables): Promise<void> {
    const { cfg } = this;
    const d = cfg.hiddenSize;
    const qkv = await this.linear(layerNorm(x, n, d, b.norm1, cfg.layerNormEps), n, b.qkv);
    applyRotary(qkv, n, 3 * d, 0, cfg.numHeads, cfg.headDim, angles); // q
    applyRotary(qkv, n, 3 * d, d, cfg.numHeads, cfg.headDim, angles); // k
    addInPlace(x, await this.deviceLinear(this.attention(qkv, n, frameLen), n, b.proj));
    for (let r0 = 0; r0 < n; r0 += this.linearRows) { // the MLP by row blocks: its hidden stays small
      const rows = x.subarray(r0 * d, Math.min(n, r0 + this.linearRows) * d);
      const m = rows.length / d;
      const hidden = await this.linear(layerNorm(rows, m, d, b.norm2, cfg.layerNormEps), m, b.fc1);
      addInPlace(rows, cfg.hiddenAct === 'gelu'
        ? await this.linear(applyInPlace(hidden, geluErf), m, b.fc2)
        : await this.deviceLinear(this.geluTanh(hidden), m, b.fc2));
    }
  }

  /** GELU (tanh form) on the kernels: x/2·(1 + tanh(u)) = x·σ(2u), u = √(2/π)(x + 0.044715x³),
   * so Kernels.mulSigmoid computes it from x and 2u (the host computes 2u: no transcendental).
   * Returns the device tensor of the result. */
  private geluTanh(h: Float32Array): Tensor {
    const x = this.tensor('hid', h.length);
    const g = this.tensor('gate', h.length);
    this.k.write(x, 0, h);
    for (let i = 0; i < h.length; i++) {
      const v = h[i]!;
      h[i] = TWO_GELU_C * (v + 0.044715 * v * v * v);
    }
    this.k.write(g, 0, h);
    this.k.mulSigmoid(x, x, g, h.length);
    return x;
  }

  /** tower.ts merge on the kernels. */
  private async merge(mw: PackedMerger, x: Float32Array, n: number): Promise<Float32Array> {
    const { cfg } = this;
    const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
    const groups = n / unit;
    const normed = mw.postShuffleNorm
      ? layerNorm(x, groups, cfg.hiddenSize * unit, mw.norm, cfg.layerNormEps)
      : layerNorm(x, n, cfg.hiddenSize, mw.norm, cfg.layerNormEps);
    return this.linear(applyInPlace(await this.linear(normed, groups, mw.fc1), geluErf), groups, mw.fc2);
  }

  /** Bidirectional attention per frame over the roped host qkv ([n × 3D]); returns the
   * device tensor of its [n × D] output (the proj matmul's input). */
  private attention(qkv: Float32Array, n: number, frameLen: number): Tensor {
    const { k } = this;
    const { numHeads: heads, headDim: hd, hiddenSize: d } = this.cfg;
    const all = this.tensor('qkv', n * 3 * d);
    k.write(all, 0, qkv);
    // one head at a time: its q, k, v and output as contiguous [frameLen × hd]
    const [q, kc, vc, o] = ['q', 'k', 'v', 'o'].map((name) => this.tensor(name, frameLen * hd)) as [Tensor, Tensor, Tensor, Tensor];
    const out = this.tensor('attn', n * d);
    const chunk = Math.max(1, Math.min(frameLen, Math.floor(this.scoresPerCall / frameLen)));
    const cache = { k: kc, v: vc, pageSize: frameLen };
    for (let f0 = 0; f0 < n; f0 += frameLen) {
      for (let h = 0; h < heads; h++) {
        k.copyRows(q, 0, hd, all, f0 * 3 * d + h * hd, 3 * d, frameLen, hd);
        k.copyRows(kc, 0, hd, all, f0 * 3 * d + d + h * hd, 3 * d, frameLen, hd);
        k.copyRows(vc, 0, hd, all, f0 * 3 * d + 2 * d + h * hd, 3 * d, frameLen, hd);
        for (let i0 = 0; i0 < frameLen; i0 += chunk) {
          const c = Math.min(chunk, frameLen - i0);
          k.attention(k.view(o, i0 * hd, c * hd), k.view(q, i0 * hd, c * hd), c * hd, cache, [0], frameLen - 1, 1, { numHeads: c, numKvHeads: 1, headDim: hd });
        }
        k.copyRows(out, f0 * d + h * hd, d, o, 0, hd, frameLen, hd);
      }
    }
    return out;
  }

  /** y = x·Wᵀ + b, host to host, by blocks of LINEAR_ROWS rows. */
  async linear(x: Float32Array, m: number, l: PackedLinear): Promise<Float32Array> {
    const y = new Float32Array(m * l.outDim);
    for (let r0 = 0; r0 < m; r0 += this.linearRows) {
      const rows = Math.min(this.linearRows, m - r0);
      const xt = this.tensor('in', rows * l.inDim);
      this.k.write(xt, 0, x.subarray(r0 * l.inDim, (r0 + rows) * l.inDim));
      await this.matmulBias(xt, rows, l, y, r0);
    }
    return y;
  }

  /** Rows [r0, r0 + m) of y = x·Wᵀ + b for an x ([m × inDim]) in kernel memory. */
  private async matmulBias(xt: Tensor, m: number, l: PackedLinear, y: Float32Array, r0: number): Promise<void> {
    const yt = this.tensor('out', m * l.outDim);
    this.k.matmul(yt, xt, l.w, m);
    const back = (await this.k.readBack([{ t: yt, offset: 0, length: m * l.outDim }]))[0]!;
    y.set(back, r0 * l.outDim); // one copy out of kernel memory, then the bias in host memory
    const { b, outDim } = l;
    for (let r = 0; r < m; r++) {
      const yo = (r0 + r) * outDim;
      for (let c = 0; c < outDim; c++) y[yo + c] = y[yo + c]! + b[c]!;
    }
  }

  /** y = x·Wᵀ + b for an x ([m × inDim]) in kernel memory, by blocks of LINEAR_ROWS rows. */
  private async deviceLinear(xt: Tensor, m: number, l: PackedLinear): Promise<Float32Array> {
    const y = new Float32Array(m * l.outDim);
    for (let r0 = 0; r0 < m; r0 += this.linearRows) {
      const rows = Math.min(this.linearRows, m - r0);
      await this.matmulBias(this.k.view(xt, r0 * l.inDim, rows * l.inDim), rows, l, y, r0);
    }
    return y;
  }

  /** The layer's matrix in the kernels' matmul layout. */
  private pack(l: Linear): Weight {
    const bf16 = allBf16(l.w);
    const { weight, bytes } = this.k.allocWeight(bf16 ? 'bf16' : 'f32', l.outDim, l.inDim);
    if (bf16) {
      const src = new Uint32Array(l.w.buffer, l.w.byteOffset, l.w.length);
      const dst = new Uint16Array(bytes.buffer, bytes.byteOffset, l.w.length);
      for (let i = 0; i < src.length; i++) dst[i] = src[i]! >>> 16;
    } else {
      new Float32Array(bytes.buffer, bytes.byteOffset, l.w.length).set(l.w);
    }
    return this.k.packWeight(weight);
  }

  /** A view of `n` floats of the named grow-only scratch tensor. */
  private tensor(name: string, n: number): Tensor {
    let s = this.slots.get(name);
    if (!s || s.size < n) {
      const size = Math.max(n, 2 * (s?.size ?? 0));
      s = { t: this.k.alloc(size), size };
      this.slots.set(name, s);
    }
    return this.k.view(s.t, 0, n);
  }
}
