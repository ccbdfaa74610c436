// make-model, the safetensors writer and Rng: random-weight checkpoints load with the exact
// tensor set the loader expects, run a finite forward pass, and are byte-deterministic.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../src/util/rng.js';
import { DeltaserveError } from '../src/util/errors.js';
import { makeModel, planModel, SHAPES } from '../src/tools/make-model.js';
import {
  writeSafetensors, writeShardedSafetensors, type TensorSource, INDEX_FILE, WRITE_CHUNK,
} from '../src/tools/safetensors-writer.js';
import { openCheckpoint, type Checkpoint } from '../src/checkpoint/safetensors.js';
import { loadModelConfig, parseModelConfig } from '../src/model/config.js';
import { loadModelWeights } from '../src/model/loader.js';
import { loadModel, allocSequenceMemory } from '../src/model/model.js';
import { forwardHidden, lmHead, mtpForward } from '../src/model/forward.js';
import { StepArena } from '../src/model/arena.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { TINY_THINK } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-mm-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let dirCount = 0;
const freshDir = (): string => {
  const d = join(ROOT, `d${dirCount++}`);
  mkdirSync(d);
  return d;
};

// ---------------------------------------------------------------------------------------
// Rng

test('Rng: same seed same sequence, different seeds differ, bigint/number agree', () => {
  const a = new Rng(42);
  const b = new Rng(42n);
  const c = new Rng(43);
  const xs = Array.from({ length: 100 }, () => a.nextU32());
  assert.deepEqual(Array.from({ length: 100 }, () => b.nextU32()), xs);
  assert.notDeepEqual(Array.from({ length: 100 }, () => c.nextU32()), xs);
  assert.ok(xs.every((x) => Number.isInteger(x) && x >= 0 && x < 2 ** 32));
  // low 64 bits only; negative seeds are two's complement
  assert.equal(new Rng(-1).nextU32(), new Rng((1n << 64n) - 1n).nextU32());
  assert.equal(new Rng(5).nextU32(), new Rng(5n + (1n << 64n)).nextU32());
  assert.throws(() => new Rng(1.5), RangeError);
  // pinned values: the sequence is part of the contract (sampler seeds, make-model files)
  assert.deepEqual([new Rng(0).nextU32(), new Rng(1).nextU32(), new Rng(0).next()], PINNED);
});
const PINNED = [3737715805, 1695105466, 0.870254774404272];

test('Rng: uniform and normal moments', () => {
  const r = new Rng(7);
  const n = 200_000;
  let sum = 0;
  let sq = 0;
  const bins = new Array<number>(10).fill(0);
  for (let i = 0; i < n; i++) {
    const u = r.next();
    assert.ok(u >= 0 && u < 1);
    sum += u;
    sq += u * u;
    bins[Math.floor(u * 10)]!++;
  }
  assert.ok(Math.abs(sum / n - 0.5) < 0.005, `mean ${sum / n}`);
  assert.ok(Math.abs(sq / n - 1 / 3) < 0.005, `E[u²] ${sq / n}`);
  for (const c of bins) assert.ok(Math.abs(c - n / 10) < 0.05 * (n / 10), `bin ${c}`);
  let m1 = 0;
  let m2 = 0;
  let m3 = 0;
  let m4 = 0;
  for (let i = 0; i < n; i++) {
    const z = r.normal();
    m1 += z;
    m2 += z * z;
    m3 += z ** 3;
    m4 += z ** 4;
  }
  assert.ok(Math.abs(m1 / n) < 0.01, `normal mean ${m1 / n}`);
  assert.ok(Math.abs(m2 / n - 1) < 0.02, `normal var ${m2 / n}`);
  assert.ok(Math.abs(m3 / n) < 0.05, `normal skew ${m3 / n}`);
  assert.ok(Math.abs(m4 / n - 3) < 0.1, `normal kurtosis ${m4 / n}`);
  // high bit and low bit of nextU32 are balanced
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < n; i++) {
    const x = r.nextU32();
    hi += x >>> 31;
    lo += x & 1;
  }
  assert.ok(Math.abs(hi / n - 0.5) < 0.01 && Math.abs(lo / n - 0.5) < 0.01);
});

// ---------------------------------------------------------------------------------------
// Writer

