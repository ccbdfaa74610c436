// Shared by the vision tests: the repo's tiny vision fixture, its tower weights read as f32,
// and random weights / patches for configs the fixture does not cover (deepstack).
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { openCheckpoint, bf16ToF32 } from '../src/checkpoint/safetensors.js';
import { parseVisionConfig, type VisionConfig } from '../src/vision/config.js';
import { type VisionWeights, loadVisionWeights, visionTensorShapes } from '../src/vision/weights.js';
import { Rng } from '../src/util/rng.js';
import { REPO_ROOT } from './paths.js';

export const TINY_VISION = join(REPO_ROOT, 'test', 'fixtures', 'tiny-vision');

export function fixtureVisionConfig(): VisionConfig {
  const cfg = parseVisionConfig(JSON.parse(readFileSync(join(TINY_VISION, 'config.json'), 'utf8')) as Record<string, unknown>);
  if (!cfg) throw new Error('the tiny-vision fixture has no vision_config');
  return cfg;
}

/** The fixture's tower: BF16 values widened exactly to f32. */
export function fixtureVisionWeights(cfg: VisionConfig): VisionWeights {
  const ck = openCheckpoint(TINY_VISION);
  try {
    return loadVisionWeights(cfg, (name, shape) => {
      const info = ck.info(name);
      if (info.shape.join() !== shape.join()) throw new Error(`${name}: shape [${info.shape}] vs config [${shape}]`);
      if (info.dtype !== 'BF16') throw new Error(`${name}: ${info.dtype}, the fixture is BF16`);
      const bytes = ck.read(name);
      const u16 = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
      return Float32Array.from(u16, bf16ToF32);
    });
  } finally {
    ck.close();
  }
}

/** Uniform values in [-scale, scale). */
export function randomArray(rng: Rng, n: number, scale: number): Float32Array {
  return Float32Array.from({ length: n }, () => (2 * rng.next() - 1) * scale);
}

/** Random weights for any config: LayerNorm weights near 1, everything else small. */
export function randomVisionWeights(cfg: VisionConfig, seed: number): VisionWeights {
  const rng = new Rng(seed);
  const tensors = new Map(visionTensorShapes(cfg).map(([name, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const isNormWeight = /norm\d?\.weight$/.test(name);
    const fan = shape.length >= 2 ? shape.slice(1).reduce((a, b) => a * b, 1) : 16;
    const data = randomArray(rng, n, isNormWeight ? 0.2 : 1.5 / Math.sqrt(fan));
    if (isNormWeight) for (let i = 0; i < n; i++) data[i] = data[i]! + 1;
    return [name, data];
  }));
  return loadVisionWeights(cfg, (name) => tensors.get(name)!);
}
