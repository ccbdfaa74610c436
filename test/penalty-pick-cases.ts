// Cases for Kernels.penaltyPicks (kernels/penalty-picks.ts), shared by the ref/wasm test
// (penalty-picks.test.ts) and the webgpu one (webgpu-draft-penalty.test.ts): random penalised
// rows (repetition, presence, frequency, bias, table ids also drafted, repeated drafts, ties,
// −∞ and NaN logits), and a crafted near-tie where the f32 penalty picks another id than the
// f64 definition. `check` states what every backend's output must satisfy: the host's replay
// (device-finish.ts replayPick, from the gathered values only) == greedyToken over the full row.
import assert from 'node:assert/strict';
import type { AnyKernels, Kernels, PenaltyPickRow, PenaltyPicksCall } from '../src/kernels/types.js';
import { idsOf } from '../src/engine/device-picks.js';
import type { RequestView } from '../src/engine/request.js';
import { GREEDY, greedyToken, penaltyPatches } from '../src/engine/sampler.js';
import { adjustInPlace } from '../src/engine/logits-adjust.js';
import { greedyAdjust, penaltyRow, replayPick } from '../src/engine/device-finish.js';
import { touchedIds } from '../src/engine/greedy-finish.js';
import { penaltyValsAt } from '../src/kernels/penalty-picks.js';
import { rng } from './numeric.js';

export interface PickCase {
  readonly name: string;
  /** Logits rows [m, stride]. */
  readonly x: Float32Array;
  /** The ids tensor before the call: drafts at [t·idsStride + i], t < steps. */
  readonly ids: Int32Array;
  readonly valsLength: number;
  readonly call: PenaltyPicksCall;
  readonly reqs: readonly RequestView[];
  /** Per row: drafts its table counts already (penaltyRow's prefix), and the call's drafts. */
  readonly prefix: readonly (readonly number[])[];
  readonly drafts: readonly (readonly number[])[];
}

interface Penalties { rp: number; pp: number; fp: number; prompt: number[]; outputs: number[]; bias: [number, number][] }

function fakeRequest(p: Penalties): RequestView {
  const outputCounts = new Map<number, number>();
  for (const id of p.outputs) outputCounts.set(id, (outputCounts.get(id) ?? 0) + 1);
  return {
    sampling: { ...GREEDY, repetitionPenalty: p.rp, presencePenalty: p.pp, frequencyPenalty: p.fp },
    history: { outputCounts, promptIds: new Set(p.prompt) },
    adjust: p.bias.length > 0 ? { bias: new Map(p.bias) } : null,
  } as unknown as RequestView;
}

function build(name: string, n: number, stride: number, steps: number, rows: { logits: Float32Array; p: Penalties; prefix: number[]; drafts: number[] }[]): PickCase {
  const m = rows.length;
  const idsStride = m + 1;
  const bestOffset = (steps + 1) * idsStride;
  const ids = new Int32Array(bestOffset + m).fill(-7);
  const x = new Float32Array(m * stride).fill(-3);
  const reqs = rows.map((r) => fakeRequest(r.p));
  const table: PenaltyPickRow[] = rows.map((r, i) => {
    x.set(r.logits, i * stride);
    r.drafts.forEach((d, t) => { ids[t * idsStride + i] = d; });
    return penaltyRow(reqs[i]!, n, r.prefix);
  });
  // the values start past a few unused slots (valsOffset is honoured)
  const call: PenaltyPicksCall = { m, n, stride, steps, idsStride, bestOffset, valsOffset: 3, rows: table };
  return { name, x, ids, valsLength: penaltyValsAt(call, m), call, reqs, prefix: rows.map((r) => r.prefix), drafts: rows.map((r) => r.drafts) };
}

