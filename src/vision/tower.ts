// The Qwen3.5 / Qwen3-VL vision tower on plain TS (the oracle for other backends): patch
// embedding, learned positions resampled to the grid, blocks with 2D rotary attention over
// the whole frame, the 2×2 merger into the language model's width, and deepstack mergers.
// The exact math is in docs/vision.md; this file follows it step by step.
import { DeltaserveError } from '../util/errors.js';
import type { VisionConfig } from './config.js';
import { type ImageGrid, checkGrid, gridTokens, interpolatePosEmbed, rotaryAngles } from './grid.js';
import { addInPlace, applyInPlace, geluErf, geluTanh, layerNorm, linear as plainLinear } from './ops.js';
import { type Linear, type MergerWeights, type VisionBlockWeights, type VisionWeights, patchDim } from './weights.js';

/** y[m × outDim] = x·Wᵀ + b: plain TS (ops.linear) or a kernel backend's matmul. */
export type LinearOp = (x: Float32Array, m: number, l: Linear) => Float32Array;

export interface VisionOutput {
  /** Image tokens after the merger: [tokens × outHiddenSize], tokens = t·h·w / m². */
  readonly embeds: Float32Array;
  readonly tokens: number;
  /** One [tokens × outHiddenSize] per deepstack block, in block order (as HF appends them;
   * feature j is added after decoder layer j). */
  readonly deepstack: readonly Float32Array[];
}

/** cos and sin of every rotary angle ([tokens × hd/2] each), computed once per image. */
export interface RotaryTables { readonly cos: Float64Array; readonly sin: Float64Array }

export function rotaryTables(angles: Float64Array): RotaryTables {
  return { cos: angles.map(Math.cos), sin: angles.map(Math.sin) };
}

