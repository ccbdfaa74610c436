// `deltaserve quantize` against llama.cpp's own files: the GGUF fixtures in
// ../shared/models/gguf were written by llama.cpp's converter and quantized by its
// llama-quantize from the same checkpoints. Our files must have the same tensors (names,
// shapes, per-tensor types of each file type's mix) with byte-identical data — except
// ssm_a = −exp(A_log), where numpy's float32 exp (a few ulp) and our correctly rounded one
// differ in the last bits — and the same metadata except three documented choices. And a file we write
// must reproduce the golden greedy ids; a qwen3_next checkpoint converts to the qwen3next
// layout and loads back to the same greedy ids. From a float GGUF (llama-quantize's own
// input), tensors and metadata (values and stored types) equal the fixtures exactly.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, openSync, readSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { readGgufHeader, type GgufFile, type GgufTensorInfo } from '../src/checkpoint/gguf-file.js';
import { quantizeToGguf } from '../src/tools/quantize-gguf.js';
import { makeModel } from '../src/tools/make-model.js';
import { readWFile, writeGguf } from './gguf-writer.js';
import { loadModel } from '../src/model/model.js';
import { greedy } from './greedy.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';

const dir = mkdtempSync(join(tmpdir(), 'ds-quantize-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const FIX = (name: string): string => sharedPath('models', 'gguf', name);
const TINY_MOE = (): string => sharedPath('models', 'tiny-moe');

function tensorData(f: GgufFile, t: GgufTensorInfo): Buffer {
  const fd = openSync(f.path, 'r');
  try {
    const b = Buffer.alloc(t.nbytes);
    readSync(fd, b, 0, t.nbytes, t.offset);
    return b;
  } finally {
    closeSync(fd);
  }
}

/** f32 values equal within 4 units in the last place. */
function withinFewUlp(a: Buffer, b: Buffer): boolean {
  const x = new Int32Array(a.buffer, a.byteOffset, a.length / 4);
  const y = new Int32Array(b.buffer, b.byteOffset, b.length / 4);
  return x.every((v, i) => Math.abs(v - y[i]!) <= 4);
}

/** Every tensor of `ref` is in `ours` with the same shape, type and bytes. */
function assertSameTensors(ours: GgufFile, ref: GgufFile): void {
  assert.deepEqual(ours.tensors.map((t) => t.name).sort(), ref.tensors.map((t) => t.name).sort(), 'tensor names');
  for (const r of ref.tensors) {
    const o = ours.tensors.find((t) => t.name === r.name)!;
    assert.deepEqual(o.shape, r.shape, `${r.name} shape`);
    assert.equal(o.type, r.type, `${r.name} type`);
    const [a, b] = [tensorData(ours, o), tensorData(ref, r)];
    if (r.name.endsWith('.ssm_a')) assert.ok(withinFewUlp(a, b), `${r.name} within 4 ulp`);
    else assert.ok(a.equals(b), `${r.name} (${r.type}) bytes identical to llama-quantize's`);
  }
}

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));

test('quantize --type bf16 (CLI) writes llama.cpp\'s tiny-think-BF16.gguf: same tensors, bytes and metadata', () => {
  const out = join(dir, 'tt-bf16.gguf');
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist/src/cli/main.js'), 'quantize', '--model', TINY_THINK(), '--out', out, '--type', 'bf16'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const report = JSON.parse(r.stdout) as { tensors: number; tensorTypes: Record<string, number> };
  assert.deepEqual(report.tensorTypes, { BF16: 71, F32: 52 });
  const ours = readGgufHeader(out);
  const ref = readGgufHeader(FIX('tiny-think-BF16.gguf'));
  assertSameTensors(ours, ref);
  // Metadata: the same keys and values, but for three choices of ours. general.name is the
  // model's; tokenizer.ggml.pre names tiny-think's real split regex (ByteLevel's own, llama.cpp's gpt-2;
  // the fixture's converter always writes qwen35); and added tokens that are not special
  // (<think>, </think>) are user-defined (4), as llama.cpp's converter marks them, not control.
  assert.deepEqual([...ours.metadata.keys()].sort(), [...ref.metadata.keys()].sort());
  const differ = [...ref.metadata.keys()].filter((k) => json(ours.metadata.get(k)) !== json(ref.metadata.get(k)));
  assert.deepEqual(differ.sort(), ['general.name', 'tokenizer.ggml.pre', 'tokenizer.ggml.token_type']);
  assert.equal(ours.metadata.get('tokenizer.ggml.pre'), 'gpt-2');
  const types = ours.metadata.get('tokenizer.ggml.token_type') as number[];
  const refTypes = ref.metadata.get('tokenizer.ggml.token_type') as number[];
  const changed = types.flatMap((t, i) => (t !== refTypes[i] ? [[i, refTypes[i], t]] : []));
  assert.deepEqual(changed, [[998, 3, 4], [999, 3, 4]]);
});

