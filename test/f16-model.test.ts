// F16 weights stay 16-bit: tiny-think written as an F16 GGUF (`quantize --type f16`, the
// same BF16 values, each exactly representable in f16 unless tiny) loads with every matmul
// and embedding operand as f16 (vectors widened to f32), matches the golden logits, state
// norm, MTP top-10 and greedy ids on the wasm backend, and its logits equal the ref
// backend's (f16 widened exactly, f64 sums) within the matmul tolerance.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { quantizeToGguf } from '../src/tools/quantize-gguf.js';
import { loadModel, allocSequenceMemory } from '../src/model/model.js';
import { forwardHidden, lmHead } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import type { Kernels, Weight } from '../src/kernels/types.js';
import { checkGolden } from './golden-check.js';
import { TINY_THINK } from './paths.js';
import { relErr } from './numeric.js';

const dir = mkdtempSync(join(tmpdir(), 'deltaserve-f16-'));
const file = join(dir, 'tiny-think-F16.gguf');
const wasm = await createWasmKernels({ threads: 2 });
after(() => {
  wasm.dispose();
  rmSync(dir, { recursive: true, force: true });
});
before(async () => {
  await quantizeToGguf({ model: TINY_THINK(), out: file, type: 'f16', threads: 1 });
});

/** Every Weight reachable from `v`, with its path. */
function weights(v: unknown, path: string, out: [string, Weight][]): [string, Weight][] {
  if (v && typeof v === 'object') {
    if ('dtype' in v && 'data' in v && 'rows' in v) out.push([path, v as Weight]);
    else for (const [key, x] of Object.entries(v)) weights(x, `${path}.${key}`, out);
  }
  return out;
}

function lastLogits(k: Kernels, prompt: number[]): Float32Array {
  const m = loadModel(file, k);
  const ws = new StepArena(m);
  const mem = allocSequenceMemory(m, prompt.length + 8);
  const fw = forwardHidden(m, ws, [{ pageTable: mem.pageTable, kv: mem.kv, state: mem.state, tokens: prompt, start: 0, chunked: true }]);
  return Float32Array.from(lmHead(m, ws, fw.hidden.slice(), [prompt.length - 1]));
}

describe('F16 GGUF (tiny-think written by quantize --type f16)', () => {
  test('matmul and embedding operands load as f16 (panels in wasm), vectors as f32', () => {
    const m = loadModel(file, wasm);
    const all = weights(m.weights, 'w', []);
    const f16 = all.filter(([, w]) => w.dtype === 'f16');
    assert.ok(f16.length >= 40, `only ${f16.length} f16 weights`);
    for (const [path, w] of f16) assert.equal(w.layout, 'panel8', `${path} is not packed`);
    for (const [path, w] of all) {
      if (w.rows === 1 || /norm|conv|aLog|dtBias/.test(path)) assert.notEqual(w.dtype, 'f16', `${path} should be widened`);
    }
    const embed = m.weights.embed;
    assert.equal(embed.dtype, 'f16');
    // the weights take the file's 2 bytes per value, not f32's 4
    const bytes = f16.reduce((s, [, w]) => s + wasm.storedWeightBytes(w), 0);
    assert.equal(bytes, f16.reduce((s, [, w]) => s + 2 * w.rows * w.cols, 0));
  });

  test('wasm logits == ref logits within the matmul tolerance', () => {
    const prompt = [1, 5, 9, 200, 17, 4, 88, 3];
    const ref = lastLogits(createRefKernels(), prompt);
    const got = lastLogits(wasm, prompt);
    const e = relErr(got, ref);
    assert.ok(e <= 1e-4, `rel err ${e}`);
  });

  checkGolden('tiny-think', () => wasm, () => file);
});
