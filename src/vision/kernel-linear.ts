// The tower's linear layers on a kernel backend (Kernels.matmul: wasm SIMD + threads), the
// rest of the tower in plain TS: encodeImage(cfg, w, patches, grid, kernelLinear(k)). The
// matmuls are ~85% of the tower's work at 784 tokens (4·D² + 2·D·I per token per block
// against 2·N·D for attention).
//
// Invariants:
// - Each Linear is copied into a backend f32 weight and packed once, on first use (keyed by
//   the Linear object), so a tower's weights are packed at most once per backend.
// - Activations go through two scratch tensors, grown by doubling and never freed (the
//   Kernels interface has no free): memory stays bounded by twice the largest call.
// - CPU backends only: their readBack is synchronous (a GPU backend's is a promise and is
//   refused with a message).
import type { AnyKernels, Tensor, Weight } from '../kernels/types.js';
import { DeltaserveError } from '../util/errors.js';
import type { LinearOp } from './tower.js';
import type { Linear } from './weights.js';

interface Scratch { t: Tensor; size: number }

export function kernelLinear(k: AnyKernels): LinearOp {
  const packed = new Map<Linear, Weight>();
  const input: Scratch = { t: k.alloc(1), size: 1 };
  const output: Scratch = { t: k.alloc(1), size: 1 };
  const ensure = (s: Scratch, n: number): Tensor => {
    if (s.size < n) {
      s.size = Math.max(n, 2 * s.size);
      s.t = k.alloc(s.size);
    }
    return k.view(s.t, 0, n);
  };
  const weightOf = (l: Linear): Weight => {
    let w = packed.get(l);
    if (!w) {
      const { weight, bytes } = k.allocWeight('f32', l.outDim, l.inDim);
      new Float32Array(bytes.buffer, bytes.byteOffset, l.outDim * l.inDim).set(l.w);
      w = k.packWeight(weight);
      packed.set(l, w);
    }
    return w;
  };
  return (x, m, l) => {
    const w = weightOf(l);
    const xt = ensure(input, m * l.inDim);
    k.write(xt, 0, x.subarray(0, m * l.inDim));
    const yt = ensure(output, m * l.outDim);
    k.matmul(yt, xt, w, m);
    const back = k.readBack([{ t: yt, offset: 0, length: m * l.outDim }]);
    if (!Array.isArray(back)) throw new DeltaserveError('internal', `the vision tower runs on CPU kernel backends (${k.name} reads back asynchronously)`);
    const y = Float32Array.from(back[0]!);
    for (let r = 0; r < m; r++) for (let o = 0; o < l.outDim; o++) y[r * l.outDim + o] = y[r * l.outDim + o]! + l.b[o]!;
    return y;
  };
}
