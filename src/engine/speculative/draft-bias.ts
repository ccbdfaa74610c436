// Logit biases added on the kernels, so a biased greedy request's MTP drafts chain on the
// device like plain argmax drafts (draft.ts draftOnKernels): one `Kernels.add` of a dense
// bias row per chain, [chains, V_draft], before each draft step's argmaxRows.
//
// Exact (the same row as adjustInPlace's, so the same argmax) when every bias value is an
// f32 (device-picks.ts biasAddsExactly): adjustInPlace stores fround(l + b), the f64 sum of
// two f32 values rounded to f32, which is the correctly rounded f32 sum (double rounding
// through 53 bits is innocuous for a sum of 24-bit operands: 53 ≥ 2·24 + 2), and that is what
// an f32 add computes (wasm f32.add, WGSL's correctly rounded f32 +). Ids without a bias get
// l + 0 = l (−0 becomes +0, which every argmax treats as equal; NaN stays NaN). A value of
// magnitude ≥ 2^-103 added to an f32 logit never lands strictly between 0 and 2^-126 (both
// are multiples of 2^-126 there), so no adapter's subnormal flushing changes the sum.
import type { AnyKernels, Tensor } from '../../kernels/types.js';
import type { RequestView } from '../request.js';

export class DraftBias {
  /** [rows, v]: row j holds the bias of owners[j] (zero without one). */
  private rows: Tensor | null = null;
  private capacity = 0;
  /** The request whose bias each row holds (null: none written yet). */
  private owners: (RequestView | null)[] = [];

  constructor(private readonly k: AnyKernels, private readonly v: number) {}

  /** The bias rows of `reqs` in order ([reqs, v], rows written only when their request
   * changed), or null when none of them has a bias. */
  rowsFor(reqs: readonly RequestView[]): Tensor | null {
    if (!reqs.some((r) => (r.adjust?.bias?.size ?? 0) > 0)) return null;
    if (!this.rows || this.capacity < reqs.length) {
      this.capacity = Math.max(reqs.length, 2 * this.capacity, 4);
      this.rows = this.k.alloc(this.capacity * this.v);
      this.owners = new Array<RequestView | null>(this.capacity).fill(null);
    }
    reqs.forEach((req, j) => {
      if (this.owners[j] === req) return;
      const row = new Float32Array(this.v);
      for (const [id, b] of req.adjust?.bias ?? []) if (id >= 0 && id < this.v) row[id] = b;
      this.k.write(this.rows!, j * this.v, row);
      this.owners[j] = req;
    });
    return this.rows;
  }
}
