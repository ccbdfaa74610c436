// Long context: YaRN / linear rope scaling on known values, unknown rope types
// rejected at load, and attn_output_gate: false honoured (checked against a gated twin
// that computes exactly the same thing).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseRopeScaling, ropeTableOf, yarnMscale, yarnParameters } from '../src/model/rope-scaling.js';
import { plainRopeTable } from '../src/kernels/rope-table.js';
import { parseModelConfig } from '../src/model/config.js';
import { rope } from '../src/kernels/ref/dense.js';
import { makeModel } from '../src/tools/make-model.js';
import { openCheckpoint } from '../src/checkpoint/safetensors.js';
import { writeSafetensors, type TensorSource } from '../src/tools/safetensors-writer.js';
import { loadModel } from '../src/model/model.js';
import { probePrompt } from '../src/model/probe.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { DeltaserveError } from '../src/util/errors.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-rope-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

const close = (a: number, b: number, rel = 1e-12): boolean => Math.abs(a - b) <= rel * Math.max(Math.abs(a), Math.abs(b));

test('YaRN parameters: known values (rotary dim 64, θ 1e7, factor 4 over 262144)', () => {
  // reference values from an independent implementation of the same formulas (Python, f64)
  const p = yarnParameters({ dim: 64, base: 1e7, factor: 4, originalMax: 262144 });
  assert.equal(p.low, 14);
  assert.equal(p.high, 22);
  const expect: [number, number][] = [[0, 1.0], [1, 0.6042963902381328], [14, 0.0008659643233600654], [15, 0.0004742398226801046],
    [18, 7.217387404309113e-5], [22, 3.8498163151487305e-6], [23, 2.3264301023242476e-6], [31, 4.137042749857954e-8]];
  for (const [i, v] of expect) assert.ok(close(p.invFreq[i]!, v), `inv_freq[${i}] = ${p.invFreq[i]} (expected ${v})`);
  assert.ok(close(p.attentionFactor, 1.138629436111989));
  assert.equal(yarnMscale(1), 1);
  // mscale / mscale_all_dim (DeepSeek style) and an explicit attention_factor
  assert.ok(close(yarnParameters({ dim: 64, base: 1e4, factor: 40, originalMax: 4096, mscale: 1, mscaleAllDim: 1 }).attentionFactor, 1));
  assert.equal(yarnParameters({ dim: 64, base: 1e4, factor: 4, originalMax: 4096, attentionFactor: 0.5 }).attentionFactor, 0.5);
});

test('rope config: yarn extends the context, unknown types are load errors, default is plain', () => {
  const text = (rope: Record<string, unknown>): Record<string, unknown> => ({
    model_type: 'qwen3_5_text', hidden_size: 64, num_hidden_layers: 4, vocab_size: 100, num_attention_heads: 2,
    num_key_value_heads: 1, head_dim: 256, linear_num_key_heads: 1, linear_num_value_heads: 2, linear_key_head_dim: 8,
    linear_value_head_dim: 8, intermediate_size: 32, full_attention_interval: 4, max_position_embeddings: 262144,
    rope_parameters: { rope_type: 'default', rope_theta: 1e7, partial_rotary_factor: 0.25, ...rope },
  });
  const plain = parseModelConfig(text({}));
  assert.equal(plain.ropeScaling, null);
  assert.equal(plain.attnOutputGate, true);
  const yarn = parseModelConfig(text({ rope_type: 'yarn', factor: 4, original_max_position_embeddings: 262144 }));
  assert.equal(yarn.ropeScaling?.type, 'yarn');
  assert.equal(yarn.maxPositionEmbeddings, 1048576);
  assert.ok(close(yarn.ropeScaling!.invFreq[15]!, 0.0004742398226801046));
  // rope_scaling at the top level (Qwen3-Next style) is read too, `type` as an alias
  const top = parseModelConfig({ ...text({}), rope_scaling: { type: 'yarn', factor: 2 } });
  assert.equal(top.ropeScaling?.factor, 2);
  for (const bad of ['dynamic', 'longrope', 'llama3']) {
    assert.throws(() => parseModelConfig(text({ rope_type: bad, factor: 2 })),
      (e: unknown) => e instanceof DeltaserveError && e.code === 'bad_config' && e.message.includes(`"${bad}"`) && /not supported/.test(e.message));
  }
  assert.throws(() => parseModelConfig(text({ rope_type: 'yarn' })), /"factor" is missing/);
});

