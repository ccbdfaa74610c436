// A vision model from llama.cpp's mmproj GGUF beside a text model (`--mmproj FILE`, as
// llama-server takes it): the tower, its config and preprocessing constants come from the
// mmproj; what the tower must fit comes from the text model — its hidden size, its layer
// count (deepstack features go into the first layers), its multimodal rotary layout and the
// vision token ids. Every mismatch is a DeltaserveError naming both files and the field.
import { readGgufHeader } from '../checkpoint/gguf-file.js';
import { DeltaserveError } from '../util/errors.js';
import type { MropeConfig, VisionTokens } from './config.js';
import type { VisionModel } from './load.js';
import { loadMmproj } from './mmproj.js';

/** What the text model offers the tower. */
export interface TextSide {
  /** The text model's file or directory (for messages). */
  readonly where: string;
  readonly hiddenSize: number;
  readonly numLayers: number;
  /** Rotary pairs of the text attention (rotary dim / 2). */
  readonly rotaryPairs: number;
  /** null: the text model has no multimodal rotary layout (it takes no images). */
  readonly mrope: MropeConfig | null;
  readonly tokens: VisionTokens;
}

/** The token strings of Qwen3-VL / Qwen3.5 vision placeholders (their chat template's). */
export const VISION_TOKEN_TEXT = {
  imageTokenId: '<|image_pad|>', videoTokenId: '<|video_pad|>',
  visionStartTokenId: '<|vision_start|>', visionEndTokenId: '<|vision_end|>',
} as const;

/** The vision token ids by their strings in a vocabulary (null where absent). */
export function visionTokensOf(tokenToId: (s: string) => number | undefined): VisionTokens {
  const id = (s: string): number | null => tokenToId(s) ?? null;
  return {
    imageTokenId: id(VISION_TOKEN_TEXT.imageTokenId), videoTokenId: id(VISION_TOKEN_TEXT.videoTokenId),
    visionStartTokenId: id(VISION_TOKEN_TEXT.visionStartTokenId), visionEndTokenId: id(VISION_TOKEN_TEXT.visionEndTokenId),
  };
}

/** Multimodal rotary layout of a text GGUF: `<arch>.rope.dimension_sections` (llama.cpp's
 * [t, h, w, 0]); qwen35 / qwen35moe rotate the axes interleaved (llama.cpp's IMROPE, HF's
 * mrope_interleaved). null when the file has no sections (a model that takes no images). */
export function ggufMrope(path: string): MropeConfig | null {
  const f = readGgufHeader(path);
  const arch = f.metadata.get('general.architecture');
  const sections = f.metadata.get(`${String(arch)}.rope.dimension_sections`);
  if (!Array.isArray(sections) || sections.length < 3) return null;
  const [t, h, w] = sections.map(Number) as [number, number, number];
  return { section: [t, h, w], interleaved: arch === 'qwen35' || arch === 'qwen35moe' };
}

function mismatch(mmproj: string, text: TextSide, what: string): never {
  throw new DeltaserveError('bad_config', `mmproj ${mmproj} does not fit the text model ${text.where}: ${what}`);
}

/** The vision model of `mmprojPath` checked against the text model it serves. */
export function loadMmprojVision(mmprojPath: string, text: TextSide): VisionModel {
  const { cfg, pre, weights } = loadMmproj(mmprojPath);
  if (cfg.outHiddenSize !== text.hiddenSize) {
    mismatch(mmprojPath, text, `its projection_dim (clip.vision.projection_dim) is ${cfg.outHiddenSize}, the text hidden size is ${text.hiddenSize}`);
  }
  if (cfg.deepstackVisualIndexes.length > text.numLayers) {
    mismatch(mmprojPath, text, `${cfg.deepstackVisualIndexes.length} deepstack layers, the text model has ${text.numLayers} layers`);
  }
  const mrope = text.mrope ?? mismatch(mmprojPath, text, 'the text model has no multimodal rotary sections (rope.dimension_sections): it takes no images');
  const pairs = mrope.section[0] + mrope.section[1] + mrope.section[2];
  if (pairs !== text.rotaryPairs) {
    mismatch(mmprojPath, text, `rope sections [${mrope.section.join(', ')}] cover ${pairs} rotary pairs, the attention rotates ${text.rotaryPairs}`);
  }
  for (const [field, s] of Object.entries(VISION_TOKEN_TEXT)) {
    if (field !== 'videoTokenId' && text.tokens[field as keyof VisionTokens] === null) {
      mismatch(mmprojPath, text, `its vocabulary has no ${s} token`);
    }
  }
  return { cfg, pre, weights, mrope, tokens: text.tokens };
}
