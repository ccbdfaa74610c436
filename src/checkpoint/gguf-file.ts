// GGUF container format (v2/v3): header, metadata key/values and tensor infos of one file.
// Only the header is read into memory (positioned reads of growing pieces); tensor data stays
// on disk and is read later by the checkpoint (gguf.ts).
//
// Layout (little-endian): magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv |
//   n_kv × (string key, u32 type, value) | n_tensors × (string name, u32 n_dims,
//   u64 ne[n_dims], u32 ggml_type, u64 offset) | padding to `general.alignment` (default 32) |
//   tensor data (each tensor at data_start + offset, offsets aligned).
// ne is reversed from PyTorch: ne[0] is the innermost (contiguous) dimension.
import { readSync, fstatSync, openSync, closeSync, existsSync } from 'node:fs';
import { DeltaserveError } from '../util/errors.js';
import { QUANT_FORMATS, type QuantType } from '../kernels/quant/formats.js';

export type GgufScalar = number | bigint | boolean | string;
export type GgufValue = GgufScalar | readonly GgufScalar[] | readonly GgufValue[];
export type GgufMetadata = ReadonlyMap<string, GgufValue>;

/** Storage type of a tensor: a float type or a GGML block format. */
export type GgufTensorType = 'F32' | 'F16' | 'BF16' | QuantType;

export interface GgufTensorInfo {
  readonly name: string;
  /** PyTorch order (outermost first): the reverse of GGUF's ne. */
  readonly shape: readonly number[];
  readonly type: GgufTensorType;
  /** Absolute byte offset in the file. */
  readonly offset: number;
  readonly nbytes: number;
}

export interface GgufFile {
  readonly path: string;
  readonly version: number;
  readonly metadata: GgufMetadata;
  /** Each metadata key's stored value type id (GGUF's u32: 4 = u32, 8 = string, …); for
   * arrays the type of the items (metadata value is then an array). Lets a writer copy a
   * value exactly as it was stored. */
  readonly metadataTypes: ReadonlyMap<string, number>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly size: number;
}

const MAGIC = 0x46554747; // "GGUF" read as u32 LE
const DEFAULT_ALIGNMENT = 32;
/** Guards against absurd counts in corrupted headers (before anything is allocated). */
const MAX_COUNT = 1 << 26;
const MAX_DIMS = 4;

const FLOAT_TYPES: ReadonlyMap<number, { type: GgufTensorType; size: number }> = new Map([
  [0, { type: 'F32', size: 4 }],
  [1, { type: 'F16', size: 2 }],
  [30, { type: 'BF16', size: 2 }],
]);
const QUANT_BY_ID: ReadonlyMap<number, QuantType> = new Map(
  (Object.entries(QUANT_FORMATS) as [QuantType, { ggmlType: number }][]).map(([t, f]) => [f.ggmlType, t]));
/** Names of GGML types this reader does not support, for error messages. */
const OTHER_GGML_TYPES: Readonly<Record<number, string>> = {
  9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K', 15: 'Q8_K', 16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS', 19: 'IQ1_S',
  20: 'IQ4_NL', 21: 'IQ3_S', 22: 'IQ2_S', 23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64',
  29: 'IQ1_M', 34: 'TQ1_0', 35: 'TQ2_0', 39: 'MXFP4',
};
export const SUPPORTED_TENSOR_TYPES = 'F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K';

function bad(message: string): never {
  throw new DeltaserveError('bad_checkpoint', message);
}

/** Bytes of a tensor of `shape` stored as `type`; the innermost dimension must be whole blocks. */
export function tensorBytes(type: GgufTensorType, shape: readonly number[], where: string): number {
  const cols = shape.length === 0 ? 1 : shape[shape.length - 1]!;
  const rows = shape.slice(0, -1).reduce((a, b) => a * b, 1);
  if (!Number.isSafeInteger(rows * cols)) bad(`${where}: shape [${shape.join(',')}] has too many elements`);
  const float = [...FLOAT_TYPES.values()].find((f) => f.type === type);
  if (float) return rows * cols * float.size;
  const f = QUANT_FORMATS[type as QuantType];
  if (cols % f.blockSize !== 0) bad(`${where}: rows of ${cols} elements are not whole ${type} blocks of ${f.blockSize}`);
  return rows * (cols / f.blockSize) * f.blockBytes;
}

/** Sequential reader over the file's header, fetching more bytes from disk as needed. */
class HeaderCursor {
  private buf = Buffer.alloc(0);
  private bufStart = 0;
  pos = 0;
  constructor(private readonly fd: number, private readonly path: string, readonly size: number) {}

