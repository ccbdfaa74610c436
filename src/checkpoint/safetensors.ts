// Safetensors checkpoints: a single `model.safetensors`, a sharded checkpoint with
// `model.safetensors.index.json`, or a directory of `*.safetensors` files (union of headers).
//
// Files may exceed 4 GiB and a model may exceed one Node Buffer, so a file is never read
// whole: the header (u64 LE length + JSON) and every tensor are read with positioned reads on
// a file descriptor, in pieces of at most READ_CHUNK bytes. Byte positions are plain numbers
// (exact up to 2^53). Descriptors stay open until close().
import { openSync, closeSync, fstatSync, readSync, existsSync, statSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DeltaserveError, assert } from '../util/errors.js';
import { type QuantType, isQuantType, quantRowBytes } from '../kernels/quant/formats.js';
import { f16ToF32 } from '../kernels/quant/dequant.js';

/** IEEE half bits → number (exact), shared with the GGML block decoder. */
export { f16ToF32 };

/** F8_E4M3 tensors are read through checkpoint/fp8.ts (withFp8Dequant), which presents them as BF16. */
export type StDType = 'BF16' | 'F16' | 'F32' | 'F8_E4M3';
/** Storage type of a checkpoint tensor: a float type, or a GGML block format (GGUF files). */
export type TensorDType = StDType | QuantType;

export interface TensorInfo {
  readonly name: string;
  readonly dtype: TensorDType;
  readonly shape: readonly number[];
  /** Absolute path of the file holding the tensor. */
  readonly file: string;
  /** Absolute byte offset of the tensor's first byte in `file`. */
  readonly offset: number;
  /** = prod(shape) · itemsize(dtype) (quantized: rows × row bytes); offset + nbytes ≤ file
   * size (checked at open). */
  readonly nbytes: number;
  /** Set when the stored columns of a matrix are permuted and could not be reordered at load
   * (quantized rows): stored column block j holds logical column block columnBlocks.order[j]
   * (blocks of columnBlocks.size columns). Float tensors are always reordered on read. */
  readonly columnBlocks?: { readonly size: number; readonly order: readonly number[] };
}

export interface Checkpoint {
  readonly dir: string;
  readonly tensors: ReadonlyMap<string, TensorInfo>;
  has(name: string): boolean;
  /** Throws DeltaserveError('missing_tensor') naming the tensor and the file(s) searched. */
  info(name: string): TensorInfo;
  /** Read the tensor's raw little-endian bytes into dest (dest.byteLength must equal nbytes).
   * `onBytes` is called after every piece read with the number of bytes in it. */
  readInto(name: string, dest: Uint8Array, onBytes?: (n: number) => void): void;
  /** Read dest.byteLength raw bytes of the tensor starting `byteOffset` bytes into it (a
   * slice of rows, e.g. one expert of a fused expert tensor) into dest. */
  readRangeInto(name: string, byteOffset: number, dest: Uint8Array, onBytes?: (n: number) => void): void;
  /** Read the tensor's raw bytes into a fresh array. */
  read(name: string): Uint8Array;
  /** Sum of nbytes over all tensors. */
  readonly totalBytes: number;
  close(): void;
}

const ITEMSIZE: Readonly<Record<StDType, number>> = { BF16: 2, F16: 2, F32: 4, F8_E4M3: 1 };
const SUPPORTED_DTYPES = Object.keys(ITEMSIZE).join(', ');
/** Upper bound on a header's JSON length; real headers are at most a few MiB. */
const MAX_HEADER_BYTES = 256 * 1024 * 1024;
/** Largest single readSync call. */
const READ_CHUNK = 256 * 1024 * 1024;
const SINGLE_FILE = 'model.safetensors';
const INDEX_FILE = 'model.safetensors.index.json';

function bad(message: string): never {
  throw new DeltaserveError('bad_checkpoint', message);
}

// ---------------------------------------------------------------------------------------
// Header parsing

/** Read exactly dest.byteLength bytes at `position`, in pieces ≤ READ_CHUNK. */
function readFully(fd: number, dest: Uint8Array, position: number, file: string, onBytes?: (n: number) => void): void {
  let done = 0;
  while (done < dest.byteLength) {
    const len = Math.min(READ_CHUNK, dest.byteLength - done);
    const got = readSync(fd, dest, done, len, position + done);
    if (got <= 0) bad(`${file}: unexpected end of file at byte ${position + done} (truncated file?)`);
    done += got;
    onBytes?.(got);
  }
}

function isNonNegInt(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}

