// Engine runs for the sampled-draft chain tests (speculative/draft-device.ts), wasm
// (mtp-sampled-draws) and webgpu (webgpu-sampled-draws): the task's cuts as seeded requests,
// run together (batched, with greedy streams among them), with the drafter's counters, every
// read-back counted (draft-record.ts), and a wrapper that corrupts a device draw.
import type { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import type { CandidateDraw, ReadRange, Tensor } from '../src/kernels/types.js';
import { sampledRequests } from './sampled-candidates-cases.js';

export const DRAW_CASES = {
  qwen: { temperature: 0.7, topK: 20, topP: 0.8 },
  minP: { temperature: 1.0, minP: 0.1 },
  topP: { temperature: 0.3, topP: 0.95 },
  // tiny-think is peaked: a hot cut makes the uniform matter
  hot: { temperature: 2, topK: 20, topP: 0.95 },
} as const;

/** `n` sampled requests of a case (the golden prompts in turn, seeds 1000 + i), and a greedy
 * one after them when `greedy`. */
export function drawRequests(sampling: Omit<Partial<GenerateRequest>, 'promptIds'>, maxTokens: number, n: number, greedy = false): GenerateRequest[] {
  const golden = sampledRequests(sampling, maxTokens);
  const reqs = Array.from({ length: n }, (_, i) => ({ ...golden[i % golden.length]!, seed: 1000 + i }));
  return greedy ? [...reqs, { ...reqs[0]!, temperature: 0, seed: 7 }] : reqs;
}

export interface DrawRun {
  readonly ids: number[][];
  readonly rounds: number;
  /** Target steps (prefill, decode, verify) run meanwhile: one read-back each. */
  readonly targetSteps: number;
  readonly reads: number;
  readonly bytes: number;
  readonly sampled: Engine['sampledDrafts'];
  /** Draft passes of rounds without a sampled chain (greedy chains alone, penalised or biased). */
  readonly greedyPasses: number;
}

/** The requests run together; read-backs counted over the run. */
export async function runDraws(e: Engine, reqs: readonly GenerateRequest[]): Promise<DrawRun> {
  const k = e.model.kernels;
  const readBack = k.readBack;
  let [reads, bytes] = [0, 0];
  k.readBack = (ranges: readonly ReadRange<Tensor>[]) => {
    reads++;
    for (const r of ranges) bytes += 4 * r.length;
    return readBack.call(k, ranges);
  };
  const s0 = e.sampledDrafts;
  const p0 = e.penaltyDrafts.passes;
  const r0 = e.stats().spec.rounds;
  const st0 = e.stats().steps;
  const steps0 = st0.prefill + st0.decode + st0.verify;
  try {
    const ids = await Promise.all(reqs.map(async (r) => [...(await e.complete(r)).outputIds]));
    const s1 = e.sampledDrafts;
    const sampled = {
      rounds: s1.rounds - s0.rounds, steps: s1.steps - s0.steps, passes: s1.passes - s0.passes, disagreements: s1.disagreements - s0.disagreements,
      refused: s1.refused - s0.refused, refusedReads: s1.refusedReads - s0.refusedReads, ended: s1.ended - s0.ended,
    };
    const st = e.stats().steps;
    return { ids, rounds: e.stats().spec.rounds - r0, targetSteps: st.prefill + st.decode + st.verify - steps0, reads, bytes, sampled, greedyPasses: e.penaltyDrafts.passes - p0 };
  } finally {
    k.readBack = readBack;
  }
}

/** Make every candidateDraws call's first drawn row pick a wrong id (written after the kernel's
 * pick, in order with the step's work): the replay disagrees and the chain redrafts. */
export function corruptDraws(e: Engine): () => void {
  const k = e.model.kernels;
  const orig = k.candidateDraws;
  k.candidateDraws = (out: Tensor, outOffset: number, ids: Tensor, vals: Tensor, candOffset: number, c: number, rows: readonly (CandidateDraw | null)[]) => {
    orig.call(k, out, outOffset, ids, vals, candOffset, c, rows);
    const i = rows.findIndex((r) => r !== null);
    if (i >= 0) k.write(out, outOffset + i, [997]);
  };
  return () => { k.candidateDraws = orig; };
}
