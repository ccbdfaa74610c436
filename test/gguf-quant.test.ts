// Quantized GGUF files (llama.cpp's quantizer): every tiny-think file reproduces the golden
// greedy ids for all 6 prompts (as llama.cpp does on them); tiny-moe-Q4_K_M loads with every
// weight close to the BF16 file's (so each row permutation / expert slice of a quantized
// tensor is the right one), runs, and keeps MTP on == MTP off bit-exact through the engine.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { loadModel, allocSequenceMemory, type Model } from '../src/model/model.js';
import { forwardHidden, lmHead } from '../src/model/forward.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { Weight } from '../src/kernels/types.js';
import { isQuantType } from '../src/kernels/quant/formats.js';
import { dequantizeRow } from '../src/kernels/quant/dequant.js';
import { bf16ToF32 } from '../src/checkpoint/safetensors.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { evalPrompts, runAll, sameBits, withEngine } from './engine-helpers.js';
import { sharedPath } from './paths.js';
import { weightsByPath } from './model-weights.js';
import { greedy } from './greedy.js';

const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());
const FIX = (name: string): string => sharedPath('models', 'gguf', name);
const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as
  { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };

for (const q of ['Q8_0', 'Q6_K', 'Q5_K_M', 'Q4_K_M', 'Q4_0']) {
  test(`tiny-think-${q}.gguf reproduces the golden greedy ids (6 prompts)`, () => {
    const m = loadModel(FIX(`tiny-think-${q}.gguf`), wasm);
    assert.ok(m.weights.layers.some((l) => isQuantType(l.mlp.kind === 'dense' ? l.mlp.gate.dtype : 'f32')), 'weights stay quantized');
    for (const p of golden.prompts) assert.deepEqual(greedy(m, p.prompt_ids, p.greedy_ids.length), p.greedy_ids, p.name);
  });
}

function rowValues(w: Weight): Float32Array {
  const out = new Float32Array(w.rows * w.cols);
  if (isQuantType(w.dtype)) {
    const row = new Float32Array(w.cols);
    for (let r = 0; r < w.rows; r++) out.set(dequantizeRow(w.dtype, w.data as Uint8Array, w.cols, r, row), r * w.cols);
  } else if (w.dtype === 'bf16') w.data.forEach((b, i) => { out[i] = bf16ToF32(b); });
  else out.set(w.data as Float32Array);
  return out;
}

test('tiny-moe-Q4_K_M.gguf: every weight is close to the BF16 file\'s (right rows, experts, head order)', () => {
  const k = createRefKernels();
  const bf = weightsByPath(loadModel(FIX('tiny-moe-BF16.gguf'), k).weights, 'w', new Map());
  const qm = loadModel(FIX('tiny-moe-Q4_K_M.gguf'), k);
  const q = weightsByPath(qm.weights, 'w', new Map());
  assert.deepEqual([...q.keys()], [...bf.keys()]);
  let quantized = 0;
  for (const [path, wq] of q) {
    const wb = bf.get(path)!;
    if (isQuantType(wq.dtype)) quantized++;
    const gdn = /^w\.layers\.(\d+)\.mixer\.outProj$/.exec(path);
    const mixer = gdn ? qm.weights.layers[Number(gdn[1])]!.mixer : undefined;
    const order = mixer?.kind === 'linear' ? mixer.outProjHeadOrder : undefined;
    const a = rowValues(wq);
    const b = rowValues(wb);
    let err = 0;
    let norm = 0;
    const dv = qm.config.linValueDim;
    for (let i = 0; i < a.length; i++) {
      // a quantized out_proj keeps its stored (tiled) column order: compare column block j
      // with the grouped model's block order[j]
      const c = i % wq.cols;
      const j = order ? i - c + order[Math.floor(c / dv)]! * dv + (c % dv) : i;
      err += (a[i]! - b[j]!) ** 2;
      norm += b[j]! ** 2;
    }
    const rel = Math.sqrt(err / Math.max(norm, 1e-30));
    assert.ok(rel < 0.1, `${path} (${wq.dtype}): relative error ${rel.toFixed(4)} vs BF16`);
  }
  assert.ok(quantized > 100, `${quantized} quantized weights`);
  assert.ok(qm.weights.layers.some((l) => l.mixer.kind === 'linear' && l.mixer.outProjHeadOrder), 'a quantized ssm_out takes the head-order path');
});

test('tiny-moe-Q4_K_M.gguf and tiny-think-Q8_0.gguf through the engine: MTP on == MTP off, bit-exact', async () => {
  const reqs: GenerateRequest[] = evalPrompts(3).map((messages, i) => ({ messages, maxTokens: 10 + 4 * i }));
  for (const file of ['tiny-moe-Q4_K_M.gguf', 'tiny-think-Q8_0.gguf']) {
    const run = (k: number) => withEngine({ model: FIX(file), kernels: 'wasm', threads: 2, specTokens: k, specAdaptive: false,
      maxRunning: 3, poisonPadding: true }, async (e) => ({ results: await runAll(e, reqs), stats: e.stats() }));
    const off = (await run(0)).results;
    const { results, stats } = await run(2);
    assert.ok(stats.spec.rounds > 0, `${file}: speculation ran`);
    results.forEach((r, i) => {
      assert.deepEqual(r.ids, off[i]!.ids, `${file}: request ${i} ids`);
      r.logits.forEach((l, s) => assert.ok(sameBits(l, off[i]!.logits[s]!), `${file}: request ${i} step ${s} logits`));
    });
  }
});

test('--quantize on GGUF: a BF16 file quantizes exactly like its safetensors twin; quantized tensors stay as stored', () => {
  const st = loadModel(sharedPath('models', 'tiny-moe'), wasm, { quantize: 'q8_0' });
  const gg = loadModel(FIX('tiny-moe-BF16.gguf'), wasm, { quantize: 'q8_0' });
  const ids = [996, 882, 198, 40, 300, 500, 700, 997, 198, 996, 77, 198];
  const a = greedy(st, ids, 8);
  assert.deepEqual(greedy(gg, ids, 8), a);
  const q4 = loadModel(FIX('tiny-think-Q4_K_M.gguf'), createRefKernels(), { quantize: 'q8_0' });
  const plain = loadModel(FIX('tiny-think-Q4_K_M.gguf'), createRefKernels());
  const mlp = (m: Model) => m.weights.layers[0]!.mlp;
  assert.equal(mlp(q4).kind === 'dense' && mlp(q4).kind === 'dense' && (mlp(q4) as { gate: Weight }).gate.dtype, 'q4_k');
  assert.deepEqual((mlp(q4) as { gate: Weight }).gate.data, (mlp(plain) as { gate: Weight }).gate.data);
});