test('RoPE with a unit linear scaling table equals the plain RoPE table (twin)', () => {
  const s = parseRopeScaling({ rope_type: 'linear', factor: 1 }, { base: 1e4, rotaryDim: 16, maxPositions: 100, where: 't' })!;
  const heads = 3;
  const hd = 32;
  const x = new Float32Array(5 * heads * hd).map((_, i) => Math.sin(i * 0.37));
  const a = x.slice();
  const b = x.slice();
  const pos = [0, 1, 7, 50, 99];
  const scaled = (sc: typeof s) => ropeTableOf({ ropeTheta: 1e4, rotaryDim: 16, ropeScaling: sc });
  rope(a, pos, 5, heads, hd, plainRopeTable(1e4, 16), heads * hd);
  rope(b, pos, 5, heads, hd, scaled(s), heads * hd);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) <= 1e-6, `${i}: ${a[i]} vs ${b[i]}`);
  // linear factor 2 at position 2p equals factor 1 at position p
  const s2 = parseRopeScaling({ rope_type: 'linear', factor: 2 }, { base: 1e4, rotaryDim: 16, maxPositions: 100, where: 't' })!;
  const c = x.slice(0, heads * hd);
  const d = x.slice(0, heads * hd);
  rope(c, [14], 1, heads, hd, scaled(s2), heads * hd);
  rope(d, [7], 1, heads, hd, scaled(s), heads * hd);
  for (let i = 0; i < c.length; i++) assert.ok(Math.abs(c[i]! - d[i]!) <= 1e-6);
});

/** Rewrite every tensor of `src` into `dest`/model.safetensors through `map` (bf16 bits). */
function rewrite(src: string, dest: string, map: (name: string, shape: readonly number[], bits: Uint16Array) => { shape: number[]; bits: Uint16Array }): void {
  mkdirSync(dest, { recursive: true });
  for (const f of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(src, f), join(dest, f));
  const ck = openCheckpoint(src);
  const sources: TensorSource[] = [];
  for (const [name, info] of ck.tensors) {
    assert.equal(info.dtype, 'BF16');
    const raw = ck.read(name);
    const out = map(name, info.shape, new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2));
    const bytes = new Uint8Array(out.bits.buffer, out.bits.byteOffset, out.bits.byteLength);
    sources.push({ name, dtype: 'BF16', shape: out.shape, fill: (d, off) => d.set(bytes.subarray(off, off + d.byteLength)) });
  }
  ck.close();
  writeSafetensors(join(dest, 'model.safetensors'), sources);
}

