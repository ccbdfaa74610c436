// The sampling distribution by its definition, in f64 by sorting: softmax at the temperature,
// then min-p (relative to the top probability), top-k, top-p (the smallest prefix of the
// descending order whose mass reaches p; ties by lower id), renormalized. The oracle the
// sampler's and the kernels' tests compare against.
export interface Truncation {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly minP: number;
}

/** Probabilities over ids [0, logits.length) of already-penalised `logits`. */
export function samplingDefinition(logits: ArrayLike<number>, p: Truncation): Float64Array {
  const l = Array.from(logits, Number);
  const max = Math.max(...l);
  let probs = l.map((x) => Math.exp((x - max) / p.temperature));
  const pmax = Math.max(...probs);
  if (p.minP > 0) probs = probs.map((x) => (x < p.minP * pmax ? 0 : x));
  const order = probs.map((_, i) => i).filter((i) => probs[i]! > 0).sort((a, b) => probs[b]! - probs[a]! || a - b);
  let keep = p.topK > 0 ? Math.min(p.topK, order.length) : order.length;
  const total = order.slice(0, keep).reduce((a, i) => a + probs[i]!, 0);
  let cum = 0;
  for (let i = 0; i < keep && p.topP < 1; i++) {
    cum += probs[order[i]!]! / total;
    if (cum >= p.topP) {
      keep = i + 1;
      break;
    }
  }
  const out = new Float64Array(l.length);
  let sum = 0;
  for (const i of order.slice(0, keep)) sum += probs[i]!;
  for (const i of order.slice(0, keep)) out[i] = probs[i]! / sum;
  return out;
}
