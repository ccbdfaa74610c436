// GGUF reader: the fixtures' headers, config from metadata, split files, model paths, and
// every kind of bad file (crafted with the test-only writer from the fixtures) giving a
// DeltaserveError that names the file, the tensor and the problem.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, readFileSync, writeFileSync, symlinkSync, openSync, closeSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readGgufHeader, type GgufFile } from '../src/checkpoint/gguf-file.js';
import { openModelFiles, loadModel } from '../src/model/model.js';
import { resolveModelSource } from '../src/checkpoint/source.js';
import { recoverALog } from '../src/model/gguf-map.js';
import { TextTokenizer } from '../src/tokenizer/tokenizer.js';
import { createRefKernels } from '../src/kernels/ref/index.js';
import { createWasmKernels } from '../src/kernels/wasm/index.js';
import { DeltaserveError, type ErrorCode } from '../src/util/errors.js';
import { sharedPath, TINY_THINK } from './paths.js';
import { relErr } from './numeric.js';
import { probePrompt } from '../src/model/probe.js';
import { bf16ToF32 } from '../src/checkpoint/safetensors.js';
import { type WFile, type WTensor, ggufTypeId, metadataEntries, writeGguf } from './gguf-writer.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-gguf-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let n = 0;
const fresh = (): string => { const d = join(ROOT, `d${n++}`); mkdirSync(d); return d; };
const FIX = (name: string): string => sharedPath('models', 'gguf', name);

