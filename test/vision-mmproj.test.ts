// llama.cpp's mmproj GGUF (clip, qwen3vl_merger): our writer's names and metadata are
// llama.cpp's, a written file loads back to the same tower (F32: bit for bit, so the same
// image embeddings; F16: within half precision), deepstack blocks keep their absolute
// indexes, and bad files are refused with a message naming the problem.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeMmproj, mmprojMetadata, mmprojTensors } from '../src/tools/mmproj-writer.js';
import { writeGgufFile } from '../src/tools/gguf-writer.js';
import { tensorBytes } from '../src/checkpoint/gguf-file.js';
import { refQuantizer } from '../src/kernels/quant/row-quantizer.js';
import { dequantizeRow } from '../src/kernels/quant/dequant.js';
import { loadMmproj } from '../src/vision/mmproj.js';
import { DEFAULT_PREPROCESS, VISION_PREFIX, type VisionConfig } from '../src/vision/config.js';
import { encodeImage } from '../src/vision/tower.js';
import { type VisionWeights, visionTensorShapes } from '../src/vision/weights.js';
import { Rng } from '../src/util/rng.js';
import { TINY_VISION, fixtureVisionConfig, fixtureVisionWeights, randomArray, randomVisionWeights } from './vision-helpers.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-mmproj-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

/** name → values of a weight set, by HF tensor name. */
function byName(cfg: VisionConfig, w: VisionWeights): Map<string, Float32Array> {
  const flat: Float32Array[] = [w.patchEmbed.w, w.patchEmbed.b, w.posEmbed];
  const merger = (m: VisionWeights['merger']): Float32Array[] => [m.norm.w, m.norm.b, m.fc1.w, m.fc1.b, m.fc2.w, m.fc2.b];
  flat.push(...merger(w.merger), ...w.deepstack.flatMap(merger));
  for (const b of w.blocks) flat.push(b.norm1.w, b.norm1.b, b.qkv.w, b.qkv.b, b.proj.w, b.proj.b, b.norm2.w, b.norm2.b, b.fc1.w, b.fc1.b, b.fc2.w, b.fc2.b);
  const names = visionTensorShapes(cfg).map(([n]) => n);
  assert.equal(names.length, flat.length);
  return new Map(names.map((n, i) => [n, flat[i]!]));
}

const image = (cfg: VisionConfig): Float32Array => randomArray(new Rng(8), 4 * 6 * cfg.inChannels * 2 * cfg.patchSize ** 2, 1);

test('F32 mmproj round trip: same config, same weights bit for bit, same image embeddings', async () => {
  const cfg = fixtureVisionConfig();
  const w = fixtureVisionWeights(cfg);
  const path = join(ROOT, 'f32.gguf');
  const tensors = byName(cfg, w);
  await writeMmproj(path, { cfg, pre: DEFAULT_PREPROCESS, name: 'tiny', matrixType: 'F32' }, (n) => tensors.get(n)!);
  const back = loadMmproj(path);
  assert.deepEqual(back.cfg, cfg);
  assert.deepEqual(back.pre, DEFAULT_PREPROCESS);
  const again = byName(back.cfg, back.weights);
  for (const [n, v] of tensors) assert.deepEqual(again.get(n), v, n);
  const grid = { t: 1, h: 4, w: 6 };
  assert.deepEqual(encodeImage(back.cfg, back.weights, image(cfg), grid).embeds, encodeImage(cfg, w, image(cfg), grid).embeds);
});

test('the fixture\'s F16 mmproj: llama.cpp names and keys; weights within half precision of the safetensors', () => {
  const cfg = fixtureVisionConfig();
  const ref = byName(cfg, fixtureVisionWeights(cfg));
  const file = join(TINY_VISION, 'mmproj-tiny-vision-F16.gguf');
  const back = loadMmproj(file);
  assert.deepEqual(back.cfg, cfg);
  for (const [n, v] of byName(back.cfg, back.weights)) {
    const r = ref.get(n)!;
    const err = v.reduce((m, x, i) => Math.max(m, Math.abs(x - r[i]!) / Math.max(Math.abs(r[i]!), 6.1e-5)), 0);
    assert.ok(err <= 2 ** -11, `${n}: relative error ${err}`);
  }
  const text = readFileSync(file).subarray(0, 4096).toString('latin1');
  for (const key of ['clip.projector_type', 'qwen3vl_merger', 'clip.vision.is_deepstack_layers', 'clip.vision.spatial_merge_size',
    'v.patch_embd.weight.1', 'v.position_embd.weight', 'v.blk.1.attn_qkv.weight', 'v.blk.0.ffn_down.bias', 'v.post_ln.weight', 'mm.2.bias']) {
    assert.ok(text.includes(key), key);
  }
});

