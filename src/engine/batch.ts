// One engine step's batch: a discriminated union with an explicit count of real rows.
// Rows are preallocated once (fixed capacity) and refilled every step; rows ≥ nReal are
// padding: zero-length, they are never passed to the model and write nothing.
import type { RequestView } from './request.js';

export interface BatchRow {
  req: RequestView | null;
  /** First position processed this step (= req.computed when scheduled). */
  start: number;
  /** Tokens processed this step (0 for padding rows). */
  n: number;
  /** Gated DeltaNet chunked form (prefill) vs step-by-step recurrence (decode). */
  chunked: boolean;
  /** The step reaches the end of the known tokens: sample the next one. */
  sample: boolean;
  /** Speculative verify of [bonus, d_1..d_k] (n = k + 1): per-step states go to this
   * row's scratch, logits are needed at every position. */
  verify: boolean;
}

interface BatchBase {
  readonly capacity: number;
  nReal: number;
  readonly rows: BatchRow[]; // length = capacity
}

/** Chunked prefill rows, possibly mixed with decode rows (n = 1, recurrent). */
export interface PrefillBatch extends BatchBase { readonly kind: 'prefill' }
/** Only decode rows (n = 1 each). */
export interface DecodeBatch extends BatchBase { readonly kind: 'decode' }
/** Speculative verify: per row [bonus, d1..dk] through the target (n = k + 1). */
export interface VerifyBatch extends BatchBase { readonly kind: 'verify' }
export type Batch = PrefillBatch | DecodeBatch | VerifyBatch;
export type BatchKind = Batch['kind'];

function emptyRow(): BatchRow {
  return { req: null, start: 0, n: 0, chunked: false, sample: false, verify: false };
}

/** Preallocated batches, one per kind, reused step after step. */
export class BatchSlots {
  private readonly batches: { [K in BatchKind]: Extract<Batch, { kind: K }> };

  constructor(readonly capacity: number) {
    const make = <K extends BatchKind>(kind: K) =>
      ({ kind, capacity, nReal: 0, rows: Array.from({ length: capacity }, emptyRow) }) as unknown as Extract<Batch, { kind: K }>;
    this.batches = { prefill: make('prefill'), decode: make('decode'), verify: make('verify') };
  }

  /** The batch of `kind`, emptied: every row reset to padding. */
  begin<K extends BatchKind>(kind: K): Extract<Batch, { kind: K }> {
    const b = this.batches[kind];
    b.nReal = 0;
    for (const r of b.rows) {
      r.req = null;
      r.n = 0;
      r.start = 0;
      r.chunked = false;
      r.sample = false;
      r.verify = false;
    }
    return b;
  }

  /** Append a one-token decode row at `start` whose token is not appended yet: an
   * overlapped step's row (overlap.ts), recorded before the step that samples it commits. */
  pushChained(b: Batch, req: RequestView, start: number): BatchRow {
    const row = this.push(b, req, 1, false);
    row.start = start;
    row.sample = true;
    return row;
  }

  /** Append a real row; rows stay packed at the front (rows < nReal are real). */
  push(b: Batch, req: RequestView, n: number, chunked: boolean, verify = false): BatchRow {
    const row = b.rows[b.nReal];
    if (!row) throw new Error(`batch capacity ${b.capacity} exceeded`);
    row.req = req;
    row.start = req.computed;
    row.n = n;
    row.chunked = chunked;
    row.verify = verify;
    row.sample = verify || req.computed + n === req.tokens.length;
    b.nReal++;
    return row;
  }
}
