// Release layouts: a Qwen3.5 ConditionalGeneration checkpoint — nested
// text_config, a vision tower under model.visual.*, sharded safetensors with an index,
// chat_template.jinja, generation_config eos list — loads text-only and computes exactly
// what the flat text-only checkpoint of the same seed computes.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModel, planModel } from '../src/tools/make-model.js';
import { loadModelConfig } from '../src/model/config.js';
import { probePrompt } from '../src/model/probe.js';
import { loadModel } from '../src/model/model.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { VISION_PREFIX } from '../src/model/config.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-release-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

for (const shape of ['tiny', 'qwen3.5-moe-tiny']) {
  test(`release layout ${shape}: nested config, vision skipped, shards, template file; same logits as flat`, async () => {
    const flat = join(ROOT, `${shape}-flat`);
    const rel = join(ROOT, `${shape}-release`);
    await makeModel({ shape, dtype: 'bf16', seed: 9, out: flat, tokenizer: TINY_THINK(), layout: 'flat' });
    const res = await makeModel({ shape, dtype: 'bf16', seed: 9, out: rel, tokenizer: TINY_THINK(), layout: 'release', shardBytes: 1 << 20 });
    assert.ok(res.files.length >= 2, 'sharded');
    assert.ok(existsSync(join(rel, 'model.safetensors.index.json')));
    const outer = JSON.parse(readFileSync(join(rel, 'config.json'), 'utf8')) as Record<string, unknown>;
    assert.equal(outer['model_type'], shape === 'tiny' ? 'qwen3_5' : 'qwen3_5_moe');
    assert.match(String((outer['architectures'] as string[])[0]), /^Qwen3_5(Moe)?ForConditionalGeneration$/);
    assert.ok(typeof outer['text_config'] === 'object' && typeof outer['vision_config'] === 'object');
    const index = JSON.parse(readFileSync(join(rel, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
    assert.ok(Object.keys(index.weight_map).some((n) => n.startsWith(VISION_PREFIX)), 'vision tensors written');
    // chat template moved into its own file, and the tokenizer still renders chats
    assert.ok(existsSync(join(rel, 'chat_template.jinja')));
    assert.equal((JSON.parse(readFileSync(join(rel, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>)['chat_template'], undefined);
    const relTemplate = TextTokenizer.load(rel).chatTemplate;
    assert.ok(relTemplate && relTemplate.includes('im_start'));
    assert.equal(relTemplate, TextTokenizer.load(flat).chatTemplate);
    // eos ids from generation_config.json's list
    assert.deepEqual([...loadModelConfig(rel).eosTokenIds].sort(), [995, 997]);
    assert.equal(loadModelConfig(rel).weightPrefix, 'model.language_model.');

    const a = loadModel(flat, createRefKernels());
    const b = loadModel(rel, createRefKernels());
    const prompt = [3, 77, 501, 12, 9, 640];
    const pa = probePrompt(a, prompt);
    const pb = probePrompt(b, prompt);
    assert.deepEqual(Array.from(pb.lastLogits), Array.from(pa.lastLogits), 'release == flat logits');
    assert.deepEqual(Array.from(pb.mtpLogits!), Array.from(pa.mtpLogits!), 'release == flat MTP logits');
  });
}

test('real shapes: published sizes, truncation with layers', () => {
  const gb = (shape: string, layers?: number): number =>
    planModel({ shape, dtype: 'bf16', seed: 0, layout: 'release', ...(layers ? { layers } : {}) }).bytes / 1e9;
  assert.ok(gb('qwen3.5-4b') > 8 && gb('qwen3.5-4b') < 9.5);
  assert.ok(gb('qwen3.5-9b') > 17.5 && gb('qwen3.5-9b') < 19.5);
  assert.ok(gb('qwen3.5-27b') > 53 && gb('qwen3.5-27b') < 57);
  assert.ok(gb('qwen3.5-35b-a3b') > 68 && gb('qwen3.5-35b-a3b') < 73);
  assert.ok(gb('qwen3-next-80b-a3b') > 155 && gb('qwen3-next-80b-a3b') < 165);
  assert.ok(gb('qwen3-next-80b-a3b', 4) < 20);
  const next = planModel({ shape: 'qwen3-next-80b-a3b', dtype: 'bf16', seed: 0, layout: 'release', layers: 4 });
  assert.equal(next.config['model_type'], 'qwen3_next', 'Qwen3-Next is flat in its release too');
  assert.ok(!next.tensors.some((t) => t.name.startsWith(VISION_PREFIX)));
});
