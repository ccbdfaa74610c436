// Model files the reference readers refuse, generated from the
// shared fixtures into a temp dir: overlapping or gapped tensor data, a norm retyped to a
// block format, data past the end, a size that does not match type × shape. Each must be
// refused through the CLI with exit 2 and one line naming the tensor — never a stack, never
// garbage output. The unmodified files load (the control).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, sharedPath, TINY_THINK } from './paths.js';
import { type WFile, ggufBytes, ggufTypeId, readWFile } from './gguf-writer.js';

const KERNELS = process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm';
const ROOT = mkdtempSync(join(tmpdir(), 'ds-mutants-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'dist', 'src', 'cli', 'main.js'), ...args], {
    encoding: 'utf8', env: { ...process.env, DELTASERVE_KERNELS: KERNELS }, timeout: 120_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const GENERATE = ['generate', '--prompt-ids', '996,271,10', '--max-tokens', '2', '--json'];

/** The CLI refuses `model` with exit 2 and a single line matching every pattern. */
function assertRefused(what: string, model: string, patterns: RegExp[], command = GENERATE): void {
  const r = cli([...command, '--model', model]);
  const lines = r.stderr.trim().split('\n');
  assert.equal(r.status, 2, `${what}: exit ${r.status}\n${r.stderr}${r.stdout.slice(0, 200)}`);
  assert.equal(lines.length, 1, `${what}: one line expected, got:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /^\s+at /m, `${what}: a stack trace`);
  for (const p of patterns) assert.match(lines[0]!, p, `${what}`);
  assert.equal(r.stdout, '', `${what}: nothing generated`);
}

// ---------------------------------------------------------------------------------------
// GGUF

const BASE = readWFile(sharedPath('models', 'gguf', 'tiny-think-BF16.gguf'));
const index = (name: string): number => {
  const i = BASE.tensors.findIndex((t) => t.name === name);
  assert.ok(i >= 0, `fixture has ${name}`);
  return i;
};
const NORM = 'blk.0.attn_norm.weight'; // F32 [256], followed by blk.0.ssm_a
const QKV = 'blk.0.attn_qkv.weight'; // BF16 [512, 256], followed by blk.0.attn_gate.weight

function writeMutant(name: string, bytes: Buffer): string {
  const path = join(ROOT, name);
  writeFileSync(path, bytes);
  return path;
}
function mutate(fn: (f: WFile) => void): Buffer {
  const f: WFile = { ...BASE, tensors: BASE.tensors.map((t) => ({ ...t })) };
  fn(f);
  return ggufBytes(f);
}
/** The header's real data offsets (relative to the data section) of `f`'s layout. */
function realOffsets(f: WFile): number[] {
  let at = 0;
  return f.tensors.map((t) => {
    const o = at;
    at = Math.ceil((at + t.data.byteLength) / 32) * 32;
    return o;
  });
}

test('GGUF control: the rewritten fixture loads and generates', () => {
  const r = cli([...GENERATE, '--model', writeMutant('control.gguf', mutate(() => {}))]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal((JSON.parse(r.stdout) as { output_ids: number[] }).output_ids.length, 2);
});

test('GGUF: every tensor at offset 0 (overlapping data) is refused naming the tensor', () => {
  const file = writeMutant('offsets0.gguf', mutate((f) => { f.offsets = f.tensors.map(() => 0); }));
  assertRefused('all offsets 0', file, [new RegExp(`tensor ${BASE.tensors[1]!.name}: data offset 0 overlaps the data of tensor ${BASE.tensors[0]!.name}`)]);
});

test('GGUF: a type changed so that sizes overlap (BF16 read as F32) is refused', () => {
  const file = writeMutant('retyped-f32.gguf', mutate((f) => { f.tensors[index(QKV)]!.type = ggufTypeId('F32'); }));
  assertRefused('BF16 → F32', file, [/tensor blk\.0\.attn_gate\.weight: data offset \d+ overlaps the data of tensor blk\.0\.attn_qkv\.weight .*F32 \[512,256\]/]);
});

test('GGUF: a norm retyped to Q8_0 is refused — as a gap (type only) or as a non-float norm (Q8_0-sized data)', () => {
  const gap = writeMutant('norm-q8-gap.gguf', mutate((f) => { f.tensors[index(NORM)]!.type = ggufTypeId('q8_0'); }));
  assertRefused('norm type only', gap, [/tensor blk\.0\.ssm_a: data offset \d+ leaves a gap of \d+ bytes after tensor blk\.0\.attn_norm\.weight/]);
  const sized = writeMutant('norm-q8.gguf', mutate((f) => {
    const t = f.tensors[index(NORM)]!;
    t.type = ggufTypeId('q8_0');
    t.data = new Uint8Array((256 / 32) * 34); // 8 blocks of Q8_0: the layout is consistent
  }));
  assertRefused('norm Q8_0', sized, [/tensor blk\.0\.attn_norm\.weight is q8_0; it must be stored as F32, F16 or BF16/i]);
});

test('GGUF: a gap between tensors, a misaligned offset, a duplicate tensor and data past the end are refused', () => {
  const i = index(QKV);
  const gapped = writeMutant('gap.gguf', mutate((f) => { f.offsets = realOffsets(f).map((o, k) => (k > i ? o + 64 : o)); }));
  assertRefused('gap', gapped, [/tensor blk\.0\.attn_gate\.weight: data offset \d+ leaves a gap of 64 bytes after tensor blk\.0\.attn_qkv\.weight/]);
  const misaligned = writeMutant('misaligned.gguf', mutate((f) => { f.offsets = realOffsets(f).map((o, k) => (k === i ? o + 2 : o)); }));
  assertRefused('misaligned', misaligned, [/tensor blk\.0\.attn_qkv\.weight: data offset \d+ is not a multiple of the alignment 32/]);
  const dup = writeMutant('dup.gguf', mutate((f) => { f.tensors[i + 1]!.name = QKV; }));
  assertRefused('duplicate', dup, [/tensor blk\.0\.attn_qkv\.weight is listed twice/]);
  const whole = mutate(() => {});
  const truncated = writeMutant('truncated.gguf', whole.subarray(0, whole.length - 100));
  assertRefused('truncated', truncated, [/tensor \S+: data ends at byte \d+ but the file has \d+ bytes \(truncated file\)/]);
});

test('GGUF mutant through serve: exit 2 with the same one line, before listening', () => {
  const file = writeMutant('serve-offsets0.gguf', mutate((f) => { f.offsets = f.tensors.map(() => 0); }));
  assertRefused('serve', file, [/overlaps the data of tensor token_embd\.weight/], ['serve', '--port', '0']);
});

// ---------------------------------------------------------------------------------------
// safetensors

interface StEntry { dtype: string; shape: number[]; data_offsets: [number, number] }
const ST_FILE = join(TINY_THINK(), 'model.safetensors');
const ST = ((): { header: Record<string, StEntry>; data: Buffer } => {
  const buf = readFileSync(ST_FILE);
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.toString('utf8', 8, 8 + n)) as Record<string, StEntry>, data: buf.subarray(8 + n) };
})();
const LN0 = 'model.language_model.layers.0.input_layernorm.weight';
const LN1 = 'model.language_model.layers.1.input_layernorm.weight';

/** A model directory with tiny-think's config and tokenizer and a rewritten safetensors. */
function stMutant(name: string, edit: (h: Record<string, StEntry>) => void, data: Buffer = ST.data): string {
  const dir = join(ROOT, name);
  mkdirSync(dir);
  for (const f of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(TINY_THINK(), f), join(dir, f));
  const header = structuredClone(ST.header);
  edit(header);
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(join(dir, 'model.safetensors'), Buffer.concat([len, json, data]));
  return dir;
}

test('safetensors control: the rewritten checkpoint loads and generates', () => {
  const r = cli([...GENERATE, '--model', stMutant('st-control', () => {})]);
  assert.equal(r.status, 0, r.stderr);
});

test('safetensors: overlapping data_offsets (two norms share bytes) are refused naming both', () => {
  const dir = stMutant('st-overlap', (h) => { h[LN1]!.data_offsets = [...h[LN0]!.data_offsets]; });
  assertRefused('overlap', dir, [/data_offsets \[\d+, \d+\] overlap tensor/, new RegExp(`${LN0}|${LN1}`)]);
});

test('safetensors: a gap, bytes after the last tensor, a size not matching dtype × shape, truncation are refused', () => {
  const gap = stMutant('st-gap', (h) => { delete h[LN1]; });
  assertRefused('gap', gap, [/leave 512 bytes unused before it .*tensor data must be contiguous/]);
  const trailing = stMutant('st-trailing', () => {}, Buffer.concat([ST.data, Buffer.alloc(16)]));
  assertRefused('trailing', trailing, [/16 bytes after the last tensor's data .* belong to no tensor/]);
  const retyped = stMutant('st-retyped', (h) => { h[LN0]!.dtype = 'F32'; });
  assertRefused('dtype', retyped, [new RegExp(`tensor ${LN0} in .*: data_offsets \\[\\d+, \\d+\\] span 512 bytes but shape \\[256\\] of F32 needs 1024`)]);
  const truncated = stMutant('st-truncated', () => {}, ST.data.subarray(0, ST.data.length - 100));
  assertRefused('truncated', truncated, [/tensor \S+ in .*: data ends at byte \d+ but the file has \d+ bytes \(truncated file\)/]);
});