test('deepstack mergers are named by their absolute block (v.deepstack.{block}.*) and load back in list order', async () => {
  const cfg: VisionConfig = { ...fixtureVisionConfig(), depth: 3, deepstackVisualIndexes: [2, 0] };
  const w = randomVisionWeights(cfg, 12);
  const tensors = byName(cfg, w);
  const names = mmprojTensors({ cfg, pre: DEFAULT_PREPROCESS, name: 'ds', matrixType: 'F32' }, (n) => tensors.get(n)!).map((t) => t.name);
  assert.ok(names.includes('v.deepstack.2.fc1.weight') && names.includes('v.deepstack.0.norm.bias'));
  const meta = mmprojMetadata({ cfg, pre: DEFAULT_PREPROCESS, name: 'ds', matrixType: 'F32' });
  assert.deepEqual(meta.find((m) => m.key === 'clip.vision.is_deepstack_layers'), { key: 'clip.vision.is_deepstack_layers', type: 'bool', array: [true, false, true] });
  const path = join(ROOT, 'ds.gguf');
  await writeMmproj(path, { cfg, pre: DEFAULT_PREPROCESS, name: 'ds', matrixType: 'F32' }, (n) => tensors.get(n)!);
  const back = loadMmproj(path);
  // the file lists blocks in order (0, 2): the loader reads them as indexes [0, 2], each
  // merger with its own block's weights
  assert.deepEqual(back.cfg.deepstackVisualIndexes, [0, 2]);
  assert.deepEqual(back.weights.deepstack[0]!.fc1.w, w.deepstack[1]!.fc1.w);
  assert.deepEqual(back.weights.deepstack[1]!.fc2.b, w.deepstack[0]!.fc2.b);
  const grid = { t: 1, h: 2, w: 4 };
  const a = encodeImage(cfg, w, image(cfg).subarray(0, 8 * 1536), grid);
  const b = encodeImage(back.cfg, back.weights, image(cfg).subarray(0, 8 * 1536), grid);
  assert.deepEqual(b.embeds, a.embeds);
  assert.deepEqual(b.deepstack, a.deepstack); // features come out in block order either way
});

test('bad mmproj files: wrong projector, missing tensors, not a GGUF', async () => {
  const cfg = fixtureVisionConfig();
  const tensors = byName(cfg, fixtureVisionWeights(cfg));
  const opts = { cfg, pre: DEFAULT_PREPROCESS, name: 'x', matrixType: 'F32' as const };
  const read = (n: string): Float32Array => tensors.get(n)!;
  const other = join(ROOT, 'other.gguf');
  await writeGgufFile(other, mmprojMetadata(opts).map((m) => (m.key === 'clip.projector_type' ? { ...m, value: 'qwen2vl_merger' } : m)), mmprojTensors(opts, read));
  assert.throws(() => loadMmproj(other), /projector type "qwen2vl_merger" is not supported/);
  const missing = join(ROOT, 'missing.gguf');
  await writeGgufFile(missing, mmprojMetadata(opts), mmprojTensors(opts, read).filter((t) => t.name !== 'v.blk.1.attn_out.weight'));
  assert.throws(() => loadMmproj(missing), /tensor v\.blk\.1\.attn_out\.weight is missing/);
  assert.throws(() => loadMmproj(join(TINY_VISION, 'model.safetensors')), /GGUF|magic|not a/i);
  assert.ok(visionTensorShapes(cfg).every(([n]) => n.startsWith(VISION_PREFIX)));
});

test('a Q8_0 mmproj (matrices in GGML blocks) loads as GGML dequantizes it', async () => {
  const cfg = fixtureVisionConfig();
  const tensors = byName(cfg, fixtureVisionWeights(cfg));
  const opts = { cfg, pre: DEFAULT_PREPROCESS, name: 'q8', matrixType: 'F32' as const };
  const quantized = new Map<string, Float32Array>();
  const out = mmprojTensors(opts, (n) => tensors.get(n)!).map((t) => {
    const [rows, cols] = [t.shape.slice(0, -1).reduce((a, b) => a * b, 1), t.shape[t.shape.length - 1]!];
    if (t.shape.length < 2 || cols % 32 !== 0) return t; // llama.cpp keeps these unquantized too
    let values = new Float32Array(0);
    t.produce((b) => { values = new Float32Array(b.slice().buffer); });
    const blocks = new Uint8Array(tensorBytes('q8_0', t.shape, t.name));
    refQuantizer.quantizeRows('q8_0', values, rows, cols, blocks);
    const back = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) dequantizeRow('q8_0', blocks, cols, r, back.subarray(r * cols, (r + 1) * cols));
    quantized.set(t.name, back);
    return { ...t, type: 'q8_0' as const, produce: (emit: (b: Uint8Array) => void) => emit(blocks) };
  });
  assert.ok(quantized.has('mm.0.weight') && quantized.has('v.blk.0.attn_qkv.weight'));
  const path = join(ROOT, 'q8.gguf');
  await writeGgufFile(path, mmprojMetadata(opts), out);
  const back = loadMmproj(path);
  assert.deepEqual(back.weights.merger.fc1.w, quantized.get('mm.0.weight'));
  assert.deepEqual(back.weights.blocks[1]!.fc2.w, quantized.get('v.blk.1.ffn_down.weight'));
  assert.deepEqual(back.weights.patchEmbed.w, tensors.get('model.visual.patch_embed.proj.weight')); // 16 columns: F32
  const grid = { t: 1, h: 4, w: 6 };
  const ref = encodeImage(cfg, fixtureVisionWeights(cfg), image(cfg), grid).embeds;
  const q8 = encodeImage(back.cfg, back.weights, image(cfg), grid).embeds;
  const err = q8.reduce((m, v, i) => Math.max(m, Math.abs(v - ref[i]!)), 0) / ref.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  assert.ok(err > 0 && err < 0.05, `q8_0 tower vs bf16: relative error ${err}`);
});