/** Rotate q or k in place: for each head, pair (i, i + hd/2) turns by angle[token][i]. */
export function applyRotary(x: Float32Array, n: number, stride: number, offset: number, heads: number, hd: number, rot: RotaryTables): void {
  const half = hd / 2;
  const { cos, sin } = rot;
  for (let t = 0; t < n; t++) {
    for (let h = 0; h < heads; h++) {
      const base = t * stride + offset + h * hd;
      for (let i = 0; i < half; i++) {
        const c = cos[t * half + i]!;
        const s = sin[t * half + i]!;
        const x1 = x[base + i]!;
        const x2 = x[base + half + i]!;
        x[base + i] = x1 * c - x2 * s;
        x[base + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

/** Head h's q, k or v (part 0, 1, 2) of tokens [f0, f0 + len) as a contiguous [len × hd]. */
function headSlice(qkv: Float32Array, f0: number, len: number, d: number, part: number, h: number, hd: number): Float32Array {
  const out = new Float32Array(len * hd);
  for (let t = 0; t < len; t++) {
    const src = (f0 + t) * 3 * d + part * d + h * hd;
    for (let e = 0; e < hd; e++) out[t * hd + e] = qkv[src + e]!;
  }
  return out;
}

/** softmax(q_i·Kᵀ·scale)·V for query rows [i0, i0 + 4) of one head, f64 sums; vt is V
 * transposed ([hd × len]) so both products are four dot products sharing one stream. */
function attendFour(q: Float32Array, k: Float32Array, vt: Float32Array, i0: number, len: number, hd: number, scale: number,
  s: Float64Array[], out: Float64Array[]): void {
  const [s0, s1, s2, s3] = s as [Float64Array, Float64Array, Float64Array, Float64Array];
  const a = i0 * hd, b = a + hd, c = b + hd, d = c + hd;
  let m0 = -Infinity, m1 = -Infinity, m2 = -Infinity, m3 = -Infinity;
  for (let j = 0; j < len; j++) {
    const ko = j * hd;
    let x0 = 0, x1 = 0, x2 = 0, x3 = 0;
    for (let e = 0; e < hd; e++) {
      const kv = k[ko + e]!;
      x0 += q[a + e]! * kv; x1 += q[b + e]! * kv; x2 += q[c + e]! * kv; x3 += q[d + e]! * kv;
    }
    x0 *= scale; x1 *= scale; x2 *= scale; x3 *= scale;
    s0[j] = x0; s1[j] = x1; s2[j] = x2; s3[j] = x3;
    if (x0 > m0) m0 = x0;
    if (x1 > m1) m1 = x1;
    if (x2 > m2) m2 = x2;
    if (x3 > m3) m3 = x3;
  }
  let z0 = 0, z1 = 0, z2 = 0, z3 = 0;
  for (let j = 0; j < len; j++) {
    const p0 = Math.exp(s0[j]! - m0), p1 = Math.exp(s1[j]! - m1), p2 = Math.exp(s2[j]! - m2), p3 = Math.exp(s3[j]! - m3);
    s0[j] = p0; s1[j] = p1; s2[j] = p2; s3[j] = p3;
    z0 += p0; z1 += p1; z2 += p2; z3 += p3;
  }
  const [o0, o1, o2, o3] = out as [Float64Array, Float64Array, Float64Array, Float64Array];
  for (let e = 0; e < hd; e++) {
    const vo = e * len;
    let x0 = 0, x1 = 0, x2 = 0, x3 = 0;
    for (let j = 0; j < len; j++) {
      const vv = vt[vo + j]!;
      x0 += s0[j]! * vv; x1 += s1[j]! * vv; x2 += s2[j]! * vv; x3 += s3[j]! * vv;
    }
    o0[e] = x0 / z0; o1[e] = x1 / z1; o2[e] = x2 / z2; o3[e] = x3 / z3;
  }
}

/** Head h's v of tokens [f0, f0 + len) transposed: [hd × len]. */
function headSliceT(qkv: Float32Array, f0: number, len: number, d: number, h: number, hd: number): Float32Array {
  const out = new Float32Array(hd * len);
  for (let t = 0; t < len; t++) {
    const src = (f0 + t) * 3 * d + 2 * d + h * hd;
    for (let e = 0; e < hd; e++) out[e * len + t] = qkv[src + e]!;
  }
  return out;
}

/** Bidirectional attention within each frame of `frameLen` tokens; qkv is [n × 3D] with
 * q, k, v each D = heads·hd wide. Returns [n × D]. Scores, softmax and the weighted sum
 * accumulate in f64 (each query row's arithmetic is the same whichever rows share a pass). */
function frameAttention(qkv: Float32Array, n: number, frameLen: number, heads: number, hd: number): Float32Array {
  const d = heads * hd;
  const scale = 1 / Math.sqrt(hd);
  const out = new Float32Array(n * d);
  const rows = Math.ceil(frameLen / 4) * 4; // padded to whole groups of four queries
  const scores = Array.from({ length: 4 }, () => new Float64Array(frameLen));
  const acc = Array.from({ length: 4 }, () => new Float64Array(hd));
  for (let f0 = 0; f0 < n; f0 += frameLen) {
    for (let h = 0; h < heads; h++) {
      const q = new Float32Array(rows * hd);
      q.set(headSlice(qkv, f0, frameLen, d, 0, h, hd));
      const k = headSlice(qkv, f0, frameLen, d, 1, h, hd);
      const v = headSliceT(qkv, f0, frameLen, d, h, hd);
      for (let i = 0; i < frameLen; i += 4) {
        attendFour(q, k, v, i, frameLen, hd, scale, scores, acc);
        for (let r = 0; r < 4 && i + r < frameLen; r++) {
          const oo = (f0 + i + r) * d + h * hd;
          for (let e = 0; e < hd; e++) out[oo + e] = acc[r]![e]!;
        }
      }
    }
  }
  return out;
}

function block(cfg: VisionConfig, b: VisionBlockWeights, x: Float32Array, n: number, frameLen: number, angles: RotaryTables, linear: LinearOp): void {
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
export function merge(cfg: VisionConfig, mw: MergerWeights, x: Float32Array, n: number, linear: LinearOp = plainLinear): Float32Array {
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
export function encodeImage(cfg: VisionConfig, w: VisionWeights, patches: Float32Array, grid: ImageGrid, linear: LinearOp = plainLinear): VisionOutput {
  checkGrid(cfg, grid);
  const n = gridTokens(grid);
  if (patches.length !== n * patchDim(cfg)) {
    throw new DeltaserveError('bad_request', `image patches: ${patches.length} values for a ${grid.t}×${grid.h}×${grid.w} grid (expected ${n * patchDim(cfg)})`);
  }
  const x = linear(patches, n, w.patchEmbed);
  addInPlace(x, interpolatePosEmbed(cfg, w.posEmbed, grid));
  const angles = rotaryTables(rotaryAngles(cfg, grid));
  const deepstack: Float32Array[] = [];
  for (let l = 0; l < cfg.depth; l++) {
    block(cfg, w.blocks[l]!, x, n, grid.h * grid.w, angles, linear);
    const k = cfg.deepstackVisualIndexes.indexOf(l);
    if (k >= 0) deepstack.push(merge(cfg, w.deepstack[k]!, x, n, linear));
  }
  const unit = cfg.spatialMergeSize * cfg.spatialMergeSize;
  return { embeds: merge(cfg, w.merger, x, n, linear), tokens: n / unit, deepstack };
}
