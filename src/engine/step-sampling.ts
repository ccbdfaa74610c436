// The "sample" stage of a step: which positions of the batch go through the sampler (one
// BatchSampler run; rows the kernels picked on the device, device-picks.ts, carry ids and
// skip it, and so do sampled rows — decode, or a verify row's positions — drawn from their
// certified top candidates: sampled-candidates.ts), and what each real row emits — a sampling row's pick, a verify row's
// accepted drafts and bonus (speculative/) — as the StepOutcome the scheduler's update
// commits. Reads requests, writes none.
import type { Batch, BatchRow } from './batch.js';
import type { RequestView } from './request.js';
import { adjustStepLogits } from './logits-adjust.js';
import type { StepResult } from './runner.js';
import { drawCertified } from './sampled-candidates.js';
import type { BatchSampler, SampleJob, SampleOutcome } from './sample-batch.js';
import { isGreedy } from './sampler.js';
import type { Speculator } from './speculative/speculator.js';
import type { RowOutcome, StepOutcome } from './step-output.js';

const NOTHING: RowOutcome = { tokens: [], logprobs: [], logits: [], drafted: 0, accepted: 0 };

/** Adjust (bias, constraint), sample, and accept the step's rows. */
export function stepOutcome(batch: Batch, result: StepResult, sampler: BatchSampler, speculative: Speculator, hiddenSize: number,
  vocab: number): StepOutcome {
  const rows = batch.rows.slice(0, batch.nReal);
  adjustStepLogits(rows, result.logits, vocab);
  // rows the kernels picked (result.ids) have no logits rows here: they sample nothing; nor do
  // the rows of a request no longer running (an overlapped step's: overlap.ts), whose uniforms
  // stay for the request's real steps
  const gone = rows.map((r) => r.req!.status !== 'running');
  const skip = rows.map((_, i) => gone[i] || result.ids[i] !== null || result.candidates[i] !== null);
  const picks = sampleStep(sampler, rows, result.logits, vocab, skip, (req) => speculative.matches(req));
  return {
    kind: 'step', batch,
    rows: rows.map((row, i): RowOutcome => {
      if (gone[i]) return NOTHING;
      const logits = result.logits[i]!;
      const ids = result.ids[i];
      const cand = result.candidates[i];
      if (row.verify) {
        if (ids) return speculative.acceptPicks(row, ids);
        return cand ? speculative.acceptCandidates(row, cand) : speculative.accept(row, logits, picks[i]!);
      }
      if (!row.sample || row.req!.snapshotOnly) return NOTHING;
      if (ids) return { tokens: [ids[0]!], logprobs: [null], logits: [], drafted: 0, accepted: 0 };
      // the one uniform of this row's draw, from its request's rng as the full-row path draws it
      if (cand) return { tokens: [drawCertified(cand[0]!, row.req!.sampling, row.req!.rng.next()).token], logprobs: [null], logits: [], drafted: 0, accepted: 0 };
      const pick = picks[i]![0]!;
      return { tokens: [pick.token], logprobs: [pick.logprobs], logits: [logits[0]!], drafted: 0, accepted: 0 };
    }),
    hiddenAt: (i, step) => {
      const rowHidden = result.hostHidden[i];
      // the runner reads back the hidden rows of every row a snapshot may take (rowMaySnapshot)
      if (!rowHidden) throw new Error(`internal: batch row ${i}'s hidden rows were not read back, yet a snapshot needs step ${step}`);
      return rowHidden.subarray(step * hiddenSize, (step + 1) * hiddenSize);
    },
  };
}

/** Per real row (batch order), the outcome of each position that samples (none for the rows
 * `picked` marks: their tokens came from the kernels' picks or candidates): a decode row's
 * last position; every verify position of a sampled request or of a request wanting logprobs.
 * A sampled verify position s given the drafts before it is drawn with the request's s-th
 * uniform ahead when `matches` says so (the draw MTP off would make there: accept.ts 'match';
 * the acceptance advances the rng by the tokens it emits), else keeps its p for the rejection
 * sampler. */
export function sampleStep(sampler: BatchSampler, rows: readonly BatchRow[], logits: readonly Float32Array[][],
  vocab: number, picked: readonly boolean[] = [], matches: (req: RequestView) => boolean = () => false): SampleOutcome[][] {
  const jobs: SampleJob[] = [];
  const at: number[][] = rows.map((row, i) => {
    const req = row.req!;
    if (picked[i] === true) return [];
    const base = { vocab, sampling: req.sampling, history: req.history, logprobs: req.onLogprob ? req.topLogprobs : -1 };
    const first = jobs.length;
    const greedy = isGreedy(req.sampling);
    if (row.verify) {
      if (!greedy && matches(req)) {
        const ahead = req.rng.fork();
        logits[i]!.forEach((l, s) => jobs.push({ ...base, logits: l, extra: req.drafts.slice(0, s), rng: uniform(ahead.next()) }));
      } else if (!greedy || req.onLogprob) {
        logits[i]!.forEach((l, s) => jobs.push({ ...base, logits: l, extra: req.drafts.slice(0, s), rng: null, dist: !greedy }));
      }
    } else if (row.sample && !req.snapshotOnly) jobs.push({ ...base, logits: logits[i]![0]!, rng: req.rng });
    return Array.from({ length: jobs.length - first }, (_, s) => first + s);
  });
  const out = sampler.run(jobs);
  return at.map((idx) => idx.map((j) => out[j]!));
}

/** A source of one given uniform (a draw made ahead of the request's rng). */
function uniform(u: number): { next(): number } {
  return { next: () => u };
}
