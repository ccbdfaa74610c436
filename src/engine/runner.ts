// Executes a batch on the model: passes views of the request's KV pages and state slot
// into the forward (no global context) and returns logits for the rows that sample.
import type { KvPool } from '../cache/kv-pool.js';
import type { StatePool } from '../cache/state-pool.js';
import { forwardHidden, lmHead, type SeqInput } from '../model/forward.js';
import { Workspace } from '../model/layers.js';
import type { Model } from '../model/model.js';
import type { Batch, BatchRow } from './batch.js';

export interface StepResult {
  /** Rows that sample, in batch order, with their logits [V] (views valid until the
   * next run). */
  readonly sampled: { row: BatchRow; logits: Float32Array }[];
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
    const seqs: SeqInput[] = rows.map((r) => {
      const req = r.req!;
      return {
        tokens: req.tokens.slice(r.start, r.start + r.n),
        start: r.start,
        pageTable: req.pages,
        kv: this.kv.layers,
        state: this.state.view(req.slot),
        scratch: null,
        chunked: r.chunked,
      };
    });
    const fw = forwardHidden(this.model, this.ws, seqs);
    const sampleRows: number[] = [];
    const sampled: { row: BatchRow; logits: Float32Array }[] = [];
    rows.forEach((r, i) => {
      if (r.sample) sampleRows.push(fw.offsets[i]! + r.n - 1);
    });
    if (sampleRows.length > 0) {
      const logits = this.ws.buf('runner.logits', sampleRows.length * this.vocab);
      lmHead(this.model, this.ws, fw.hidden, sampleRows, logits);
      let j = 0;
      for (const r of rows) {
        if (!r.sample) continue;
        sampled.push({ row: r, logits: logits.subarray(j * this.vocab, (j + 1) * this.vocab) });
        j++;
      }
    }
    return { sampled, hidden: fw.hidden, offsets: fw.offsets };
  }
}
