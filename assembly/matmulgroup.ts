// Several matmuls of ONE input x [M, K] as one chunk space (the wasm backend's matmulGroup,
// src/kernels/wasm/matmul-group.ts): out_j [M, N_j] = x · W_jᵀ for j < count, so a decode
// step pays one pool launch (and, for quantized weights, one activation quantization) for
// the qkv / z / b / a, q / k / v or gate / up projections instead of one per weight.
//
// Split invariance: chunk c of the group is chunk c − first_j of weight j's own split —
// columns share(N_j, c − first_j, chunks_j, unit) with unit 8 (panels) or 4 (quant groups),
// the same formula as commands.ts `share` — and calls exactly the export a separate matmul
// call would (matmulF32 / matmulBf16 / matmulF16 / qmatmul with the same format id and the
// same activation buffers), so every output element is computed by the same code as alone.
//
// Descriptor of matmul j: GROUP_DESC_INTS i32 at desc + j·GROUP_DESC_BYTES:
//   [kind, type, out, w, n, q8, first, chunks]
//   kind: GROUP_F32 | GROUP_BF16 | GROUP_F16 (8-column panels, read x) | GROUP_QUANT (reads
//         q16 / q8 / d / s; `type` = qmatmul's format id);
//   out, w, q8: pointers (u32); n = N_j; first: its first chunk in the group; chunks: its count.
// Descriptors are in ascending `first`, contiguous: first_0 = 0, first_{j+1} = first_j + chunks_j.
import { matmulBf16, matmulF32 } from './matmul';
import { matmulF16 } from './matmulf16';
import { qmatmul } from './qmatmul';

const GROUP_F32: i32 = 0;
const GROUP_BF16: i32 = 1;
const GROUP_F16: i32 = 2;
const GROUP_QUANT: i32 = 3;
const GROUP_DESC_BYTES: usize = 32;

/** Group chunks [lo, hi) (ascending) of the `count` matmuls described at desc. x: [M, K] f32
 * (dense weights); q16, d, s: quantizeActs of x (quantized weights; q8 per descriptor);
 * tmp: this thread's scratch (max of qmatmulTmpBytes(k), panelTmpBytes(k) as needed). */
export function matmulGroup(desc: usize, count: i32, x: usize, q16: usize, d: usize, s: usize, m: i32, k: i32, lo: i32, hi: i32, tmp: usize): void {
  let j = 0;
  for (let c = lo; c < hi; c++) {
    while (j + 1 < count && load<i32>(desc + <usize>(j + 1) * GROUP_DESC_BYTES, 24) <= c) j++;
    const p = desc + <usize>j * GROUP_DESC_BYTES;
    const kind = load<i32>(p);
    const n = load<i32>(p, 16);
    const chunks = load<i32>(p, 28);
    const cl = c - load<i32>(p, 24);
    if (cl < 0 || cl >= chunks) unreachable(); // descriptors not contiguous: a caller's bug
    const unit = kind == GROUP_QUANT ? 4 : 8;
    const per = ((n + chunks - 1) / chunks + unit - 1) / unit * unit;
    const n0 = min(n, cl * per);
    const n1 = min(n, n0 + per);
    if (n0 >= n1) continue;
    const out = <usize>load<u32>(p, 8);
    const w = <usize>load<u32>(p, 12);
    if (kind == GROUP_QUANT) qmatmul(load<i32>(p, 4), out, q16, <usize>load<u32>(p, 20), d, s, w, m, n, k, n0, n1, tmp);
    else if (kind == GROUP_F16) matmulF16(out, x, w, m, n, k, n0, n1, tmp);
    else if (kind == GROUP_BF16) matmulBf16(out, x, w, m, n, k, n0, n1, tmp);
    else if (kind == GROUP_F32) matmulF32(out, x, w, m, n, k, n0, n1, tmp);
    else unreachable();
  }
}
