// The vision tower on a kernel backend (ref, wasm, webgpu): every step on the kernels —
// linear layers through Kernels.matmul with their bias (and the GELU after fc1) through
// Kernels.biasAct, LayerNorm through Kernels.layerNorm, the residual adds through
// Kernels.add, the 2D rotary as two passes of Kernels.rope (grid.ts rotaryPasses), the
// bidirectional attention through Kernels.attention. The residual stream stays in kernel
// memory from the patch embedding to the merger: the host only resamples the position table
// (written once per image) and reads back the merger outputs. Async: a GPU backend's
// read-backs are promises; on a CPU backend every await settles at once.
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
//   matrices it was made from, so they are freed once their owner drops them. Biases and
//   LayerNorm weights are copied into kernel tensors then too.
// - Device scratch tensors are grow-only (the Kernels interface has no free), named by role;
//   towerScratchFloats gives their sizes for a number of tokens (the memory plan reads it).
import type { AnyKernels, BiasAct, Tensor, Weight } from '../kernels/types.js';
import { DeltaserveError } from '../util/errors.js';
import type { VisionConfig } from './config.js';
import { type ImageGrid, type RotaryPass, checkGrid, gridTokens, interpolatePosEmbed, rotaryPasses } from './grid.js';
import type { VisionOutput } from './tower.js';
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

/** Rows per matmul call: linear layers and the MLP run over blocks of this many tokens (a
 * kernel's rows never depend on their batch, so the bits are those of one call), which
 * bounds their scratch for large images. */
export const LINEAR_ROWS = 2048;

/** Float32 elements of each device scratch tensor for an image of `tokens` patches
 * (one frame: an image). `x` is the residual stream; `attn` holds the attention output,
 * and before it the resampled positions, after the last block the merger's normed input. */
export function towerScratchFloats(cfg: VisionConfig, tokens: number, linearRows = LINEAR_ROWS): Record<string, number> {
  const d = cfg.hiddenSize;
  const hd = cfg.headDim;
  const merged = d * cfg.spatialMergeSize * cfg.spatialMergeSize;
  const rows = Math.min(tokens, linearRows);
  const widestIn = Math.max(patchDim(cfg), d);
  const widestOut = Math.max(d, cfg.outHiddenSize);
  return { x: tokens * d, in: rows * widestIn, out: rows * widestOut, hid: rows * Math.max(cfg.intermediateSize, merged), qkv: tokens * 3 * d,
    q: tokens * hd, k: tokens * hd, v: tokens * hd, o: tokens * hd, attn: tokens * d };
}

/** Bytes a tower pass holds at its peak for `tokens` patches: the device scratch plus the
 * host arrays alive at once (the resampled positions, the rotary passes' positions, the
 * outputs). */
export function towerActivationBytes(cfg: VisionConfig, tokens: number): number {
  const device = Object.values(towerScratchFloats(cfg, tokens)).reduce((a, b) => a + b, 0) * 4;
  const outputs = (tokens / (cfg.spatialMergeSize * cfg.spatialMergeSize)) * cfg.outHiddenSize * (1 + cfg.deepstackVisualIndexes.length);
  const host = 4 * (tokens * cfg.hiddenSize + outputs) + 4 * 4 * tokens;
  return device + host;
}

/** Bytes of the tower's weights on the kernels: the matrices packed (bf16 where the values
 * are), the biases and LayerNorm weights as f32 tensors. */
