// Cases for Kernels.candidateDraws (kernels/candidate-draws.ts), shared by the ref/wasm test
// (candidate-draws.test.ts) and the webgpu one (webgpu-sampled-draws.test.ts): seeded logits
// rows reduced to their top candidates (topCandidates' ref), under the task's cuts (T 0.7
// top-k 20 top-p 0.8; T 1.0 min-p 0.1; T 0.3 top-p 0.95; a hot top-k; top-k 200 and 1000), each
// with a seeded uniform; and the exact pick the host replays (sampled-candidates.ts: the
// certified row's draw, or the full row's when refused).
import { Rng } from '../src/util/rng.js';
import type { CandidateDraw } from '../src/kernels/types.js';
import { topCandidates } from '../src/kernels/top-candidates.js';
import { candidateCount, certify, drawCertified } from '../src/engine/sampled-candidates.js';
import { sample } from '../src/kernels/ref/sampling.js';
import { GREEDY, sampleRowOf, emptyResult, type SamplingParams } from '../src/engine/sampler.js';

export const DRAW_SAMPLINGS: Record<string, Partial<SamplingParams>> = {
  qwen: { temperature: 0.7, topK: 20, topP: 0.8 },
  minP: { temperature: 1, minP: 0.1 },
  topP: { temperature: 0.3, topP: 0.95 },
  hot: { temperature: 2, topK: 40, topP: 0.95 },
  // top-k past 128 (512 and 2048 candidates: MAX_DRAW_CANDIDATES), over rows longer than c
  topK200: { temperature: 1, topK: 200 },
  topK1000: { temperature: 1, topK: 1000, topP: 0.9 },
};

/** Ids per row: longer than the candidates, so the certificate has an outside to rule on. */
const ROW_IDS: Record<string, number> = { topK200: 1500, topK1000: 3000 };

export interface DrawCase {
  readonly name: string;
  readonly n: number;
  readonly c: number;
  /** The rows' logits [m, n], their candidates [m, c] and draws (null: a greedy row). */
  readonly x: Float32Array;
  readonly ids: Int32Array;
  readonly vals: Float32Array;
  readonly rows: (CandidateDraw | null)[];
  readonly sampling: SamplingParams[];
}

/** Seeded cases: per sampling, rows of n ids (peaked and flat), one greedy row among them. */
export function drawCases(): DrawCase[] {
  const rng = new Rng(4242);
  const out: DrawCase[] = [];
  for (const [name, s] of Object.entries(DRAW_SAMPLINGS)) {
    const sampling: SamplingParams = { ...GREEDY, ...s };
    const n = ROW_IDS[name] ?? 700;
    const c = candidateCount(sampling, n) || 256;
    const m = n > 700 ? 8 : 24;
    const x = new Float32Array(m * n);
    for (let r = 0; r < m; r++) {
      const scale = 1 + (r % 4) * 2;
      for (let i = 0; i < n; i++) x[r * n + i] = Math.fround((rng.next() - 0.5) * scale + (i % 97 === r ? 4 : 0));
    }
    const ids = new Int32Array(m * c);
    const vals = new Float32Array(m * c);
    topCandidates(ids, vals, 0, x, m, n, n, c);
    const rows = Array.from({ length: m }, (_, r): CandidateDraw | null => (r === 5 ? null : {
      invTemperature: 1 / sampling.temperature, topK: sampling.topK > 0 && sampling.topK < n ? sampling.topK : 0, topP: sampling.topP, minP: sampling.minP, u: rng.next(),
    }));
    out.push({ name, n, c, x, ids, vals, rows, sampling: rows.map(() => sampling) });
  }
  return out;
}

/** The exact pick of row r (the host's replay): the certified candidates' draw, else the full row's. */
export function exactPick(k: DrawCase, r: number): number {
  const row = k.rows[r]!;
  const p = k.sampling[r]!;
  const got = certify(k.ids.subarray(r * k.c, (r + 1) * k.c), k.vals.subarray(r * k.c, (r + 1) * k.c), p, k.n);
  if (got) return drawCertified(got, p, row.u).token;
  const res = emptyResult(0);
  sample([sampleRowOf(k.x.subarray(r * k.n, (r + 1) * k.n), p, null, k.n, { u: row.u, dist: null, topN: -1 })], [res]);
  return res.token;
}
