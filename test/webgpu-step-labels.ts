// Dispatches per decode step by kernel label, counted at StepEncoder.dispatch over the bench's
// own decode (1 stream): what the dispatch-count tests (webgpu-batch-dispatches,
// webgpu-moe-stacked) assert on.
import { StepEncoder } from '../src/kernels/webgpu/encoder.js';
import type { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { benchOnce } from '../src/cli/bench-run.js';
import { type AnyModel, loadModel } from '../src/model/model.js';
import { Rng } from '../src/util/rng.js';

/** Dispatches per decode step of the bench (1 stream) by label, for the model at `path`. */
export async function labelsPerStep(path: string, k: WebGpuBoundaryKernels): Promise<Map<string, number>> {
  const m = await loadModel(path, k) as unknown as AnyModel;
  const counts = new Map<string, number>();
  const dispatch = StepEncoder.prototype.dispatch;
  let on = false;
  StepEncoder.prototype.dispatch = function (this: StepEncoder, ...a: Parameters<typeof dispatch>): void {
    if (on) counts.set(a[5], (counts.get(a[5]) ?? 0) + 1);
    dispatch.apply(this, a);
  };
  try {
    const run = await benchOnce(m, 'decode', 1, 3, 2, 1, new Rng(5), () => { on = true; });
    return new Map([...counts].map(([l, n]) => [l, n / run.steps]));
  } finally {
    StepEncoder.prototype.dispatch = dispatch;
  }
}