/** A tensor whose element i (as f32) is base + i. */
function rampTensor(name: string, shape: number[], base: number, dtype: 'F32' | 'BF16' = 'F32'): TensorSource {
  return {
    name, dtype, shape,
    fill(dest: Uint8Array, byteOffset: number) {
      if (dtype === 'F32') {
        const v = new Float32Array(dest.buffer, dest.byteOffset, dest.byteLength / 4);
        for (let i = 0; i < v.length; i++) v[i] = base + byteOffset / 4 + i;
      } else {
        const v = new Uint16Array(dest.buffer, dest.byteOffset, dest.byteLength / 2);
        const f = new Float32Array(1);
        const u = new Uint32Array(f.buffer);
        for (let i = 0; i < v.length; i++) {
          f[0] = base + byteOffset / 2 + i;
          v[i] = u[0]! >>> 16;
        }
      }
    },
  };
}

function checkRamp(ck: Checkpoint, name: string, base: number): void {
  const raw = ck.read(name);
  const info = ck.info(name);
  if (info.dtype === 'F32') {
    const v = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
    for (let i = 0; i < v.length; i++) if (v[i] !== base + i) assert.fail(`${name}[${i}] = ${v[i]}, want ${base + i}`);
  } else {
    const v = new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    for (let i = 0; i < v.length; i++) {
      f[0] = base + i;
      if (v[i] !== u[0]! >>> 16) assert.fail(`${name}[${i}] bits ${v[i]}`);
    }
  }
}

const RAMPS = (): TensorSource[] => [
  rampTensor('z.last', [3, 5], 1000),
  rampTensor('a.first', [7], 0),
  rampTensor('m.middle', [2, 3, 4], 50, 'BF16'),
  rampTensor('b.empty', [0, 4], 0),
  rampTensor('c.big', [300, 257], 7),
];

test('writeSafetensors: header layout and round trip through openCheckpoint', () => {
  const dir = freshDir();
  const path = join(dir, 'model.safetensors');
  const size = writeSafetensors(path, RAMPS(), { note: 'x' });
  assert.equal(statSync(path).size, size);
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  assert.equal((8 + n) % 8, 0, 'data starts 8-byte aligned');
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, unknown>;
  assert.deepEqual(Object.keys(header), ['__metadata__', 'a.first', 'b.empty', 'c.big', 'm.middle', 'z.last']);
  assert.deepEqual(header['__metadata__'], { format: 'pt', note: 'x' });
  assert.ok(!existsSync(`${path}.partial`));
  const ck = openCheckpoint(dir);
  try {
    assert.equal(ck.tensors.size, 5);
    assert.deepEqual(ck.info('m.middle').shape, [2, 3, 4]);
    for (const [name, base] of [['z.last', 1000], ['a.first', 0], ['m.middle', 50], ['c.big', 7]] as const) checkRamp(ck, name, base);
    assert.equal(ck.info('b.empty').nbytes, 0);
  } finally {
    ck.close();
  }
  assert.throws(() => writeSafetensors(join(dir, 'x.safetensors'), [rampTensor('a', [1], 0), rampTensor('a', [2], 0)]),
    (e: unknown) => e instanceof DeltaserveError && e.code === 'bad_request' && /duplicate/.test(e.message));
});

test('writeShardedSafetensors: several shards round trip through openCheckpoint', () => {
  const dir = freshDir();
  const names = writeShardedSafetensors(dir, RAMPS(), 400);
  assert.ok(names.length >= 3, `${names.length} shards`);
  assert.equal(names[0], `model-00001-of-0000${names.length}.safetensors`);
  const index = JSON.parse(readFileSync(join(dir, INDEX_FILE), 'utf8')) as { metadata: { total_size: number }; weight_map: Record<string, string> };
  assert.deepEqual(Object.keys(index.weight_map), ['a.first', 'b.empty', 'c.big', 'm.middle', 'z.last']);
  assert.equal(index.metadata.total_size, 7 * 4 + 300 * 257 * 4 + 24 * 2 + 15 * 4);
  assert.deepEqual(readdirSync(dir).sort(), [...names, INDEX_FILE].sort());
  const ck = openCheckpoint(dir);
  try {
    assert.equal(ck.tensors.size, 5);
    for (const [name, base] of [['z.last', 1000], ['a.first', 0], ['m.middle', 50], ['c.big', 7]] as const) checkRamp(ck, name, base);
    assert.ok(new Set([...ck.tensors.values()].map((t) => t.file)).size >= 3);
  } finally {
    ck.close();
  }
});

