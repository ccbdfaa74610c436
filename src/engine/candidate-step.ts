// The runner's and the MTP drafter's side of sampled picks from candidates
// (sampled-candidates.ts): which logits rows take them — sampled decode rows, every verify
// position of a sampled request (its p_i given the drafts before it), a sampled chain's draft
// rows (its q_i) — one Kernels.topCandidates call over the span of those rows, the read
// ranges (c ids and c values per row, in the caller's read-back), and the certificate per
// row once read. A row with a logit bias, a constraint or penalties also gathers its touched
// ids' raw logits (gatherRows), adjusted on the host. A row the certificate refuses is read
// whole in a second read-back (counted: `fallbacks`) and sampled on the host as before. A
// top-p request without top-k or min-p (sampled-candidates.ts nucleusOnly: it read its logits
// rows before certificate (c)) whose rows were refused reads its logits rows outright for its
// next 2^r − 1 tries (r: its refused tries in a row, at most MAX_BACKOFF), so a flat nucleus,
// which never certifies, pays the second read-back on a few of its steps only; ids are the
// same either way.
import type { AnyKernels, ReadRange, Tensor } from '../kernels/types.js';
import type { BatchRow } from './batch.js';
import { idsOf, sampledCandidates } from './device-picks.js';
import { certify, nucleusOnly, type CertifiedRow } from './sampled-candidates.js';
import { greedyAdjust } from './device-finish.js';
import { touchedIds, type GreedyAdjust } from './greedy-finish.js';
import { committedMatcher, matcherAfterDrafts } from './logits-adjust.js';
import type { SamplingParams } from './sampler.js';

/** A logits row to select candidates of: its owner (`row`: a batch row, or a draft chain),
 * its position there (`pos`: a verify position; 0 otherwise), its logits row `at` in the
 * tensor the kernel selects over, what the sampler reads of its request (`adjust`: bias,
 * constraint mask, penalties with the drafts before it counted) and how many candidates it
 * asks for. */
export interface CandidateItem {
  /** The request (its refusals back off: CandidateStep.admits); absent: no backoff. */
  readonly req?: object;
  readonly row: number;
  readonly pos: number;
  readonly at: number;
  readonly sampling: SamplingParams;
  readonly adjust: GreedyAdjust;
  readonly want: number;
}

interface PlannedRow {
  readonly req: object | null;
  readonly row: number;
  readonly pos: number;
  readonly at: number;
  readonly sampling: SamplingParams;
  /** Its adjustment (null: none) and touched ids, whose raw logits start at `touchedAt`. */
  readonly a: GreedyAdjust | null;
  readonly touched: readonly number[];
  readonly touchedAt: number;
}

export interface CandidatePlan {
  /** The planned logits rows, in ascending `at`. */
  readonly rows: readonly PlannedRow[];
  /** Flat indices (logits row · stride + id) of every planned row's touched ids. */
  readonly flat: readonly number[];
  /** Candidates per row (the most any planned row asks for). */
  readonly c: number;
  /** The logits rows [lo, lo + span) the kernel selects over (they hold every planned row). */
  readonly lo: number;
  readonly span: number;
}

/** The plan of `items` (ascending `at`; null when none) over logits rows of `stride`. */
export function planOf(items: readonly CandidateItem[], stride: number): CandidatePlan | null {
  if (items.length === 0) return null;
  const flat: number[] = [];
  const rows = items.map(({ req, row, pos, at, sampling, adjust: a }): PlannedRow => {
    const touched = touchedIds(a);
    const touchedAt = flat.length;
    for (const id of touched) flat.push(at * stride + id);
    return { req: req ?? null, row, pos, at, sampling, a: touched.length > 0 || a.mask ? a : null, touched, touchedAt };
  });
  const lo = rows[0]!.at;
  return { rows, flat, c: Math.max(...items.map((i) => i.want)), lo, span: rows[rows.length - 1]!.at - lo + 1 };
}

/** The step's candidate rows: sampled decode rows (one logits row) and sampled verify rows
 * (each of their positions) that the kernels do not pick and whose request qualifies
 * (device-picks.ts sampledCandidates) and is `admitted` (CandidateStep.admits: not backing
 * off). Verify position s reads the request as the host path does: its matcher after
 * d_1..d_s, its penalties counting them as outputs. */
export function planCandidates(rows: readonly BatchRow[], layout: { first: number[]; count: number[]; onKernels: boolean[] },
  sampleVocab: number, stride: number, admitted: (req: object) => boolean = () => true): CandidatePlan | null {
  const items: CandidateItem[] = [];
  rows.forEach((r, i) => {
    if (!r.sample || layout.onKernels[i] || (!r.verify && layout.count[i] !== 1)) return;
    const req = r.req!;
    const want = sampledCandidates(req, sampleVocab);
    if (want === 0 || (nucleusOnly(req.sampling, sampleVocab) && !admitted(req))) return;
    for (let s = 0; s < layout.count[i]!; s++) {
      const matcher = r.verify ? matcherAfterDrafts(req, s) : committedMatcher(req);
      const adjust = greedyAdjust(req, matcher?.mask() ?? null, sampleVocab, r.verify ? req.drafts.slice(0, s) : []);
      items.push({ req, row: i, pos: s, at: layout.first[i]! + s, sampling: req.sampling, adjust, want });
    }
  });
  return planOf(items, stride);
}

/** Per batch row: its certified candidates, one per logits row (null: none, or refused). */
export type Certified = (CertifiedRow[] | null)[];

