// Executes a batch on the model: passes views of the request's KV pages and state slot
// into the forward (no global context), computes the logits rows that sample on the
// kernels, and reads back what the engine needs in ONE read-back call per step (logits
// rows and the hidden rows; on CPU backends these are views, returned at once).
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import type { Tensor } from '../kernels/types.js';
import { StepArena } from '../model/arena.js';
import { forwardHidden, lmHeadInto, type SeqInput } from '../model/forward.js';
import type { AnyModel } from '../model/model.js';
import type { Batch } from './batch.js';
import { assert } from '../util/errors.js';

export interface StepResult {
  /** Per real row (batch order): host logits [V] of every position that needs them — the
   * last position of a sampling row, all n positions of a verify row, none otherwise.
   * Views are valid until the next run. */
  readonly logits: Float32Array[][];
  /** Post-norm hidden of every processed token, [M, H], as a kernel tensor (for the MTP
   * head) and on the host (for prefix snapshots; on CPU backends the same memory). */
  readonly hidden: Tensor;
  readonly hostHidden: Float32Array;
  readonly offsets: readonly number[];
}

export class Runner {
  readonly ws: StepArena<Tensor, Tensor>;
  private readonly vocab: number;

  constructor(
    readonly model: AnyModel,
    readonly kv: KvPool,
    readonly state: StatePool,
  ) {
    this.ws = new StepArena(model);
    this.vocab = model.config.vocabSize;
  }

  /** Forward of a batch: KV written for every processed position, working state slots
   * advanced in place (verify: per-step states to the rows' scratch). A promise only when
   * the backend's read-back is asynchronous. */
  run(batch: Batch): StepResult | Promise<StepResult> {
    const rows = batch.rows.slice(0, batch.nReal);
    const seqs: SeqInput<Tensor>[] = rows.map((r, i) => {
      const req = r.req!;
      // slot 0 is the dummy sink: a real request never reads or writes through it
      assert(req.slot > 0, `batch row ${i} (request ${req.id}) has no state slot`);
      return {
        // a verify row feeds [bonus, d_1..d_k]; the drafts are not in req.tokens yet
        tokens: r.verify ? [req.tokens[r.start]!, ...req.drafts] : req.tokens.slice(r.start, r.start + r.n),
        start: r.start,
        pageTable: req.pages,
        kv: this.kv.layers,
        state: this.state.view(req.slot),
        // scratch is indexed by batch row: row i owns region i, whatever its slot
        scratch: r.verify ? this.state.scratch(i, r.n) : null,
        chunked: r.chunked,
      };
    });
    const fw = forwardHidden(this.model, this.ws, seqs);
    const want: number[] = [];
    rows.forEach((r, i) => {
      const first = fw.offsets[i]! + (r.verify ? 0 : r.n - 1);
      if (r.verify || r.sample) for (let p = first; p < fw.offsets[i]! + r.n; p++) want.push(p);
    });
    const all = this.ws.logits.rows(want.length);
    if (want.length > 0) lmHeadInto(this.model, this.ws, fw.hidden, want, all);
    const m = seqs.reduce((n, s) => n + s.tokens.length, 0);
    const h = this.model.config.hiddenSize;
    const back = this.model.kernels.readBack([
      { t: all, offset: 0, length: want.length * this.vocab }, { t: fw.hidden, offset: 0, length: m * h },
    ]);
    const done = ([logits, hidden]: Float32Array[]): StepResult => this.result(rows, logits!, hidden!, fw.hidden, fw.offsets);
    return back instanceof Promise ? back.then(done) : done(back);
  }

  private result(rows: Batch['rows'], all: Float32Array, hostHidden: Float32Array, hidden: Tensor, offsets: readonly number[]): StepResult {
    let j = 0;
    const logits = rows.map((r) => {
      const count = r.verify ? r.n : r.sample ? 1 : 0;
      const out = Array.from({ length: count }, (_, c) => all.subarray((j + c) * this.vocab, (j + c + 1) * this.vocab));
      j += count;
      return out;
    });
    return { logits, hidden, hostHidden, offsets };
  }
}
