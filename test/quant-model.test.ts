// --quantize at load: quantize → dequantize error bounds of the two quantizers; tiny-think
// with --quantize q8_0 against the golden greedy ids; and MTP on == MTP off, bit for bit,
// through the engine on quantized weights (invariant 4 of docs/ARCHITECTURE.md holds for the integer kernels).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { quantizeRowsGgml as quantizeRows } from '../src/kernels/quant/quantize-ggml.js';
import { dequantizeRow } from '../src/kernels/quant/dequant.js';
import { quantRowBytes } from '../src/kernels/quant/formats.js';
import { quantTypeFor } from '../src/checkpoint/quantize-load.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { loadModel, allocSequenceMemory } from '../src/model/model.js';
import { forwardHidden, lmHead } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { evalPrompts, runAll, sameBits, withEngine } from './engine-helpers.js';
import { TINY_THINK, sharedPath } from './paths.js';
import { rng } from './numeric.js';

function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

for (const [type, bound] of [['q8_0', 0.012], ['q4_k', 0.12]] as const) {
  test(`${type} quantizer: rms error / rms value ≤ ${bound}, max error ≤ half a step`, () => {
    const r = rng(9);
    const rows = 16;
    const cols = 512;
    const x = new Float32Array(rows * cols).map(() => 0.02 * gaussian(r) * (r() < 0.01 ? 8 : 1));
    const bytes = new Uint8Array(rows * quantRowBytes(type, cols));
    quantizeRows(type, x, rows, cols, bytes);
    const y = new Float32Array(cols);
    let se = 0;
    let sv = 0;
    for (let i = 0; i < rows; i++) {
      dequantizeRow(type, bytes, cols, i, y);
      for (let c = 0; c < cols; c++) {
        const v = x[i * cols + c]!;
        se += (y[c]! - v) ** 2;
        sv += v * v;
        if (type === 'q8_0') { // |err| ≤ d/2 (+ the f16 rounding of d) with d = amax/127
          let amax = 0;
          const b0 = i * cols + (c & ~31);
          for (let l = 0; l < 32; l++) amax = Math.max(amax, Math.abs(x[b0 + l]!));
          assert.ok(Math.abs(y[c]! - v) <= (amax / 127) * 0.51 + 1e-3 * amax, `q8_0 element ${i},${c}`);
        }
      }
    }
    const rel = Math.sqrt(se / sv);
    assert.ok(rel <= bound, `${type}: relative rms error ${rel}`);
  });
}

test('quantTypeFor: projections quantized, head q8_0, router/gates/small kept', () => {
  assert.equal(quantTypeFor('q4_k', 'model.layers.0.mlp.up_proj.weight', 1024), 'q4_k');
  assert.equal(quantTypeFor('q4_k', 'model.layers.0.mlp.down_proj.weight', 352), 'q8_0'); // 352 % 256 ≠ 0
  assert.equal(quantTypeFor('q4_k', 'model.layers.0.mlp.down_proj.weight', 100), null); // not whole blocks
  assert.equal(quantTypeFor('q4_k', 'lm_head.weight', 1024), 'q8_0');
  assert.equal(quantTypeFor('q8_0', 'model.language_model.embed_tokens.weight', 1024), 'q8_0');
  assert.equal(quantTypeFor('q8_0', 'model.layers.0.mlp.gate.weight', 1024), null);
  assert.equal(quantTypeFor('q8_0', 'model.layers.0.mlp.gate_proj.weight', 1024), 'q8_0');
  assert.equal(quantTypeFor('q8_0', 'model.layers.0.linear_attn.in_proj_a.weight', 1024), null);
  assert.equal(quantTypeFor('q8_0', 'model.layers.0.mlp.shared_expert_gate.weight', 1024), null);
});

interface GoldenPrompt { name: string; prompt_ids: number[]; greedy_ids: number[] }

test('tiny-think --quantize q8_0 reproduces the golden greedy ids', async () => {
  const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as { prompts: GoldenPrompt[] };
  const k = await createWasmKernels({ threads: 2 });
  try {
    const m = loadModel(TINY_THINK(), k, { quantize: 'q8_0' });
    assert.ok(m.weights.layers.some((l) => l.mlp.kind === 'dense' && l.mlp.up.dtype === 'q8_0'), 'MLP weights are q8_0');
    const ws = new StepArena(m);
    for (const p of golden.prompts) {
      const mem = allocSequenceMemory(m, p.prompt_ids.length + p.greedy_ids.length + 8);
      const seq = { pageTable: mem.pageTable, kv: mem.kv, state: mem.state };
      const P = p.prompt_ids.length;
      const argmax = (v: Float32Array): number => v.reduce((b, x, i) => (x > v[b]! ? i : b), 0);
      const fw = forwardHidden(m, ws, [{ ...seq, tokens: p.prompt_ids, start: 0, chunked: true }]);
      const out = [argmax(lmHead(m, ws, fw.hidden, [P - 1]))];
      while (out.length < p.greedy_ids.length) {
        const step = forwardHidden(m, ws, [{ ...seq, tokens: [out[out.length - 1]!], start: P + out.length - 1, chunked: false }]);
        out.push(argmax(lmHead(m, ws, step.hidden, [0])));
      }
      assert.deepEqual(out, p.greedy_ids, `${p.name}: greedy ids`);
    }
  } finally {
    k.dispose();
  }
});

for (const quantize of ['q8_0', 'q4_k'] as const) {
  test(`--quantize ${quantize}: MTP on == MTP off through the engine (k = 1, 3; 1 and 4 concurrent)`, async () => {
    const reqs = evalPrompts(4).map((messages, i) => ({ messages, maxTokens: 12 + (i % 2) * 4 }));
    const run = (k: number, n: number) => withEngine({ model: TINY_THINK(), kernels: 'wasm', threads: 2, quantize, specTokens: k,
      specAdaptive: false, maxRunning: 8, poisonPadding: true }, async (e) => ({ results: await runAll(e, reqs.slice(0, n)), stats: e.stats() }));
    const { results: off } = await run(0, 4);
    for (const k of [1, 3]) {
      for (const n of [1, 4]) {
        const { results, stats } = await run(k, n);
        assert.ok(stats.spec.rounds > 0, 'speculation ran');
        results.forEach((g, i) => {
          assert.deepEqual(g.ids, off[i]!.ids, `k=${k} n=${n} request ${i} ids`);
          g.logits.forEach((l, s) => assert.ok(sameBits(l, off[i]!.logits[s]!), `k=${k} n=${n} request ${i} step ${s} logits differ`));
        });
      }
    }
  });
}