  private need(n: number, what: string): number {
    if (this.pos + n > this.size) {
      bad(`${this.path}: unexpected end of file at byte ${this.pos} while reading ${what} (truncated file)`);
    }
    const end = this.pos + n;
    if (end > this.bufStart + this.buf.length) {
      const want = Math.min(this.size - this.pos, Math.max(n, 2 * this.buf.length, 1 << 16));
      const next = Buffer.alloc(want);
      let got = 0;
      while (got < want) {
        const r = readSync(this.fd, next, got, want - got, this.pos + got);
        if (r <= 0) bad(`${this.path}: read failed at byte ${this.pos + got} (truncated file?)`);
        got += r;
      }
      this.buf = next;
      this.bufStart = this.pos;
    }
    const at = this.pos - this.bufStart;
    this.pos = end;
    return at;
  }
  u8(what: string): number { const at = this.need(1, what); return this.buf.readUInt8(at); }
  i8(what: string): number { const at = this.need(1, what); return this.buf.readInt8(at); }
  u16(what: string): number { const at = this.need(2, what); return this.buf.readUInt16LE(at); }
  i16(what: string): number { const at = this.need(2, what); return this.buf.readInt16LE(at); }
  u32(what: string): number { const at = this.need(4, what); return this.buf.readUInt32LE(at); }
  i32(what: string): number { const at = this.need(4, what); return this.buf.readInt32LE(at); }
  f32(what: string): number { const at = this.need(4, what); return this.buf.readFloatLE(at); }
  f64(what: string): number { const at = this.need(8, what); return this.buf.readDoubleLE(at); }
  i64(what: string): bigint { const at = this.need(8, what); return this.buf.readBigInt64LE(at); }
  u64big(what: string): bigint { const at = this.need(8, what); return this.buf.readBigUInt64LE(at); }
  /** A u64 that must fit a JS number and be ≤ limit. */
  u64(what: string, limit = Number.MAX_SAFE_INTEGER): number {
    const v = this.u64big(what);
    if (v > BigInt(limit)) bad(`${this.path}: ${what} is ${v}, more than ${limit} (corrupted header?)`);
    return Number(v);
  }
  str(what: string): string {
    const n = this.u64(`length of ${what}`, this.size);
    const at = this.need(n, what);
    return this.buf.toString('utf8', at, at + n);
  }
}

const SCALAR_READERS: Readonly<Record<number, (c: HeaderCursor, what: string) => GgufScalar>> = {
  0: (c, w) => c.u8(w), 1: (c, w) => c.i8(w), 2: (c, w) => c.u16(w), 3: (c, w) => c.i16(w),
  4: (c, w) => c.u32(w), 5: (c, w) => c.i32(w), 6: (c, w) => c.f32(w),
  7: (c, w) => c.u8(w) !== 0, 8: (c, w) => c.str(w),
  10: (c, w) => { const v = c.u64big(w); return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v; },
  11: (c, w) => { const v = c.i64(w); return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v; },
  12: (c, w) => c.f64(w),
};
const ARRAY_TYPE = 9;

/** `types`: records the stored type of `key` (for arrays, of their items). */
function readValue(c: HeaderCursor, type: number, key: string, path: string, types?: Map<string, number>): GgufValue {
  types?.set(key, type);
  const scalar = SCALAR_READERS[type];
  if (scalar) return scalar(c, `value of ${key}`);
  if (type !== ARRAY_TYPE) bad(`${path}: metadata key ${key} has unknown value type ${type} (corrupted header?)`);
  const itemType = c.u32(`array type of ${key}`);
  types?.set(key, itemType);
  const n = c.u64(`array length of ${key}`, MAX_COUNT);
  const out: GgufValue[] = [];
  for (let i = 0; i < n; i++) out.push(readValue(c, itemType, key, path));
  return out;
}

function tensorType(id: number, name: string, path: string): GgufTensorType {
  const float = FLOAT_TYPES.get(id);
  if (float) return float.type;
  const q = QUANT_BY_ID.get(id);
  if (q) return q;
  const known = OTHER_GGML_TYPES[id];
  bad(`${path}: tensor ${name} has type ${known ?? `id ${id}`}, which deltaserve does not support (supported: ${SUPPORTED_TENSOR_TYPES})`);
}

