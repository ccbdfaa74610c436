// The runner's side of sampled picks from candidates (sampled-candidates.ts): which logits
// rows of a step take them, one Kernels.topCandidates call over the span of those rows, the
// read ranges (c ids and c values per row, in the step's one read-back), and the
// certificate per row once read. A row with a logit bias, a constraint or penalties also
// gathers its touched ids' raw logits (gatherRows), adjusted on the host. A row the
// certificate refuses reads its logits row in a second read-back (counted: `fallbacks`) and
// is sampled on the host as before.
import type { AnyKernels, ReadRange, Tensor } from '../kernels/types.js';
import type { BatchRow } from './batch.js';
import { idsOf, sampledCandidates } from './device-picks.js';
import { certify, type CertifiedRow } from './sampled-candidates.js';
import { greedyAdjust } from './device-finish.js';
import { touchedIds, type GreedyAdjust } from './greedy-finish.js';
import { committedMatcher } from './logits-adjust.js';

interface PlannedRow {
  readonly row: number;
  /** Its logits row in the step's `all`. */
  readonly at: number;
  /** Its adjustment (null: none) and touched ids, whose raw logits start at `touchedAt`. */
  readonly a: GreedyAdjust | null;
  readonly touched: readonly number[];
  readonly touchedAt: number;
}

export interface CandidatePlan {
  /** The planned batch rows, in row order. */
  readonly rows: readonly PlannedRow[];
  /** Flat indices (logits row · stride + id) of every planned row's touched ids. */
  readonly flat: readonly number[];
  /** Candidates per row (the most any planned row asks for). */
  readonly c: number;
  /** The logits rows [lo, lo + span) the kernel selects over (they hold every planned row). */
  readonly lo: number;
  readonly span: number;
}

/** The step's candidate rows: sampled decode rows (one logits row, not verify) that the
 * kernels do not pick and whose request qualifies (device-picks.ts sampledCandidates). */
export function planCandidates(rows: readonly BatchRow[], layout: { first: number[]; count: number[]; onKernels: boolean[] },
  sampleVocab: number, stride: number): CandidatePlan | null {
  const planned: PlannedRow[] = [];
  const flat: number[] = [];
  let c = 0;
  rows.forEach((r, i) => {
    if (r.verify || !r.sample || layout.onKernels[i] || layout.count[i] !== 1) return;
    const req = r.req!;
    const want = sampledCandidates(req, sampleVocab);
    if (want === 0) return;
    const at = layout.first[i]!;
    const a = greedyAdjust(req, committedMatcher(req)?.mask() ?? null, sampleVocab, []);
    const touched = touchedIds(a);
    planned.push({ row: i, at, a: touched.length > 0 || a.mask ? a : null, touched, touchedAt: flat.length });
    for (const id of touched) flat.push(at * stride + id);
    c = Math.max(c, want);
  });
  if (planned.length === 0) return null;
  const lo = planned[0]!.at;
  return { rows: planned, flat, c, lo, span: planned[planned.length - 1]!.at - lo + 1 };
}

/** Per batch row: its certified candidates (null: none, or refused). */
export type Certified = (CertifiedRow | null)[];

export class CandidateStep {
  /** Since construction: rows that read candidates, and those the certificate refused. */
  readonly counts = { rows: 0, fallbacks: 0 };
  private bufs: { ids: Tensor; vals: Tensor; cap: number } | null = null;
  private touchedBuf: { t: Tensor; cap: number } | null = null;

  constructor(private readonly kernels: AnyKernels) {}

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

  /** Certify each planned row from its read ranges (`read`: ranges() in order). Returns the
   * certified rows by batch row and the batch rows refused (they need their logits row). */
  certify(plan: CandidatePlan, rows: readonly BatchRow[], read: readonly Float32Array[], sampleVocab: number): { certified: Certified; refused: number[] } {
    const certified: Certified = rows.map(() => null);
    const refused: number[] = [];
    const touchedRaw = plan.flat.length > 0 ? read[2 * plan.rows.length]! : null;
    plan.rows.forEach(({ row, a, touched, touchedAt }, j) => {
      const adjust = a ? { a, touched, raw: touchedRaw ? touchedRaw.subarray(touchedAt, touchedAt + touched.length) : [] } : null;
      const got = certify(idsOf(read[2 * j]!), read[2 * j + 1]!, rows[row]!.req!.sampling, sampleVocab, adjust);
      if (got) certified[row] = got;
      else refused.push(row);
    });
    this.counts.rows += plan.rows.length;
    this.counts.fallbacks += refused.length;
    return { certified, refused };
  }
}
