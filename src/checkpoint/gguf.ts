// GGUF checkpoints: one `.gguf` file, or every part of a split GGUF (`…-00001-of-0000N.gguf`),
// behind the same Checkpoint interface as safetensors. The GGUF tensors are presented under
// the Hugging Face names and shapes the loader asks for (gguf-map.ts builds that mapping);
// layout differences (row order of value heads, +1 folded into norms, ssm_a = −exp(A_log),
// split experts) are undone when a tensor is read, so the weights are the same as the
// safetensors twin's. Matrices are read row range by row range straight into backend memory.
import { openSync, closeSync, readSync, existsSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { DeltaserveError, assert } from '../util/errors.js';
import type { Checkpoint, TensorInfo } from './safetensors.js';
import { bf16ToF32, f16ToF32, storedRowBytes } from './safetensors.js';
import { type GgufFile, type GgufTensorInfo, parseGguf } from './gguf-file.js';

/** Largest single readSync call. */
const READ_CHUNK = 256 * 1024 * 1024;
const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

function bad(message: string): never {
  throw new DeltaserveError('bad_checkpoint', message);
}

/** A GGUF tensor with the file (and descriptor) holding it. */
export interface Located {
  readonly t: GgufTensorInfo;
  readonly file: string;
  readonly fd: number;
}

export function readFully(src: Located, position: number, dest: Uint8Array, onBytes?: (n: number) => void): void {
  let done = 0;
  while (done < dest.byteLength) {
    const len = Math.min(READ_CHUNK, dest.byteLength - done);
    const got = readSync(src.fd, dest, done, len, position + done);
    if (got <= 0) bad(`${src.file}: unexpected end of file at byte ${position + done} reading tensor ${src.t.name} (truncated file?)`);
    done += got;
    onBytes?.(got);
  }
}

/** A run of `n` stored rows starting at `row` of `src`. */
export interface RowSegment {
  readonly src: Located;
  readonly row: number;
  readonly n: number;
}

/** A tensor the loader sees under its Hugging Face name. */
export interface VirtualTensor {
  readonly info: TensorInfo;
  /** Read dest.byteLength bytes of the (transformed) tensor starting at byteOffset. */
  read(byteOffset: number, dest: Uint8Array, onBytes?: (n: number) => void): void;
}

/** Rows gathered from stored rows (a row permutation or a slice), with an optional
 * permutation of column blocks applied to float rows after reading: logical column block b
 * reads stored block `colBlocks.from[b]`. Quantized rows keep their stored columns (the
 * permutation is reported in info.columnBlocks for the model to apply to activations). */
export function rowMapped(name: string, shape: readonly number[], segments: readonly RowSegment[],
  colBlocks?: { size: number; from: readonly number[] }): VirtualTensor {
  const first = segments[0]!.src;
  const dtype = first.t.type;
  const cols = first.t.shape[first.t.shape.length - 1] ?? 1;
  const rowBytes = storedRowBytes(dtype, cols);
  const rows = segments.reduce((a, s) => a + s.n, 0);
  const float = dtype === 'F32' || dtype === 'F16' || dtype === 'BF16';
  const columnBlocks = colBlocks && !float ? { size: colBlocks.size, order: inverse(colBlocks.from) } : undefined;
  const info: TensorInfo = {
    name, dtype, shape, file: first.file, offset: first.t.offset + segments[0]!.row * rowBytes, nbytes: rows * rowBytes,
    ...(columnBlocks ? { columnBlocks } : {}),
  };
  return {
    info,
    read(byteOffset, dest, onBytes) {
      assert(byteOffset % rowBytes === 0 && dest.byteLength % rowBytes === 0,
        `${name}: reads must cover whole rows of ${rowBytes} bytes`);
      let row = byteOffset / rowBytes;
      let at = 0;
      for (const s of segments) {
        if (at >= dest.byteLength) break;
        if (row >= s.n) { row -= s.n; continue; }
        const n = Math.min(s.n - row, (dest.byteLength - at) / rowBytes);
        readFully(s.src, s.src.t.offset + (s.row + row) * rowBytes, dest.subarray(at, at + n * rowBytes), onBytes);
        at += n * rowBytes;
        row = 0;
      }
      if (colBlocks && float) permuteColumnBlocks(dest, rowBytes, colBlocks.size * (rowBytes / cols), colBlocks.from);
    },
  };
}

function inverse(perm: readonly number[]): number[] {
  const out = new Array<number>(perm.length);
  perm.forEach((p, i) => { out[p] = i; });
  return out;
}

function permuteColumnBlocks(bytes: Uint8Array, rowBytes: number, blockBytes: number, from: readonly number[]): void {
  const tmp = new Uint8Array(rowBytes);
  for (let r = 0; r < bytes.byteLength; r += rowBytes) {
    tmp.set(bytes.subarray(r, r + rowBytes));
    from.forEach((src, b) => bytes.set(tmp.subarray(src * blockBytes, (src + 1) * blockBytes), r + b * blockBytes));
  }
}

/** Refuses a tensor that is read as float32 values (norms, A_log, dt_bias) but stored in a
 * block format. */
function checkFloatStored(src: Located): void {
  const type = src.t.type;
  if (type !== 'F32' && type !== 'F16' && type !== 'BF16') {
    bad(`${src.file}: tensor ${src.t.name} is ${type}; it must be stored as F32, F16 or BF16 (it is read as float values)`);
  }
}

/** The stored values of a tensor as float32 (F32, F16 or BF16). */
export function readAsF32(src: Located): Float32Array {
  checkFloatStored(src);
  const raw = new Uint8Array(src.t.nbytes);
  readFully(src, src.t.offset, raw);
  const n = src.t.shape.reduce((a, b) => a * b, 1);
  if (src.t.type === 'F32') return new Float32Array(raw.buffer, 0, n);
  const u16 = new Uint16Array(raw.buffer, 0, n);
  return Float32Array.from(u16, src.t.type === 'BF16' ? bf16ToF32 : f16ToF32);
}

/** A small float vector computed from a stored one: the stored elements in the order `from`
 * (logical element i = stored[from[i]]), then `transform`; presented as F32. */
export function vectorMapped(name: string, shape: readonly number[], src: Located,
  from: readonly number[] | null, transform: (values: Float32Array) => Float32Array): VirtualTensor {
  checkFloatStored(src);
  const n = shape.reduce((a, b) => a * b, 1);
  const info: TensorInfo = { name, dtype: 'F32', shape, file: src.file, offset: src.t.offset, nbytes: n * 4 };
  let values: Float32Array | undefined;
  return {
    info,
    read(byteOffset, dest, onBytes) {
      if (!values) {
        const stored = readAsF32(src);
        values = transform(Float32Array.from({ length: n }, (_, i) => stored[from ? from[i]! : i]!));
        onBytes?.(src.t.nbytes);
      }
      dest.set(new Uint8Array(values.buffer, byteOffset, dest.byteLength));
    },
  };
}

/** Owns one descriptor per part; `virtuals` reference only those parts. */
export class GgufCheckpoint implements Checkpoint {
  readonly tensors = new Map<string, TensorInfo>();
  private readonly virtuals = new Map<string, VirtualTensor>();
  /** HF names whose GGUF tensor is absent → that GGUF name (for the error message). */
  private readonly missing = new Map<string, string>();
  private closed = false;

  constructor(readonly dir: string, readonly parts: readonly GgufFile[], private readonly fds: readonly number[]) {}

  add(v: VirtualTensor): void {
    assert(!this.virtuals.has(v.info.name), `GGUF mapping defines ${v.info.name} twice`);
    this.virtuals.set(v.info.name, v);
    this.tensors.set(v.info.name, v.info);
  }
  addMissing(hfName: string, ggufName: string): void {
    this.missing.set(hfName, ggufName);
  }

  get totalBytes(): number {
    let sum = 0;
    for (const t of this.tensors.values()) sum += t.nbytes;
    return sum;
  }
  has(name: string): boolean {
    return this.tensors.has(name);
  }
  info(name: string): TensorInfo {
    const t = this.tensors.get(name);
    if (t) return t;
    const files = this.parts.map((p) => p.path).join(', ');
    const g = this.missing.get(name);
    throw new DeltaserveError('missing_tensor', g !== undefined
      ? `tensor ${g} (${name}) not found in GGUF ${files}`
      : `tensor ${name} not found in GGUF ${files}`);
  }
  private virtual(name: string): VirtualTensor {
    assert(!this.closed, `checkpoint ${this.dir} read after close()`);
    this.info(name);
    return this.virtuals.get(name)!;
  }
  readInto(name: string, dest: Uint8Array, onBytes?: (n: number) => void): void {
    const v = this.virtual(name);
    assert(dest.byteLength === v.info.nbytes, `readInto(${name}): dest has ${dest.byteLength} bytes, tensor has ${v.info.nbytes}`);
    v.read(0, dest, onBytes);
  }
  readRangeInto(name: string, byteOffset: number, dest: Uint8Array, onBytes?: (n: number) => void): void {
    const v = this.virtual(name);
    assert(byteOffset >= 0 && byteOffset + dest.byteLength <= v.info.nbytes,
      `readRangeInto(${name}): bytes [${byteOffset}, ${byteOffset + dest.byteLength}) outside the tensor's ${v.info.nbytes}`);
    v.read(byteOffset, dest, onBytes);
  }
  read(name: string): Uint8Array {
    const out = new Uint8Array(this.info(name).nbytes);
    this.readInto(name, out);
    return out;
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const fd of this.fds) closeSync(fd);
  }
}