/** Group per-planned-row certificates by owner: an owner is certified when all its rows are;
 * `refused` lists the others (ascending). */
export function byOwner(plan: CandidatePlan, got: readonly (CertifiedRow | null)[], owners: number): { certified: Certified; refused: number[] } {
  const certified: Certified = Array.from({ length: owners }, () => null);
  const bad = new Set<number>();
  plan.rows.forEach(({ row }, j) => {
    const g = got[j];
    if (!g) bad.add(row);
    else (certified[row] ??= []).push(g);
  });
  for (const row of bad) certified[row] = null;
  return { certified, refused: [...bad].sort((a, b) => a - b) };
}

/** The most refused steps in a row a backoff counts: then 2^MAX_BACKOFF − 1 steps on the full
 * row between tries (at most one refused try in 32 steps). */
export const MAX_BACKOFF = 5;

export class CandidateStep {
  /** Since construction: logits rows that read candidates, and those then read whole
   * (refused, or beside a refused row of the same verify row). */
  readonly counts = { rows: 0, fallbacks: 0 };
  /** Per request that was refused: refused steps in a row, steps still to skip. */
  private readonly backoff = new WeakMap<object, { refused: number; skip: number }>();
  private bufs: { ids: Tensor; vals: Tensor; cap: number } | null = null;
  private touchedBuf: { t: Tensor; cap: number } | null = null;

  constructor(private readonly kernels: AnyKernels) {}

  /** The last select's candidates: span row r's c ids and values at r · c (a chained draw reads
   * them: Runner.drawChained). */
  get buffers(): { readonly ids: Tensor; readonly vals: Tensor } {
    if (!this.bufs) throw new Error('internal: no candidates selected yet');
    return this.bufs;
  }

  /** topCandidates over the plan's span of `all` (rows of `stride`, ids < sampleVocab). */
  select(all: Tensor, plan: CandidatePlan, sampleVocab: number, stride: number): void {
    const need = plan.span * plan.c;
    if (!this.bufs || this.bufs.cap < need) {
      const cap = Math.max(need, 2 * (this.bufs?.cap ?? 256));
      this.bufs = { ids: this.kernels.allocI32(cap), vals: this.kernels.alloc(cap), cap };
    }
    const x = this.kernels.view(all, plan.lo * stride, plan.span * stride);
    this.kernels.topCandidates(this.bufs.ids, this.bufs.vals, 0, x, plan.span, sampleVocab, stride, plan.c);
    if (plan.flat.length === 0) return;
    if (!this.touchedBuf || this.touchedBuf.cap < plan.flat.length) {
      const cap = Math.max(plan.flat.length, 2 * (this.touchedBuf?.cap ?? 128));
      this.touchedBuf = { t: this.kernels.alloc(cap), cap };
    }
    this.kernels.gatherRows(this.touchedBuf.t, all, plan.flat, 1);
  }

  /** The read ranges of the planned rows: per row its c ids, then its c values; then the
   * touched ids' raw logits (when any row has some). */
  ranges(plan: CandidatePlan): ReadRange<Tensor>[] {
    const { ids, vals } = this.bufs!;
    return [...plan.rows.flatMap(({ at }) => {
      const o = (at - plan.lo) * plan.c;
      return [{ t: ids, offset: o, length: plan.c }, { t: vals, offset: o, length: plan.c }];
    }), ...(plan.flat.length > 0 ? [{ t: this.touchedBuf!.t, offset: 0, length: plan.flat.length }] : [])];
  }

  /** Certify each planned row from its read ranges (`read`: ranges() in order), over ids
   * [0, vocab): per planned row, its certified candidates or null (refused: it needs its
   * logits row). Counts the rows; the caller counts the rows it reads whole (`fallback`). */
  certify(plan: CandidatePlan, read: readonly Float32Array[], vocab: number): (CertifiedRow | null)[] {
    const touchedRaw = plan.flat.length > 0 ? read[2 * plan.rows.length]! : null;
    this.counts.rows += plan.rows.length;
    const got = plan.rows.map(({ sampling, a, touched, touchedAt }, j) => {
      const adjust = a ? { a, touched, raw: touchedRaw ? touchedRaw.subarray(touchedAt, touchedAt + touched.length) : [] } : null;
      return certify(idsOf(read[2 * j]!), read[2 * j + 1]!, sampling, vocab, adjust);
    });
    this.settle(plan, got, vocab);
    return got;
  }

  /** Does a nucleusOnly request read candidates this try (false: it backs off after refusals;
   * counts the try)? */
  admits(req: object): boolean {
    const b = this.backoff.get(req);
    if (!b || b.skip === 0) return true;
    b.skip--;
    return false;
  }

  /** Each planned request's outcome (`got`: certify's, per planned row): refused when any of
   * its rows is; a certified step ends its backoff. */
  private settle(plan: CandidatePlan, got: readonly (CertifiedRow | null)[], vocab: number): void {
    const refused = new Map<object, boolean>();
    plan.rows.forEach(({ req, sampling }, j) => {
      if (req && nucleusOnly(sampling, vocab)) refused.set(req, (refused.get(req) ?? false) || got[j] === null);
    });
    for (const [req, no] of refused) {
      if (!no) this.backoff.delete(req);
      else {
        const r = Math.min(MAX_BACKOFF, (this.backoff.get(req)?.refused ?? 0) + 1);
        this.backoff.set(req, { refused: r, skip: 2 ** r - 1 });
      }
    }
  }

  /** `n` candidate rows were refused or belong to a refused owner: read whole. */
  fallback(n: number): void {
    this.counts.fallbacks += n;
  }
}
