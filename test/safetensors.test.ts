// Safetensors loader: synthetic files for every format path and error, plus the real test models.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync, openSync, closeSync, writeSync, ftruncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openCheckpoint, bf16ToF32, f16ToF32, type Checkpoint } from '../src/checkpoint/safetensors.js';
import { loadWeight, loadWeightF32 } from '../src/checkpoint/load-weight.js';
import { progressBar } from '../src/util/progress.js';
import { DeltaserveError, type ErrorCode } from '../src/util/errors.js';
import type { WeightDType } from '../src/kernels/types.js';
import { TINY_THINK, TINY_NEXT_MOE } from './paths.js';

const ROOT = mkdtempSync(join(tmpdir(), 'deltaserve-st-'));
after(() => rmSync(ROOT, { recursive: true, force: true }));
let dirCount = 0;
function freshDir(): string {
  const d = join(ROOT, `d${dirCount++}`);
  mkdirSync(d);
  return d;
}

const alloc = {
  allocWeight(dtype: WeightDType, rows: number, cols: number) {
    const n = rows * cols;
    const data = dtype === 'f32' ? new Float32Array(n) : new Uint16Array(n);
    return { weight: { dtype, rows, cols, data }, bytes: new Uint8Array(data.buffer) };
  },
};

interface SynTensor { name: string; dtype: string; shape: number[]; data: Uint8Array; offsets?: [number, number] }

/** Header bytes (u64 LE length + JSON) for tensors laid out back to back. */
function headerBytes(tensors: SynTensor[]): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: t.offsets ?? [off, off + t.data.byteLength] };
    off += t.data.byteLength;
  }
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, json]);
}

function writeSt(path: string, tensors: SynTensor[]): void {
  writeFileSync(path, Buffer.concat([headerBytes(tensors), ...tensors.map((t) => t.data)]));
}

const bytesOf = (a: Uint16Array | Float32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const bf16Bits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0]! >>> 16;

