// Grouped MoE (kernels/webgpu/moe.ts) against the former every-expert path, on the GPU:
// each (row, slot)'s expert output must have the bits of that expert's matmuls run over all
// rows (matmul, matmul, mulSilu, matmul: what moeExperts did before it was grouped), for
// float and quantized experts, at decode (1 row) and in prefill (20 rows: one expert gets
// more than a 16-row tile). Also a row alone == in the batch, and the device tally of
// expert bytes = the host's count: each routed expert read once = the routed ideal (float
// experts past WHOLE_K: once per 16-row tile).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { quantizeRowsGgml } from '../src/kernels/quant/quantize-ggml.js';
import { quantRowBytes } from '../src/kernels/quant/formats.js';
import { WHOLE_K } from '../src/kernels/webgpu/wgsl/matmul-group.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';

let k: WebGpuBoundaryKernels;
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest()); });
after(() => k?.dispose());

const ref = createRefKernels();
const [IE, E, TOPK] = [256, 5, 2];

/** A host weight (packed per use: each packWeight uploads its own copy). */
function weight(dtype: 'bf16' | 'f16' | 'q8_0' | 'q4_k', rows: number, cols: number, sym: () => number): Weight {
  if (dtype === 'bf16' || dtype === 'f16') return randomWeight(ref, dtype, rows, cols, sym);
  const q = ref.allocWeight(dtype, rows, cols);
  quantizeRowsGgml(dtype, Float32Array.from({ length: rows * cols }, sym), rows, cols, q.bytes);
  return q.weight;
}

type Experts = readonly { gate: Weight; up: Weight; down: Weight }[];

/** The experts uploaded afresh (a grouped call stacks a layer's experts and retires their
 * own handles, so each path gets its own copy). */
function packed(experts: Experts): Experts {
  return experts.map((e) => ({ gate: k.packWeight(e.gate), up: k.packWeight(e.up), down: k.packWeight(e.down) }));
}

async function read(t: GpuTensor, length = t.length): Promise<Float32Array> {
  return (await k.readBack([{ t, offset: 0, length }]))[0]!;
}

/** Row i's topK distinct experts: expert 1 in every row (20 rows: > one tile), then another. */
function routing(m: number): number[] {
  return Array.from({ length: m }, (_, i) => [1, [0, 3, 4, 2][i % 4]!]).flat();
}

function grouped(H: number, experts: readonly { gate: Weight; up: Weight; down: Weight }[], x: Float32Array, ids: number[], wts: Float32Array, m: number) {
  const gx = k.alloc(m * H);
  k.write(gx, 0, x);
  const gi = k.allocI32(m * TOPK);
  k.write(gi, 0, ids);
  const gw = k.alloc(m * TOPK);
  k.write(gw, 0, wts);
  const out = k.alloc(m * H);
  const slot = k.alloc(m * TOPK * H);
  k.moeExperts(out, gx, gi, gw, m, TOPK, experts, { slot, rowsIn: k.alloc(m * H), rowsOut: k.alloc(m * H), gate: k.alloc(m * IE), up: k.alloc(m * IE) });
  return { out, slot };
}

describe('webgpu grouped MoE kernel', () => {
  // H = 2304: K past WHOLE_K (float: the per-tile grid) and past 64 blocks of 32 (quantized:
  // a row's chain continues in the output across block groups)
  for (const [dtype, H] of [['bf16', 256], ['f16', 256], ['q8_0', 256], ['q4_k', 256], ['bf16', 2304], ['q8_0', 2304]] as const) {
    test(`${dtype} experts, H ${H}: == the every-expert path bit for bit (1 and 20 rows); alone == batched; tally = host count`, async () => {
      const r = rng(47);
      const sym = () => 2 * r() - 1;
      const host = Array.from({ length: E }, () => ({ gate: weight(dtype, IE, H, sym), up: weight(dtype, IE, H, sym), down: weight(dtype, H, IE, sym) }));
      const every = packed(host);
      const experts = packed(host);
      for (const m of [1, 20]) {
        const x = Float32Array.from({ length: m * H }, sym);
        const ids = routing(m);
        const wts = Float32Array.from({ length: m * TOPK }, () => r());
        // the former path: every expert over all rows
        const gx = k.alloc(m * H);
        k.write(gx, 0, x);
        const ys: Float32Array[] = [];
        for (const e of every) {
          const [g, u, y] = [k.alloc(m * IE), k.alloc(m * IE), k.alloc(m * H)];
          k.matmul(g, gx, e.gate, m);
          k.matmul(u, gx, e.up, m);
          k.mulSilu(u, u, g, m * IE);
          k.matmul(y, u, e.down, m);
          ys.push(await read(y));
        }
        k.moeTally.restart();
        const { out, slot } = grouped(H, experts, x, ids, wts, m);
        const slots = await read(slot);
        const bytes = await k.moeWeightBytes();
        ids.forEach((ex, p) => {
          const i = Math.floor(p / TOPK);
          assert.ok(sameBits(slots.subarray(p * H, (p + 1) * H), ys[ex]!.subarray(i * H, (i + 1) * H)), `m ${m}: row ${i} slot ${p % TOPK} (expert ${ex})`);
        });
        const rowBytes = (cols: number): number => (dtype === 'bf16' || dtype === 'f16' ? 2 * cols : quantRowBytes(dtype, cols));
        const perExpert = 2 * IE * rowBytes(H) + H * rowBytes(IE);
        const counts = Array.from({ length: E }, (_, e) => ids.filter((id) => id === e).length);
        // one read per routed expert (whole-expert workgroups), also past a 16-row tile; float
        // experts past WHOLE_K: one per 16-row tile
        const reads = (c: number): number => (dtype === 'bf16' && H > WHOLE_K ? Math.ceil(c / 16) : Math.min(c, 1));
        assert.equal(bytes.read, counts.reduce((s, c) => s + reads(c), 0) * perExpert, `m ${m}: bytes read`);
        assert.equal(bytes.ideal, counts.filter((c) => c > 0).length * perExpert, `m ${m}: routed ideal`);
        if (m > 1) {
          const all = await read(out);
          const row = 13;
          const alone = await read(grouped(H, experts, x.subarray(row * H, (row + 1) * H), ids.slice(row * TOPK, (row + 1) * TOPK),
            wts.subarray(row * TOPK, (row + 1) * TOPK), 1).out);
          assert.ok(sameBits(alone, all.subarray(row * H, (row + 1) * H)), `${dtype}: row ${row} alone differs from the batch`);
        }
      }
    });
  }
});