/** Random cases over n = 300 ids (a partial mask word), 0..3 drafts a row. */
export function randomCases(): PickCase[] {
  const r = rng(47);
  const n = 300;
  const id = (): number => Math.floor(r() * n);
  const cases: PickCase[] = [];
  for (let c = 0; c < 12; c++) {
    const steps = c % 4;
    const rows = [0, 1, 2].map((i) => {
      // coarse values (even cases) make ties; a few −∞ and NaN
      const logits = Float32Array.from({ length: n }, () => {
        const u = r();
        const v = r() * 8 - 4;
        return u < 0.01 ? -Infinity : u < 0.015 && c % 3 === 0 ? NaN : c % 2 === 0 ? Math.round(v * 4) / 4 : v;
      });
      const prompt = Array.from({ length: 5 + i * 7 }, id);
      const outputs = Array.from({ length: 3 + c }, () => (r() < 0.5 ? prompt[Math.floor(r() * prompt.length)]! : id()));
      const p: Penalties = {
        rp: [1, 1.3, 0.8][(c + i) % 3]!, pp: [0, 0.5, 1.25][(c + 2 * i) % 3]!, fp: [0.3, 0, 0.7][(c + i) % 3]!,
        prompt, outputs, bias: i === 1 ? [[id(), 2.5], [id(), -1.1]] : [],
      };
      // a biased row without penalties (its drafts count for nothing) in every fourth case
      if (c % 4 === 3 && i === 1) [p.rp, p.pp, p.fp] = [1, 0, 0];
      else if (p.rp === 1 && p.pp === 0 && p.fp === 0) p.fp = 0.2;
      // drafts: the row's raw best often (its penalty decides the pick), some from the table
      // (prompt / outputs), some repeated
      const top = logits.reduce((b, v, j) => (v > logits[b]! ? j : b), 0);
      const drafts = Array.from({ length: steps }, (_, t) => (t > 0 && r() < 0.3 ? -1 : r() < 0.4 ? top : r() < 0.5 ? outputs[0]! : id()));
      drafts.forEach((d, t) => { if (d < 0) drafts[t] = drafts[t - 1]!; });
      const prefix = c % 2 === 0 ? [] : [id(), outputs[1]!];
      return { logits, p, prefix, drafts };
    });
    cases.push(build(`random ${c}`, n, n + 5, steps, rows));
  }
  return cases;
}

/** A near-tie: touched id 5 (a prompt id, rp 1.3) penalised in f32 rounds up to exactly the
 * untouched id 9's logit, so the f32 pick is 5 (the lower id of a tie) while the exact f64
 * value of id 5 is below id 9's: the definition picks 9. */
export function nearTieCase(): PickCase {
  const n = 64;
  const row = build('probe', n, n, 0, [{ logits: new Float32Array(n).fill(-10), p: { rp: 1.3, pp: 0, fp: 0, prompt: [5], outputs: [], bias: [] }, prefix: [], drafts: [] }]);
  const rp = Math.fround(1.3);
  for (let raw = 2; raw < 3; raw = Math.fround(raw + 2 ** -20)) {
    const f32 = Math.fround(raw / rp);
    if (raw / 1.3 < f32) {
      const logits = new Float32Array(n).fill(-10);
      logits[5] = raw;
      logits[9] = f32;
      return build('near tie', n, n, 0, [{ logits, p: { rp: 1.3, pp: 0, fp: 0, prompt: [5], outputs: [], bias: [] }, prefix: [], drafts: [] }]);
    }
  }
  throw new Error(`no near tie found (${row.name})`);
}

/** The exact pick of row i: greedyToken over the whole row (bias as adjustInPlace). */
export function exactPick(c: PickCase, i: number): number {
  const { n, stride } = c.call;
  const l = c.x.slice(i * stride, i * stride + n);
  const req = c.reqs[i]!;
  adjustInPlace(l, n, req.adjust, null);
  return greedyToken(l, req.sampling, req.history, n, undefined, [...c.prefix[i]!, ...c.drafts[i]!]);
}