test('attn_output_gate: false — no gate rows in q_proj, no sigmoid gate (== a gated twin with gate 0 and o_proj ×2)', async () => {
  const base = join(ROOT, 'base');
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 21, out: base, layout: 'flat', tokenizer: TINY_THINK() });
  const hd = 32;
  const heads = 4;
  // gated twin: gate rows zero ⇒ sigmoid(0) = ½ scales the attention output
  rewrite(base, join(ROOT, 'gated'), (name, shape, bits) => {
    if (!name.endsWith('self_attn.q_proj.weight')) return { shape: [...shape], bits };
    const cols = shape[1]!;
    const out = bits.slice();
    for (let h = 0; h < heads; h++) out.fill(0, (h * 2 * hd + hd) * cols, (h + 1) * 2 * hd * cols);
    return { shape: [...shape], bits: out };
  });
  // ungated: only the query rows, and o_proj halved (exact in bf16) to match the ½
  rewrite(base, join(ROOT, 'ungated'), (name, shape, bits) => {
    const cols = shape[1]!;
    if (name.endsWith('self_attn.q_proj.weight')) {
      const out = new Uint16Array(heads * hd * cols);
      for (let h = 0; h < heads; h++) out.set(bits.subarray(h * 2 * hd * cols, (h * 2 * hd + hd) * cols), h * hd * cols);
      return { shape: [heads * hd, cols], bits: out };
    }
    if (name.endsWith('self_attn.o_proj.weight')) {
      const f = new Float32Array(1);
      const u = new Uint32Array(f.buffer);
      const out = bits.map((b) => {
        u[0] = b << 16;
        f[0] = f[0]! * 0.5;
        return u[0]! >>> 16;
      });
      return { shape: [...shape], bits: out };
    }
    return { shape: [...shape], bits };
  });
  const cfgPath = join(ROOT, 'ungated', 'config.json');
  writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(readFileSync(cfgPath, 'utf8')), attn_output_gate: false }));
  const gated = loadModel(join(ROOT, 'gated'), createRefKernels());
  const ungated = loadModel(join(ROOT, 'ungated'), createRefKernels());
  assert.equal(ungated.config.attnOutputGate, false);
  const prompt = [5, 99, 300, 42, 7, 811, 12];
  const a = probePrompt(gated, prompt);
  const b = probePrompt(ungated, prompt);
  assert.deepEqual(Array.from(b.lastLogits), Array.from(a.lastLogits));
  assert.deepEqual(Array.from(b.mtpLogits!), Array.from(a.mtpLogits!));
  // and the gate matters: the unmodified model differs
  const orig = probePrompt(loadModel(base, createRefKernels()), prompt);
  assert.notDeepEqual(Array.from(orig.lastLogits), Array.from(a.lastLogits));
});

test('a YaRN config runs through the model: factor 1 == plain RoPE (twin), factor 4 changes long-range logits', async () => {
  const base = join(ROOT, 'yarn-base');
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 8, out: base, layout: 'release', tokenizer: TINY_THINK() });
  const withRope = (name: string, rope: Record<string, unknown>): string => {
    const dir = join(ROOT, name);
    mkdirSync(dir, { recursive: true });
    for (const f of ['generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'model.safetensors']) copyFileSync(join(base, f), join(dir, f));
    const cfg = JSON.parse(readFileSync(join(base, 'config.json'), 'utf8')) as { text_config: { rope_parameters: Record<string, unknown> } };
    cfg.text_config.rope_parameters = { ...cfg.text_config.rope_parameters, ...rope };
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    return dir;
  };
  const prompt = Array.from({ length: 300 }, (_, i) => (i * 37) % 900 + 3);
  const plain = probePrompt(loadModel(base, createRefKernels()), prompt).lastLogits;
  const y1 = loadModel(withRope('yarn1', { rope_type: 'yarn', factor: 1 }), createRefKernels());
  assert.equal(y1.config.ropeScaling?.type, 'yarn');
  const l1 = probePrompt(y1, prompt).lastLogits;
  let maxAbs = 0;
  let diff = 0;
  for (let i = 0; i < plain.length; i++) {
    maxAbs = Math.max(maxAbs, Math.abs(plain[i]!));
    diff = Math.max(diff, Math.abs(plain[i]! - l1[i]!));
  }
  assert.ok(diff <= 1e-4 * maxAbs, `factor 1: max |Δ| ${diff} vs max |logit| ${maxAbs}`);
  const y4 = loadModel(withRope('yarn4', { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 1024 }), createRefKernels());
  assert.equal(y4.config.maxPositionEmbeddings, 4096);
  const l4 = probePrompt(y4, prompt).lastLogits;
  let d4 = 0;
  for (let i = 0; i < plain.length; i++) d4 = Math.max(d4, Math.abs(plain[i]! - l4[i]!));
  assert.ok(d4 > 1e-3 * maxAbs, 'YaRN factor 4 must change the logits');
});
