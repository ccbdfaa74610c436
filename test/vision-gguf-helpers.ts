// Shared by the GGUF vision tests: the tiny-vision fixture as llama.cpp-style files (a text
// GGUF written by `deltaserve quantize`, an F32 mmproj of the fixture's tower — exact, so
// the tower is bit-identical to the directory's) and one greedy image request.
import { join } from 'node:path';
import { openCheckpoint } from '../src/checkpoint/safetensors.js';
import type { Engine } from '../src/engine/engine.js';
import { ImageParts } from '../src/frontend/images.js';
import { quantizeToGguf } from '../src/tools/quantize-gguf.js';
import { writeMmproj } from '../src/tools/mmproj-writer.js';
import { DEFAULT_PREPROCESS } from '../src/vision/config.js';
import { checkpointReader } from '../src/vision/load.js';
import { TINY_VISION, fixtureVisionConfig } from './vision-helpers.js';

/** The fixture's text model as a BF16 GGUF in `dir` (same weights as its safetensors). */
export async function fixtureTextGguf(dir: string): Promise<string> {
  const out = join(dir, 'tiny-vision-BF16.gguf');
  await quantizeToGguf({ model: TINY_VISION, out, type: 'bf16', threads: 1 });
  return out;
}

/** The fixture's tower as an F32 mmproj in `dir` (BF16 values widen exactly). */
export async function fixtureF32Mmproj(dir: string): Promise<string> {
  const out = join(dir, 'mmproj-tiny-vision-F32.gguf');
  const ck = openCheckpoint(TINY_VISION);
  try {
    await writeMmproj(out, { cfg: fixtureVisionConfig(), pre: DEFAULT_PREPROCESS, name: 'tiny-vision', matrixType: 'F32' }, checkpointReader(ck));
  } finally {
    ck.close();
  }
  return out;
}

export interface ImageAnswer {
  readonly ids: readonly number[];
  readonly prompt: readonly number[];
  readonly logits: Float32Array[];
}

/** Greedy ids (and the logits of each step) of one user turn: `text` then the image. */
export async function answerImage(e: Engine, image: Uint8Array, text: string, maxTokens = 12): Promise<ImageAnswer> {
  const parts = new ImageParts();
  const messages = [{ role: 'user', content: `${text} ${parts.add(image, 'messages[0].content[1]')}` }];
  const req = await e.info.frontend.withPrompt({ messages, images: parts, maxTokens, temperature: 0, ignoreEos: true });
  const logits: Float32Array[] = [];
  const done = await e.complete({ ...req, captureLogits: (l) => logits.push(l.slice()) });
  return { ids: done.outputIds, prompt: done.promptIds, logits };
}
