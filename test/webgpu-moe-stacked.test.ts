// Stacked MoE experts on webgpu (kernels/webgpu/moe-stack.ts): every expert's GEMM of a kind
// in one dispatch (grid z = (expert, tile)) against the per-expert dispatches
// (MoeStacks.enabled = false), for float (bf16) and quantized (q4_k) experts, at decode (1
// row) and in prefill (20 rows: one expert gets more than a 16-row tile), with the layer
// split in parts of 2 stacked experts (gate+up: 2E = 10 stacked, 5 parts; down: 3 parts)
// and unsplit, and at 70 rows (past the fused routing's 64):
// - the slots (each (row, slot)'s expert output) and the layer's output are the same bits;
// - the fused call (MoeFusion: the router's rows and the plan (and the gather) in one
//   dispatch, then the combine with σ(shared logit)·shared and the residual add in one) has
//   the bits of moeRoute, moeExperts, addSigmoidScaled, add;
// - a row alone == in the batch;
// - dispatches: per-expert paths grow with the experts, the stacked path takes a fixed
//   number per stacked part (counted below per kind);
// - a whole model's decode step (tiny-moe BF16 safetensors and Q4_K_M GGUF, 8 MoE layers of
//   16 experts): the router runs inside the plan, no gather, gate product, shared-gate or
//   residual dispatch is left, and the matmuls are 6 per layer (BF16: the attention/GDN
//   input group and output, the router group, gate+up, down, shared down; Q4_K_M: ≤ 8) + the
//   LM head.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Weight } from '../src/kernels/types.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import type { GpuTensor } from '../src/kernels/webgpu/tensor.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { quantizeRowsGgml } from '../src/kernels/quant/quantize-ggml.js';
import { randomWeight, rng } from './numeric.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { sameBits } from './engine-helpers.js';
import { labelsPerStep } from './webgpu-step-labels.js';
import { sharedPath } from './paths.js';

let k: WebGpuBoundaryKernels;
// the cpu launch profile whatever DELTASERVE_LAUNCHES says: the dispatch counts below are its
before(async () => { k = new WebGpuBoundaryKernels(await gpuUnderTest({ launches: 'cpu' })); });
after(() => k?.dispose());

const ref = createRefKernels();
const [H, IE, E, TOPK] = [256, 256, 5, 2];
type Experts = readonly { gate: Weight; up: Weight; down: Weight }[];

function hostWeight(dtype: 'bf16' | 'q4_k', rows: number, cols: number, sym: () => number): Weight {
  if (dtype === 'bf16') return randomWeight(ref, dtype, rows, cols, sym);
  const q = ref.allocWeight(dtype, rows, cols);
  quantizeRowsGgml(dtype, Float32Array.from({ length: rows * cols }, sym), rows, cols, q.bytes);
  return q.weight;
}

/** A fresh upload of the experts (each layer key stacks once, retiring its handles). */
function packed(host: Experts): Experts {
  return host.map((e) => ({ gate: k.packWeight(e.gate), up: k.packWeight(e.up), down: k.packWeight(e.down) }));
}

async function read(t: GpuTensor): Promise<Float32Array> {
  return (await k.readBack([{ t, offset: 0, length: t.length }]))[0]!;
}

interface Inputs { x: Float32Array; logits: Float32Array; res: Float32Array; sgate: Float32Array; sup: Float32Array; logit: Float32Array; m: number }

function up(data: ArrayLike<number>, i32 = false): GpuTensor {
  const t = i32 ? k.allocI32(data.length) : k.alloc(data.length);
  k.write(t, 0, data);
  return t;
}

/** The MoE layer's calls: fused (moeExperts routes, runs the shared expert's down and ends
 * the layer), or moeRoute, moeExperts, mulSilu and matmul (the shared down), addSigmoidScaled,
 * add. Returns the routing, the slots, the routed + shared output, the residual and the
 * dispatches of the calls. */
