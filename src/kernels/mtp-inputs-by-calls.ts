// The plain form of Kernels.mtpInputs: the separate calls mtpForward made before the op
// (hidden rows gathered into hid, embed, two rmsNorms, two copies into cat). Its bits define
// the op's: a backend that runs it as one dispatch (webgpu) must give the same cat.
import type { Kernels, Tensor } from './types.js';
import { mtpInputRows, type MtpInputs } from './mtp-inputs.js';

type MtpInputsCalls<T extends Tensor, I extends Tensor> = Pick<Kernels<T, I>, 'write' | 'copyRows' | 'embed' | 'embedIds' | 'rmsNorm'>;

/** cat [M, 2H] = [rmsNorm(embed(ids), normEmbedding) | rmsNorm(hidden rows, normHidden)]; e and
 * hid ([M, H]) hold the two halves afterwards. */
export function mtpInputsByCalls<T extends Tensor, I extends Tensor>(k: MtpInputsCalls<T, I>, a: MtpInputs<T, I>): void {
  const h = a.table.cols;
  const m = mtpInputRows(a.runs);
  let row = 0;
  for (const r of a.runs) {
    const head = r.first ? 1 : 0;
    if (r.first) k.write(a.hid, row * h, r.first);
    k.copyRows(a.hid, (row + head) * h, h, r.src, r.row * h, h, r.n, h);
    row += head + r.n;
  }
  if ('device' in a.ids) k.embedIds(a.e, a.table, a.ids.device, a.ids.offset, m);
  else k.embed(a.e, a.table, a.ids.host);
  k.rmsNorm(a.e, a.e, a.normEmbedding, m, a.eps, a.zeroCentered);
  k.rmsNorm(a.hid, a.hid, a.normHidden, m, a.eps, a.zeroCentered);
  k.copyRows(a.cat, 0, 2 * h, a.e, 0, h, m, h);
  k.copyRows(a.cat, h, 2 * h, a.hid, 0, h, m, h);
}
