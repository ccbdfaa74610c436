// Tensors past the adapter's storage-binding limit, split in row parts (issue 47 item 4):
// with an artificially low binding limit (WebGpuKernels' maxBindingOverride), tiny-think's
// embedding table / tied LM head is split in 4+ parts and every larger matmul weight in 2+;
// the prompt's last logits and the MTP head's logits equal the unsplit run's bit for bit.
// planSplitEmbed's bookkeeping is also checked on its own (any number of parts, empty parts).
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { WebGpuBoundaryKernels } from '../src/kernels/webgpu/kernels.js';
import { gpuRowBytes, planSplitEmbed, rowsPerPart, type GpuWeight } from '../src/kernels/webgpu/weights.js';
import { loadModel } from '../src/model/model.js';
import { loadModelConfig } from '../src/model/config.js';
import { probePromptAsync, type PromptProbe } from '../src/model/probe.js';
import { sameBits } from './engine-helpers.js';
import { TINY_THINK } from './paths.js';
import { gpuUnderTest } from './webgpu-helpers.js';

/** Binding limit that splits tiny-think's [1024, 256] bf16 embedding (512 KiB) in 4 parts. */
const LOW_BINDING = 150_000;
// token ids in every part of the split table, repeated and out of order
const PROMPT = [995, 3, 700, 260, 1023, 511, 3, 900, 0, 300, 640];

async function probeWith(maxBindingOverride?: number): Promise<PromptProbe> {
  const g = await gpuUnderTest(maxBindingOverride === undefined ? {} : { maxBindingOverride });
  const k = new WebGpuBoundaryKernels(g);
  try {
    return await probePromptAsync(loadModel(TINY_THINK(), k), PROMPT);
  } finally {
    k.dispose();
  }
}

let whole: PromptProbe;
let split: PromptProbe;
before(async () => {
  whole = await probeWith();
  split = await probeWith(LOW_BINDING);
});

test('the low binding limit splits the embedding / LM head in 3+ parts', () => {
  const cfg = loadModelConfig(TINY_THINK());
  const rows = rowsPerPart(gpuRowBytes('bf16', cfg.hiddenSize), LOW_BINDING);
  const parts = Math.ceil(cfg.vocabSize / rows);
  assert.ok(parts >= 3, `${parts} parts`);
  assert.ok(new Set(PROMPT.map((id) => Math.floor(id / rows))).size === parts, 'the prompt reads every part');
});

test('last logits with every table split == unsplit, bit for bit', () => {
  assert.equal(split.lastLogits.length, whole.lastLogits.length);
  assert.ok(sameBits(split.lastLogits, whole.lastLogits), 'last logits differ');
});

test('MTP head logits (embedding + LM head split) == unsplit, bit for bit', () => {
  assert.ok(whole.mtpLogits && split.mtpLogits, 'tiny-think has an MTP head');
  assert.ok(sameBits(split.mtpLogits, whole.mtpLogits), 'MTP logits differ');
});

test('planSplitEmbed: each id lands in its part, order gathers them back, empty parts are skipped', () => {
  const fake = { buffer: {} as GPUBuffer };
  const w: GpuWeight = { dtype: 'bf16', rows: 10, cols: 4, rowBytes: 8,
    parts: [{ ...fake, row0: 0, rows: 3 }, { ...fake, row0: 3, rows: 3 }, { ...fake, row0: 6, rows: 3 }, { ...fake, row0: 9, rows: 1 }] };
  const ids = [9, 0, 7, 2, 9, 1];
  const plan = planSplitEmbed(w, ids);
  assert.deepEqual(plan.parts.map((p) => p.first), [0, 3, 4], 'part 1 (rows 3..5) holds no id');
  const stacked = plan.parts.flatMap((p, i) => [...p.localIds].map((l) => [0, 6, 9][i]! + l));
  assert.deepEqual([...plan.order].map((r) => stacked[r]), ids, 'gathering the stacked rows gives the ids back');
  assert.ok(plan.parts.every((p) => p.weight.parts.length === 1 && p.weight.parts[0]!.row0 === 0));
  assert.throws(() => planSplitEmbed(w, [10]), /outside the table's 10 rows/);
});
