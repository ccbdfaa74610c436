// Seeded sampled requests for the candidate-path engine tests (wasm: sampled-candidates-
// engine, webgpu: webgpu-sampled-candidates): Qwen's default cut (temperature 0.7, top-k
// 20, top-p 0.8) and a hot one, min-p 0.1 without top-k, a min-p the candidates cannot hold
// (refused: the second read-back), top-k off (top-p alone: certificate (c)), penalties, and a
// logit bias.
import { readFileSync } from 'node:fs';
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { sharedPath } from './paths.js';

export const CASES = {
  qwen: { temperature: 0.7, topK: 20, topP: 0.8 },
  // tiny-think is peaked: at 0.7 most draws are its argmax, so the hot cases make u matter
  hotTopK: { temperature: 2, topK: 20, topP: 0.95 },
  minP: { temperature: 2, minP: 0.1 },
  // min-p keeps more ids than the candidates hold: every row refused, read whole a second time
  minPWide: { temperature: 2, minP: 1e-6 },
  topPOnly: { temperature: 2, topP: 0.95 },
  // adjustments: the touched ids' logits gathered and adjusted on the host
  penalised: { temperature: 2, topK: 20, topP: 0.95, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.3 },
  biased: { temperature: 2, topK: 20, topP: 0.95, logitsAdjust: { bias: new Map([[54, 2], [55, 3.5], [57, -4], [200, 6], [999, -100]]) } },
} as const;

/** Three golden prompts as seeded sampled requests of `maxTokens`. */
export function sampledRequests(sampling: Omit<Partial<GenerateRequest>, 'promptIds'>, maxTokens: number): GenerateRequest[] {
  const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: { prompt_ids: number[] }[] };
  return golden.prompts.slice(0, 3).map((p, i) => ({ promptIds: p.prompt_ids, maxTokens, ignoreEos: true, seed: 1000 + i, ...sampling }));
}

/** Every request's ids (run together, one batch), and the engine's candidate counters' change. */
export async function runAll(e: Engine, reqs: readonly GenerateRequest[]): Promise<{ ids: number[][]; rows: number; fallbacks: number }> {
  const before = e.sampledCandidates;
  const ids = await Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
  const after = e.sampledCandidates;
  return { ids, rows: after.rows - before.rows, fallbacks: after.fallbacks - before.fallbacks };
}