/** Validate one header entry; returns its TensorInfo with an absolute offset. */
function parseEntry(name: string, entry: unknown, file: string, dataStart: number, fileSize: number): TensorInfo {
  const where = `tensor ${name} in ${file}`;
  if (typeof entry !== 'object' || entry === null) bad(`${where}: header entry is not an object`);
  const e = entry as Record<string, unknown>;
  const dtype = e['dtype'];
  if (typeof dtype !== 'string' || !(dtype in ITEMSIZE)) {
    bad(`${where} has dtype ${String(dtype)}; supported: ${SUPPORTED_DTYPES}`);
  }
  const shape = e['shape'];
  if (!Array.isArray(shape) || !shape.every(isNonNegInt)) bad(`${where}: "shape" must be a list of non-negative integers`);
  const offs = e['data_offsets'];
  if (!Array.isArray(offs) || offs.length !== 2 || !isNonNegInt(offs[0]) || !isNonNegInt(offs[1]) || offs[1] < offs[0]) {
    bad(`${where}: "data_offsets" must be [begin, end] with 0 ≤ begin ≤ end`);
  }
  const [begin, end] = offs as [number, number];
  const nbytes = (shape as number[]).reduce((a, b) => a * b, 1) * ITEMSIZE[dtype as StDType];
  if (end - begin !== nbytes) {
    bad(`${where}: data_offsets [${begin}, ${end}] span ${end - begin} bytes but shape [${shape.join(',')}] of ${dtype} needs ${nbytes}`);
  }
  if (dataStart + end > fileSize) {
    bad(`${where}: data ends at byte ${dataStart + end} but the file has ${fileSize} bytes (truncated file)`);
  }
  return Object.freeze({ name, dtype: dtype as StDType, shape: Object.freeze([...(shape as number[])]), file, offset: dataStart + begin, nbytes });
}

/** Parse the header of an open file; every tensor is checked to lie inside the file. */
function parseHeader(fd: number, file: string): TensorInfo[] {
  const size = fstatSync(fd).size;
  if (size < 8) bad(`${file}: file has ${size} bytes, too short for a safetensors header (truncated file)`);
  const lenBuf = new Uint8Array(8);
  readFully(fd, lenBuf, 0, file);
  const len = Buffer.from(lenBuf.buffer).readBigUInt64LE(0);
  if (len > BigInt(MAX_HEADER_BYTES)) bad(`${file}: header length ${len} is absurd (not a safetensors file or corrupted)`);
  const n = Number(len);
  if (8 + n > size) bad(`${file}: header length ${n} exceeds the file size ${size} (truncated file)`);
  const jsonBytes = new Uint8Array(n);
  readFully(fd, jsonBytes, 8, file);
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(jsonBytes.buffer).toString('utf8'));
  } catch (e) {
    bad(`${file}: header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) bad(`${file}: header is not a JSON object`);
  const dataStart = 8 + n;
  const tensors = Object.entries(header as Record<string, unknown>)
    .filter(([name]) => name !== '__metadata__')
    .map(([name, entry]) => parseEntry(name, entry, file, dataStart, size));
  checkDataLayout(tensors, dataStart, size, file);
  return tensors;
}

/** As the reference safetensors reader requires: sorted by offset, the tensors' data
 * ranges tile the data section exactly — no overlap, no bytes between two tensors or after
 * the last one. */
function checkDataLayout(tensors: readonly TensorInfo[], dataStart: number, fileSize: number, file: string): void {
  const byOffset = [...tensors].sort((a, b) => a.offset - b.offset || a.nbytes - b.nbytes);
  const range = (t: TensorInfo): string => `[${t.offset - dataStart}, ${t.offset - dataStart + t.nbytes}]`;
  let expected = dataStart;
  let prev: TensorInfo | null = null;
  for (const t of byOffset) {
    if (t.offset < expected) {
      bad(`tensor ${t.name} in ${file}: data_offsets ${range(t)} overlap tensor ${prev!.name}'s ${range(prev!)}`);
    }
    if (t.offset > expected) {
      bad(`tensor ${t.name} in ${file}: data_offsets ${range(t)} leave ${t.offset - expected} bytes unused before it` +
        ` (after ${prev ? `tensor ${prev.name}'s ${range(prev)}` : 'the header'}); tensor data must be contiguous`);
    }
    expected = t.offset + t.nbytes;
    prev = t;
  }
  if (expected !== fileSize) {
    bad(`${file}: ${fileSize - expected} bytes after the last tensor's data${prev ? ` (${prev.name})` : ''} belong to no tensor`);
  }
}

// ---------------------------------------------------------------------------------------
// Checkpoint

/** Owns one open fd per file; `tensors` only references files in `fds`. */
class SafetensorsCheckpoint implements Checkpoint {
  readonly tensors = new Map<string, TensorInfo>();
  private readonly fds = new Map<string, number>();
  private closed = false;
  /** Files searched for tensors, for error messages (an index file if sharded). */
  private searched: string[] = [];

  constructor(readonly dir: string) {}

  get totalBytes(): number {
    let sum = 0;
    for (const t of this.tensors.values()) sum += t.nbytes;
    return sum;
  }

  /** Open a file and parse its header (the fd is owned from here on). */
  openFile(file: string): TensorInfo[] {
    if (!existsSync(file)) bad(`safetensors file not found: ${file}`);
    const fd = openSync(file, 'r');
    this.fds.set(file, fd);
    return parseHeader(fd, file);
  }

