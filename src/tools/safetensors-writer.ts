// Write safetensors checkpoints whose tensor data is generated on the fly: a single file
// or HF-style shards (`model-0000i-of-0000n.safetensors` + `model.safetensors.index.json`).
//
// Invariants:
// - Tensors are written sorted by name (byte order of the UTF-16 names, i.e. JS `<`), back
//   to back with no gaps; the header lists them in the same order after `__metadata__`.
// - The header is `u64 LE length` + JSON padded with spaces so the data starts at a
//   multiple of 8 bytes.
// - Memory: tensor data is never held whole. Each tensor is generated into one reusable
//   buffer of at most WRITE_CHUNK bytes, piece by piece, and written before the next piece.
// - A file is written to `<path>.partial` and renamed into place when complete, so a crash
//   never leaves a truncated file under the final name.
// Byte positions are plain numbers (exact up to 2^53).
import { openSync, closeSync, writeSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { endianness } from 'node:os';
import { DeltaserveError, assert } from '../util/errors.js';

export type WriteDType = 'BF16' | 'F32' | 'F16' | 'F8_E4M3';

export interface TensorSource {
  readonly name: string;
  readonly dtype: WriteDType;
  readonly shape: readonly number[];
  /** Produce the tensor's next little-endian bytes into `dest`. Called once per piece, in
   * order, with consecutive pieces (`byteOffset` = bytes already produced) whose lengths
   * sum to the tensor's byte size; every piece is a whole number of elements and `dest`
   * is aligned to 8 bytes. */
  fill(dest: Uint8Array, byteOffset: number): void;
}

/** Largest piece generated at once (a multiple of 8, so of every element size). */
export const WRITE_CHUNK = 64 * 1024 * 1024;
export const ITEMSIZE: Readonly<Record<WriteDType, number>> = { BF16: 2, F16: 2, F32: 4, F8_E4M3: 1 };
export const INDEX_FILE = 'model.safetensors.index.json';

// Typed-array views write host byte order; safetensors is little-endian.
assert(endianness() === 'LE', 'safetensors writer needs a little-endian host');

/** prod(shape) · itemsize(dtype). */
export function tensorBytes(t: Pick<TensorSource, 'dtype' | 'shape'>): number {
  return t.shape.reduce((a, b) => a * b, 1) * ITEMSIZE[t.dtype];
}

function sortedChecked(tensors: Iterable<TensorSource>): TensorSource[] {
  const list = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (let i = 0; i < list.length; i++) {
    const t = list[i]!;
    if (t.name === '__metadata__' || t.name === '') throw new DeltaserveError('bad_request', `invalid tensor name "${t.name}"`);
    if (i > 0 && list[i - 1]!.name === t.name) throw new DeltaserveError('bad_request', `duplicate tensor name ${t.name}`);
    if (!(t.dtype in ITEMSIZE)) throw new DeltaserveError('bad_request', `tensor ${t.name}: unsupported dtype ${String(t.dtype)}`);
    if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw new DeltaserveError('bad_request', `tensor ${t.name}: shape [${t.shape.join(',')}] must be non-negative integers`);
    }
  }
  return list;
}

/** Header bytes for tensors already in file order. */
function headerBytes(list: readonly TensorSource[], metadata: Record<string, string>): Buffer {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', ...metadata } };
  let off = 0;
  for (const t of list) {
    const n = tensorBytes(t);
    header[t.name] = { dtype: t.dtype, shape: [...t.shape], data_offsets: [off, off + n] };
    off += n;
  }
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const padded = Math.ceil((8 + json.length) / 8) * 8 - 8;
  const out = Buffer.alloc(8 + padded, 0x20); // pad with spaces
  out.writeBigUInt64LE(BigInt(padded), 0);
  json.copy(out, 8);
  return out;
}

function writeAll(fd: number, bytes: Uint8Array, position: number): void {
  let done = 0;
  while (done < bytes.byteLength) {
    done += writeSync(fd, bytes, done, bytes.byteLength - done, position + done);
  }
}

