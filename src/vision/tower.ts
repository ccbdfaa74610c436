// The Qwen3.5 / Qwen3-VL vision tower on plain TS (the oracle for other backends): patch
// embedding, learned positions resampled to the grid, blocks with 2D rotary attention over
// the whole frame, the 2×2 merger into the language model's width, and deepstack mergers.
// The exact math is in docs/vision.md; this file follows it step by step.
import { DeltaserveError } from '../util/errors.js';
import type { VisionConfig } from './config.js';
import { type ImageGrid, checkGrid, gridTokens, interpolatePosEmbed, rotaryAngles } from './grid.js';
import { addInPlace, applyInPlace, geluErf, geluTanh, layerNorm, linear } from './ops.js';
import { type MergerWeights, type VisionBlockWeights, type VisionWeights, patchDim } from './weights.js';

export interface VisionOutput {
  /** Image tokens after the merger: [tokens × outHiddenSize], tokens = t·h·w / m². */
  readonly embeds: Float32Array;
  readonly tokens: number;
  /** One [tokens × outHiddenSize] per deepstack block, in block order (as HF appends them;
   * feature j is added after decoder layer j). */
  readonly deepstack: readonly Float32Array[];
}

/** Rotate q or k in place: for each head, pair (i, i + hd/2) turns by angle[token][i]. */
function applyRotary(x: Float32Array, n: number, stride: number, offset: number, heads: number, hd: number, angles: Float64Array): void {
  const half = hd / 2;
  for (let t = 0; t < n; t++) {
    for (let h = 0; h < heads; h++) {
      const base = t * stride + offset + h * hd;
      for (let i = 0; i < half; i++) {
        const a = angles[t * half + i]!;
        const c = Math.cos(a);
        const s = Math.sin(a);
        const x1 = x[base + i]!;
        const x2 = x[base + half + i]!;
        x[base + i] = x1 * c - x2 * s;
        x[base + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

/** Bidirectional attention within each frame of `frameLen` tokens; qkv is [n × 3D] with
 * q, k, v each D = heads·hd wide. Returns [n × D]. */
function frameAttention(qkv: Float32Array, n: number, frameLen: number, heads: number, hd: number): Float32Array {
  const d = heads * hd;
  const stride = 3 * d;
  const scale = 1 / Math.sqrt(hd);
  const out = new Float32Array(n * d);
  const scores = new Float64Array(frameLen);
  const acc = new Float64Array(hd);
  for (let f0 = 0; f0 < n; f0 += frameLen) {
    for (let h = 0; h < heads; h++) {
      for (let i = f0; i < f0 + frameLen; i++) {
        const qo = i * stride + h * hd;
        let max = -Infinity;
        for (let j = 0; j < frameLen; j++) {
          const ko = (f0 + j) * stride + d + h * hd;
          let s = 0;
          for (let e = 0; e < hd; e++) s += qkv[qo + e]! * qkv[ko + e]!;
          scores[j] = s * scale;
          if (scores[j]! > max) max = scores[j]!;
        }
        let sum = 0;
        for (let j = 0; j < frameLen; j++) {
          scores[j] = Math.exp(scores[j]! - max);
          sum += scores[j]!;
        }
        acc.fill(0);
        for (let j = 0; j < frameLen; j++) {
          const vo = (f0 + j) * stride + 2 * d + h * hd;
          const p = scores[j]! / sum;
          for (let e = 0; e < hd; e++) acc[e] = acc[e]! + p * qkv[vo + e]!;
        }
        for (let e = 0; e < hd; e++) out[i * d + h * hd + e] = acc[e]!;
      }
    }
  }
  return out;
}

function block(cfg: VisionConfig, b: VisionBlockWeights, x: Float32Array, n: number, frameLen: number, angles: Float64Array): void {
  const d = cfg.hiddenSize;
  const qkv = linear(layerNorm(x, n, d, b.norm1, cfg.layerNormEps), n, b.qkv);
  applyRotary(qkv, n, 3 * d, 0, cfg.numHeads, cfg.headDim, angles); // q
  applyRotary(qkv, n, 3 * d, d, cfg.numHeads, cfg.headDim, angles); // k
  addInPlace(x, linear(frameAttention(qkv, n, frameLen, cfg.numHeads, cfg.headDim), n, b.proj));
  const act = cfg.hiddenAct === 'gelu' ? geluErf : geluTanh;
  const hidden = applyInPlace(linear(layerNorm(x, n, d, b.norm2, cfg.layerNormEps), n, b.fc1), act);
  addInPlace(x, linear(hidden, n, b.fc2));
}

/** The 2×2 merger: LayerNorm (before or after grouping m² consecutive tokens), then
 * fc2(GELU_erf(fc1(group))). x is [n × D]; returns [n/m² × outHiddenSize]. */
export function merge(cfg: VisionConfig, mw: MergerWeights, x: Float32Array, n: number): Float32Array {
  const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
  const groups = n / unit;
  const wide = cfg.hiddenSize * unit;
  // [n × D] and [n/unit × unit·D] are the same row-major buffer
  const normed = mw.postShuffleNorm
    ? layerNorm(x, groups, wide, mw.norm, cfg.layerNormEps)
    : layerNorm(x, n, cfg.hiddenSize, mw.norm, cfg.layerNormEps);
  return linear(applyInPlace(linear(normed, groups, mw.fc1), geluErf), groups, mw.fc2);
}

/** Encode one image (or video clip): `patches` is [t·h·w × C·T·P·P] in the processor's
 * order (see preprocess.ts), `grid` its patch grid. */
export function encodeImage(cfg: VisionConfig, w: VisionWeights, patches: Float32Array, grid: ImageGrid): VisionOutput {
  checkGrid(cfg, grid);
  const n = gridTokens(grid);
  if (patches.length !== n * patchDim(cfg)) {
    throw new DeltaserveError('bad_request', `image patches: ${patches.length} values for a ${grid.t}×${grid.h}×${grid.w} grid (expected ${n * patchDim(cfg)})`);
  }
  const x = linear(patches, n, w.patchEmbed);
  addInPlace(x, interpolatePosEmbed(cfg, w.posEmbed, grid));
  const angles = rotaryAngles(cfg, grid);
  const deepstack: Float32Array[] = [];
  for (let l = 0; l < cfg.depth; l++) {
    block(cfg, w.blocks[l]!, x, n, grid.h * grid.w, angles);
    const k = cfg.deepstackVisualIndexes.indexOf(l);
    if (k >= 0) deepstack.push(merge(cfg, w.deepstack[k]!, x, n));
  }
  const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
  return { embeds: merge(cfg, w.merger, x, n), tokens: n / unit, deepstack };
}
