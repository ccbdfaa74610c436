// Kernels.penaltyPicks for host-memory rows (ref and wasm: one implementation; the definition
// the webgpu shader wgsl/penalty-picks.ts follows). One draft step of penalised greedy MTP
// chains (engine/speculative/draft-device.ts), per row i of x (x[i·stride .. + n)):
//
//   touched ids: the row's `ids`, then (countsDrafts) its drafts before this step,
//     d_t = ids[t·idsStride + i], t < steps; a draft's count is its occurrences among them,
//     added to its table count;
//   penalised value (f32, each operation rounded to f32): v = raw + bias; with repetition
//     ≠ 1 and (prompt or count > 0): v = v > 0 ? v / rp : v · rp; with count > 0:
//     v = (v − presence) − frequency · count. Untouched ids keep their raw logit.
//   pick: the lowest id holding the maximum of the penalised row (NaN never wins; all NaN: 0)
//     → ids[steps·idsStride + i];
//   untouched best: the argmax of the row with every touched id at −∞ (argmaxRowsMasked's rule)
//     → ids[bestOffset + i];
//   gathered raw logits at vals[penaltyValsAt(call, i) ..]: the best's, each table id's, each
//     draft's (written only where the drafts count);
//   with `apply`, last: x[id] = the penalised value of each touched id (table ids, and drafts
//     outside the table), so x holds the f32-adjusted row a sampled draft is drawn from.
//
// The pick is f32 arithmetic, not the f64 definition of greedyToken (engine/sampler.ts): it is
// a proposal. The gathered values are what the host needs to replay the exact f64 pick
// (engine/greedy-finish.ts finishGreedy) and keep it only where the two agree.
import type { PenaltyPickRow, PenaltyPicksCall } from './kernel-operands.js';

const f = Math.fround;

/** Does (w, j) beat (v, i) in the argmax order (index −1: nothing yet; NaN never wins)? */
function better(v: number, i: number, w: number, j: number): boolean {
  if (j < 0 || w !== w) return false;
  if (i < 0) return true;
  return w > v || (w === v && j < i);
}

/** The penalised f32 value of a touched id's raw logit (the definition above). */
export function penalisedValue(r: PenaltyPickRow, raw: number, bias: number, prompt: boolean, count: number): number {
  let v = f(raw + bias);
  if (f(r.repetition) !== 1 && (prompt || count > 0)) v = v > 0 ? f(v / f(r.repetition)) : f(v * f(r.repetition));
  if (count > 0) v = f(f(v - f(r.presence)) - f(f(r.frequency) * count));
  return v;
}

/** Where row i's gathered values start in vals. */
export function penaltyValsAt(call: Pick<PenaltyPicksCall, 'rows' | 'steps' | 'valsOffset'>, i: number): number {
  let at = call.valsOffset;
  for (let r = 0; r < i; r++) at += 1 + call.rows[r]!.ids.length + call.steps;
  return at;
}

function isUntouched(mask: Uint32Array, id: number): boolean {
  return (((mask[id >>> 5] ?? 0) >>> (id & 31)) & 1) === 1;
}

export function penaltyPicks(ids: Int32Array, x: Float32Array, vals: Float32Array, a: PenaltyPicksCall): void {
  const { m, n, stride, steps, idsStride, bestOffset, rows } = a;
  if (rows.length !== m) throw new RangeError(`penaltyPicks: ${rows.length} rows for ${m}`);
  if (m > 0 && (n > stride || (m - 1) * stride + n > x.length)) throw new RangeError(`penaltyPicks: ${m} rows of ${n} past the logits`);
  if (m > 0 && (steps * idsStride + m > ids.length || bestOffset + m > ids.length || m > idsStride)) throw new RangeError(`penaltyPicks: ${m} rows past the ids`);
  for (let i = 0; i < m; i++) {
    const r = rows[i]!;
    const valsAt = penaltyValsAt(a, i);
    if (valsAt + 1 + r.ids.length + steps > vals.length) throw new RangeError(`penaltyPicks: row ${i}'s values past vals`);
    const base = i * stride;
    const drafts = r.countsDrafts ? Array.from({ length: steps }, (_, t) => ids[t * idsStride + i]!) : [];
    for (const d of drafts) if (!(d >= 0 && d < n)) throw new RangeError(`penaltyPicks: row ${i}'s draft ${d} outside [0, ${n})`);
    const occurrences = (id: number): number => drafts.reduce((c, d) => c + (d === id ? 1 : 0), 0);
    // untouched best (a touched id counts as −∞, not skipped)
    let ui = -1;
    let uv = 0;
    for (let p = 0; p < n; p++) {
      const v = isUntouched(r.untouched, p) && !drafts.includes(p) ? x[base + p]! : -Infinity;
      if (better(uv, ui, v, p)) { uv = v; ui = p; }
    }
    // touched best: table ids, then drafts outside the table (each id once)
    let ti = -1;
    let tv = 0;
    r.ids.forEach((id, e) => {
      const raw = x[base + id]!;
      vals[valsAt + 1 + e] = raw;
      const v = penalisedValue(r, raw, r.bias[e]!, r.prompt[e] === 1, r.counts[e]! + occurrences(id));
      if (better(tv, ti, v, id)) { tv = v; ti = id; }
    });
    drafts.forEach((id, t) => {
      const raw = x[base + id]!;
      vals[valsAt + 1 + r.ids.length + t] = raw;
      if (!isUntouched(r.untouched, id) || drafts.indexOf(id) < t) return;
      const v = penalisedValue(r, raw, 0, false, occurrences(id));
      if (better(tv, ti, v, id)) { tv = v; ti = id; }
    });
    const best = Math.max(ui, 0);
    vals[valsAt] = x[base + best]!;
    ids[bestOffset + i] = best;
    ids[steps * idsStride + i] = Math.max(better(uv, ui, tv, ti) ? ti : ui, 0);
    if (a.apply) applyRow(x, base, r, drafts, occurrences);
  }
}

/** x[base + id] = the penalised value of every touched id: the table's (bias and counts), then
 * the drafts outside the table (each once; no bias, no prompt). */
function applyRow(x: Float32Array, base: number, r: PenaltyPickRow, drafts: readonly number[], occurrences: (id: number) => number): void {
  r.ids.forEach((id, e) => {
    x[base + id] = penalisedValue(r, x[base + id]!, r.bias[e]!, r.prompt[e] === 1, r.counts[e]! + occurrences(id));
  });
  drafts.forEach((id, t) => {
    if (!isUntouched(r.untouched, id) || drafts.indexOf(id) < t) return;
    x[base + id] = penalisedValue(r, x[base + id]!, 0, false, occurrences(id));
  });
}