// ---------------------------------------------------------------------------------------
// make-model

test('make-model: computed sizes of the real shapes (not written)', () => {
  const b08 = planModel({ shape: 'qwen3.5-0.8b', dtype: 'bf16', seed: 0 });
  assert.ok(b08.bytes > 1.5e9 && b08.bytes < 1.8e9, `0.8b bf16 bytes ${b08.bytes}`);
  assert.equal(b08.bytes, 2 * b08.params);
  const b2 = planModel({ shape: 'qwen3.5-2b', dtype: 'bf16', seed: 0 });
  assert.ok(b2.bytes > 3.7e9 && b2.bytes < 4.6e9, `2b bf16 bytes ${b2.bytes}`);
  assert.equal(planModel({ shape: 'qwen3.5-2b', dtype: 'f32', seed: 0 }).bytes, 2 * b2.bytes);
  for (const [name, plan] of [['qwen3.5-0.8b', b08], ['qwen3.5-2b', b2]] as const) {
    const cfg = parseModelConfig(plan.config, name);
    assert.equal(cfg.numLayers, 24);
    assert.equal(cfg.vocabSize, 248320);
    assert.equal(cfg.layerKinds.filter((k) => k === 'full').length, 6);
    assert.equal(cfg.rotaryDim, 64);
    assert.equal(cfg.mtpLayers, 1);
    assert.ok(cfg.tieWordEmbeddings);
    assert.ok(plan.tensors.some((t) => t.name === 'mtp.layers.0.self_attn.q_proj.weight'));
    assert.ok(!plan.tensors.some((t) => t.name === 'lm_head.weight'));
  }
});

test('make-model: unknown shape and bad options are bad_request errors', async () => {
  await assert.rejects(makeModel({ shape: 'qwen9', dtype: 'bf16', seed: 1, out: freshDir() }),
    (e: unknown) => e instanceof DeltaserveError && e.code === 'bad_request' && e.message.includes('qwen3.5-0.8b') && e.message.includes('tiny'));
  assert.throws(() => planModel({ shape: 'tiny', dtype: 'f16' as 'bf16', seed: 1 }), DeltaserveError);
  assert.throws(() => planModel({ shape: 'tiny', dtype: 'bf16', seed: 1.5 }), DeltaserveError);
  assert.throws(() => planModel({ shape: 'toString', dtype: 'bf16', seed: 1 }), DeltaserveError);
  await assert.rejects(makeModel({ shape: 'tiny', dtype: 'bf16', seed: 1, out: freshDir(), tokenizer: TINY_THINK(), vocabSize: 512 }),
    (e: unknown) => e instanceof DeltaserveError && e.code === 'bad_request' && /tokenizer/.test(e.message));
});

/** Fused expert tensors split into per-expert weights: expert x's gate, up and down are
 * exactly rows [2x·Ie, 2x·Ie + Ie), [2x·Ie + Ie, 2(x+1)·Ie) of gate_up_proj and rows
 * [x·H, (x+1)·H) of down_proj (checked on the first layer, first, middle and last expert). */
function checkFusedExperts(dir: string): void {
  const ck = openCheckpoint(dir);
  try {
    const cfg = loadModelConfig(dir);
    const w = loadModelWeights(ck, cfg, createRefKernels());
    const mlp = w.layers[0]!.mlp;
    if (mlp.kind !== 'moe') assert.fail('layer 0 is not MoE');
    const p = `${cfg.weightPrefix}layers.0.mlp.experts.`;
    const gu = new Uint16Array(ck.read(`${p}gate_up_proj`).buffer.slice(0));
    const dn = new Uint16Array(ck.read(`${p}down_proj`).buffer.slice(0));
    const h = cfg.hiddenSize;
    const experts = mlp.experts;
    const e = experts.length;
    for (const x of [0, e >> 1, e - 1]) {
      const ex = experts[x]!;
      const ie: number = ex.gate.rows;
      assert.deepEqual(Array.from(ex.gate.data as Uint16Array), Array.from(gu.subarray(2 * x * ie * h, (2 * x + 1) * ie * h)), `expert ${x} gate`);
      assert.deepEqual(Array.from(ex.up.data as Uint16Array), Array.from(gu.subarray((2 * x + 1) * ie * h, (2 * x + 2) * ie * h)), `expert ${x} up`);
      assert.deepEqual(Array.from(ex.down.data as Uint16Array), Array.from(dn.subarray(x * h * ie, (x + 1) * h * ie)), `expert ${x} down`);
    }
  } finally {
    ck.close();
  }
}

