// Requests whose penaltyPicks tables pass the draft-pass reservation's bound (engine/
// draft-memory.ts: T = min(V, C + k) table ids a row at max context C): a logit bias of 600
// ids, on an engine of max context 128, so a pass grows the penalty-values buffer (wasm:
// draft-memory.test, webgpu: webgpu-draft-penalty.test). A greedy penalised chain and a
// sampled one (penaltyPicks with `apply`), both biased.
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { drawRequests } from './sampled-draw-cases.js';

/** Engine options: a short context (the golden prompts 0 and 1, 22 and 89 tokens, fit with
 * 12 tokens out), k = 4, 2 running. */
export const GROWTH_ENGINE = { specAdaptive: false, kvCacheTokens: 1024, maxContext: 128, prefixCache: false, maxRunning: 2, specTokens: 4 } as const;

/** Ids 400..999 biased by multiples of 1/8 in [−1, 1] (f32 values: the f32 and f64 sums agree). */
export const WIDE_BIAS: ReadonlyMap<number, number> = new Map(Array.from({ length: 600 }, (_, i) => [400 + i, (((i * 37) % 17) - 8) / 8]));

/** The two requests, `maxTokens` out each. */
export function growthRequests(maxTokens = 12): GenerateRequest[] {
  const [a, b] = drawRequests({ temperature: 2, topK: 20, topP: 0.95 }, maxTokens, 2);
  return [
    { ...a!, temperature: 0, repetitionPenalty: 1.3, frequencyPenalty: 0.2, logitsAdjust: { bias: WIDE_BIAS } },
    { ...b!, logitsAdjust: { bias: WIDE_BIAS } },
  ];
}