function throwsCode(fn: () => unknown, code: ErrorCode, ...parts: string[]): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof DeltaserveError, `expected DeltaserveError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    for (const p of parts) assert.ok(e.message.includes(p), `message "${e.message}" lacks "${p}"`);
    return true;
  });
}

/** A fixture as writer input (metadata and every tensor's bytes). */
function fixture(name: string): WFile {
  const path = FIX(name);
  const h: GgufFile = readGgufHeader(path);
  const fd = openSync(path, 'r');
  try {
    const tensors: WTensor[] = h.tensors.map((t) => {
      const data = new Uint8Array(t.nbytes);
      readSync(fd, data, 0, t.nbytes, t.offset);
      return { name: t.name, shape: [...t.shape], type: ggufTypeId(t.type), data };
    });
    return { metadata: metadataEntries(h.metadata), tensors };
  } finally {
    closeSync(fd);
  }
}
const thinkBf16 = fixture('tiny-think-BF16.gguf');
const edit = (f: WFile, fn: (g: WFile) => void): WFile => {
  const g: WFile = { ...f, metadata: f.metadata.map((e) => [...e] as [string, WFile['metadata'][0][1]]), tensors: [...f.tensors] };
  fn(g);
  return g;
};
const setMeta = (f: WFile, key: string, value: WFile['metadata'][0][1]): void => {
  const e = f.metadata.find(([k]) => k === key);
  if (e) e[1] = value; else f.metadata.push([key, value]);
};

test('fixture headers: version, architecture, tensor types and shapes in PyTorch order', () => {
  const h = readGgufHeader(FIX('tiny-think-BF16.gguf'));
  assert.equal(h.version, 3);
  assert.equal(h.metadata.get('general.architecture'), 'qwen35');
  const qkv = h.tensors.find((t) => t.name === 'blk.0.attn_qkv.weight')!;
  assert.deepEqual([qkv.type, ...qkv.shape], ['BF16', 512, 256]);
  assert.equal(qkv.nbytes, 512 * 256 * 2);
  const q4 = readGgufHeader(FIX('tiny-think-Q4_K_M.gguf'));
  const types = new Set(q4.tensors.map((t) => t.type));
  assert.ok(types.has('q4_k') && types.has('q6_k') && types.has('F32'), [...types].join(','));
  const gate = q4.tensors.find((t) => t.name === 'blk.0.ffn_gate.weight')!;
  assert.equal(gate.nbytes, 768 * (256 / 256) * 144, 'q4_k: 144 bytes per 256 elements');
  const moe = readGgufHeader(FIX('tiny-moe-Q4_K_M.gguf'));
  for (const t of ['q4_k', 'q5_0', 'q6_k', 'q8_0']) assert.ok(moe.tensors.some((x) => x.type === t), t);
});

test('config from metadata equals the safetensors twin\'s config.json', () => {
  for (const [file, dir] of [['tiny-think-BF16.gguf', 'tiny-think'], ['tiny-moe-BF16.gguf', 'tiny-moe']]) {
    const g = openModelFiles(FIX(file!));
    const s = openModelFiles(sharedPath('models', dir!));
    g.ckpt.close();
    s.ckpt.close();
    const { eosTokenIds: ge, ...gc } = g.config;
    const { eosTokenIds: se, ...sc } = s.config;
    assert.deepEqual(gc, sc, file);
    assert.ok(ge.length > 0 && ge.every((id) => se.includes(id)), `eos ${ge} ⊆ ${se}`);
  }
});

test('a directory holding one GGUF, and the first part of a split GGUF, are models too', () => {
  const one = fresh();
  symlinkSync(FIX('tiny-think-BF16.gguf'), join(one, 'tiny-think-BF16.gguf'));
  assert.deepEqual(resolveModelSource(one), { kind: 'gguf', file: join(one, 'tiny-think-BF16.gguf') });
  assert.equal(TextTokenizer.load(one).size, 1000);
  symlinkSync(FIX('tiny-think-Q8_0.gguf'), join(one, 'tiny-think-Q8_0.gguf'));
  throwsCode(() => resolveModelSource(one), 'bad_config', one, 'several GGUF models', 'tiny-think-Q8_0.gguf');
  assert.deepEqual(resolveModelSource(TINY_THINK()), { kind: 'hf', dir: TINY_THINK() });
  throwsCode(() => resolveModelSource(join(ROOT, 'nope.gguf')), 'bad_config', 'nope.gguf', 'not found');
});

/** Write `f` as `parts` split files (tensors dealt round-robin) in dir; returns their paths. */
function writeSplit(dir: string, f: WFile, parts: number): string[] {
  const paths = Array.from({ length: parts }, (_, i) => join(dir, `m-${String(i + 1).padStart(5, '0')}-of-${String(parts).padStart(5, '0')}.gguf`));
  paths.forEach((p, i) => {
    const split: WFile['metadata'] = [['split.no', i, 2], ['split.count', parts, 2], ['split.tensors.count', f.tensors.length, 5]];
    writeGguf(p, { metadata: i === 0 ? [...f.metadata, ...split] : split, tensors: f.tensors.filter((_, j) => j % parts === i) });
  });
  return paths;
}

test('split GGUF: every part is read; the tensors equal the single file\'s', () => {
  const dir = fresh();
  const paths = writeSplit(dir, thinkBf16, 3);
  assert.deepEqual(resolveModelSource(dir), { kind: 'gguf', file: paths[0] });
  const split = openModelFiles(paths[0]!).ckpt;
  const whole = openModelFiles(FIX('tiny-think-BF16.gguf')).ckpt;
  try {
    assert.deepEqual([...split.tensors.keys()].sort(), [...whole.tensors.keys()].sort());
    for (const name of whole.tensors.keys()) assert.deepEqual(split.read(name), whole.read(name), name);
  } finally {
    split.close();
    whole.close();
  }
  throwsCode(() => openModelFiles(paths[1]!), 'bad_checkpoint', paths[1]!, 'part 2', '00001-of-');
  rmSync(paths[2]!);
  throwsCode(() => openModelFiles(paths[0]!), 'bad_checkpoint', paths[0]!, 'm-00003-of-00003.gguf', 'missing');
});

test('bad magic, bad version, truncated header or data', () => {
  const dir = fresh();
  const bytes = readFileSync(FIX('tiny-think-BF16.gguf'));
  const path = join(dir, 'x.gguf');
  writeFileSync(path, Buffer.concat([Buffer.from('GGUX'), bytes.subarray(4)]));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'bad magic', 'not a GGUF file');
  writeGguf(path, { version: 1, metadata: [], tensors: [] });
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'version 1');
  writeGguf(path, { version: 0x03000000, metadata: [], tensors: [] });
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'big-endian');
  writeFileSync(path, bytes.subarray(0, 5000));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'truncated');
  writeFileSync(path, bytes.subarray(0, bytes.length - 1000));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'tensor ', 'truncated');
  writeFileSync(path, Buffer.alloc(2));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'truncated');
});

test('unknown architecture or tensor type', () => {
  const dir = fresh();
  const path = join(dir, 'x.gguf');
  writeGguf(path, edit(thinkBf16, (g) => setMeta(g, 'general.architecture', 'llama')));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'unknown architecture "llama"', 'qwen35');
  writeGguf(path, edit(thinkBf16, (g) => {
    g.tensors[3] = { ...g.tensors[3]!, type: 10 }; // Q2_K
  }));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, `tensor ${thinkBf16.tensors[3]!.name}`, 'Q2_K', 'not support');
});

test('a missing tensor or a shape that disagrees with the metadata', () => {
  const dir = fresh();
  const path = join(dir, 'x.gguf');
  writeGguf(path, edit(thinkBf16, (g) => { g.tensors = g.tensors.filter((t) => t.name !== 'blk.2.ssm_out.weight'); }));
  const k = createRefKernels();
  throwsCode(() => loadModel(path, k), 'missing_tensor', 'blk.2.ssm_out.weight', path);
  writeGguf(path, edit(thinkBf16, (g) => {
    g.tensors = g.tensors.map((t) => (t.name === 'blk.0.attn_gate.weight' ? { ...t, shape: [128, 512] } : t));
  }));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'blk.0.attn_gate.weight', '[128, 512]', '[256, 256]');
  writeGguf(path, edit(thinkBf16, (g) => setMeta(g, 'qwen35.ssm.state_size', 32)));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'blk.0.attn_qkv.weight', 'metadata');
  writeGguf(path, edit(thinkBf16, (g) => { g.metadata = g.metadata.filter(([key]) => key !== 'qwen35.embedding_length'); }));
  throwsCode(() => openModelFiles(path), 'bad_checkpoint', path, 'qwen35.embedding_length', 'missing');
});

test('tokenizer metadata errors name the file and the key', () => {
  const dir = fresh();
  const path = join(dir, 'x.gguf');
  writeGguf(path, edit(thinkBf16, (g) => setMeta(g, 'tokenizer.ggml.model', 'llama')));
  throwsCode(() => TextTokenizer.load(path), 'bad_tokenizer', path, 'tokenizer.ggml.model', '"llama"');
  writeGguf(path, edit(thinkBf16, (g) => setMeta(g, 'tokenizer.ggml.pre', 'falcon')));
  throwsCode(() => TextTokenizer.load(path), 'bad_tokenizer', path, 'tokenizer.ggml.pre "falcon"');
  writeGguf(path, edit(thinkBf16, (g) => setMeta(g, 'tokenizer.ggml.eos_token_id', 5000)));
  throwsCode(() => TextTokenizer.load(path), 'bad_tokenizer', path, 'tokenizer.ggml.eos_token_id');
});

test('recoverALog: the bf16 A_log behind an ssm_a a few f32 steps off, else an f32 one', () => {
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  const step = (x: number, k: number): number => { f32[0] = x; u32[0] = u32[0]! + k; return f32[0]!; };
  const bf16 = (x: number): number => { f32[0] = x; u32[0] = u32[0]! & 0xffff0000; return f32[0]!; };
  for (let i = 0; i < 400; i++) {
    const x = bf16(-4 + (i * 9.37) % 9); // bf16 values in [−4, 5)
    for (const k of [-3, 0, 2]) {
      const a = step(Math.fround(-Math.exp(x)), k);
      assert.equal(recoverALog(a), x, `A_log ${x}, ssm_a ${k} steps off`);
    }
  }
  const x = Math.fround(1.2345678); // not a bf16 value: an f32 whose −exp rounds to a
  const a = Math.fround(-Math.exp(x));
  assert.equal(Math.fround(-Math.exp(recoverALog(a))), a);
});

test('MTP pre_fc norms are read right whether the converter stored w or 1 + w', () => {
  const dir = fresh();
  const path = join(dir, 'x.gguf');
  const plusOne = (t: WTensor): WTensor => ({ ...t, data: new Uint8Array(new Float32Array(new Float32Array(t.data.slice().buffer).map((x) => x + 1)).buffer) });
  writeGguf(path, edit(thinkBf16, (g) => { g.tensors = g.tensors.map((t) => (/nextn\.[eh]norm/.test(t.name) ? plusOne(t) : t)); }));
  const a = openModelFiles(FIX('tiny-think-BF16.gguf')).ckpt;
  const b = openModelFiles(path).ckpt;
  try {
    for (const name of ['mtp.pre_fc_norm_embedding.weight', 'mtp.pre_fc_norm_hidden.weight', 'mtp.norm.weight']) {
      assert.deepEqual(b.read(name), a.read(name), name);
    }
    assert.notDeepEqual(b.read('mtp.pre_fc_norm_embedding.weight'), new Uint8Array(512), 'not all zero');
  } finally {
    a.close();
    b.close();
  }
});

/** IEEE half bits of a float32 value (round to nearest even; the values here are in range). */
const f16Scratch = new Float32Array(1);
const f16ScratchBits = new Uint32Array(f16Scratch.buffer);
function f16Bits(x: number): number {
  f16Scratch[0] = x;
  const b = f16ScratchBits[0]!;
  const sign = (b >>> 16) & 0x8000;
  const exp = ((b >>> 23) & 0xff) - 127 + 15;
  const mant = b & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return sign;
    const m = (mant | 0x800000) >>> (1 - exp);
    return sign | ((m + 0x0fff + ((m >>> 13) & 1)) >>> 13);
  }
  if (exp >= 31) return sign | 0x7c00;
  return (sign | (exp << 10) | (mant >>> 13)) + (((mant & 0x1fff) + ((mant >>> 13) & 1) > 0x1000) ? 1 : 0);
}

test('an F16 GGUF loads (matmul weights kept 16-bit) and gives the BF16 file\'s logits', async () => {
  const dir = fresh();
  const path = join(dir, 'tiny-think-F16.gguf');
  writeGguf(path, edit(thinkBf16, (g) => {
    g.tensors = g.tensors.map((t) => {
      if (t.type !== ggufTypeId('BF16')) return t;
      const bits = new Uint16Array(t.data.slice().buffer);
      return { ...t, type: ggufTypeId('F16'), data: new Uint8Array(Uint16Array.from(bits, (x) => f16Bits(bf16ToF32(x))).buffer) };
    });
  }));
  const k = await createWasmKernels({ threads: 2 });
  after(() => k.dispose());
  const f16 = loadModel(path, k);
  assert.equal(f16.weights.layers[0]!.mixer.kind === 'linear' && f16.weights.layers[0]!.mixer.inProjQkv.dtype, 'f16');
  const ids = [996, 882, 198, 40, 300, 500, 700, 997, 198];
  const want = probePrompt(loadModel(FIX('tiny-think-BF16.gguf'), k), ids).lastLogits;
  const got = probePrompt(f16, ids).lastLogits;
  assert.ok(relErr(got, want) < 1e-3, `rel err ${relErr(got, want)}`);
});