  add(t: TensorInfo): void {
    const prev = this.tensors.get(t.name);
    if (prev) bad(`tensor ${t.name} appears in both ${prev.file} and ${t.file}`);
    this.tensors.set(t.name, t);
  }

  setSearched(files: string[]): void {
    this.searched = files;
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (t) return t;
    const list = this.searched.length <= 4 ? this.searched.join(', ')
      : `${this.searched.slice(0, 4).join(', ')} and ${this.searched.length - 4} more`;
    throw new DeltaserveError('missing_tensor', `tensor ${name} not found in checkpoint (searched ${list})`);
  }

  readInto(name: string, dest: Uint8Array, onBytes?: (n: number) => void): void {
    assert(!this.closed, `checkpoint ${this.dir} read after close()`);
    const t = this.info(name);
    assert(dest.byteLength === t.nbytes, `readInto(${name}): dest has ${dest.byteLength} bytes, tensor has ${t.nbytes}`);
    const fd = this.fds.get(t.file);
    assert(fd !== undefined, `no open fd for ${t.file}`);
    readFully(fd, dest, t.offset, t.file, onBytes);
  }

  readRangeInto(name: string, byteOffset: number, dest: Uint8Array, onBytes?: (n: number) => void): void {
    assert(!this.closed, `checkpoint ${this.dir} read after close()`);
    const t = this.info(name);
    assert(byteOffset >= 0 && byteOffset + dest.byteLength <= t.nbytes,
      `readRangeInto(${name}): bytes [${byteOffset}, ${byteOffset + dest.byteLength}) outside the tensor's ${t.nbytes}`);
    const fd = this.fds.get(t.file);
    assert(fd !== undefined, `no open fd for ${t.file}`);
    readFully(fd, dest, t.offset + byteOffset, t.file, onBytes);
  }

  read(name: string): Uint8Array {
    const out = new Uint8Array(this.info(name).nbytes);
    this.readInto(name, out);
    return out;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }
}

/** Sharded: every weight_map entry must exist in its shard's header. */
function openSharded(ck: SafetensorsCheckpoint, dir: string, indexPath: string): void {
  let index: unknown;
  try {
    index = JSON.parse(readFileSync(indexPath, 'utf8'));
  } catch (e) {
    bad(`${indexPath}: not valid JSON (${(e as Error).message})`);
  }
  const wm = (index as Record<string, unknown> | null)?.['weight_map'];
  if (typeof wm !== 'object' || wm === null || Array.isArray(wm)) bad(`${indexPath}: missing "weight_map" object`);
  const byShard = new Map<string, string[]>();
  for (const [name, shard] of Object.entries(wm as Record<string, unknown>)) {
    if (typeof shard !== 'string') bad(`${indexPath}: weight_map entry for ${name} is not a file name`);
    const list = byShard.get(shard) ?? [];
    list.push(name);
    byShard.set(shard, list);
  }
  ck.setSearched([indexPath]);
  for (const [shard, names] of byShard) {
    const file = join(dir, shard);
    if (!existsSync(file)) bad(`shard file ${file} listed in ${indexPath} is missing`);
    const found = new Map(ck.openFile(file).map((t) => [t.name, t]));
    for (const name of names) {
      const t = found.get(name);
      if (!t) bad(`${indexPath} maps tensor ${name} to ${file}, but that file has no such tensor`);
      ck.add(t);
    }
  }
}

/** Open a checkpoint directory (see the file comment for the accepted layouts). */
export function openCheckpoint(dir: string): Checkpoint {
  const abs = resolve(dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) bad(`model directory not found: ${abs}`);
  const ck = new SafetensorsCheckpoint(abs);
  try {
    const indexPath = join(abs, INDEX_FILE);
    if (existsSync(indexPath)) {
      openSharded(ck, abs, indexPath);
      return ck;
    }
    const single = join(abs, SINGLE_FILE);
    const files = existsSync(single) ? [single]
      : readdirSync(abs).filter((f) => f.endsWith('.safetensors')).sort().map((f) => join(abs, f));
    if (files.length === 0) bad(`no ${SINGLE_FILE}, ${INDEX_FILE} or *.safetensors file in ${abs}`);
    ck.setSearched(files);
    for (const f of files) for (const t of ck.openFile(f)) ck.add(t);
    return ck;
  } catch (e) {
    ck.close();
    throw e;
  }
}

// ---------------------------------------------------------------------------------------
// Decoding (loading into kernel weights: load-weight.ts)

const cvtU32 = new Uint32Array(1);
const cvtF32 = new Float32Array(cvtU32.buffer);

/** bfloat16 bits → number (exact). */
export function bf16ToF32(bits: number): number {
  cvtU32[0] = (bits & 0xffff) << 16;
  return cvtF32[0]!;
}

/** Bytes of one stored row of `cols` elements. */
export function storedRowBytes(dtype: TensorDType, cols: number): number {
  if (isQuantType(dtype)) return quantRowBytes(dtype, cols);
  return cols * (dtype === 'F32' ? 4 : 2);
}
