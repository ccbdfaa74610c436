// The standalone activation quantization with 8 lanes a 32-block (wgsl/quant-acts-lanes.ts:
// quant_acts, its gated variants and norm_quant_acts as (8 blocks × 8 lanes) workgroups) gives
// the bits of the one-thread-a-block kernels (wgsl/matmul.ts, actsLayout 'block'): QX, DX,
// SX, the normed rows OUT and the gated product written into X, element by element, for
// K = 256, 416 (13 blocks: not a multiple of 8), 2560, 4096 and M = 1, 3, 5; zero-centred and
// plain norm weights; gated silu / sigmoid; blocks with ties at the max, all zeros (d = 0),
// and a negative element of largest magnitude.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { QuantLayout } from '../src/kernels/webgpu/wgsl/matmul.js';
import type { QuantActs, WebGpuKernels } from '../src/kernels/webgpu/backend.js';
import { rng } from './numeric.js';
import { gpuUnderTest, run } from './webgpu-helpers.js';

let g: WebGpuKernels;
before(async () => { g = await gpuUnderTest(); });
after(() => g?.dispose());

const KS = [256, 32 * 13, 2560, 4096];
const MS = [1, 3, 5];

/** Random values with special blocks: b ≡ 1 (mod 5) a tie at the max, ≡ 2 all zeros,
 * ≡ 3 its largest magnitude negative (and tied with a positive one at b ≡ 4). */
function activations(m: number, k: number, seed: number): Float32Array {
  const r = rng(seed);
  const x = Float32Array.from({ length: m * k }, () => 4 * (2 * r() - 1));
  for (let b = 0; b < (m * k) / 32; b++) {
    const o = b * 32;
    const kind = b % 5;
    if (kind === 1) { x[o + 3] = 9.5; x[o + 17] = 9.5; x[o + 30] = -9.5; }
    if (kind === 2) x.fill(0, o, o + 32);
    if (kind === 3) x[o + 11] = -12.25;
    if (kind === 4) { x[o + 5] = -7; x[o + 6] = 7; }
  }
  return x;
}

interface Quantized { qx: Uint32Array; dx: Uint32Array; sx: Uint32Array; rest: Uint32Array[] }
const bits = (v: Float32Array): Uint32Array => new Uint32Array(v.buffer, v.byteOffset, v.length);

async function quantize(layout: QuantLayout, body: (e: Parameters<Parameters<typeof run>[1]>[0]) => { acts: QuantActs; rest: Parameters<typeof run>[2][] }):
  Promise<Quantized & { dispatches: number }> {
  g.actsLayout = layout;
  let out: { acts: QuantActs; rest: Parameters<typeof run>[2][] } | null = null;
  let dispatches = 0;
  // record, then read back the scratch and the extra tensors in a second (read-only) submit
  await run(g, (e) => { const d0 = e.dispatchCount; out = body(e); dispatches = e.dispatchCount - d0; });
  const o = out!;
  const got = await run(g, () => {}, o.acts.qx, o.acts.dx, o.acts.sx, ...o.rest);
  return { qx: bits(got[0]!), dx: bits(got[1]!), sx: bits(got[2]!), rest: got.slice(3).map(bits), dispatches };
}

function sameBits(got: Uint32Array, want: Uint32Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < got.length; i++) if (got[i] !== want[i]) assert.fail(`${what}: [${i}] 0x${got[i]!.toString(16)} !== 0x${want[i]!.toString(16)}`);
}

function sameQuantized(lanes: Quantized, block: Quantized, m: number, k: number, what: string): void {
  // the scratch may be longer than this call's rows: compare the rows written
  const nb = (m * k) / 32;
  sameBits(lanes.qx.subarray(0, nb * 8), block.qx.subarray(0, nb * 8), `${what} QX`);
  sameBits(lanes.dx.subarray(0, nb), block.dx.subarray(0, nb), `${what} DX`);
  sameBits(lanes.sx.subarray(0, nb), block.sx.subarray(0, nb), `${what} SX`);
  lanes.rest.forEach((r, i) => sameBits(r, block.rest[i]!, `${what} tensor ${i}`));
  // the cases must exercise d = 0 and non-zero scales
  const dx = new Float32Array(block.dx.buffer, block.dx.byteOffset, nb);
  assert.ok(dx.some((d) => d === 0) && dx.some((d) => d > 0), `${what}: zero and non-zero scales`);
}

describe('webgpu quant_acts / norm_quant_acts with 8 lanes a block == one thread a block, bit for bit', () => {
  test('quant_acts, plain and gated (silu, sigmoid): QX, DX, SX and the gated X', async () => {
    for (const k of KS) for (const m of MS) for (const gate of [null, 'silu', 'sigmoid'] as const) {
      const what = `K=${k} M=${m} ${gate ?? 'plain'}`;
      const x = activations(m, k, 7 * k + m);
      const gb = activations(m, k, 11 * k + m + 1);
      const res = async (layout: QuantLayout) => quantize(layout, (e) => {
        const xt = g.alloc.upload(x);
        const gt = g.alloc.upload(gb);
        return { acts: g.quantActs(e, xt, m, k, gate ? { b: gt, act: gate } : undefined), rest: [xt] };
      });
      const block = await res('block');
      const lanes = await res('lanes');
      assert.equal(lanes.dispatches, 1, `${what}: one dispatch`);
      sameQuantized(lanes, block, m, k, what);
    }
  });

  test('norm_quant_acts, zero-centred and plain: QX, DX, SX and the normed rows', async () => {
    for (const k of KS) for (const m of MS) for (const zeroCentered of [false, true]) {
      const what = `K=${k} M=${m}${zeroCentered ? ' zero-centred' : ''}`;
      const x = activations(m, k, 13 * k + m);
      const r = rng(k + m);
      // a weight with repeated values, so the special blocks' ties survive the norm
      const wv = Float32Array.from({ length: k }, (_, p) => (p % 32 < 8 ? 0.75 : 0.5 * (2 * r() - 1)));
      const res = async (layout: QuantLayout) => quantize(layout, (e) => {
        const xt = g.alloc.upload(x);
        const out = g.alloc.upload(new Float32Array(m * k).fill(NaN));
        const acts = g.normQuantActs(e, { wv: g.alloc.upload(wv), eps: 1e-6, zeroCentered, out }, xt, m, k);
        return { acts, rest: [out] };
      });
      const block = await res('block');
      const lanes = await res('lanes');
      assert.equal(lanes.dispatches, 1, `${what}: one dispatch`);
      sameQuantized(lanes, block, m, k, what);
    }
  });
});
