// Where each patch of an image sits, in the tower's token order, and the two position
// signals derived from it: the bilinear resampling of the learned position table and the
// 2D rotary angles. Pure functions of the grid and the config (no weights).
//
// Token order (the processor's patchify order, kept through the tower): frame by frame;
// within a frame, merge windows row-major over the (h/m) × (w/m) window grid; within a
// window, its m × m patches row-major. So every m² consecutive tokens form one merge window,
// which is what the merger's reshape relies on.
import { DeltaserveError } from '../util/errors.js';
import type { RopeTable } from '../kernels/types.js';
import type { VisionConfig } from './config.js';

/** An image's patch grid: t temporal patches (1 for a still image), h × w spatial patches. */
export interface ImageGrid {
  readonly t: number;
  readonly h: number;
  readonly w: number;
}

export function gridTokens(g: ImageGrid): number {
  return g.t * g.h * g.w;
}

export function checkGrid(cfg: VisionConfig, g: ImageGrid): void {
  const m = cfg.spatialMergeSize;
  const ok = [g.t, g.h, g.w].every((x) => Number.isSafeInteger(x) && x >= 1) && g.h % m === 0 && g.w % m === 0;
  if (!ok) throw new DeltaserveError('bad_request', `image grid ${g.t}×${g.h}×${g.w} patches: h and w must be positive multiples of the merge size ${m}`);
}

/** [tokens × 2] (row, col) of each token in the tower's order. */
export function tokenCoords(g: ImageGrid, mergeSize: number): Int32Array {
  const m = mergeSize;
  const out = new Int32Array(gridTokens(g) * 2);
  let i = 0;
  for (let f = 0; f < g.t; f++) {
    for (let br = 0; br < g.h / m; br++) {
      for (let bc = 0; bc < g.w / m; bc++) {
        for (let ir = 0; ir < m; ir++) {
          for (let ic = 0; ic < m; ic++) {
            out[i++] = br * m + ir;
            out[i++] = bc * m + ic;
          }
        }
      }
    }
  }
  return out;
}

/** Bilinear corners of one axis: grid point i of n maps to side·i/(n−1) on the table's
 * [0, side−1] axis (align_corners; a one-point axis maps to 0). */
function axisCorners(n: number, side: number): { lo: Int32Array; hi: Int32Array; frac: Float64Array } {
  const lo = new Int32Array(n);
  const hi = new Int32Array(n);
  const frac = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = n === 1 ? 0 : (i * (side - 1)) / (n - 1);
    const f = Math.floor(x);
    lo[i] = f;
    hi[i] = Math.min(f + 1, side - 1);
    frac[i] = x - f;
  }
  return { lo, hi, frac };
}

/** The learned position table resampled to the grid, in token order: [tokens × hidden].
 * table is [side², hidden] (row-major side × side). */
export function interpolatePosEmbed(cfg: VisionConfig, table: Float32Array, g: ImageGrid): Float32Array {
  const d = cfg.hiddenSize;
  const side = Math.round(Math.sqrt(cfg.numPositionEmbeddings));
  const rows = axisCorners(g.h, side);
  const cols = axisCorners(g.w, side);
  const coords = tokenCoords(g, cfg.spatialMergeSize);
  const n = gridTokens(g);
  const out = new Float32Array(n * d);
  for (let t = 0; t < n; t++) {
    const r = coords[2 * t]!;
    const c = coords[2 * t + 1]!;
    const dh = rows.frac[r]!;
    const dw = cols.frac[c]!;
    const corners: [number, number][] = [
      [rows.lo[r]! * side + cols.lo[c]!, (1 - dh) * (1 - dw)],
      [rows.lo[r]! * side + cols.hi[c]!, (1 - dh) * dw],
      [rows.hi[r]! * side + cols.lo[c]!, dh * (1 - dw)],
      [rows.hi[r]! * side + cols.hi[c]!, dh * dw],
    ];
    for (let j = 0; j < d; j++) {
      let s = 0;
      for (const [idx, wt] of corners) s += table[idx * d + j]! * wt;
      out[t * d + j] = s;
    }
  }
  return out;
}

/** Rotary angles [tokens × headDim/2]: the first quarter of the head rotates by row·invFreq,
 * the second by col·invFreq, with invFreq[k] = θ^(−4k/headDim), k < headDim/4. Channel i and
 * i + headDim/2 form a rotated pair with angle[i] (rotate_half convention). */
export function rotaryAngles(cfg: VisionConfig, g: ImageGrid): Float64Array {
  const quarter = cfg.headDim / 4;
  const half = cfg.headDim / 2;
  const inv = rotaryInvFreq(cfg);
  const coords = tokenCoords(g, cfg.spatialMergeSize);
  const n = gridTokens(g);
  const out = new Float64Array(n * half);
  for (let t = 0; t < n; t++) {
    for (let k = 0; k < quarter; k++) {
      out[t * half + k] = coords[2 * t]! * inv[k]!;
      out[t * half + quarter + k] = coords[2 * t + 1]! * inv[k]!;
    }
  }
  return out;
}

/** f_k = θ^(−4k/hd) for k < hd/4: the frequencies of the 2D rotary's pairs. */
function rotaryInvFreq(cfg: VisionConfig): Float64Array {
  const half = cfg.headDim / 2;
  return Float64Array.from({ length: cfg.headDim / 4 }, (_, k) => 1 / cfg.ropeTheta ** ((2 * k) / half));
}

/** A rotation by Kernels.rope: per-token positions and the table of the hd/2 pairs. */
export interface RotaryPass { readonly positions: Int32Array; readonly table: RopeTable }

/** The 2D rotary as two passes of the plain rope kernel over whole heads: the row pass turns
 * pair i < hd/4 by row·f_i, the column pass pair hd/4 + i by col·f_i; each pass gives the
 * other pairs frequency 0 (angle 0: cos 1, sin 0, an exact identity), so every pair turns
 * once by rotaryAngles' angle, in the kernel's arithmetic. */
export function rotaryPasses(cfg: VisionConfig, g: ImageGrid): readonly [RotaryPass, RotaryPass] {
  const quarter = cfg.headDim / 4;
  const inv = rotaryInvFreq(cfg);
  const coords = tokenCoords(g, cfg.spatialMergeSize);
  const n = gridTokens(g);
  const axis = (a: number): RotaryPass => {
    const invFreq = new Float64Array(2 * quarter);
    invFreq.set(inv, a * quarter);
    return { positions: Int32Array.from({ length: n }, (_, t) => coords[2 * t + a]!), table: { invFreq, scale: 1 } };
  };
  return [axis(0), axis(1)];
}
