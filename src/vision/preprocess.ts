// Qwen's image processor (Qwen2VLImageProcessor, used by Qwen3-VL and Qwen3.5): smart resize
// to multiples of patch·merge (32) within [minPixels, maxPixels], Pillow's bicubic resample
// (8-bit fixed point, horizontal pass then vertical, so results equal PIL's pixel for pixel),
// rescale to [0, 1], normalize with the config's mean / std, and patchify into the tower's
// token order (see grid.ts) with the still frame repeated over the temporal patch.
import { DeltaserveError } from '../util/errors.js';
import type { PreprocessConfig, VisionConfig } from './config.js';
import type { RgbImage } from './decode.js';
import type { ImageGrid } from './grid.js';
import { patchDim } from './weights.js';

/** Python's round(): halves go to the even neighbour. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d !== 0.5) return d < 0.5 ? f : f + 1;
  return f % 2 === 0 ? f : f + 1;
}

/** The processor's smart_resize: [height, width], both multiples of `factor`, the pixel count
 * within [minPixels, maxPixels] when possible, the aspect ratio kept as closely as rounding
 * allows. Aspect ratios above 200 are refused (as the processor does). */
export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): [number, number] {
  if (Math.max(height, width) / Math.min(height, width) > 200) {
    throw new DeltaserveError('bad_request', `image of ${width}×${height}: the aspect ratio must be at most 200`);
  }
  let h = roundHalfEven(height / factor) * factor;
  let w = roundHalfEven(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [Math.max(factor, h), Math.max(factor, w)];
}

const PRECISION_BITS = 22; // Pillow: 32 − 8 − 2
const ONE = 2 ** PRECISION_BITS;

function bicubic(x: number): number {
  const a = -0.5;
  const t = Math.abs(x);
  if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return (((t - 5) * t + 8) * t - 4) * a;
  return 0;
}

interface Coeffs { readonly ksize: number; readonly start: Int32Array; readonly count: Int32Array; readonly k: Int32Array }

/** Pillow's precompute_coeffs + normalize_coeffs_8bpc for the bicubic filter (support 2,
 * widened by the downscale factor), weights as 22-bit fixed point rounded away from zero. */
function coefficients(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = 2 * filterScale;
  const ksize = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const k = new Int32Array(outSize * ksize);
  const w = new Float64Array(ksize);
  for (let o = 0; o < outSize; o++) {
    const center = (o + 0.5) * scale;
    const lo = Math.max(0, Math.trunc(center - support + 0.5));
    const n = Math.min(inSize, Math.trunc(center + support + 0.5)) - lo;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      w[i] = bicubic((i + lo - center + 0.5) / filterScale);
      sum += w[i]!;
    }
    for (let i = 0; i < n; i++) {
      const v = sum !== 0 ? w[i]! / sum : w[i]!;
      k[o * ksize + i] = Math.trunc(v < 0 ? v * ONE - 0.5 : v * ONE + 0.5);
    }
    start[o] = lo;
    count[o] = n;
  }
  return { ksize, start, count, k };
}

function clip8(acc: number): number {
  if (acc >= 256 * ONE) return 255;
  if (acc <= 0) return 0;
  return Math.floor(acc / ONE);
}

/** Horizontal pass: each row of 3-channel pixels resampled from w to ow columns. */
function passX(src: Uint8Array, w: number, h: number, c: Coeffs, ow: number): Uint8Array {
  const out = new Uint8Array(ow * h * 3);
  for (let y = 0; y < h; y++) {
    const row = y * w * 3;
    for (let x = 0; x < ow; x++) {
      const lo = c.start[x]!;
      const n = c.count[x]!;
      const kb = x * c.ksize;
      let r = ONE / 2, g = ONE / 2, b = ONE / 2;
      for (let i = 0; i < n; i++) {
        const k = c.k[kb + i]!;
        const s = row + (lo + i) * 3;
        r += src[s]! * k;
        g += src[s + 1]! * k;
        b += src[s + 2]! * k;
      }
      const o = (y * ow + x) * 3;
      out[o] = clip8(r);
      out[o + 1] = clip8(g);
      out[o + 2] = clip8(b);
    }
  }
  return out;
}

/** Vertical pass: each column resampled from h to oh rows (rows of w·3 bytes). */
function passY(src: Uint8Array, w: number, c: Coeffs, oh: number): Uint8Array {
  const stride = w * 3;
  const out = new Uint8Array(stride * oh);
  const acc = new Float64Array(stride);
  for (let y = 0; y < oh; y++) {
    acc.fill(ONE / 2);
    const lo = c.start[y]!;
    const n = c.count[y]!;
    for (let i = 0; i < n; i++) {
      const k = c.k[y * c.ksize + i]!;
      const s = (lo + i) * stride;
      for (let j = 0; j < stride; j++) acc[j] = acc[j]! + src[s + j]! * k;
    }
    for (let j = 0; j < stride; j++) out[y * stride + j] = clip8(acc[j]!);
  }
  return out;
}

/** Pillow's Image.resize(size, BICUBIC) on an 8-bit RGB image. */
export function resizeBicubic(img: RgbImage, width: number, height: number): RgbImage {
  let data = img.data;
  let w = img.width;
  if (width !== img.width) {
    data = passX(data, w, img.height, coefficients(img.width, width), width);
    w = width;
  }
  if (height !== img.height) data = passY(data, w, coefficients(img.height, height), height);
  return { width, height, data };
}

export interface PreprocessedImage {
  /** [t·h·w × C·T·P·P] in the tower's token order. */
  readonly patches: Float32Array;
  readonly grid: ImageGrid;
  /** The resized image's size in pixels. */
  readonly width: number;
  readonly height: number;
}

/** Resize, normalize and patchify one still image for the tower. */
export function preprocessImage(img: RgbImage, cfg: VisionConfig, pre: PreprocessConfig): PreprocessedImage {
  const p = cfg.patchSize;
  const m = cfg.spatialMergeSize;
  const [height, width] = smartResize(img.height, img.width, p * m, pre.minPixels, pre.maxPixels);
  const resized = resizeBicubic(img, width, height);
  const grid: ImageGrid = { t: 1, h: height / p, w: width / p };
  const T = cfg.temporalPatchSize;
  const dim = patchDim(cfg);
  const patches = new Float32Array(grid.h * grid.w * dim);
  const scale = pre.imageStd.map((s) => 1 / (255 * s));
  const shift = pre.imageMean.map((mu, c) => mu / pre.imageStd[c]!);
  let row = 0;
  for (let br = 0; br < grid.h / m; br++) {
    for (let bc = 0; bc < grid.w / m; bc++) {
      for (let ir = 0; ir < m; ir++) {
        for (let ic = 0; ic < m; ic++, row++) {
          const y0 = (br * m + ir) * p;
          const x0 = (bc * m + ic) * p;
          // row layout: channel, then temporal copy, then y, then x
          for (let ch = 0; ch < 3; ch++) {
            for (let t = 0; t < T; t++) {
              const base = row * dim + (ch * T + t) * p * p;
              const sc = scale[ch]!;
              const sh = shift[ch]!;
              for (let y = 0; y < p; y++) {
                const src = ((y0 + y) * width + x0) * 3 + ch;
                for (let x = 0; x < p; x++) patches[base + y * p + x] = resized.data[src + 3 * x]! * sc - sh;
              }
            }
          }
        }
      }
    }
  }
  return { patches, grid, width, height };
}
