// GGUF files vs their safetensors twins (same BF16 weights, written by llama.cpp's converter):
// every weight the loader builds holds the same values, and the logits are bit-identical on
// both backends — through the layout transforms (tiled value heads, +1 norms, ssm_a,
// per-expert slices of the 3-D expert tensors). Through the engine: the GGUF model gives the
// twin's tokens and logits bit for bit, and MTP on equals MTP off bit-exact.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { loadModel, type Model } from '../src/model/model.js';
import { probePrompt } from '../src/model/probe.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { weightsByPath } from './model-weights.js';
import { bf16ToF32 } from '../src/checkpoint/safetensors.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import { evalPrompts, runAll, sameBits, withEngine, type RunResult } from './engine-helpers.js';
import { sharedPath } from './paths.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { convertQwen3Next } from './gguf-convert.js';
import { checkGolden } from './golden-check.js';
import { relErr } from './numeric.js';
import { tiledValueHeads } from '../src/model/gguf-map.js';

const wasm = await createWasmKernels({ threads: 2 });
after(() => wasm.dispose());
// qwen3next: no fixture file exists, so tiny-next-moe is converted by a test-only converter
// that follows llama.cpp's rules (gguf-convert.ts), in today's layout and the older one.
const TMP = mkdtempSync(join(tmpdir(), 'deltaserve-gguf-next-'));
after(() => rmSync(TMP, { recursive: true, force: true }));
const NEXT = join(TMP, 'tiny-next-moe-BF16.gguf');
const NEXT_LEGACY = join(TMP, 'tiny-next-moe-legacy-BF16.gguf');
convertQwen3Next(sharedPath('models', 'tiny-next-moe'), NEXT, sharedPath('models', 'gguf', 'tiny-think-BF16.gguf'));
convertQwen3Next(sharedPath('models', 'tiny-next-moe'), NEXT_LEGACY, sharedPath('models', 'gguf', 'tiny-think-BF16.gguf'), true);

const TWINS = [
  ['tiny-moe', () => sharedPath('models', 'tiny-moe'), () => sharedPath('models', 'gguf', 'tiny-moe-BF16.gguf')],
  ['tiny-think', () => sharedPath('models', 'tiny-think'), () => sharedPath('models', 'gguf', 'tiny-think-BF16.gguf')],
  ['tiny-next-moe (qwen3next)', () => sharedPath('models', 'tiny-next-moe'), () => NEXT],
  ['tiny-next-moe (qwen3next, ssm_in)', () => sharedPath('models', 'tiny-next-moe'), () => NEXT_LEGACY],
] as const;
const PROMPTS = [[996, 882, 198, 40, 300, 500, 700, 997, 198, 996, 77, 198], [1, 2, 3, 50, 60, 70, 80, 90, 100, 500, 900]];

function values(w: Weight): Float64Array {
  const out = new Float64Array(w.data.length);
  if (w.dtype === 'bf16') w.data.forEach((b, i) => { out[i] = bf16ToF32(b); });
  else w.data.forEach((x, i) => { out[i] = x; });
  return out;
}

for (const [name, st, gguf] of TWINS) {
  test(`${name}: every weight from the GGUF holds the safetensors twin's values`, () => {
    const k = createRefKernels();
    const a = weightsByPath(loadModel(st(), k).weights, 'w', new Map());
    const b = weightsByPath(loadModel(gguf(), k).weights, 'w', new Map());
    assert.deepEqual([...b.keys()], [...a.keys()]);
    assert.ok(a.size > 100, `${a.size} weights`);
    for (const [path, wa] of a) {
      const wb = b.get(path)!;
      assert.deepEqual([wb.rows, wb.cols], [wa.rows, wa.cols], path);
      assert.deepEqual(values(wb), values(wa), path);
    }
  });
}

function probeBits(m: Model, ids: number[]): Float32Array[] {
  const p = probePrompt(m, ids);
  return [p.lastLogits, p.mtpLogits!, new Float32Array([p.layer0StateNorm!])];
}