export function towerPackedBytes(w: VisionWeights): number {
  let n = 0;
  const add = (l: Linear): void => { n += l.w.length * (allBf16(l.w) ? 2 : 4) + 4 * l.b.length; };
  const norm = (l: LayerNormWeights): void => { n += 4 * (l.w.length + l.b.length); };
  add(w.patchEmbed);
  for (const b of w.blocks) {
    [b.qkv, b.proj, b.fc1, b.fc2].forEach(add);
    [b.norm1, b.norm2].forEach(norm);
  }
  for (const m of [w.merger, ...w.deepstack]) {
    [m.fc1, m.fc2].forEach(add);
    norm(m.norm);
  }
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
interface PackedLinear { readonly w: Weight; readonly b: Tensor; readonly outDim: number; readonly inDim: number }
/** LayerNorm weight and bias in kernel tensors. */
interface PackedNorm { readonly w: Tensor; readonly b: Tensor }
interface PackedMerger { readonly norm: PackedNorm; readonly postShuffleNorm: boolean; readonly fc1: PackedLinear; readonly fc2: PackedLinear }
interface PackedBlock {
  readonly norm1: PackedNorm; readonly qkv: PackedLinear; readonly proj: PackedLinear;
  readonly norm2: PackedNorm; readonly fc1: PackedLinear; readonly fc2: PackedLinear;
}
interface PackedTower {
  readonly patchEmbed: PackedLinear; readonly posEmbed: Float32Array; readonly blocks: readonly PackedBlock[];
  readonly merger: PackedMerger; readonly deepstack: readonly PackedMerger[];
}

/** The tower's weights with every linear layer packed by `pack`, every norm by `norm`. */
function packTower(w: VisionWeights, pack: (l: Linear) => PackedLinear, norm: (n: LayerNormWeights) => PackedNorm): PackedTower {
  const merger = (m: MergerWeights): PackedMerger => ({ norm: norm(m.norm), postShuffleNorm: m.postShuffleNorm, fc1: pack(m.fc1), fc2: pack(m.fc2) });
  return {
    patchEmbed: pack(w.patchEmbed), posEmbed: w.posEmbed,
    blocks: w.blocks.map((b) => ({ norm1: norm(b.norm1), qkv: pack(b.qkv), proj: pack(b.proj), norm2: norm(b.norm2), fc1: pack(b.fc1), fc2: pack(b.fc2) })),
    merger: merger(w.merger), deepstack: w.deepstack.map(merger),
  };
}

export class KernelTower {
  private readonly slots = new Map<string, Slot>();
  private readonly scoresPerCall: number;
  private readonly linearRows: number;
  private readonly w: PackedTower;
  /** The blocks' activation after fc1 (the config's hidden_act). */
  private readonly blockAct: BiasAct;

  /** Packs every linear layer of `weights` on `k` now (the engine makes its tower at load:
   * the memory plan counted the packed copy, and no image pays for packing). */
  constructor(private readonly k: AnyKernels, readonly cfg: VisionConfig, weights: VisionWeights, opts: KernelTowerOptions = {}) {
    this.scoresPerCall = opts.scoresPerCall ?? SCORES_PER_CALL;
    this.linearRows = opts.linearRows ?? LINEAR_ROWS;
    this.blockAct = cfg.hiddenAct === 'gelu' ? 'geluErf' : 'geluTanh';
    this.w = packTower(weights, (l) => ({ w: this.pack(l), b: this.vector(l.b), outDim: l.outDim, inDim: l.inDim }),
      (n) => ({ w: this.vector(n.w), b: this.vector(n.b) }));
  }

  /** Encode one image (or clip); same contract as tower.ts encodeImage. */
  async encode(patches: Float32Array, grid: ImageGrid): Promise<VisionOutput> {
    const { cfg, w, k } = this;
    checkGrid(cfg, grid);
    const n = gridTokens(grid);
    const d = cfg.hiddenSize;
    if (patches.length !== n * patchDim(cfg)) {
      throw new DeltaserveError('bad_request', `image patches: ${patches.length} values for a ${grid.t}×${grid.h}×${grid.w} grid (expected ${n * patchDim(cfg)})`);
    }
    // size every scratch tensor for this image up front: one allocation per growth
    for (const [name, floats] of Object.entries(towerScratchFloats(cfg, n, this.linearRows))) this.tensor(name, floats);
    const x = this.tensor('x', n * d);
    for (const [r0, rows] of this.rowBlocks(n)) {
      const xin = this.tensor('in', rows * w.patchEmbed.inDim);
      k.write(xin, 0, patches.subarray(r0 * w.patchEmbed.inDim, (r0 + rows) * w.patchEmbed.inDim));
      this.linear(k.view(x, r0 * d, rows * d), xin, rows, w.patchEmbed, 'none');
    }
    const pos = this.tensor('attn', n * d);
    k.write(pos, 0, interpolatePosEmbed(cfg, w.posEmbed, grid));
    k.add(x, x, pos, n * d);
    const rotary = rotaryPasses(cfg, grid);
    const deepstack: Float32Array[] = [];
    for (let l = 0; l < cfg.depth; l++) {
      this.block(w.blocks[l]!, x, n, grid.h * grid.w, rotary);
      const j = cfg.deepstackVisualIndexes.indexOf(l);
      if (j >= 0) deepstack.push(await this.merge(w.deepstack[j]!, x, n));
    }
    return { embeds: await this.merge(w.merger, x, n), tokens: n / (cfg.spatialMergeSize * cfg.spatialMergeSize), deepstack };
  }

  /** One block on the residual x ([n × D] in kernel memory), in place. */
  private block(b: PackedBlock, x: Tensor, n: number, frameLen: number, rotary: readonly RotaryPass[]): void {
    const { cfg, k } = this;
    const d = cfg.hiddenSize;
    const qkv = this.tensor('qkv', n * 3 * d);
    for (const [r0, rows] of this.rowBlocks(n)) {
      const h = this.tensor('in', rows * d);
      k.layerNorm(h, k.view(x, r0 * d, rows * d), b.norm1.w, b.norm1.b, rows, d, cfg.layerNormEps);
      this.linear(k.view(qkv, r0 * 3 * d, rows * 3 * d), h, rows, b.qkv, 'none');
    }
    // q and k of a row are 2·heads contiguous heads: each pass turns both
    for (const r of rotary) k.rope(qkv, r.positions, n, 2 * cfg.numHeads, cfg.headDim, r.table, 3 * d);
    const attn = this.attention(qkv, n, frameLen);
    for (const [r0, rows] of this.rowBlocks(n)) {
      const xr = k.view(x, r0 * d, rows * d);
      this.residual(xr, k.view(attn, r0 * d, rows * d), rows, b.proj);
      const h = this.tensor('in', rows * d);
      k.layerNorm(h, xr, b.norm2.w, b.norm2.b, rows, d, cfg.layerNormEps);
      const hidden = this.tensor('hid', rows * cfg.intermediateSize);
      this.linear(hidden, h, rows, b.fc1, this.blockAct);
      this.residual(xr, hidden, rows, b.fc2);
    }
  }

  /** tower.ts merge on the kernels: x ([n × D]) is read, not changed. */
  private async merge(mw: PackedMerger, x: Tensor, n: number): Promise<Float32Array> {
    const { cfg, k } = this;
    const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
    const width = cfg.hiddenSize * unit;
    const groups = n / unit;
    const normed = this.tensor('attn', n * cfg.hiddenSize); // a merge group is unit consecutive rows
    if (mw.postShuffleNorm) k.layerNorm(normed, x, mw.norm.w, mw.norm.b, groups, width, cfg.layerNormEps);
    else k.layerNorm(normed, x, mw.norm.w, mw.norm.b, n, cfg.hiddenSize, cfg.layerNormEps);
    const out = new Float32Array(groups * mw.fc2.outDim);
    for (const [g0, rows] of this.rowBlocks(groups)) {
      const hidden = this.tensor('hid', rows * width);
      this.linear(hidden, k.view(normed, g0 * width, rows * width), rows, mw.fc1, 'geluErf');
      const y = this.tensor('out', rows * mw.fc2.outDim);
      this.linear(y, hidden, rows, mw.fc2, 'none');
      // copied at once: a CPU backend's read-back is a view the next block overwrites
      out.set((await k.readBack([{ t: y, offset: 0, length: rows * mw.fc2.outDim }]))[0]!, g0 * mw.fc2.outDim);
    }
    return out;
  }

  /** Bidirectional attention per frame over the roped qkv ([n × 3D] in kernel memory);
   * returns the tensor of its [n × D] output (the proj matmul's input). */
  private attention(all: Tensor, n: number, frameLen: number): Tensor {
    const { k } = this;
    const { numHeads: heads, headDim: hd, hiddenSize: d } = this.cfg;
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

  /** y = act(x·Wᵀ + b) for x ([m × inDim]) and y ([m × outDim]) in kernel memory. */
  private linear(y: Tensor, x: Tensor, m: number, l: PackedLinear, act: BiasAct): void {
    this.k.matmul(y, x, l.w, m);
    this.k.biasAct(y, y, l.b, m, l.outDim, act);
  }

  /** xr += x·Wᵀ + b ([m × D] rows of the residual; the sum rounded before the add, as the
   * plain tower's y = linear(x); x += y). */
  private residual(xr: Tensor, x: Tensor, m: number, l: PackedLinear): void {
    const y = this.tensor('out', m * l.outDim);
    this.linear(y, x, m, l, 'none');
    this.k.add(xr, xr, y, m * l.outDim);
  }

  /** [first row, rows] of each block of at most linearRows rows of n. */
  private *rowBlocks(n: number): Generator<[number, number]> {
    for (let r0 = 0; r0 < n; r0 += this.linearRows) yield [r0, Math.min(this.linearRows, n - r0)];
  }

  /** A host vector (a bias, a norm's weight) copied into a kernel tensor of its own. */
  private vector(v: Float32Array): Tensor {
    const t = this.k.alloc(v.length);
    this.k.write(t, 0, v);
    return t;
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