/** Every tensor of the (possibly split) GGUF by its GGUF name. */
export interface GgufParts {
  readonly first: GgufFile;
  readonly parts: readonly GgufFile[];
  readonly fds: readonly number[];
  readonly tensors: ReadonlyMap<string, Located>;
}

function splitInfo(f: GgufFile): { no: number; count: number } | null {
  const count = f.metadata.get('split.count');
  if (count === undefined) return null;
  const no = f.metadata.get('split.no');
  if (typeof count !== 'number' || typeof no !== 'number' || count < 1 || no < 0 || no >= count) {
    bad(`${f.path}: split.no (${String(no)}) / split.count (${String(count)}) are invalid`);
  }
  return { no, count };
}

/** Paths of all parts of a split GGUF given its first part. */
function partPaths(first: string, count: number): string[] {
  const m = SPLIT_NAME.exec(basename(first));
  if (!m) bad(`${first}: metadata says split.count = ${count} but the name is not …-00001-of-${String(count).padStart(5, '0')}.gguf`);
  const dir = dirname(first);
  return Array.from({ length: count }, (_, i) =>
    join(dir, `${m[1]}-${String(i + 1).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`));
}

/** Open a GGUF file (the first part of a split GGUF opens every part). */
export function openGgufParts(path: string): GgufParts {
  const fds: number[] = [];
  const parts: GgufFile[] = [];
  try {
    const open = (p: string): GgufFile => {
      if (!existsSync(p)) bad(`GGUF file not found: ${p}`);
      const fd = openSync(p, 'r');
      fds.push(fd);
      const f = parseGguf(fd, p);
      parts.push(f);
      return f;
    };
    const first = open(path);
    const split = splitInfo(first);
    if (split && split.no !== 0) bad(`${path} is part ${split.no + 1} of a split GGUF; pass the first part (…-00001-of-…)`);
    if (split && split.count > 1) {
      const paths = partPaths(path, split.count);
      const absent = paths.filter((p) => !existsSync(p));
      if (absent.length > 0) bad(`split GGUF ${path} has ${split.count} parts but ${absent.map((p) => basename(p)).join(', ')} ${absent.length === 1 ? 'is' : 'are'} missing (in ${dirname(path)})`);
      paths.slice(1).forEach((p, i) => {
        const info = splitInfo(open(p));
        if (!info || info.no !== i + 1 || info.count !== split.count) {
          bad(`${p}: expected split part ${i + 2} of ${split.count} (split.no = ${i + 1}), found ${info ? `split.no = ${info.no} of ${info.count}` : 'no split metadata'}`);
        }
      });
    }
    const tensors = new Map<string, Located>();
    parts.forEach((f, i) => {
      for (const t of f.tensors) {
        const prev = tensors.get(t.name);
        if (prev) bad(`tensor ${t.name} appears in both ${prev.file} and ${f.path}`);
        tensors.set(t.name, { t, file: f.path, fd: fds[i]! });
      }
    });
    return { first, parts, fds, tensors };
  } catch (e) {
    for (const fd of fds) closeSync(fd);
    throw e;
  }
}