async function run(experts: Experts, sharedDown: Weight, inp: Inputs, fused: boolean) {
  const { m } = inp;
  const [x, logits, res, sgate, sup, logit] = [up(inp.x), up(inp.logits), up(inp.res), up(inp.sgate), up(inp.sup), up(inp.logit)];
  const shared = k.alloc(m * H);
  const [ids, wts] = [k.allocI32(m * TOPK), k.alloc(m * TOPK)];
  const out = k.alloc(m * H);
  const slot = k.alloc(m * TOPK * H);
  const before = k.recordedDispatches;
  const scratch = { slot, rowsIn: k.alloc(m * H), rowsOut: k.alloc(m * H), gate: k.alloc(m * IE), up: k.alloc(m * IE) };
  if (fused) {
    const down = { w: sharedDown, gate: sgate, up: sup };
    k.moeExperts(out, x, ids, wts, m, TOPK, experts, scratch, { route: { logits, renormalize: true }, tail: { shared: { y: shared, logit, down }, residual: res } });
  } else {
    k.moeRoute(ids, wts, logits, m, E, TOPK, true);
    k.moeExperts(out, x, ids, wts, m, TOPK, experts, scratch);
    k.mulSilu(sup, sup, sgate, m * IE);
    k.matmul(shared, sup, sharedDown, m);
    k.addSigmoidScaled(out, shared, logit, m, H);
    k.add(res, res, out, m * H);
  }
  const dispatches = k.recordedDispatches - before;
  const [routed, weights, slots, o, r] = await k.readBack([ids, wts, slot, out, res].map((t) => ({ t, offset: 0, length: t.length })));
  // ids come back as f32 views of their i32 words
  return { routed: new Int32Array(routed!.buffer, routed!.byteOffset, routed!.length), weights: weights!, slots: slots!, out: o!, res: r!, dispatches };
}

/** Row i's router logits: expert 1 first (20 rows: more than a 16-row tile), then one of
 * 0, 3, 4, 2, the others lower. */
function inputs(m: number, sym: () => number, r: () => number): Inputs {
  const logits = Float32Array.from({ length: m * E }, () => r() - 2);
  for (let i = 0; i < m; i++) {
    logits[i * E + 1] = 3 + r();
    logits[i * E + [0, 3, 4, 2][i % 4]!] = 1 + r();
  }
  return { m, logits, x: Float32Array.from({ length: m * H }, sym), res: Float32Array.from({ length: m * H }, sym),
    sgate: Float32Array.from({ length: m * IE }, sym), sup: Float32Array.from({ length: m * IE }, sym), logit: Float32Array.from({ length: m }, sym) };
}

/** Row `i` of the inputs as a batch of one. */
function row(inp: Inputs, i: number): Inputs {
  const s = (a: Float32Array, w: number): Float32Array => a.subarray(i * w, (i + 1) * w);
  return { m: 1, logits: s(inp.logits, E), x: s(inp.x, H), res: s(inp.res, H), sgate: s(inp.sgate, IE), sup: s(inp.sup, IE), logit: s(inp.logit, 1) };
}

