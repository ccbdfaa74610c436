// Executes a batch on the model: passes views of the request's KV pages and state slot
// into the forward (no global context) and returns logits for the rows that sample.
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import { forwardHidden, lmHead, type SeqInput } from '../model/forward.js';
import { Workspace } from '../model/layers.js';
import type { Model } from '../model/model.js';
import type { Batch } from './batch.js';
import { assert } from '../util/errors.js';

export interface StepResult {
  /** Per real row (batch order): logits [V] of every position that needs them — the
   * last position of a sampling row, all n positions of a verify row, none otherwise.
   * Views are valid until the next run. */
  readonly logits: Float32Array[][];
  /** Post-norm hidden of every processed token, [M, H] (for the MTP head). */
  readonly hidden: Float32Array;
  readonly offsets: readonly number[];
}

export class Runner {
  readonly ws: Workspace;
  private readonly vocab: number;

  constructor(
    readonly model: Model,
    readonly kv: KvPool,
    readonly state: StatePool,
  ) {
    this.ws = new Workspace(model.kernels);
    this.vocab = model.config.vocabSize;
  }

  /** Forward of a prefill or decode batch: KV written for every processed position,
   * working state slots advanced in place. */
  run(batch: Batch): StepResult {
    const rows = batch.rows.slice(0, batch.nReal);
    const seqs: SeqInput[] = rows.map((r, i) => {
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
    const all = this.ws.buf('runner.logits', want.length * this.vocab);
    if (want.length > 0) lmHead(this.model, this.ws, fw.hidden, want, all);
    let j = 0;
    const logits = rows.map((r) => {
      const count = r.verify ? r.n : r.sample ? 1 : 0;
      const out = Array.from({ length: count }, (_, c) => all.subarray((j + c) * this.vocab, (j + c + 1) * this.vocab));
      j += count;
      return out;
    });
    return { logits, hidden: fw.hidden, offsets: fw.offsets };
  }
}
