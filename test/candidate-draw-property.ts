// Adversarial rows for Kernels.candidateDraws (kernels/candidate-draws.ts, the definition):
// candidates of few distinct values (weight ties everywhere, so the rank order's index
// tie-break decides), ±∞ and NaN values, padding after a random count, every c from 1 to
// MAX_DRAW_CANDIDATES (powers of two and not), and cuts that hit each branch: top-k of 1, of
// more than the entries, top-p of 0, 1 and in between, min-p removing most entries,
// temperatures that flatten or sharpen, uniforms at 0 and near 1. Shared by the webgpu test
// (webgpu-candidate-draws.test.ts: the WGSL twin == the ref bit for bit).
import { Rng } from '../src/util/rng.js';
import type { CandidateDraw } from '../src/kernels/types.js';

export interface DrawBatch {
  readonly c: number;
  readonly ids: Int32Array;
  readonly vals: Float32Array;
  readonly rows: (CandidateDraw | null)[];
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)]!;

/** One row's candidates: ascending ids, values from a few levels (ties), −1 padding after n. */
function fillRow(rng: Rng, ids: Int32Array, vals: Float32Array, o: number, c: number): void {
  const n = rng.next() < 0.7 ? c : Math.floor(rng.next() * (c + 1));
  const levels = pick(rng, [1, 2, 3, 8, 1000]);
  const special = rng.next() < 0.15;
  let id = Math.floor(rng.next() * 10);
  for (let j = 0; j < c; j++) {
    if (j >= n) {
      ids[o + j] = -1;
      vals[o + j] = 0;
      continue;
    }
    ids[o + j] = id;
    id += 1 + Math.floor(rng.next() * 3);
    let v = Math.fround(Math.floor(rng.next() * levels) * 0.5 - 2);
    if (special) v = pick(rng, [v, v, v, -Infinity, Infinity, NaN]);
    vals[o + j] = v;
  }
}

function drawOf(rng: Rng, c: number): CandidateDraw | null {
  if (rng.next() < 0.05) return null;
  return {
    invTemperature: pick(rng, [1, 1 / 0.7, 0.5, 4, 1e-3, 50]),
    topK: pick(rng, [0, 0, 1, 2, 7, Math.max(1, c >> 1), c, c + 5]),
    topP: pick(rng, [1, 1, 0.95, 0.8, 0.5, 0.1, 0, 0.9999]),
    minP: pick(rng, [0, 0, 0.05, 0.3, 0.9]),
    u: pick(rng, [0, 0.999999, rng.next(), rng.next(), rng.next()]),
  };
}

/** Batches of `rows` rows at each c in `cs` (seeded). */
export function drawBatches(cs: readonly number[], rows: number, seed = 2026): DrawBatch[] {
  const rng = new Rng(seed);
  return cs.map((c) => {
    const ids = new Int32Array(rows * c);
    const vals = new Float32Array(rows * c);
    for (let r = 0; r < rows; r++) fillRow(rng, ids, vals, r * c, c);
    return { c, ids, vals, rows: Array.from({ length: rows }, () => drawOf(rng, c)) };
  });
}