/** Every tensor in the checkpoint is requested by the loader (and loading succeeds). */
function checkExactTensorSet(dir: string): void {
  const ck = openCheckpoint(dir);
  const used = new Set<string>();
  const spy: Checkpoint = {
    dir: ck.dir, tensors: ck.tensors, totalBytes: ck.totalBytes,
    has: (n) => ck.has(n),
    info: (n) => (used.add(n), ck.info(n)),
    readInto: (n, d, cb) => (used.add(n), ck.readInto(n, d, cb)),
    readRangeInto: (n, o, d, cb) => (used.add(n), ck.readRangeInto(n, o, d, cb)),
    read: (n) => (used.add(n), ck.read(n)),
    close: () => ck.close(),
  };
  try {
    loadModelWeights(spy, loadModelConfig(dir), createRefKernels());
  } finally {
    ck.close();
  }
  const unused = [...ck.tensors.keys()].filter((n) => !used.has(n));
  assert.deepEqual(unused, [], 'tensors written but not loaded');
}

function forwardLogits(dir: string): { logits: Float32Array; mtp: Float32Array; vocab: number } {
  const m = loadModel(dir, createRefKernels());
  const ws = new StepArena(m);
  const prompt = [1, 17, 300, 5, 998, 42, 7, 600];
  const mem = allocSequenceMemory(m, 32);
  const seq = { pageTable: mem.pageTable, kv: mem.kv, state: mem.state };
  const fw = forwardHidden(m, ws, [{ ...seq, tokens: prompt, start: 0, chunked: true }]);
  const hidden = fw.hidden.slice();
  const logits = lmHead(m, ws, hidden, [prompt.length - 1]);
  const step = forwardHidden(m, ws, [{ ...seq, tokens: [3], start: prompt.length, chunked: false }]);
  const stepLogits = lmHead(m, ws, step.hidden, [0]);
  assert.ok(stepLogits.every(Number.isFinite), 'decode-step logits finite');
  const mtpOut = mtpForward(m, ws, [{ tokens: [...prompt.slice(1), 3], hidden, start: 0, pageTable: mem.pageTable, kv: mem.mtpKv[0]! }]);
  const mtp = lmHead(m, ws, mtpOut, [prompt.length - 1]);
  return { logits, mtp, vocab: m.config.vocabSize };
}

function checkLogits(v: Float32Array, what: string): void {
  assert.ok(v.every(Number.isFinite), `${what}: logits finite`);
  let mean = 0;
  for (const x of v) mean += x / v.length;
  let varSum = 0;
  for (const x of v) varSum += (x - mean) ** 2;
  const sd = Math.sqrt(varSum / v.length);
  assert.ok(sd > 1e-3 && sd < 1e3, `${what}: logit sd ${sd} (degenerate?)`);
}

for (const shape of ['tiny', 'qwen3-next-tiny', 'qwen3.5-moe-tiny']) {
  test(`make-model ${shape}: loads exactly, finite forward, config round trip`, async () => {
    const dir = freshDir();
    const res = await makeModel({ shape, dtype: 'bf16', seed: 11, out: dir, tokenizer: TINY_THINK() });
    assert.deepEqual(res.files, ['model.safetensors']);
    const cfg = loadModelConfig(dir);
    const spec = SHAPES[shape]!;
    assert.equal(cfg.modelType, spec.modelType);
    assert.equal(cfg.hiddenSize, spec.hidden);
    assert.equal(cfg.vocabSize, spec.vocab);
    assert.deepEqual([...cfg.eosTokenIds].sort(), [995, 997]);
    assert.equal(cfg.mtpLayers, 1);
    assert.ok(existsSync(join(dir, 'tokenizer.json')) && existsSync(join(dir, 'tokenizer_config.json')));
    const ck = openCheckpoint(dir);
    assert.equal(ck.totalBytes, res.bytes);
    ck.close();
    checkExactTensorSet(dir);
    if (shape === 'qwen3.5-moe-tiny') checkFusedExperts(dir);
    const { logits, mtp, vocab } = forwardLogits(dir);
    assert.equal(logits.length, vocab);
    checkLogits(logits, shape);
    checkLogits(mtp, `${shape} MTP`);
  });
}

