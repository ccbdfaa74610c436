// Inputs of the llama.cpp vision parity fixture (test/fixtures/llamacpp-vision), written
// deterministically from the tiny-vision fixture: the tower as an F32 mmproj (exact: the
// BF16 values widened) and two opaque RGB PNG images — 256×256 (no resize on either side:
// within both min/max pixel bounds, a multiple of 32) and 200×120 (resized up to the
// min-pixel bound by both). Usage: node scripts/llamacpp-vision-inputs.mjs OUT_DIR
// (after `npx tsc`; it imports dist/).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { openCheckpoint } from '../dist/src/checkpoint/safetensors.js';
import { writeMmproj } from '../dist/src/tools/mmproj-writer.js';
import { DEFAULT_PREPROCESS, parseVisionConfig } from '../dist/src/vision/config.js';
import { checkpointReader } from '../dist/src/vision/load.js';
import { encodePng } from '../dist/test/vision-encode.js';
import { readFileSync } from 'node:fs';

const out = process.argv[2];
if (!out) throw new Error('usage: node scripts/llamacpp-vision-inputs.mjs OUT_DIR');
const fixture = new URL('../test/fixtures/tiny-vision/', import.meta.url).pathname;
const cfg = parseVisionConfig(JSON.parse(readFileSync(join(fixture, 'config.json'), 'utf8')));
const ck = openCheckpoint(fixture);
await writeMmproj(join(out, 'mmproj-tiny-vision-F32.gguf'), { cfg, pre: DEFAULT_PREPROCESS, name: 'tiny-vision', matrixType: 'F32' }, checkpointReader(ck));
ck.close();

/** Smooth colour fields with some structure (compresses well; every channel varies). */
function pixels(w, h) {
  const rgba = new Uint8Array(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = 4 * (y * w + x);
      rgba[i] = (x * 255) / (w - 1);
      rgba[i + 1] = (y * 255) / (h - 1);
      rgba[i + 2] = 128 + 127 * Math.sin((x + 2 * y) / 9);
      rgba[i + 3] = 255;
    }
  }
  return rgba;
}
for (const [w, h] of [[256, 256], [200, 120]]) writeFileSync(join(out, `image-${w}x${h}.png`), await encodePng(pixels(w, h), w, h));
console.log(`wrote ${out}/mmproj-tiny-vision-F32.gguf, image-256x256.png, image-200x120.png`);
