// FP8 checkpoints: e4m3 encoding on known values, block-wise dequantization at
// load (tensor by tensor, presented as BF16), and an FP8 checkpoint agreeing with the BF16
// model it came from on greedy output over 32 tokens.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { E4M3_VALUES, encodeE4M3, withFp8Dequant, SCALE_SUFFIX } from '../src/checkpoint/fp8.js';
import { makeModel } from '../src/tools/make-model.js';
import { openCheckpoint } from '../src/checkpoint/safetensors.js';
import { writeSafetensors } from '../src/tools/safetensors-writer.js';
import { loadModelConfig } from '../src/model/config.js';
import { DeltaserveError } from '../src/util/errors.js';
import { evalPrompts, withEngine } from './engine-helpers.js';
import { writeFp8Copy } from './fp8-helpers.js';
import { TINY_THINK } from './paths.js';

const cvt = new Uint32Array(1);
const cvtF = new Float32Array(cvt.buffer);
const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-fp8-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

test('e4m3fn: known codes, round to nearest even, saturation', () => {
  assert.equal(E4M3_VALUES[0x7e], 448); // largest finite
  assert.ok(Number.isNaN(E4M3_VALUES[0x7f]!));
  assert.equal(E4M3_VALUES[0x38], 1); // exponent 7 = bias
  assert.equal(E4M3_VALUES[0x01], 2 ** -9); // smallest subnormal
  assert.equal(E4M3_VALUES[0xb8], -1);
  assert.equal(encodeE4M3(1), 0x38);
  assert.equal(encodeE4M3(-448), 0xfe);
  assert.equal(encodeE4M3(1e6), 0x7e, 'saturates');
  assert.equal(encodeE4M3(1.0625), 0x38, 'tie between 1 (even code) and 1.125 → 1');
  assert.equal(encodeE4M3(1.1875), 0x3a, 'tie between 1.125 and 1.25 (even code) → 1.25');
  assert.equal(encodeE4M3(0), 0);
  for (let c = 0; c < 0x7f; c++) assert.equal(encodeE4M3(E4M3_VALUES[c]!), c, `code ${c} round trip`);
});

test('make-model --dtype fp8: scales per 128×128 block, dequantized within e4m3 precision of the BF16 source', async () => {
  const bf = join(ROOT, 'bf16');
  const f8 = join(ROOT, 'fp8');
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 4, out: bf, layout: 'release' });
  await makeModel({ shape: 'tiny', dtype: 'fp8', seed: 4, out: f8, layout: 'release' });
  assert.deepEqual(loadModelConfig(f8).fp8Block, [128, 128]);
  const raw = openCheckpoint(f8);
  const name = 'model.language_model.layers.0.mlp.up_proj.weight'; // [384, 128]
  assert.equal(raw.info(name).dtype, 'F8_E4M3');
  assert.deepEqual(raw.info(`${name}${SCALE_SUFFIX}`).shape, [3, 1]);
  const ck = withFp8Dequant(raw);
  const ref = openCheckpoint(bf);
  try {
    assert.ok(!ck.has(`${name}${SCALE_SUFFIX}`), 'scales hidden');
    assert.equal(ck.info(name).dtype, 'BF16');
    let fp8Tensors = 0;
    for (const t of ck.tensors.values()) {
      const a = new Uint16Array(ck.read(t.name).buffer);
      const b = new Uint16Array(ref.read(t.name).buffer);
      assert.equal(a.length, b.length, t.name);
      if (raw.info(t.name).dtype !== 'F8_E4M3') {
        assert.deepEqual(a, b, `${t.name} copied as is`);
        continue;
      }
      fp8Tensors++;
      const f = (x: number): number => {
        cvt[0] = x << 16;
        return cvtF[0]!;
      };
      let amax = 0;
      for (const x of b) amax = Math.max(amax, Math.abs(f(x)));
      for (let i = 0; i < a.length; i++) {
        // e4m3 keeps 3 mantissa bits: ≤ 1/16 relative, or the block's subnormal step
        assert.ok(Math.abs(f(a[i]!) - f(b[i]!)) <= Math.abs(f(b[i]!)) / 16 + amax / 448 * 2 ** -9 + 1e-12, `${t.name}[${i}]`);
      }
      // a ranged read (one expert's rows) equals the slice of the whole read
      const part = new Uint8Array(64);
      ck.readRangeInto(t.name, 256, part);
      assert.deepEqual(new Uint16Array(part.buffer), a.subarray(128, 160));
    }
    assert.ok(fp8Tensors > 15, `${fp8Tensors} FP8 tensors`);
  } finally {
    ck.close();
    ref.close();
  }
});

test('FP8 errors: missing scales, unsupported quantization methods', async () => {
  const dir = join(ROOT, 'noscale');
  await makeModel({ shape: 'tiny', dtype: 'fp8', seed: 1, out: dir, layout: 'flat' });
  const ck = openCheckpoint(dir);
  const kept = [...ck.tensors.values()].filter((t) => !t.name.endsWith(SCALE_SUFFIX));
  const bad = join(ROOT, 'noscale2');
  mkdirSync(bad);
  writeSafetensors(join(bad, 'model.safetensors'), kept.map((t) => ({
    name: t.name, dtype: t.dtype as 'BF16', shape: t.shape, fill: (d: Uint8Array, off: number) => ck.readRangeInto(t.name, off, d),
  })));
  ck.close();
  const noScale = openCheckpoint(bad);
  assert.throws(() => withFp8Dequant(noScale), (e: unknown) => e instanceof DeltaserveError && /has no .*_scale_inv/.test(e.message));
  noScale.close();
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, quantization_config: { quant_method: 'gptq', bits: 4 } }));
  assert.throws(() => loadModelConfig(dir), /quant_method "gptq" is not supported/);
});

test('an FP8 copy of a trained BF16 model agrees on greedy output over 32 tokens (MTP on)', async () => {
  const src = TINY_THINK();
  const dest = join(ROOT, 'tiny-think-fp8');
  writeFp8Copy(src, dest);
  const reqs = evalPrompts(3).map((messages) => ({ messages, maxTokens: 32, ignoreEos: true }));
  const run = (model: string): Promise<(readonly number[])[]> => withEngine({ model, specTokens: 2 },
    async (e) => Promise.all(reqs.map(async (r) => (await e.complete(r)).outputIds)));
  const [a, b] = [await run(src), await run(dest)];
  for (let i = 0; i < a.length; i++) {
    assert.equal(a[i]!.length, 32);
    assert.deepEqual(b[i], a[i], `prompt ${i}: FP8 greedy output differs from BF16`);
  }
});
