// Image placeholders and multimodal rotary positions: a hand-worked prompt, agreement with a
// transcription of transformers' get_rope_index (group tokens by type, one grid per image
// group) on random layouts, the pair → axis map of interleaved and chunked mrope, and errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IMAGE_PLACEHOLDER, expandImagePads, imageTokenCount, mropePairAxes, mropePositions } from '../src/vision/positions.js';
import { parseMrope } from '../src/vision/config.js';
import type { ImageGrid } from '../src/vision/grid.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { TINY_VISION } from './vision-helpers.js';

const [VS, PAD, VE] = [1000, 1003, 1001];

test('hand-worked prompt: text, one 4×6-patch image (2×3 merged), text', () => {
  const ids = expandImagePads([5, 6, VS, PAD, VE, 7], PAD, [{ t: 1, h: 4, w: 6 }], 2);
  assert.deepEqual(ids, [5, 6, VS, PAD, PAD, PAD, PAD, PAD, PAD, VE, 7]);
  const m = mropePositions(ids, PAD, [{ t: 1, h: 4, w: 6 }], 2);
  const rows = [0, 1, 2].map((a) => Array.from(m.positions.subarray(a * ids.length, (a + 1) * ids.length)));
  assert.deepEqual(rows[0], [0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7]);
  assert.deepEqual(rows[1], [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7]);
  assert.deepEqual(rows[2], [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7]);
  assert.equal(m.delta, 8 - 11); // the next token (index 11) is at position 8
});

/** transformers' get_rope_index, transcribed: group by token type, then per group. */
function hfRopeIndex(ids: readonly number[], grids: readonly ImageGrid[], m: number): { rows: number[][]; delta: number } {
  const groups: { image: boolean; len: number }[] = [];
  for (const id of ids) {
    const image = id === PAD;
    const last = groups[groups.length - 1];
    if (last && last.image === image) last.len++;
    else groups.push({ image, len: 1 });
  }
  const rows: number[][] = [[], [], []];
  let current = 0;
  let next = 0;
  for (const g of groups) {
    if (!g.image) {
      for (let k = 0; k < g.len; k++) rows.forEach((r) => r.push(current + k));
      current += g.len;
      continue;
    }
    const grid = grids[next++]!;
    const [t, h, w] = [grid.t, grid.h / m, grid.w / m];
    for (let a = 0; a < t; a++) for (let b = 0; b < h; b++) for (let c = 0; c < w; c++) {
      rows[0]!.push(a + current); rows[1]!.push(b + current); rows[2]!.push(c + current);
    }
    current += Math.max(grid.h, grid.w) / m;
  }
  return { rows, delta: Math.max(...rows.flat()) + 1 - ids.length };
}

test('random prompts: positions and delta equal the get_rope_index transcription', () => {
  const rng = new Rng(49);
  for (let trial = 0; trial < 200; trial++) {
    const template: number[] = [];
    const grids: ImageGrid[] = [];
    const parts = 1 + (rng.nextU32() % 5);
    for (let p = 0; p < parts; p++) {
      for (let k = rng.nextU32() % 4; k > 0; k--) template.push(rng.nextU32() % 900);
      if (rng.next() < 0.6) {
        grids.push({ t: 1, h: 2 * (1 + (rng.nextU32() % 5)), w: 2 * (1 + (rng.nextU32() % 5)) });
        template.push(VS, PAD, VE);
      }
    }
    if (template.length === 0) template.push(3);
    const ids = expandImagePads(template, PAD, grids, 2);
    assert.equal(ids.length, template.length + grids.reduce((a, g) => a + imageTokenCount(g, 2) - 1, 0));
    const got = mropePositions(ids, PAD, grids, 2);
    const want = hfRopeIndex(ids, grids, 2);
    assert.deepEqual(Array.from(got.positions), want.rows.flat(), `trial ${trial}`);
    assert.equal(got.delta, want.delta, `trial ${trial} delta`);
  }
});

test('mrope pair axes: Qwen3.5 [11, 11, 10] interleaved and Qwen2-VL chunked', () => {
  const axes = Array.from(mropePairAxes(32, [11, 11, 10], true));
  assert.deepEqual(axes.slice(0, 9), [0, 1, 2, 0, 1, 2, 0, 1, 2]);
  assert.deepEqual(axes.slice(27), [0, 1, 2, 0, 1]); // j = 30: 30 ≥ 3·10, temporal; j = 31 ≡ 1, < 33: height
  assert.deepEqual([0, 1, 2].map((a) => axes.filter((x) => x === a).length), [11, 11, 10]);
  assert.deepEqual(Array.from(mropePairAxes(6, [2, 2, 2], false)), [0, 0, 1, 1, 2, 2]);
  assert.throws(() => mropePairAxes(6, [2, 2, 1], false), /must sum to the 6 rotary pairs/);
  assert.deepEqual(parseMrope({ rope_parameters: { mrope_section: [24, 20, 20], mrope_interleaved: true } }), { section: [24, 20, 20], interleaved: true });
  assert.deepEqual(parseMrope({}), { section: [11, 11, 10], interleaved: true });
  assert.throws(() => parseMrope({ rope_parameters: { mrope_section: [1, 2] } }), /"mrope_section" must be a list of 3/);
});

test('placeholder text tokenizes to start, one pad, end (the fixture tokenizer)', () => {
  assert.deepEqual(TextTokenizer.load(TINY_VISION).encode(`look: ${IMAGE_PLACEHOLDER}`).slice(-3), [VS, PAD, VE]);
});

test('placeholder / image count mismatches are bad requests', () => {
  const g = { t: 1, h: 2, w: 2 };
  assert.throws(() => expandImagePads([VS, PAD, VE], PAD, [], 2), /1 image placeholder for 0 images/);
  assert.throws(() => expandImagePads([VS, PAD, VE, PAD], PAD, [g], 2), /2 image placeholders for 1 image/);
  assert.throws(() => mropePositions([VS, PAD, PAD, VE], PAD, [g], 2), /image 0 needs 1 image tokens|2 image token runs|no image/);
  assert.throws(() => mropePositions([VS, PAD, VE], PAD, [{ t: 1, h: 4, w: 2 }], 2), /image 0 needs 2 image tokens from position 1; found 1/);
  assert.throws(() => mropePositions([1, 2], PAD, [g], 2), /1 images for 0 image token runs/);
});