/** Parse the header of an open GGUF file; every tensor is checked to lie inside the file. */
export function parseGguf(fd: number, path: string): GgufFile {
  const size = fstatSync(fd).size;
  const c = new HeaderCursor(fd, path, size);
  if (size < 4) bad(`${path}: file has ${size} bytes, too short for a GGUF header (truncated file)`);
  const magic = c.u32('magic');
  if (magic !== MAGIC) bad(`${path}: bad magic 0x${magic.toString(16).padStart(8, '0')} (expected "GGUF"): not a GGUF file`);
  const version = c.u32('version');
  if (version === 0x02000000 || version === 0x03000000) bad(`${path}: big-endian GGUF files are not supported`);
  if (version !== 2 && version !== 3) bad(`${path}: GGUF version ${version} is not supported (supported: 2, 3)`);
  const nTensors = c.u64('tensor count', MAX_COUNT);
  const nKv = c.u64('metadata count', MAX_COUNT);
  const metadata = new Map<string, GgufValue>();
  const metadataTypes = new Map<string, number>();
  for (let i = 0; i < nKv; i++) {
    const key = c.str(`metadata key #${i}`);
    if (metadata.has(key)) bad(`${path}: metadata key ${key} appears twice`);
    const type = c.u32(`type of ${key}`);
    metadata.set(key, readValue(c, type, key, path, metadataTypes));
  }
  const alignment = metadata.get('general.alignment') ?? DEFAULT_ALIGNMENT;
  if (typeof alignment !== 'number' || alignment <= 0 || !Number.isInteger(alignment) || alignment % 8 !== 0) {
    bad(`${path}: general.alignment must be a positive multiple of 8 (got ${String(alignment)})`);
  }
  const raw: { name: string; shape: number[]; type: GgufTensorType; rel: number }[] = [];
  const names = new Set<string>();
  for (let i = 0; i < nTensors; i++) {
    const name = c.str(`tensor name #${i}`);
    const nDims = c.u32(`dimension count of ${name}`);
    if (nDims > MAX_DIMS) bad(`${path}: tensor ${name} has ${nDims} dimensions (at most ${MAX_DIMS})`);
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) ne.push(c.u64(`dimension ${d} of ${name}`, 2 ** 40));
    const type = tensorType(c.u32(`type of ${name}`), name, path);
    if (names.has(name)) bad(`${path}: tensor ${name} is listed twice in the header`);
    names.add(name);
    raw.push({ name, shape: ne.reverse(), type, rel: c.u64(`offset of ${name}`) });
  }
  const dataStart = Math.ceil(c.pos / alignment) * alignment;
  const tensors = raw.map((t): GgufTensorInfo => {
    const where = `${path}: tensor ${t.name}`;
    if (t.rel % alignment !== 0) bad(`${where}: data offset ${t.rel} is not a multiple of the alignment ${alignment}`);
    const nbytes = tensorBytes(t.type, t.shape, where);
    return Object.freeze({ name: t.name, shape: Object.freeze(t.shape), type: t.type, offset: dataStart + t.rel, nbytes });
  });
  checkDataLayout(tensors, dataStart, alignment, path);
  for (const t of tensors) {
    if (t.offset + t.nbytes > size) {
      bad(`${path}: tensor ${t.name}: data ends at byte ${t.offset + t.nbytes} but the file has ${size} bytes (truncated file)`);
    }
  }
  return { path, version, metadata, metadataTypes, tensors, size };
}

/** The data section holds the tensors back to back in header order, each padded to the
 * alignment (as llama.cpp's reader requires): tensor i starts where tensor i−1's padded
 * data ends, so no two tensors overlap and no bytes lie between them. */
function checkDataLayout(tensors: readonly GgufTensorInfo[], dataStart: number, alignment: number, path: string): void {
  let expected = 0;
  let prev: GgufTensorInfo | null = null;
  for (const t of tensors) {
    const rel = t.offset - dataStart;
    if (rel !== expected) {
      const where = `${path}: tensor ${t.name}: data offset ${rel}`;
      if (prev === null) bad(`${where} should be 0: the first tensor's data starts the data section`);
      const prevRange = `[${prev.offset - dataStart}, ${prev.offset - dataStart + prev.nbytes})`;
      bad(rel < expected
        ? `${where} overlaps the data of tensor ${prev.name} ${prevRange} (${prev.type} [${prev.shape.join(',')}]) before it`
        : `${where} leaves a gap of ${rel - expected} bytes after tensor ${prev.name} ${prevRange}; expected ${expected} (tensors are stored back to back, padded to ${alignment})`);
    }
    expected += Math.ceil(t.nbytes / alignment) * alignment;
    prev = t;
  }
}

/** The header of a GGUF file (metadata and tensor infos), the file closed again. */
export function readGgufHeader(path: string): GgufFile {
  if (!existsSync(path)) bad(`GGUF file not found: ${path}`);
  const fd = openSync(path, 'r');
  try {
    return parseGguf(fd, path);
  } finally {
    closeSync(fd);
  }
}