function throwsCode(fn: () => unknown, code: ErrorCode, ...parts: (string | RegExp)[]): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof DeltaserveError, `expected DeltaserveError, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    for (const p of parts) {
      if (typeof p === 'string') assert.ok(e.message.includes(p), `message "${e.message}" lacks "${p}"`);
      else assert.match(e.message, p);
    }
    return true;
  });
}

function withCkpt<T>(dir: string, fn: (c: Checkpoint) => T): T {
  const c = openCheckpoint(dir);
  try {
    return fn(c);
  } finally {
    c.close();
  }
}

// Values exactly representable in bf16 and f16.
const VALUES = [1, -2, 0.5, 3.140625, 0, -0.125, 96];
const F16_BITS = [0x3c00, 0xc000, 0x3800, 0x4248, 0x0000, 0xb000, 0x5600];

test('bf16ToF32 / f16ToF32 decode exactly', () => {
  for (const v of VALUES) assert.equal(bf16ToF32(bf16Bits(v)), v);
  F16_BITS.forEach((b, i) => assert.equal(f16ToF32(b), VALUES[i]));
  assert.equal(f16ToF32(0x7bff), 65504);
  assert.equal(f16ToF32(0x0001), 2 ** -24);
  assert.equal(f16ToF32(0x7c00), Infinity);
  assert.equal(f16ToF32(0xfc00), -Infinity);
  assert.ok(Number.isNaN(f16ToF32(0x7e00)));
  assert.equal(bf16ToF32(0x7f80), Infinity);
});

test('round-trip BF16, F16, F32 through read, loadWeight and loadWeightF32', () => {
  const dir = freshDir();
  const bf = new Uint16Array(VALUES.map(bf16Bits));
  const f16 = new Uint16Array(F16_BITS);
  const f32 = new Float32Array([...VALUES, 1e-30, 123456.789]);
  writeSt(join(dir, 'model.safetensors'), [
    { name: 'a.bf16', dtype: 'BF16', shape: [VALUES.length], data: bytesOf(bf) },
    { name: 'b.f16', dtype: 'F16', shape: [1, VALUES.length], data: bytesOf(f16) },
    { name: 'c.f32', dtype: 'F32', shape: [3, 1, 3], data: bytesOf(f32) },
  ]);
  withCkpt(dir, (c) => {
    assert.equal(c.tensors.size, 3);
    assert.equal(c.totalBytes, bf.byteLength + f16.byteLength + f32.byteLength);
    assert.deepEqual(c.read('a.bf16'), bytesOf(bf));
    let reported = 0;
    const wa = loadWeight(c, alloc, 'a.bf16', [VALUES.length], (n) => { reported += n; });
    assert.equal(reported, bf.byteLength);
    assert.deepEqual([wa.dtype, wa.rows, wa.cols], ['bf16', 1, VALUES.length]);
    assert.deepEqual([...wa.data], [...bf]);
    const wb = loadWeight(c, alloc, 'b.f16', [1, VALUES.length]);
    assert.deepEqual([wb.dtype, wb.rows, wb.cols], ['f32', 1, VALUES.length]);
    assert.deepEqual([...wb.data], VALUES);
    const wk = loadWeight(c, alloc, 'b.f16', [1, VALUES.length], undefined, true); // a matmul operand stays 16-bit
    assert.deepEqual([wk.dtype, wk.rows, wk.cols], ['f16', 1, VALUES.length]);
    assert.deepEqual([...wk.data], [...f16]);
    const wc = loadWeight(c, alloc, 'c.f32', [3, 1, 3]);
    assert.deepEqual([wc.dtype, wc.rows, wc.cols], ['f32', 3, 3]);
    assert.deepEqual([...wc.data], [...f32]);
    for (const [name, shape] of [['a.bf16', [VALUES.length]], ['b.f16', [1, VALUES.length]]] as const) {
      const w = loadWeightF32(c, alloc, name, shape);
      assert.equal(w.dtype, 'f32');
      assert.deepEqual([...w.data], VALUES);
    }
    assert.deepEqual([...loadWeightF32(c, alloc, 'c.f32', [3, 1, 3]).data], [...f32]);
  });
});

test('sharded checkpoint via model.safetensors.index.json', () => {
  const dir = freshDir();
  const x = new Float32Array([1, 2, 3, 4]);
  const y = new Uint16Array([bf16Bits(5), bf16Bits(6)]);
  writeSt(join(dir, 'model-00001-of-00002.safetensors'), [{ name: 'x', dtype: 'F32', shape: [2, 2], data: bytesOf(x) }]);
  writeSt(join(dir, 'model-00002-of-00002.safetensors'), [
    { name: 'y', dtype: 'BF16', shape: [2], data: bytesOf(y) },
    { name: 'unlisted', dtype: 'BF16', shape: [2], data: bytesOf(y) },
  ]);
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({
    metadata: { total_size: 20 },
    weight_map: { x: 'model-00001-of-00002.safetensors', y: 'model-00002-of-00002.safetensors' },
  }));
  withCkpt(dir, (c) => {
    assert.deepEqual([...c.tensors.keys()].sort(), ['x', 'y']);
    assert.equal(c.info('x').file, join(dir, 'model-00001-of-00002.safetensors'));
    assert.equal(c.info('y').file, join(dir, 'model-00002-of-00002.safetensors'));
    assert.deepEqual([...loadWeight(c, alloc, 'x', [2, 2]).data], [1, 2, 3, 4]);
    assert.deepEqual([...loadWeightF32(c, alloc, 'y', [2]).data], [5, 6]);
    throwsCode(() => c.info('nope'), 'missing_tensor', 'nope', 'model.safetensors.index.json');
  });
});

test('directory of *.safetensors without an index: union of headers', () => {
  const dir = freshDir();
  writeSt(join(dir, 'a.safetensors'), [{ name: 'p', dtype: 'F32', shape: [1], data: bytesOf(new Float32Array([7])) }]);
  writeSt(join(dir, 'b.safetensors'), [{ name: 'q', dtype: 'F32', shape: [1], data: bytesOf(new Float32Array([8])) }]);
  withCkpt(dir, (c) => {
    assert.deepEqual([...c.tensors.keys()].sort(), ['p', 'q']);
    assert.deepEqual([...loadWeight(c, alloc, 'q', [1]).data], [8]);
  });
  writeSt(join(dir, 'c.safetensors'), [{ name: 'p', dtype: 'F32', shape: [1], data: bytesOf(new Float32Array([9])) }]);
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', 'p', 'a.safetensors', 'c.safetensors');
});

test('truncated real file: error names the file and says truncated', () => {
  const dir = freshDir();
  const full = readFileSync(join(TINY_THINK(), 'model.safetensors'));
  const file = join(dir, 'model.safetensors');
  writeFileSync(file, full.subarray(0, Math.floor(full.length / 2)));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', file, 'truncated');
  writeFileSync(file, full.subarray(0, 5));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', file, 'truncated');
});

test('corrupted headers are rejected naming the file', () => {
  const dir = freshDir();
  const file = join(dir, 'model.safetensors');
  const json = Buffer.from('{"x": {"dtype": "F32", ', 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, json]));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', file, 'not valid JSON');

  len.writeBigUInt64LE(1000n);
  writeFileSync(file, Buffer.concat([len, json]));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', file, 'exceeds the file size', 'truncated');

  len.writeBigUInt64LE(1n << 60n);
  writeFileSync(file, Buffer.concat([len, json]));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', file, 'absurd');
});

test('unknown dtype and inconsistent data_offsets', () => {
  const dir = freshDir();
  const file = join(dir, 'model.safetensors');
  writeSt(file, [{ name: 'q8', dtype: 'I8', shape: [4], data: new Uint8Array(4) }]);
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', `tensor q8 in ${file} has dtype I8; supported: BF16, F16, F32`);
  writeSt(file, [{ name: 'w', dtype: 'F32', shape: [2, 3], data: new Uint8Array(20) }]);
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', 'w', file, 'needs 24');
});

test('missing tensor and wrong shape', () => {
  const dir = freshDir();
  const file = join(dir, 'model.safetensors');
  writeSt(file, [{ name: 'w', dtype: 'F32', shape: [2, 3], data: new Uint8Array(24) }]);
  withCkpt(dir, (c) => {
    assert.equal(c.has('w'), true);
    assert.equal(c.has('v'), false);
    throwsCode(() => c.info('v'), 'missing_tensor', 'tensor v', file);
    throwsCode(() => loadWeight(c, alloc, 'v', [2, 3]), 'missing_tensor', 'tensor v', file);
    throwsCode(() => loadWeight(c, alloc, 'w', [3, 2]), 'bad_checkpoint', `tensor w in ${file} has shape [2,3], expected [3,2]`);
    throwsCode(() => loadWeightF32(c, alloc, 'w', [6]), 'bad_checkpoint', 'expected [6]');
  });
});

test('an F16 matmul operand holding inf or NaN is refused, naming the tensor, file and element', () => {
  const dir = freshDir();
  const file = join(dir, 'model.safetensors');
  const ok = new Uint16Array([0x3c00, 0x8001, 0x7bff, 0x0000, 0xfbff]); // finite: 1, −tiny, 65504, 0, −65504
  const inf = new Uint16Array([0x3c00, 0x3c00, 0x3c00, 0x7c00, 0x3c00]);
  const nan = new Uint16Array([0x3c00, 0x3c00, 0x3c00, 0x3c00, 0xfe01]); // the odd tail element
  writeSt(file, [
    { name: 'ok', dtype: 'F16', shape: [1, 5], data: bytesOf(ok) },
    { name: 'inf', dtype: 'F16', shape: [1, 5], data: bytesOf(inf) },
    { name: 'nan', dtype: 'F16', shape: [1, 5], data: bytesOf(nan) },
  ]);
  withCkpt(dir, (c) => {
    assert.deepEqual([...loadWeight(c, alloc, 'ok', [1, 5], undefined, true).data], [...ok]);
    throwsCode(() => loadWeight(c, alloc, 'inf', [1, 5], undefined, true), 'bad_checkpoint', `tensor inf in ${file}`, 'element 3', 'inf or NaN');
    throwsCode(() => loadWeight(c, alloc, 'nan', [1, 5], undefined, true), 'bad_checkpoint', `tensor nan in ${file}`, 'element 4');
    // widened to f32 (vectors), inf / NaN pass through exactly as before
    assert.equal((loadWeight(c, alloc, 'inf', [1, 5]).data as Float32Array)[3], Infinity);
  });
});

test('missing files: directory, empty directory, shard listed in the index', () => {
  throwsCode(() => openCheckpoint(join(ROOT, 'does-not-exist')), 'bad_checkpoint', 'does-not-exist');
  const empty = freshDir();
  throwsCode(() => openCheckpoint(empty), 'bad_checkpoint', empty, 'model.safetensors');

  const dir = freshDir();
  writeSt(join(dir, 's1.safetensors'), [{ name: 'x', dtype: 'F32', shape: [1], data: new Uint8Array(4) }]);
  const index = join(dir, 'model.safetensors.index.json');
  writeFileSync(index, JSON.stringify({ weight_map: { x: 's1.safetensors', y: 's2.safetensors' } }));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', join(dir, 's2.safetensors'), 'missing');
  writeFileSync(index, JSON.stringify({ weight_map: { x: 's1.safetensors', y: 's1.safetensors' } }));
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', 'tensor y', join(dir, 's1.safetensors'));
  writeFileSync(index, '{"weight_map": ');
  throwsCode(() => openCheckpoint(dir), 'bad_checkpoint', index, 'not valid JSON');
});

/** Independent decode of the first n BF16 values of a tensor from the raw file. */
function rawBf16(file: string, name: string, n: number): number[] {
  const buf = readFileSync(file);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8')) as Record<string, { dtype: string; data_offsets: [number, number] }>;
  const e = header[name]!;
  assert.equal(e.dtype, 'BF16');
  const dv = new DataView(new ArrayBuffer(4));
  return Array.from({ length: n }, (_, i) => {
    dv.setUint32(0, buf.readUInt16LE(8 + hlen + e.data_offsets[0] + 2 * i) << 16, true);
    return dv.getFloat32(0, true);
  });
}

for (const [label, dirFn, norm] of [
  ['tiny-think', TINY_THINK, 'model.language_model.norm.weight'],
  ['tiny-next-moe', TINY_NEXT_MOE, 'model.norm.weight'],
] as const) {
  test(`every tensor of ${label} loads; ${norm} matches the raw bytes`, () => {
    const dir = dirFn();
    withCkpt(dir, (c) => {
      assert.ok(c.tensors.size > 50);
      let bytes = 0;
      for (const t of c.tensors.values()) {
        const w = loadWeight(c, alloc, t.name, t.shape, (n) => { bytes += n; });
        assert.equal(w.rows * w.cols, t.shape.reduce((a, b) => a * b, 1), t.name);
      }
      assert.equal(bytes, c.totalBytes);
      const t = c.info(norm);
      const expect = rawBf16(join(dir, 'model.safetensors'), norm, 8);
      const w = loadWeight(c, alloc, norm, t.shape);
      assert.deepEqual(Array.from(w.data.subarray(0, 8), bf16ToF32), expect);
      assert.deepEqual([...loadWeightF32(c, alloc, norm, t.shape).data.subarray(0, 8)], expect);
      assert.ok(expect.some((v) => v !== 0));
    });
  });
}

test('tensor at a byte offset beyond 4 GiB (sparse file)', () => {
  const dir = freshDir();
  const file = join(dir, 'model.safetensors');
  const payload = new Float32Array([1.5, -2.25, 3, 4e9]);
  const nb = payload.byteLength;
  // The data must tile the file (as the reference reader requires), so a 1-byte-element
  // tensor `pad` fills [0, begin) (a hole in the sparse file) and `far` ends the file.
  const tensors = (begin: number): SynTensor[] => [
    { name: 'pad', dtype: 'F8_E4M3', shape: [begin], data: new Uint8Array(0), offsets: [0, begin] },
    { name: 'far', dtype: 'F32', shape: [4], data: new Uint8Array(nb), offsets: [begin, begin + nb] },
  ];
  // The header length must be known before the offsets are: offsets are printed with a fixed width.
  const probe = headerBytes(tensors(4_500_000_000));
  const begin = 4 * 2 ** 30 + 12345 - probe.length; // absolute position 4 GiB + 12345
  const header = headerBytes(tensors(begin));
  assert.equal(header.length, probe.length);
  const fd = openSync(file, 'w');
  try {
    ftruncateSync(fd, 4 * 2 ** 30 + 12345 + nb);
    writeSync(fd, header, 0, header.length, 0);
    writeSync(fd, bytesOf(payload), 0, nb, 4 * 2 ** 30 + 12345);
  } finally {
    closeSync(fd);
  }
  withCkpt(dir, (c) => {
    assert.equal(c.info('far').offset, 4 * 2 ** 30 + 12345);
    assert.deepEqual([...loadWeight(c, alloc, 'far', [4]).data], [...payload]);
  });
  rmSync(file);
});

test('progressBar writes nothing when stderr is not a TTY', () => {
  const orig = process.stderr.write.bind(process.stderr);
  const wasTty = process.stderr.isTTY;
  let writes = 0;
  process.stderr.write = (() => { writes++; return true; }) as typeof process.stderr.write;
  try {
    (process.stderr as { isTTY: boolean }).isTTY = false;
    const bar = progressBar('loading', 100);
    bar.tick(50);
    bar.done();
    assert.equal(writes, 0);
    (process.stderr as { isTTY: boolean }).isTTY = true;
    const tty = progressBar('loading', 100);
    for (let i = 0; i < 100; i++) tty.tick(1);
    tty.done();
    tty.done();
    assert.ok(writes >= 2 && writes <= 4, `writes=${writes}`);
  } finally {
    process.stderr.write = orig;
    (process.stderr as { isTTY: boolean }).isTTY = wasTty;
  }
});
