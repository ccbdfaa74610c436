// One kernel call per step for every row that samples, reports logprobs or needs its
// distribution (decode rows, speculative verify positions, MTP draft rows). Rows are read
// in place from backend memory; the only per-row JS data are the penalty patches (the ids
// a penalty touches) and the top-N logprobs. A logits mask (e.g. grammar-constrained
// decoding) is applied to the rows before `run` — the kernels see the masked rows.
import type { AnyKernels, SampleResult, SampleRow } from '../kernels/types.js';
import type { Rng } from '../util/rng.js';
import { type Argmax, emptyResult, greedyToken, isGreedy, sampleRowOf, type SamplingParams, type HistoryView } from './sampler.js';

export interface SampleJob {
  /** The raw logits row (≥ vocab floats), unchanged by the sampler. */
  readonly logits: Float32Array;
  readonly vocab: number;
  readonly sampling: SamplingParams;
  readonly history: HistoryView | null;
  /** Ids after the history that count as generated (verify position i: d_1..d_i). */
  readonly extra?: readonly number[];
  /** Pick a token: the argmax when greedy, else a draw with one uniform from rng. */
  readonly rng: Pick<Rng, 'next'> | null;
  /** Keep the row's sampling distribution (weights + their sum) for speculative decoding. */
  readonly dist?: boolean;
  /** top_logprobs count (0..REQUEST_PARAMS.topLogprobs.max), or −1 for no logprobs. */
  readonly logprobs: number;
}

export interface TopLogprob {
  readonly id: number;
  readonly logprob: number;
}

/** An emitted token's log-probability and the most likely ids at its position. */
export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
  readonly top: readonly TopLogprob[];
}

/** Log-softmax of the raw row (before penalties, temperature and cuts) at one position. */
export interface LogprobSummary {
  /** log Σ exp(logits) over the vocabulary. */
  readonly logZ: number;
  readonly top: readonly TopLogprob[];
  /** The raw row (valid until the next forward). */
  readonly row: Float32Array;
}

export interface SampleOutcome {
  /** The pick (−1 when the job has no rng). */
  readonly token: number;
  /** Kept weights over [0, vocab) (backend memory, valid until the next run) and their sum. */
  readonly weights: Float32Array | null;
  readonly mass: number;
  readonly logprobs: LogprobSummary | null;
}

/** logprob of `id` under a summary (floored at −9999, as OpenAI reports −inf). */
export function logprobOf(s: LogprobSummary, id: number): number {
  return Math.max(s.row[id]! - s.logZ, -9999);
}

/** probs[i] = weights[i] / mass for i < vocab (a normalised distribution in f64). */
export function toProbs(weights: Float32Array, mass: number, vocab: number, into: Float64Array): Float64Array {
  for (let i = 0; i < vocab; i++) into[i] = weights[i]! / mass;
  return into;
}

export class BatchSampler {
  /** Per kernel row index: a weights buffer in backend memory (reused every run). */
  private readonly dists: Float32Array[] = [];

  constructor(private readonly kernels: AnyKernels, readonly argmax?: Argmax) {}

  private distBuffer(i: number, vocab: number): Float32Array {
    let d = this.dists[i];
    if (!d || d.length < vocab) {
      const t = this.kernels.alloc(vocab); // in the kernels' memory when it is host-visible (no staging copy)
      this.dists[i] = d = t instanceof Float32Array ? t : new Float32Array(vocab);
    }
    return d;
  }

  /** Outcomes of `jobs`, in order; uniforms are drawn from each job's rng in job order. */
  run(jobs: readonly SampleJob[]): SampleOutcome[] {
    const rows: SampleRow[] = [];
    const results: SampleResult[] = [];
    const rowOf: number[] = [];
    jobs.forEach((j) => {
      const greedy = isGreedy(j.sampling);
      const draw = !greedy && j.rng !== null;
      const dist = !greedy && j.dist === true;
      if (!draw && !dist && j.logprobs < 0) {
        rowOf.push(-1);
        return;
      }
      rowOf.push(rows.length);
      if (greedy) {
        rows.push({
          logits: j.logits, n: j.vocab, invTemperature: 1, topK: 0, topP: 1, minP: 0, u: 0, patchIds: null, patchVals: null,
          patchCount: 0, draw: false, logprobs: true, topN: j.logprobs, dist: null,
        });
      } else {
        rows.push(sampleRowOf(j.logits, j.sampling, j.history, j.vocab, {
          ...(draw ? { u: j.rng!.next() } : {}), ...(j.extra ? { extra: j.extra } : {}),
          dist: dist ? this.distBuffer(rows.length, j.vocab) : null, topN: j.logprobs,
        }));
      }
      results.push(emptyResult(Math.max(j.logprobs, 0)));
    });
    if (rows.length > 0) this.kernels.sample(rows, results);
    return jobs.map((j, i) => {
      const r = rowOf[i]!;
      const res = r >= 0 ? results[r]! : null;
      const row = r >= 0 ? rows[r]! : null;
      const token = isGreedy(j.sampling) ? (j.rng ? greedyToken(j.logits, j.sampling, j.history, j.vocab, this.argmax) : -1)
        : row?.draw ? res!.token : -1;
      return { token, weights: row?.dist ?? null, mass: res?.keptMass ?? 0, logprobs: res && j.logprobs >= 0 ? summary(j, res) : null };
    });
  }
}

function summary(j: SampleJob, res: SampleResult): LogprobSummary {
  const logZ = res.rawMax + Math.log(res.rawSumExp);
  const top: TopLogprob[] = [];
  for (let t = 0; t < j.logprobs; t++) {
    const id = res.topIds[t]!;
    if (id >= 0) top.push({ id, logprob: Math.max(res.topVals[t]! - logZ, -9999) });
  }
  return { logZ, top, row: j.logits };
}