export interface WriteOptions {
  /** Extra `__metadata__` entries (string values, as the format requires). */
  readonly metadata?: Record<string, string>;
  /** Called after every piece written with its byte count (progress). */
  readonly onBytes?: (n: number) => void;
}

/** Write one file from tensors already sorted and checked; returns the file size. */
function writeFile(path: string, list: readonly TensorSource[], opts: WriteOptions, scratch: { buf: Uint8Array | null }): number {
  const header = headerBytes(list, opts.metadata ?? {});
  const partial = `${path}.partial`;
  const fd = openSync(partial, 'w');
  let pos = 0;
  try {
    writeAll(fd, header, 0);
    pos = header.byteLength;
    for (const t of list) {
      const total = tensorBytes(t);
      for (let off = 0; off < total;) {
        const len = Math.min(WRITE_CHUNK, total - off);
        if (!scratch.buf || scratch.buf.byteLength < len) scratch.buf = new Uint8Array(Math.min(WRITE_CHUNK, Math.max(len, 1 << 20)));
        const piece = scratch.buf.subarray(0, len);
        piece.fill(0);
        t.fill(piece, off);
        writeAll(fd, piece, pos);
        pos += len;
        off += len;
        opts.onBytes?.(len);
      }
    }
  } finally {
    closeSync(fd);
  }
  renameSync(partial, path);
  return pos;
}

/** Write all tensors into one safetensors file at `path`; returns its size in bytes. */
export function writeSafetensors(path: string, tensors: Iterable<TensorSource>, metadata?: Record<string, string>,
  opts: Omit<WriteOptions, 'metadata'> = {}): number {
  return writeFile(path, sortedChecked(tensors), { ...opts, metadata: metadata ?? {} }, { buf: null });
}

export function shardName(i: number, n: number): string {
  const pad = (x: number): string => String(x).padStart(5, '0');
  return `model-${pad(i + 1)}-of-${pad(n)}.safetensors`;
}

/** Split name-sorted tensors into consecutive groups of at most maxShardBytes of data
 * (a tensor larger than that gets a shard of its own). */
export function planShards(tensors: Iterable<TensorSource>, maxShardBytes: number): TensorSource[][] {
  if (!(maxShardBytes > 0)) throw new DeltaserveError('bad_request', `maxShardBytes must be positive (got ${maxShardBytes})`);
  const shards: TensorSource[][] = [];
  let cur: TensorSource[] = [];
  let size = 0;
  for (const t of sortedChecked(tensors)) {
    const n = tensorBytes(t);
    if (cur.length > 0 && size + n > maxShardBytes) {
      shards.push(cur);
      cur = [];
      size = 0;
    }
    cur.push(t);
    size += n;
  }
  if (cur.length > 0 || shards.length === 0) shards.push(cur);
  return shards;
}

/** Write `model-0000i-of-0000n.safetensors` shards of at most maxShardBytes of tensor
 * data each, plus `model.safetensors.index.json` (written last: its presence means every
 * shard is complete). Returns the shard file names. */
export function writeShardedSafetensors(dir: string, tensors: Iterable<TensorSource>, maxShardBytes: number,
  opts: WriteOptions = {}): string[] {
  const shards = planShards(tensors, maxShardBytes);
  const names = shards.map((_, i) => shardName(i, shards.length));
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  const scratch: { buf: Uint8Array | null } = { buf: null };
  shards.forEach((list, i) => {
    writeFile(join(dir, names[i]!), list, opts, scratch);
    for (const t of list) {
      weightMap[t.name] = names[i]!;
      totalSize += tensorBytes(t);
    }
  });
  const index = { metadata: { total_size: totalSize }, weight_map: weightMap };
  writeFileSync(join(dir, INDEX_FILE), `${JSON.stringify(index, null, 2)}\n`);
  return names;
}