for (const [name, st, gguf] of TWINS) {
  for (const [kname, kernels] of [['ref', createRefKernels], ['wasm', () => wasm]] as [string, () => Kernels][]) {
    test(`${name} [${kname}]: GGUF logits, MTP logits and state are bit-identical to safetensors`, () => {
      const k = kernels();
      const a = loadModel(st(), k);
      const b = loadModel(gguf(), k);
      for (const ids of PROMPTS.slice(0, kname === 'ref' ? 1 : 2)) {
        probeBits(a, ids).forEach((x, i) => assert.ok(sameBits(probeBits(b, ids)[i]!, x), `prompt ${ids.length} output ${i}`));
      }
    });
  }
}

function assertSame(got: RunResult[], want: RunResult[], label: string): void {
  got.forEach((g, i) => {
    assert.deepEqual(g.ids, want[i]!.ids, `${label}: request ${i} ids`);
    assert.equal(g.finishReason, want[i]!.finishReason, `${label}: request ${i} finish`);
    assert.equal(g.logits.length, want[i]!.logits.length);
    g.logits.forEach((l, s) => assert.ok(sameBits(l, want[i]!.logits[s]!), `${label}: request ${i} step ${s} logits differ`));
  });
}

checkGolden('tiny-next-moe', () => wasm, () => NEXT);

test('engine on GGUF: same tokens and logits as the safetensors twin; MTP on == off, bit-exact', async () => {
  const reqs: GenerateRequest[] = evalPrompts(4).map((messages, i) => ({ messages, maxTokens: 12 + 4 * i }));
  for (const [name, st, gguf] of TWINS.slice(0, 3)) {
    const run = (model: string, k: number) => withEngine({ model, kernels: 'wasm', threads: 2, specTokens: k, specAdaptive: false,
      maxRunning: 4, poisonPadding: true }, async (e) => ({ results: await runAll(e, reqs), stats: e.stats() }));
    const off = (await run(gguf(), 0)).results;
    assertSame((await run(st(), 0)).results, off, `${name} safetensors vs GGUF`);
    for (const k of [1, 3]) {
      const { results, stats } = await run(gguf(), k);
      assert.ok(stats.spec.rounds > 0, `${name} k=${k}: speculation ran`);
      assertSame(results, off, `${name} GGUF k=${k}`);
    }
  }
});

test('out_proj with input columns in tiled head order + the activation permuted = the grouped model', () => {
  // The path quantized GGUF ssm_out takes (its columns cannot be regrouped at load).
  const k = createRefKernels();
  const model = loadModel(TWINS[1][1](), k);
  const { linNumKeyHeads: hk, linNumValueHeads: hv, linValueDim: dv } = model.config;
  const order = Int32Array.from(tiledValueHeads(hk, hv).map((_, t) => tiledValueHeads(hk, hv).indexOf(t)));
  assert.notDeepEqual([...order], [...order.keys()], 'tiny-think has a non-trivial head order');
  const layers = model.weights.layers.map((l) => {
    if (l.mixer.kind !== 'linear') return l;
    const w = l.mixer.outProj;
    const { weight, bytes } = k.allocWeight(w.dtype, w.rows, w.cols);
    const src = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
    const esz = w.dtype === 'bf16' ? 2 : 4;
    for (let r = 0; r < w.rows; r++) {
      order.forEach((h, j) => bytes.set(src.subarray((r * w.cols + h * dv) * esz, (r * w.cols + (h + 1) * dv) * esz), (r * w.cols + j * dv) * esz));
    }
    return { ...l, mixer: { ...l.mixer, outProj: k.packWeight(weight), outProjHeadOrder: order } };
  });
  const permuted = { ...model, weights: { ...model.weights, layers } };
  const ids = PROMPTS[0]!;
  const want = probePrompt(model, ids).lastLogits;
  const got = probePrompt(permuted, ids).lastLogits;
  assert.ok(relErr(got, want) <= 1e-5, `rel err ${relErr(got, want)}`);
});
