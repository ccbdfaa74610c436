// The llama.cpp vision parity cases (test/fixtures/llamacpp-vision): images, prompts, and how
// deltaserve answers one as llama-mtmd-cli prints it. Shared by the fixture's generator
// (scripts/llamacpp-vision-parity.mjs) and its test.
//
// llama.cpp's Qwen3-VL preprocessing differs from HF's in one known way: where the image
// must be resized, HF (and deltaserve) stretch it to smart_resize's (height, width), while
// llama.cpp keeps the aspect ratio — a Pillow-bicubic resize by min(W/w, H/h) (float32),
// ceil'd, centred on a black W×H canvas (tools/mtmd/mtmd-image.cpp, PAD_CEIL). A `letterbox`
// case gives deltaserve that padded image, so everything after preprocessing is compared.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Engine } from '../src/engine/engine.js';
import { ImageParts } from '../src/frontend/images.js';
import { decodeImage, type RgbImage } from '../src/vision/decode.js';
import { resizeBicubic, smartResize } from '../src/vision/preprocess.js';
import { encodePng } from './vision-encode.js';
import { REPO_ROOT } from './paths.js';

export const PARITY_DIR = join(REPO_ROOT, 'test', 'fixtures', 'llamacpp-vision');

export interface ParityCase {
  readonly image: string;
  readonly prompt: string;
  /** llama.cpp letterboxes this image (it needs a resize): give deltaserve the same pixels. */
  readonly letterbox: boolean;
}

export const PARITY_CASES: readonly ParityCase[] = [
  { image: 'image-256x256.png', prompt: 'x', letterbox: false },
  { image: 'image-256x256.png', prompt: 'What is in this picture?', letterbox: false },
  { image: 'image-200x120.png', prompt: 'x', letterbox: true },
];

/** llama.cpp's aspect-preserving resize + black padding to smart_resize's size. */
export function letterbox(img: RgbImage, minPixels: number, maxPixels: number, factor: number): RgbImage {
  const [th, tw] = smartResize(img.height, img.width, factor, minPixels, maxPixels);
  const scale = Math.min(Math.fround(tw / img.width), Math.fround(th / img.height));
  const w = Math.min(Math.ceil(Math.fround(img.width * scale)), tw);
  const h = Math.min(Math.ceil(Math.fround(img.height * scale)), th);
  const inner = resizeBicubic(img, w, h);
  const [ox, oy] = [Math.floor((tw - w) / 2), Math.floor((th - h) / 2)];
  const data = new Uint8Array(tw * th * 3);
  for (let y = 0; y < h; y++) data.set(inner.data.subarray(y * w * 3, (y + 1) * w * 3), ((y + oy) * tw + ox) * 3);
  return { width: tw, height: th, data };
}

async function imageBytes(e: Engine, c: ParityCase): Promise<Uint8Array> {
  const bytes = new Uint8Array(readFileSync(join(PARITY_DIR, c.image)));
  if (!c.letterbox) return bytes;
  const v = e.info.frontend.vision!;
  const boxed = letterbox(await decodeImage(bytes), v.pre.minPixels, v.pre.maxPixels, v.cfg.patchSize * v.cfg.spatialMergeSize);
  const rgba = new Uint8Array(boxed.width * boxed.height * 4).fill(255);
  for (let i = 0; i < boxed.width * boxed.height; i++) rgba.set(boxed.data.subarray(3 * i, 3 * i + 3), 4 * i);
  return encodePng(rgba, boxed.width, boxed.height);
}

/** GPT-2 byte-level BPE: the byte each vocabulary character stands for. */
function byteLevelDecoder(): Map<string, number> {
  const direct = (b: number): boolean => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  const map = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) map.set(String.fromCharCode(direct(b) ? b : 256 + extra++), b);
  return map;
}
const BYTES = byteLevelDecoder();

/** The raw bytes of `ids` (as llama.cpp prints pieces: a token holding part of a UTF-8
 * character prints that byte), as a latin1 string; special tokens by their text. */
export function rawText(e: Engine, ids: readonly number[]): string {
  return ids.map((id) => {
    if (e.tokenizer.specialIds.has(id)) return e.tokenizer.decode([id]);
    return [...(e.tokenizer.idToToken(id) ?? '')].map((ch) => String.fromCharCode(BYTES.get(ch) ?? 0x3f)).join('');
  }).join('');
}

/** llama-mtmd-cli's stdout for a continuation: "\n", the pieces, "\n" more when it stopped
 * at an end-of-generation token, then "\n\n" — which its asynchronous logger sometimes
 * loses at exit, so either form is its output. */
export function llamaStdoutForms(text: string, stopped: boolean): [string, string] {
  const body = `\n${text}${stopped ? '\n' : ''}`;
  return [body, `${body}\n\n`];
}

/** deltaserve's greedy answer (banned ids at −inf) and the stdout llama-mtmd-cli prints for it. */
export async function parityAnswer(e: Engine, c: ParityCase, banned: readonly number[], maxTokens: number): Promise<{ ids: readonly number[]; stdout: string }> {
  const parts = new ImageParts();
  const content = parts.add(await imageBytes(e, c), c.image) + c.prompt; // llama-mtmd-cli puts the image first
  const req = await e.info.frontend.withPrompt({ messages: [{ role: 'user', content }], images: parts, maxTokens, temperature: 0 });
  const bias = banned.length > 0 ? { logitsAdjust: { bias: new Map(banned.map((id) => [id, -Infinity])) } } : {};
  const done = await e.complete({ ...req, ...bias });
  const stopped = done.finishReason === 'stop';
  const last = done.outputIds.at(-1);
  const eog = stopped && last !== undefined && e.tokenizer.stopIds().includes(last);
  const text = rawText(e, eog ? done.outputIds.slice(0, -1) : done.outputIds);
  return { ids: done.outputIds, stdout: llamaStdoutForms(text, stopped)[1] };
}
