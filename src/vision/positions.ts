// Image placeholders in the token sequence and the multimodal rotary positions (temporal,
// height, width) of Qwen3-VL / Qwen3.5 (`get_rope_index`):
// - An image appears in the prompt as <|vision_start|> <|image_pad|>×n <|vision_end|>, n =
//   t·(h/m)·(w/m) (the merger's output count). Chat templates emit one <|image_pad|> per
//   image; expandImagePads repeats it n times, as the processor does.
// - Text tokens get position p on all three axes, p counting up from 0.
// - An image starting at running position s gets, for merged token (ti, r, c) in row-major
//   order: (s + ti, s + r, s + c). The running position then advances by max(h, w)/m, so text
//   after the image continues at s + max(h/m, w/m).
// - After the prompt, token i (0-based in the whole sequence) has position i + delta on all
//   axes, delta = (next running position) − (sequence length).
import { DeltaserveError } from '../util/errors.js';
import type { ImageGrid } from './grid.js';

/** The placeholder text of one image, as Qwen's chat template writes it. */
export const IMAGE_PLACEHOLDER = '<|vision_start|><|image_pad|><|vision_end|>';

/** Merged tokens the tower produces for `grid`: t · (h/m) · (w/m). */
export function imageTokenCount(grid: ImageGrid, mergeSize: number): number {
  return grid.t * (grid.h / mergeSize) * (grid.w / mergeSize);
}

/** Repeat the i-th <|image_pad|> of `ids` n_i times (n_i = imageTokenCount(grids[i])). The
 * number of pads must equal the number of images. */
export function expandImagePads(ids: readonly number[], imageTokenId: number, grids: readonly ImageGrid[], mergeSize: number): number[] {
  const out: number[] = [];
  let image = 0;
  for (const id of ids) {
    if (id !== imageTokenId) {
      out.push(id);
      continue;
    }
    const grid = grids[image++];
    if (!grid) break;
    for (let k = imageTokenCount(grid, mergeSize); k > 0; k--) out.push(id);
  }
  const pads = ids.filter((id) => id === imageTokenId).length;
  if (pads !== grids.length) {
    throw new DeltaserveError('bad_request', `the prompt has ${pads} image placeholder${pads === 1 ? '' : 's'} for ${grids.length} image${grids.length === 1 ? '' : 's'}`);
  }
  return out;
}

export interface MropePositions {
  /** [3 × length]: temporal, then height, then width positions of every token. */
  readonly positions: Int32Array;
  readonly length: number;
  /** Position of the next token: generated token j (0-based after the prompt) is at
   * length + j + delta on every axis. */
  readonly delta: number;
}

/** The three position rows of a prompt whose image tokens are runs of `imageTokenId`, one
 * run of imageTokenCount(grid) tokens per entry of `grids`, in order. */
export function mropePositions(ids: readonly number[], imageTokenId: number, grids: readonly ImageGrid[], mergeSize: number): MropePositions {
  const n = ids.length;
  const pos = new Int32Array(3 * n);
  let running = 0;
  let image = 0;
  let i = 0;
  while (i < n) {
    if (ids[i] !== imageTokenId) {
      pos[i] = pos[n + i] = pos[2 * n + i] = running++;
      i++;
      continue;
    }
    const grid = grids[image++];
    if (!grid) throw new DeltaserveError('bad_request', `image tokens at position ${i} have no image (${grids.length} given)`);
    const [gh, gw] = [grid.h / mergeSize, grid.w / mergeSize];
    const count = grid.t * gh * gw;
    for (let k = 0; k < count; k++, i++) {
      if (ids[i] !== imageTokenId) {
        throw new DeltaserveError('bad_request', `image ${image - 1} needs ${count} image tokens from position ${i - k}; found ${k}`);
      }
      pos[i] = running + Math.floor(k / (gh * gw));
      pos[n + i] = running + Math.floor((k % (gh * gw)) / gw);
      pos[2 * n + i] = running + (k % gw);
    }
    running += Math.max(gh, gw);
  }
  if (image !== grids.length) throw new DeltaserveError('bad_request', `${grids.length} images for ${image} image token runs`);
  return { positions: pos, length: n, delta: running - n };
}

/** Which position axis (0 = temporal, 1 = height, 2 = width) rotates each of the text
 * attention's `pairs` rotary pairs. Interleaved (Qwen3-VL, Qwen3.5): pair j uses height when
 * j ≡ 1 (mod 3) and j < 3·section[1], width when j ≡ 2 (mod 3) and j < 3·section[2], else
 * temporal. Chunked (Qwen2-VL): section[0] temporal pairs, then height, then width. */
export function mropePairAxes(pairs: number, section: readonly [number, number, number], interleaved: boolean): Uint8Array {
  if (!interleaved && section[0] + section[1] + section[2] !== pairs) {
    throw new DeltaserveError('bad_config', `mrope_section [${section.join(', ')}] must sum to the ${pairs} rotary pairs`);
  }
  const axes = new Uint8Array(pairs);
  for (let j = 0; j < pairs; j++) {
    if (interleaved) {
      if (j % 3 === 1 && j < 3 * section[1]) axes[j] = 1;
      else if (j % 3 === 2 && j < 3 * section[2]) axes[j] = 2;
    } else {
      axes[j] = j < section[0] ? 0 : j < section[0] + section[1] ? 1 : 2;
    }
  }
  return axes;
}
