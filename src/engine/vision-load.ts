// Which vision tower the engine loads: `--mmproj FILE` (llama.cpp's projector GGUF, beside a
// text GGUF or a model directory), else the projector a hub `:QUANT` reference recorded,
// else a release checkpoint's own tower (model.visual.* in its safetensors); none with
// `--no-mmproj` (mmproj: false) or for a text GGUF without a projector.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { resolveModelSource } from '../checkpoint/source.js';
import type { AnyModel } from '../model/model.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { type MropeConfig, type VisionTokens, parseMrope, parseVisionTokens } from '../vision/config.js';
import { loadVisionModel, type VisionModel } from '../vision/load.js';
import { ggufMrope, loadMmprojVision, type TextSide, visionTokensOf } from '../vision/mmproj-model.js';

type Json = Record<string, unknown>;

/** The projector to load: the explicit option wins (false: none), else the hub's. A
 * missing file fails here, before any backend starts or weights load. */
export function chosenMmproj(option: string | false | undefined, fromHub: string | null): string | null {
  if (option === false) return null;
  const path = option !== undefined ? resolve(option) : fromHub;
  if (path !== null && !existsSync(path)) throw new DeltaserveError('bad_config', `mmproj file not found: ${path}`);
  return path;
}

/** Rotary layout and vision token ids of a model directory: config.json's where it sets
 * them, the vocabulary's placeholder tokens otherwise. */
function directorySide(dir: string, tokenizer: TextTokenizer): { mrope: MropeConfig; tokens: VisionTokens } {
  const where = join(dir, 'config.json');
  const outer = JSON.parse(readFileSync(where, 'utf8')) as Json;
  const text = (typeof outer['text_config'] === 'object' && outer['text_config'] !== null ? outer['text_config'] : outer) as Json;
  const fromConfig = parseVisionTokens(outer, where);
  const fromVocab = visionTokensOf((s) => tokenizer.tokenToId(s));
  const tokens: VisionTokens = {
    imageTokenId: fromConfig.imageTokenId ?? fromVocab.imageTokenId, videoTokenId: fromConfig.videoTokenId ?? fromVocab.videoTokenId,
    visionStartTokenId: fromConfig.visionStartTokenId ?? fromVocab.visionStartTokenId,
    visionEndTokenId: fromConfig.visionEndTokenId ?? fromVocab.visionEndTokenId,
  };
  return { mrope: parseMrope(text, `${where} (text_config)`), tokens };
}

/** What the text model at `path` (resolved model path) offers a projector. */
function textSide(path: string, model: AnyModel, tokenizer: TextTokenizer): TextSide {
  const src = resolveModelSource(path);
  const cfg = model.config;
  const base = { hiddenSize: cfg.hiddenSize, numLayers: cfg.numLayers, rotaryPairs: cfg.rotaryDim / 2 };
  if (src.kind === 'gguf') {
    return { ...base, where: src.file, mrope: ggufMrope(src.file), tokens: visionTokensOf((s) => tokenizer.tokenToId(s)) };
  }
  return { ...base, where: src.dir, ...directorySide(src.dir, tokenizer) };
}

/** The engine's vision model for the resolved model `path` and projector `mmproj`. */
export function loadEngineVision(path: string, mmproj: string | null, noTower: boolean, model: AnyModel, tokenizer: TextTokenizer): VisionModel | null {
  if (noTower) return null;
  if (mmproj !== null) {
    return loadMmprojVision(mmproj, textSide(path, model, tokenizer));
  }
  const src = resolveModelSource(path);
  return src.kind === 'hf' && existsSync(join(src.dir, 'config.json')) ? loadVisionModel(src.dir) : null;
}