/** Checks a backend's output of case c; returns per row whether its f32 pick equalled the exact one. */
export function check(c: PickCase, ids: Int32Array, vals: Float32Array): boolean[] {
  const { m, n, stride, steps, idsStride, bestOffset, rows } = c.call;
  return Array.from({ length: m }, (_, i) => {
    const what = `${c.name}, row ${i}`;
    const row = rows[i]!;
    const at = penaltyValsAt(c.call, i);
    const best = ids[bestOffset + i]!;
    assert.equal(vals[at], c.x[i * stride + best], `${what}: the best's raw logit`);
    row.ids.forEach((id, e) => assert.ok(Object.is(vals[at + 1 + e], c.x[i * stride + id]), `${what}: raw logit of table id ${id}`));
    const want = exactPick(c, i);
    assert.equal(replayPick(c.reqs[i]!, n, row, c.prefix[i]!, c.drafts[i]!, vals, at, best), want, `${what}: the replay == greedyToken over the full row`);
    const pick = ids[steps * idsStride + i]!;
    assert.ok(pick >= 0 && pick < n, `${what}: pick ${pick} in the row`);
    return pick === want;
  });
}

/** A draft chain of penaltyPicks calls within one step, as draft-device.ts makes them: call t
 * over the first live[t] rows (the same row objects: a backend may keep their table), its
 * drafts the picks of calls 0..t−1, its values after theirs. */
export interface ChainCase {
  readonly n: number;
  /** Per call, its logits rows [live[t], n]. */
  readonly x: readonly Float32Array[];
  readonly live: readonly number[];
  readonly reqs: readonly RequestView[];
  readonly rows: readonly PenaltyPickRow[];
}

export function chainCase(): ChainCase {
  const r = rng(7);
  const n = 200;
  const live = [3, 3, 2, 1];
  const reqs = [0, 1, 2].map((i) => fakeRequest({
    rp: [1.3, 1, 0.9][i]!, pp: [0.5, 0.8, 0][i]!, fp: [0.3, 0.4, 0.6][i]!, prompt: [1, 2, 3, 50 + i], outputs: [7, 7, 9 + i], bias: i === 2 ? [[11, 1.5]] : [],
  }));
  return {
    n, live, reqs, rows: reqs.map((q) => penaltyRow(q, n, [])),
    // a strong top id per row, so the chain keeps drafting it and its penalty grows
    x: live.map((m) => Float32Array.from({ length: m * n }, (_, j) => (j % n === 20 + Math.floor(j / n) ? 6 : r() * 8 - 4))),
  };
}

/** The calls of chain c on kernels k in one step; the picks [t][i], bests [t][i] and values. */
export async function runChain(k: AnyKernels, c: ChainCase): Promise<{ picks: number[][]; bests: number[][]; vals: Float32Array; calls: PenaltyPicksCall[] }> {
  const m0 = c.rows.length;
  const ids = k.allocI32(2 * c.live.length * m0);
  const calls: PenaltyPicksCall[] = [];
  let vo = 0;
  const xs = c.x.map((rows) => { const t = k.alloc(rows.length); k.write(t, 0, rows); return t; });
  const need = c.live.reduce((a, m, t) => a + penaltyValsAt({ rows: c.rows.slice(0, m), steps: t, valsOffset: 0 }, m), 0);
  const vals = k.alloc(need);
  c.live.forEach((m, t) => {
    const call: PenaltyPicksCall = { m, n: c.n, stride: c.n, steps: t, idsStride: m0, bestOffset: (c.live.length + t) * m0, valsOffset: vo, rows: c.rows.slice(0, m) };
    vo = penaltyValsAt(call, m);
    calls.push(call);
    k.penaltyPicks(ids, xs[t]!, vals, call);
  });
  const [idsRead, valsRead] = await k.readBack([{ t: ids, offset: 0, length: 2 * c.live.length * m0 }, { t: vals, offset: 0, length: need }]);
  const all = idsOf(idsRead!).slice();
  return {
    picks: c.live.map((m, t) => Array.from({ length: m }, (_, i) => all[t * m0 + i]!)),
    bests: c.live.map((m, t) => Array.from({ length: m }, (_, i) => all[(c.live.length + t) * m0 + i]!)),
    vals: valsRead!.slice(), calls,
  };
}