describe('webgpu stacked MoE experts', () => {
  // one dispatch per stacked part (gate+up parts, then down parts). The rest: route, plan,
  // gather, combine, mul_silu, the shared down, add_sigmoid_scaled, add (q4_k: + the two
  // activation quantizations and the shared down's); fused: route + plan + gather (q4_k: +
  // the gate/up input's quantization), the gated shared down (q4_k: + its gated
  // quantization), the down input's (q4_k) quantization, combine. Fused with the gather
  // apart: + the gather (q4_k: + the quantization); past 64 rows: + route, plan apart too.
  // The per-expert path: 2 or 3 per expert.
  for (const [dtype, perExpertMin, fixed, fusedFixed, apart] of [['bf16', 2, 8, 3, 1], ['q4_k', 3, 11, 5, 2]] as const) {
    test(`${dtype}: stacked (1 part, parts of 2) == per-expert dispatches bit for bit, fused calls == separate calls, alone == batched`, async () => {
      const r = rng(61);
      const sym = () => 2 * r() - 1;
      const host = Array.from({ length: E }, () => ({ gate: hostWeight(dtype, IE, H, sym), up: hostWeight(dtype, IE, H, sym), down: hostWeight(dtype, H, IE, sym) }));
      const sharedDown = k.packWeight(hostWeight(dtype, H, IE, sym));
      const expertBytes = (k.storedWeightBytes(host[0]!.gate) + k.storedWeightBytes(host[0]!.up) + k.storedWeightBytes(host[0]!.down)) / 3;
      k.moeStacks.enabled = false;
      const perExpert = packed(host);
      await run(perExpert, sharedDown, inputs(1, sym, r), false); // first sight of the layer: per-expert from now on
      k.moeStacks.enabled = true;
      const whole = packed(host);
      k.moeStacks.partBytes = 2 * expertBytes; // 2 experts per part: 3 parts
      const split = packed(host);
      await run(split, sharedDown, inputs(1, sym, r), false);
      k.moeStacks.partBytes = null;
      for (const m of [1, 20, 70]) {
        const inp = inputs(m, sym, r);
        const want = await run(perExpert, sharedDown, inp, false);
        assert.deepEqual([...want.routed].filter((_, p) => p % TOPK === 0), Array.from({ length: m }, () => 1), 'expert 1 first in every row');
        assert.ok(want.dispatches >= E * perExpertMin, `${dtype} m ${m}: per-expert path ${want.dispatches} dispatches`);
        for (const [name, experts, parts] of [['1 part', whole, 1 + 1], ['parts of 2', split, 5 + 3]] as const) {
          // fused: the gather in the routing workgroup, or (gatherElements 0) apart
          for (const [fused, gatherElements] of [[false, 0], [true, 1 << 16], [true, 0]] as const) {
            k.moeStacks.fusedGatherElements = gatherElements;
            const got = await run(experts, sharedDown, inp, fused);
            k.moeStacks.fusedGatherElements = 1 << 16;
            const what = `${dtype} m ${m} ${name}${fused ? ` fused, gather ≤ ${gatherElements}` : ''}`;
            assert.deepEqual([...got.routed], [...want.routed], `${what}: routed ids`);
            assert.ok(sameBits(got.weights, want.weights), `${what}: routing weights`);
            assert.ok(sameBits(got.slots, want.slots), `${what}: slots`);
            assert.ok(sameBits(got.out, want.out), `${what}: routed + shared output`);
            assert.ok(sameBits(got.res, want.res), `${what}: residual`);
            // fused: + the gather when apart; past 64 rows route, plan and gather apart
            const extra = !fused ? 0 : m > 64 ? apart + 1 : gatherElements === 0 ? apart : 0;
            assert.equal(got.dispatches, (fused ? fusedFixed : fixed) + extra + parts, `${what}: dispatches`);
          }
          const i = 13 % m;
          const alone = await run(experts, sharedDown, row(inp, i), true);
          const batched = await run(experts, sharedDown, inp, true);
          assert.ok(sameBits(alone.res, batched.res.subarray(i * H, (i + 1) * H)), `${dtype} m ${m} ${name}: row ${i} alone differs from the batch`);
        }
      }
    });
  }

  test('a stacked expert is refused by the plain matmuls, naming why', async () => {
    const r = rng(7);
    const sym = () => 2 * r() - 1;
    const [h, ie] = [64, 32];
    const experts = packed(Array.from({ length: 2 }, () => ({ gate: hostWeight('bf16', ie, h, sym), up: hostWeight('bf16', ie, h, sym), down: hostWeight('bf16', h, ie, sym) })));
    k.moeExperts(k.alloc(h), up(Float32Array.from({ length: h }, sym)), up([0, 1], true), up([0.5, 0.5]), 1, TOPK, experts,
      { slot: k.alloc(TOPK * h), rowsIn: k.alloc(h), rowsOut: k.alloc(h), gate: k.alloc(ie), up: k.alloc(ie) });
    await k.readBack([]);
    assert.throws(() => k.matmul(k.alloc(ie), k.alloc(h), experts[0]!.gate, 1), /stacked with its layer's experts/);
  });

  test('tiny-moe decode (BF16, Q4_K_M GGUF): one plan and one combine per MoE layer, no per-expert or glue dispatches', async () => {
    for (const path of [sharedPath('models', 'tiny-moe'), sharedPath('models', 'gguf', 'tiny-moe-Q4_K_M.gguf')]) {
      const counts = await labelsPerStep(path, k);
      const what = `${path}: ${JSON.stringify(Object.fromEntries(counts))}`;
      const layers = 8;
      assert.equal(counts.get('moe_plan'), layers, what);
      assert.equal(counts.get('moe_combine'), layers, what);
      for (const glue of ['moe_route', 'mul_silu', 'add_sigmoid_scaled', 'add']) assert.equal(counts.get(glue) ?? 0, 0, `${glue}: ${what}`);
      // the LM head's rows (GGUF: + the head-order gather of each of the 6 GDN layers)
      assert.ok((counts.get('gather_rows') ?? 0) <= 1 + (path.endsWith('.gguf') ? 6 : 0), `gather_rows: ${what}`);
      const matmuls = [...counts].filter(([l]) => l.startsWith('matmul_')).reduce((a, [, n]) => a + n, 0);
      // Q4_K_M: + 2 per layer: the f32 router and shared gate apart from the quantized shared
      // gate/up, and a group mixing quant types
      assert.ok(matmuls <= (path.endsWith('.gguf') ? 8 : 6) * layers + 1, `matmul dispatches ${matmuls}: ${what}`);
    }
  });
});

