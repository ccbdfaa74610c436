// Issue 47: the qwen3.5-0.8b shape on webgpu generates the CPU's greedy ids. make-model's
// qwen3.5-0.8b cut to one decoder layer keeps what differs from the tiny fixtures: the real
// 248,320-token vocabulary (a tied table of 508 MB in BF16, split in parts on a 128 MiB
// binding), hidden 1024, GDN 16 × 128 heads, and in the MTP block full attention with
// 8 query / 2 KV heads of 256 (head dims over 64 broke the grouped attention kernel: BF16
// ids diverged at the 2nd token, Q8_0 at the 5th). In BF16 and as the Q8_0 and Q4_K_M GGUFs
// `deltaserve quantize` writes, a 70-token prompt (past one 64-position tile, ids from every
// part of the table) gives webgpu the wasm backend's greedy id after the prompt and from the
// MTP head, with logits within a tolerance of their scale. Not bit for bit: on this shape
// ref, wasm and webgpu all differ in the last bits (BF16: ≤ 6e-6 of a scale of 3, every pair
// of backends), and a Q8_0 / Q4_K activation block quantized from inputs one ulp apart can
// round one int8 the other way, moving a logit by about 1% of its scale (ref vs wasm too).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel } from '../src/tools/make-model.js';
import { quantizeToGguf } from '../src/tools/quantize-gguf.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { loadModel } from '../src/model/model.js';
import type { AnyKernels } from '../src/kernels/types.js';
import { probePromptAsync, type PromptProbe } from '../src/model/probe.js';
import { gpuUnderTest } from './webgpu-helpers.js';
import { TINY_THINK } from './paths.js';

const VOCAB = 248_320;
// 70 ids spread over the whole vocabulary (every part of a split table), some repeated
const PROMPT = Array.from({ length: 70 }, (_, i) => (i * 35_473 + (i % 7) * 1_009) % VOCAB);
PROMPT[69] = VOCAB - 1;

const dir = mkdtempSync(join(tmpdir(), 'ds-qwen35-shape-'));
const st = join(dir, 'st');
const files: Record<'BF16' | 'Q8_0' | 'Q4_K_M', string> = { BF16: st, Q8_0: join(dir, 'q8_0.gguf'), Q4_K_M: join(dir, 'q4_k_m.gguf') };
after(() => rmSync(dir, { recursive: true, force: true }));

before(async () => {
  await makeModel({ shape: 'qwen3.5-0.8b', dtype: 'bf16', seed: 3, out: st, layers: 1, layout: 'flat', tokenizer: TINY_THINK() });
  await quantizeToGguf({ model: st, out: files.Q8_0, type: 'q8_0' });
  await quantizeToGguf({ model: st, out: files.Q4_K_M, type: 'q4_k_m' });
});

async function probe(path: string, kernels: AnyKernels): Promise<PromptProbe> {
  return await probePromptAsync(loadModel(path, kernels), PROMPT);
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** Index and size of the largest |a − b| (a NaN on either side counts as infinite). */
function maxDiff(a: Float32Array, b: Float32Array): { at: number; diff: number } {
  let at = 0;
  let diff = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= diff)) { diff = Number.isNaN(d) ? Infinity : d; at = i; }
  }
  return { at, diff };
}

/** max |got − want| allowed, as a fraction of max |want| (see the header). */
const TOLERANCE = { BF16: 2e-5, Q8_0: 3e-2, Q4_K_M: 3e-2 } as const;

for (const dtype of ['BF16', 'Q8_0', 'Q4_K_M'] as const) {
  test(`qwen3.5-0.8b shape (1 layer + MTP) ${dtype}: webgpu's greedy ids (last and MTP) == wasm's, logits within ${TOLERANCE[dtype]} of their scale`, async () => {
    const wasm = await createWasmKernels({ threads: 2 });
    let want: PromptProbe;
    try {
      want = await probe(files[dtype], wasm);
    } finally {
      wasm.dispose();
    }
    const gpu = new WebGpuBoundaryKernels(await gpuUnderTest());
    let got: PromptProbe;
    try {
      got = await probe(files[dtype], gpu);
    } finally {
      gpu.dispose();
    }
    assert.equal(got.lastLogits.length, VOCAB);
    assert.ok(want.mtpLogits && got.mtpLogits, 'the shape has an MTP head');
    for (const [name, a, b] of [['last', got.lastLogits, want.lastLogits], ['MTP', got.mtpLogits, want.mtpLogits]] as const) {
      assert.equal(argmax(a), argmax(b), `${dtype} ${name}: greedy id`);
      const d = maxDiff(a, b);
      const scale = b.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
      assert.ok(d.diff <= TOLERANCE[dtype] * scale, `${dtype} ${name}: max |diff| ${d.diff} at id ${d.at} (scale ${scale})`);
    }
  });
}
