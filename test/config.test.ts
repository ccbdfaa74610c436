// Config parsing: every supported model_type normalises into one ModelConfig; bad input
// is a clear error naming the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseModelConfig, loadModelConfig } from '../src/model/config.js';
import { TINY_THINK, TINY_NEXT_MOE } from './paths.js';

const tinyThink = (): Record<string, unknown> => JSON.parse(readFileSync(join(TINY_THINK(), 'config.json'), 'utf8'));
const tinyNext = (): Record<string, unknown> => JSON.parse(readFileSync(join(TINY_NEXT_MOE(), 'config.json'), 'utf8'));

test('qwen3_5_text (tiny-think): layer kinds, rope, MTP, eos from generation_config', () => {
  const c = loadModelConfig(TINY_THINK());
  assert.equal(c.arch, 'qwen3_5');
  assert.deepEqual(c.layerKinds, ['linear', 'linear', 'linear', 'full', 'linear', 'linear', 'linear', 'full']);
  assert.equal(c.rotaryDim, 16);
  assert.equal(c.ropeTheta, 1e7);
  assert.equal(c.mtpLayers, 1);
  assert.equal(c.tieWordEmbeddings, true);
  assert.equal(c.weightPrefix, 'model.language_model.');
  assert.deepEqual([...c.eosTokenIds].sort(), [995, 997]);
  assert.ok(Object.isFrozen(c));
});

test('qwen3_next (tiny-next-moe): interval layers, top-level rope, MoE, nextn', () => {
  const c = loadModelConfig(TINY_NEXT_MOE());
  assert.equal(c.arch, 'qwen3_next');
  assert.deepEqual(c.layerKinds, ['linear', 'linear', 'linear', 'full']);
  assert.equal(c.rotaryDim, 8);
  assert.equal(c.mtpLayers, 1);
  assert.equal(c.weightPrefix, 'model.');
  const mlp = c.layerMlp[0]!;
  assert.equal(mlp.kind, 'moe');
  if (mlp.kind === 'moe') assert.deepEqual([mlp.numExperts, mlp.topK, mlp.sharedIntermediateSize], [8, 2, 64]);
});

test('qwen3_5 with nested text_config; qwen3_5_moe always renormalises', () => {
  const inner = { ...tinyThink(), model_type: 'qwen3_5_text' };
  const c = parseModelConfig({ model_type: 'qwen3_5', text_config: inner, tie_word_embeddings: true });
  assert.equal(c.hiddenSize, 256);
  assert.equal(c.weightPrefix, 'model.language_model.');
  const moe = parseModelConfig({ ...tinyNext(), model_type: 'qwen3_5_moe', norm_topk_prob: false });
  assert.equal(moe.arch, 'qwen3_5_moe');
  const mlp = moe.layerMlp[0]!;
  assert.ok(mlp.kind === 'moe' && mlp.normTopkProb);
  const mtpKey = parseModelConfig({ ...tinyNext(), num_nextn_predict_layers: undefined });
  assert.equal(mtpKey.mtpLayers, 1, 'qwen3_next without num_nextn_predict_layers has 1 MTP layer');
});

test('bad configs name the field at fault', () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...tinyThink(), model_type: 'llama' }, /unsupported model_type "llama"/],
    [{ ...tinyThink(), hidden_size: undefined }, /"hidden_size" is missing/],
    [{ ...tinyThink(), num_attention_heads: 'four' }, /"num_attention_heads" must be an integer/],
    [{ ...tinyThink(), layer_types: ['linear_attention'] }, /"layer_types" must be a list of 8/],
    [{ ...tinyThink(), layer_types: undefined, full_attention_interval: undefined }, /layer_types.*full_attention_interval/],
    [{ ...tinyThink(), num_key_value_heads: 3 }, /multiple of num_key_value_heads/],
    [{ ...tinyNext(), num_experts_per_tok: 99 }, /num_experts_per_tok/],
    [{ ...tinyThink(), rope_parameters: { rope_theta: 1e7, partial_rotary_factor: 2 } }, /partial_rotary_factor/],
  ];
  for (const [cfg, msg] of cases) {
    assert.throws(() => parseModelConfig(cfg), (e: Error) => e.name === 'DeltaserveError' && msg.test(e.message), String(msg));
  }
  assert.throws(() => parseModelConfig([1, 2]), /expected a JSON object/);
  assert.throws(() => loadModelConfig('/nonexistent-dir'), /no config.json/);
});
