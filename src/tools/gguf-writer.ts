// A streaming GGUF (v3) writer: typed metadata, tensor infos, then each tensor's data,
// produced one tensor at a time (a producer may be async) (no whole-model copy), written to `<out>.tmp-<pid>` and
// renamed into place once complete and fsynced.
//
// Layout (little-endian): "GGUF" | u32 3 | u64 n_tensors | u64 n_kv | n_kv × (string key,
//   u32 type, value) | n_tensors × (string name, u32 n_dims, u64 ne[n_dims] (innermost
//   first), u32 ggml_type, u64 offset) | zero padding to the alignment | tensor data, each
//   tensor at data_start + offset with offsets multiples of the alignment (32).
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { QUANT_FORMATS, type QuantType } from '../kernels/quant/formats.js';
import type { GgufTensorType } from '../checkpoint/gguf-file.js';
import { tensorBytes } from '../checkpoint/gguf-file.js';

export const GGUF_ALIGNMENT = 32;

/** GGUF metadata value types (the u32 written before every value). */
export const GV = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;
export type GgufScalarType = Exclude<keyof typeof GV, 'array'>;

/** One metadata entry: a scalar of `type`, or (with `array`) a list of scalars of `type`. */
export type MetaEntry =
  | { readonly key: string; readonly type: GgufScalarType; readonly value: number | bigint | boolean | string }
  | { readonly key: string; readonly type: GgufScalarType; readonly array: readonly (number | bigint | boolean | string)[] };

/** A tensor to write: its GGUF name, PyTorch-order shape, storage type, and a producer that
 * calls `emit` with the tensor's bytes in order (any number of pieces). */
export interface TensorOut {
  readonly name: string;
  readonly shape: readonly number[];
  readonly type: GgufTensorType;
  readonly produce: (emit: (bytes: Uint8Array) => void) => void | Promise<void>;
}

const FLOAT_IDS: Readonly<Record<string, number>> = { F32: 0, F16: 1, BF16: 30 };

export function ggmlTypeId(type: GgufTensorType): number {
  return FLOAT_IDS[type] ?? QUANT_FORMATS[type as QuantType].ggmlType;
}

class ByteSink {
  private readonly parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void { this.parts.push(b); this.length += b.length; }
  num(type: GgufScalarType, v: number | bigint | boolean | string): void {
    if (type === 'string') { this.str(String(v)); return; }
    const size = { u8: 1, i8: 1, bool: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8 }[type];
    const b = Buffer.alloc(size);
    switch (type) {
      case 'u8': b.writeUInt8(Number(v)); break;
      case 'i8': b.writeInt8(Number(v)); break;
      case 'bool': b.writeUInt8(v ? 1 : 0); break;
      case 'u16': b.writeUInt16LE(Number(v)); break;
      case 'i16': b.writeInt16LE(Number(v)); break;
      case 'u32': b.writeUInt32LE(Number(v)); break;
      case 'i32': b.writeInt32LE(Number(v)); break;
      case 'f32': b.writeFloatLE(Number(v)); break;
      case 'u64': b.writeBigUInt64LE(BigInt(v)); break;
      case 'i64': b.writeBigInt64LE(BigInt(v)); break;
      case 'f64': b.writeDoubleLE(Number(v)); break;
    }
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.num('u64', b.length);
    this.push(b);
  }
  concat(): Buffer { return Buffer.concat(this.parts, this.length); }
}

/** The header (everything before the tensor data, padded) and each tensor's data offset. */
export function ggufHeader(meta: readonly MetaEntry[], tensors: readonly TensorOut[]): { header: Buffer; offsets: number[]; dataBytes: number } {
  const out = new ByteSink();
  out.push(Buffer.from('GGUF', 'latin1'));
  out.num('u32', 3);
  out.num('u64', tensors.length);
  out.num('u64', meta.length);
  for (const m of meta) {
    out.str(m.key);
    if ('array' in m) {
      out.num('u32', GV.array);
      out.num('u32', GV[m.type]);
      out.num('u64', m.array.length);
      for (const v of m.array) out.num(m.type, v);
    } else {
      out.num('u32', GV[m.type]);
      out.num(m.type, m.value);
    }
  }
  const offsets: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    out.str(t.name);
    out.num('u32', t.shape.length);
    for (const d of [...t.shape].reverse()) out.num('u64', d);
    out.num('u32', ggmlTypeId(t.type));
    offsets.push(offset);
    out.num('u64', offset);
    offset += alignUp(tensorBytes(t.type, t.shape, t.name));
  }
  const raw = out.concat();
  const header = Buffer.alloc(alignUp(raw.length));
  raw.copy(header);
  return { header, offsets, dataBytes: offset };
}

function alignUp(n: number): number {
  return Math.ceil(n / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
}

/** Write a GGUF file: header, then every tensor's data as its producer emits it. A producer
 * that emits a different number of bytes than type × shape is an error, and a failed write
 * leaves no file at `path` (nor a temp file). `onTensor` reports progress. */
export async function writeGgufFile(path: string, meta: readonly MetaEntry[], tensors: readonly TensorOut[],
  onTensor?: (i: number, t: TensorOut) => void): Promise<void> {
  const { header, offsets } = ggufHeader(meta, tensors);
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  let pos = 0;
  const put = (b: Uint8Array): void => {
    let done = 0;
    while (done < b.byteLength) done += writeSync(fd, b, done, b.byteLength - done, pos + done);
    pos += b.byteLength;
  };
  try {
    put(header);
    const dataStart = header.length;
    for (const [i, t] of tensors.entries()) {
      const want = tensorBytes(t.type, t.shape, t.name);
      const start = dataStart + offsets[i]!;
      if (pos < start) put(new Uint8Array(start - pos));
      await t.produce(put);
      if (pos - start !== want) throw new Error(`gguf writer: ${t.name} produced ${pos - start} bytes, expected ${want} (${t.type} ${JSON.stringify(t.shape)})`);
      onTensor?.(i, t);
    }
    const end = alignUp(pos);
    if (end > pos) put(new Uint8Array(end - pos));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, path);
  } catch (e) {
    try { closeSync(fd); } catch { /* already closed */ }
    rmSync(tmp, { force: true });
    throw e;
  }
}
