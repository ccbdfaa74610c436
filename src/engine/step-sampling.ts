// Which positions of a step's batch go through the sampler, in one BatchSampler run.
import type { BatchRow } from './batch.js';
import type { BatchSampler, SampleJob, SampleOutcome } from './sample-batch.js';
import { isGreedy } from './sampler.js';

/** Per real row (batch order), the outcome of each position that samples: a decode row's
 * last position; every verify position of a sampled request (its p given the drafts before
 * it, drawn later by the rejection sampler) or of a request wanting logprobs. A per-request
 * logits mask (e.g. grammar-constrained decoding) belongs here, applied to the rows before
 * the sampler runs. */
export function sampleStep(sampler: BatchSampler, rows: readonly BatchRow[], logits: readonly Float32Array[][],
  vocab: number): SampleOutcome[][] {
  const jobs: SampleJob[] = [];
  const at: number[][] = rows.map((row, i) => {
    const req = row.req!;
    const base = { vocab, sampling: req.sampling, history: req.history, logprobs: req.onLogprob ? req.topLogprobs : -1 };
    const first = jobs.length;
    const greedy = isGreedy(req.sampling);
    if (row.verify) {
      if (!greedy || req.onLogprob) {
        logits[i]!.forEach((l, s) => jobs.push({ ...base, logits: l, extra: req.drafts.slice(0, s), rng: null, dist: !greedy }));
      }
    } else if (row.sample && !req.snapshotOnly) jobs.push({ ...base, logits: logits[i]![0]!, rng: req.rng });
    return Array.from({ length: jobs.length - first }, (_, s) => first + s);
  });
  const out = sampler.run(jobs);
  return at.map((idx) => idx.map((j) => out[j]!));
}