for (const [type, fixture] of [['q8_0', 'tiny-think-Q8_0.gguf'], ['q4_k_m', 'tiny-think-Q4_K_M.gguf'], ['q4_0', 'tiny-think-Q4_0.gguf']] as const) {
  test(`quantize --type ${type}: tensor types and blocks identical to llama-quantize's ${fixture}`, async () => {
    const out = join(dir, `tt-${type}.gguf`);
    await quantizeToGguf({ model: TINY_THINK(), out, type });
    assertSameTensors(readGgufHeader(out), readGgufHeader(FIX(fixture)));
  });
}

test('quantize tiny-moe --type q4_k_m: experts split gate/up, shared expert, Q5_0/Q8_0 fallbacks, untied head — identical to llama-quantize\'s', async () => {
  const out = join(dir, 'moe-q4_k_m.gguf');
  const res = await quantizeToGguf({ model: TINY_MOE(), out, type: 'q4_k_m' });
  assert.ok((res.types['q5_0'] ?? 0) > 0 && (res.types['q8_0'] ?? 0) > 0, `fallback types used: ${json(res.types)}`);
  assertSameTensors(readGgufHeader(out), readGgufHeader(FIX('tiny-moe-Q4_K_M.gguf')));
});

test('a q4_k_m file written by quantize reproduces the golden greedy ids (6 prompts)', async () => {
  const out = join(dir, 'tt-q4_k_m.gguf'); // written by the q4_k_m test above
  const wasm = await createWasmKernels({ threads: 2 });
  try {
    const m = loadModel(out, wasm);
    const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-think.json'), 'utf8')) as
      { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };
    for (const p of golden.prompts) assert.deepEqual(greedy(m, p.prompt_ids, p.greedy_ids.length), p.greedy_ids, p.name);
  } finally {
    wasm.dispose();
  }
});