test('make-model: same seed ⇒ byte-identical files, different seed ⇒ different data', async () => {
  const [a, b, c] = [freshDir(), freshDir(), freshDir()];
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 3, out: a });
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 3, out: b });
  await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 4, out: c });
  const fa = readFileSync(join(a, 'model.safetensors'));
  assert.ok(fa.equals(readFileSync(join(b, 'model.safetensors'))), 'same seed, same bytes');
  assert.ok(readFileSync(join(a, 'config.json')).equals(readFileSync(join(b, 'config.json'))));
  const ca = openCheckpoint(a);
  const cc = openCheckpoint(c);
  try {
    for (const name of ca.tensors.keys()) {
      assert.ok(!Buffer.from(ca.read(name)).equals(Buffer.from(cc.read(name))), `${name} differs between seeds`);
    }
  } finally {
    ca.close();
    cc.close();
  }
});

test('make-model: f32, layer/vocab overrides and sharded output load and run', async () => {
  const dir = freshDir();
  const res = await makeModel({ shape: 'qwen3-next-tiny', dtype: 'f32', seed: 5, out: dir, layers: 5, vocabSize: 1500, shardBytes: 1 << 20 });
  assert.ok(res.files.length >= 3, `${res.files.length} shards`);
  assert.ok(!existsSync(join(dir, 'model.safetensors')));
  const cfg = loadModelConfig(dir);
  assert.equal(cfg.numLayers, 5);
  assert.equal(cfg.vocabSize, 1500);
  assert.deepEqual(cfg.layerKinds, ['linear', 'linear', 'linear', 'full', 'linear']);
  const ck = openCheckpoint(dir);
  assert.ok([...ck.tensors.values()].every((t) => t.dtype === 'F32'));
  ck.close();
  checkExactTensorSet(dir);
  checkLogits(forwardLogits(dir).logits, 'sharded f32');
  // rewriting the same directory as a single file removes the stale shards
  await makeModel({ shape: 'qwen3-next-tiny', dtype: 'bf16', seed: 5, out: dir, layers: 5, vocabSize: 1500 });
  assert.deepEqual(readdirSync(dir).filter((f) => f.includes('safetensors')), ['model.safetensors']);
  checkExactTensorSet(dir);
});

test('make-model: generated value statistics', () => {
  const plan = planModel({ shape: 'tiny', dtype: 'f32', seed: 9 });
  const values = (name: string): Float32Array => {
    const t = plan.tensors.find((x) => x.name === name)!;
    const bytes = new Uint8Array(t.shape.reduce((a, b) => a * b, 1) * 4);
    t.fill(bytes, 0);
    return new Float32Array(bytes.buffer);
  };
  const stats = (v: Float32Array): { mean: number; sd: number } => {
    const mean = v.reduce((a, b) => a + b, 0) / v.length;
    return { mean, sd: Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length) };
  };
  const emb = stats(values('model.language_model.embed_tokens.weight'));
  assert.ok(Math.abs(emb.mean) < 1e-3 && Math.abs(emb.sd - 0.02) < 1e-3, JSON.stringify(emb));
  const aLog = values('model.language_model.layers.0.linear_attn.A_log');
  assert.ok(aLog.every((x) => x >= 0 && x <= Math.log(16)));
  const dt = values('model.language_model.layers.0.linear_attn.dt_bias').map((x) => Math.log1p(Math.exp(x)));
  assert.ok(dt.every((x) => x >= 0.99e-3 && x <= 0.101), `softplus(dt_bias) ${dt}`);
  const gnorm = stats(values('model.language_model.layers.0.linear_attn.norm.weight'));
  assert.ok(Math.abs(gnorm.mean - 1) < 0.05, `gated norm mean ${gnorm.mean}`);
  // a second pass over the same source repeats the values; chunk size is 64 MiB
  assert.deepEqual(values('mtp.fc.weight'), values('mtp.fc.weight'));
  assert.equal(WRITE_CHUNK, 64 * 1024 * 1024);
});