/** The replay of every chain call == greedyToken over its full row, the drafts before it the
 * chain's picks; returns how many f32 picks equalled the exact ones. */
export function checkChain(c: ChainCase, got: { picks: number[][]; bests: number[][]; vals: Float32Array; calls: PenaltyPicksCall[] }): number {
  let same = 0;
  c.live.forEach((m, t) => {
    for (let i = 0; i < m; i++) {
      const drafts = got.picks.slice(0, t).map((p) => p[i]!);
      const l = c.x[t]!.slice(i * c.n, (i + 1) * c.n);
      adjustInPlace(l, c.n, c.reqs[i]!.adjust, null);
      const want = greedyToken(l, c.reqs[i]!.sampling, c.reqs[i]!.history, c.n, undefined, drafts);
      const replay = replayPick(c.reqs[i]!, c.n, c.rows[i]!, [], drafts, got.vals, penaltyValsAt(got.calls[t]!, i), got.bests[t]![i]!);
      assert.equal(replay, want, `chain call ${t}, row ${i}: the replay == greedyToken over the full row`);
      if (got.picks[t]![i] === want) same++;
    }
  });
  return same;
}

/** One penaltyPicks call of case `c` on host-memory kernels (ref, wasm): the ids and gathered values. */
export function runOn(k: Kernels, c: PickCase): { ids: Int32Array; vals: Float32Array; x: Float32Array } {
  const x = k.alloc(c.x.length);
  x.set(c.x);
  const ids = k.allocI32(c.ids.length);
  ids.set(c.ids);
  const vals = k.alloc(c.valsLength);
  k.penaltyPicks(ids, x, vals, c.call);
  return { ids: ids.slice(), vals: vals.slice(), x: x.slice() };
}

/** Case c with the call's `apply` on (x becomes the f32-adjusted rows). */
export function applying(c: PickCase): PickCase {
  return { ...c, name: `${c.name} (apply)`, call: { ...c.call, apply: true } };
}

/** Checks x after an `apply` call of case c: every id no penalty or bias touches (and the
 * stride's padding) keeps its raw logit bit for bit; every touched id holds its adjusted value
 * within f32 rounding of the host's definition (adjustInPlace's bias, then penaltyPatches with
 * the row's drafts counted). Returns how many touched values were checked. */
export function checkApplied(c: PickCase, after: Float32Array): number {
  const { m, n, stride } = c.call;
  let checked = 0;
  for (let i = 0; i < m; i++) {
    const req = c.reqs[i]!;
    const extra = [...c.prefix[i]!, ...c.drafts[i]!];
    const touched = new Set(touchedIds(greedyAdjust(req, null, n, extra)));
    const l = c.x.slice(i * stride, i * stride + n);
    adjustInPlace(l, n, req.adjust, null);
    const patches = penaltyPatches(l, req.sampling, req.history, n, extra);
    patches?.ids.forEach((id, j) => { l[id] = patches.vals[j]!; });
    for (let p = 0; p < stride; p++) {
      const [got, raw] = [after[i * stride + p]!, c.x[i * stride + p]!];
      if (!touched.has(p)) {
        assert.ok(Object.is(got, raw), `${c.name}, row ${i}: untouched id ${p} keeps its raw logit (${got} vs ${raw})`);
        continue;
      }
      const want = l[p]!;
      const close = Object.is(got, want) || Math.abs(got - want) <= 2 ** -20 * Math.max(1, Math.abs(want));
      assert.ok(close, `${c.name}, row ${i}: touched id ${p} adjusted to ${got}, the definition's ${want}`);
      checked++;
    }
  }
  return checked;
}