// Regression: `make-model --layers 1` of a shape with full_attention_interval 4 has no full
// attention layer; the GGUF once said interval 1 (block 0 full) and failed to load with
// "tensor blk.0.attn_q.weight … not found". Every layer count must give a GGUF whose layer
// kinds equal the safetensors checkpoint's, and the same greedy tokens (BF16 in, BF16 out).
test('make-model --layers 1..5 (interval 4) → quantize: the GGUF has the checkpoint\'s layer kinds and tokens', async () => {
  const k = createRefKernels();
  for (const layers of [1, 2, 3, 4, 5]) {
    const st = join(dir, `tiny-l${layers}`);
    await makeModel({ shape: 'tiny', dtype: 'bf16', seed: 7, out: st, layers, tokenizer: TINY_THINK(), layout: 'release' });
    const gguf = join(dir, `tiny-l${layers}.gguf`);
    await quantizeToGguf({ model: st, out: gguf, type: 'bf16', threads: 1 });
    const a = loadModel(st, k);
    const b = loadModel(gguf, k);
    const kinds = Array.from({ length: layers }, (_, i) => (i === 3 ? 'full' : 'linear'));
    assert.deepEqual(a.config.layerKinds, kinds, `safetensors, ${layers} layers`);
    assert.deepEqual(b.config.layerKinds, a.config.layerKinds, `GGUF, ${layers} layers`);
    assert.deepEqual(greedy(b, [1, 2, 3], 3), greedy(a, [1, 2, 3], 3), `greedy ids, ${layers} layers`);
  }
  // A file from the old writer (interval 1 for the all-linear 1-layer model) is refused by name.
  const old = readWFile(join(dir, 'tiny-l1.gguf'));
  old.metadata = old.metadata.map(([key, v]) => [key, key === 'qwen35.full_attention_interval' ? 1 : v]);
  writeGguf(join(dir, 'tiny-l1-old.gguf'), old);
  assert.throws(() => loadModel(join(dir, 'tiny-l1-old.gguf'), k), /full_attention_interval \(1\) makes block 0 full attention, but its tensors are a linear-attention block's/);
  // layer_types no interval reproduces: quantize refuses rather than write other layer kinds.
  const st5 = join(dir, 'tiny-l5');
  const cfg = JSON.parse(readFileSync(join(st5, 'config.json'), 'utf8')) as { text_config: { layer_types: string[] } };
  cfg.text_config.layer_types[4] = 'full_attention';
  writeFileSync(join(st5, 'config.json'), JSON.stringify(cfg));
  await assert.rejects(quantizeToGguf({ model: st5, out: join(dir, 'never-l5.gguf'), type: 'bf16', threads: 1 }),
    /layer_types is not periodic \(layer 4 is full attention, but full_attention_interval 4 makes it linear\)/);
});

test('quantize: user errors are one line and exit 2, and leave no file behind', () => {
  const cli = (...args: string[]) => spawnSync(process.execPath, [join(REPO_ROOT, 'dist/src/cli/main.js'), 'quantize', ...args], { encoding: 'utf8' });
  const out = join(dir, 'never.gguf');
  const cases: [string[], RegExp][] = [
    [['--model', TINY_THINK(), '--out', out], /needs --model, --out and --type/],
    [['--model', TINY_THINK(), '--out', out, '--type', 'q9_k'], /--type must be one of .*q4_k_m/],
    [['--model', FIX('tiny-think-Q8_0.gguf'), '--out', out, '--type', 'q4_k_m'], /token_embd\.weight of .*tiny-think-Q8_0\.gguf is q8_0: quantize starts from a float GGUF/],
    [['--model', join(dir, 'absent'), '--out', out, '--type', 'q8_0'], /model not found/],
    [['--model', TINY_THINK(), '--out', join(dir, 'x.bin'), '--type', 'q8_0'], /--out must name a \.gguf file/],
  ];
  for (const [args, message] of cases) {
    const r = cli(...args);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.ok(!r.stderr.includes('    at '), `no stack: ${r.stderr}`);
  }
  assert.throws(() => readFileSync(out));
});

test('quantize tiny-next-moe (qwen3_next) --type bf16: a qwen3next GGUF in llama.cpp\'s layout that loads to the same weights and golden greedy ids', async () => {
  const out = join(dir, 'next-bf16.gguf');
  const res = await quantizeToGguf({ model: sharedPath('models', 'tiny-next-moe'), out, type: 'bf16' });
  const f = readGgufHeader(out);
  assert.equal(f.metadata.get('general.architecture'), 'qwen3next');
  const names = new Set(f.tensors.map((t) => t.name));
  // in_proj_qkvz split into attn_qkv / attn_gate, in_proj_ba whole, experts stacked; no HF leftovers
  for (const n of ['blk.0.attn_qkv.weight', 'blk.0.attn_gate.weight', 'blk.0.ssm_ba.weight', 'blk.0.ffn_gate_exps.weight',
    'blk.0.ffn_up_exps.weight', 'blk.0.ffn_down_exps.weight', 'blk.4.nextn.eh_proj.weight', 'blk.4.ffn_down_exps.weight', 'output.weight']) {
    assert.ok(names.has(n), `${n} written`);
  }
  assert.ok(![...names].some((n) => /ssm_in|experts\.\d/.test(n)), 'no per-expert or fused qkvz tensors');
  assert.deepEqual(f.tensors.find((t) => t.name === 'blk.0.ffn_gate_exps.weight')!.shape, [8, 64, 128]);
  assert.ok(res.tensors > 0);
  const wasm = await createWasmKernels({ threads: 2 });
  try {
    const fromGguf = loadModel(out, wasm);
    const fromHf = loadModel(sharedPath('models', 'tiny-next-moe'), wasm);
    const golden = JSON.parse(readFileSync(sharedPath('golden', 'tiny-next-moe.json'), 'utf8')) as
      { prompts: { name: string; prompt_ids: number[]; greedy_ids: number[] }[] };
    for (const p of golden.prompts.slice(0, 3)) {
      const ids = greedy(fromGguf, p.prompt_ids, 16);
      assert.deepEqual(ids, p.greedy_ids.slice(0, 16), `${p.name}: golden greedy ids`);
      assert.deepEqual(ids, greedy(fromHf, p.prompt_ids, 16), `${p.name}: same as the safetensors checkpoint`);
    }
  } finally {
    wasm.dispose();
  }
});

/** The same metadata keys and values (order aside). */
function assertSameMetadata(ours: GgufFile, ref: GgufFile): void {
  assert.deepEqual([...ours.metadata.keys()].sort(), [...ref.metadata.keys()].sort());
  for (const [k, v] of ref.metadata) assert.equal(json(ours.metadata.get(k)), json(v), `metadata ${k}`);
  for (const [k, t] of ref.metadataTypes) assert.equal(ours.metadataTypes.get(k), t, `metadata ${k}: stored type`);
}

// (tiny-think's q4_k_m search is covered from safetensors above; tiny-moe's covers it here)
for (const [src, type, fixture] of [['tiny-think-BF16.gguf', 'q8_0', 'tiny-think-Q8_0.gguf'], ['tiny-think-BF16.gguf', 'q4_0', 'tiny-think-Q4_0.gguf'], ['tiny-moe-BF16.gguf', 'q4_k_m', 'tiny-moe-Q4_K_M.gguf']] as const) {
  test(`quantize ${src} --type ${type} (GGUF in): every tensor and metadata value identical to llama-quantize's ${fixture}`, async () => {
    const out = join(dir, `from-gguf-${type}-${fixture}`);
    await quantizeToGguf({ model: FIX(src), out, type });
    const [ours, ref] = [readGgufHeader(out), readGgufHeader(FIX(fixture))];
    assertSameTensors(ours, ref);
    assertSameMetadata(ours, ref);
  });
}
