// A test-only GGUF writer, for crafting bad and split files (never the fixtures). Metadata
// value types are given explicitly or inferred (string, bool, integer → u32 / i32, float → f32).
import { closeSync, openSync, readSync, writeFileSync } from 'node:fs';
import { readGgufHeader, type GgufMetadata, type GgufValue } from '../src/checkpoint/gguf-file.js';

export interface WTensor {
  name: string;
  /** PyTorch order (outermost first); written reversed as GGUF ne. */
  shape: number[];
  /** ggml type id (0 F32, 1 F16, 8 Q8_0, 30 BF16, …). */
  type: number;
  data: Uint8Array;
}

export interface WFile {
  version?: number;
  magic?: string;
  alignment?: number;
  /** Entries [key, value] or [key, value, ggufTypeId]. */
  metadata: [string, GgufValue, number?][];
  tensors: WTensor[];
  /** Data offsets written in the header instead of the real ones (the data stays where the
   * real offsets put it): for files whose header lies about the layout. */
  offsets?: number[];
}

class Bytes {
  private parts: Buffer[] = [];
  length = 0;
  push(b: Buffer): void { this.parts.push(b); this.length += b.length; }
  u32(x: number): void { const b = Buffer.alloc(4); b.writeUInt32LE(x); this.push(b); }
  i32(x: number): void { const b = Buffer.alloc(4); b.writeInt32LE(x); this.push(b); }
  u64(x: number | bigint): void { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(x)); this.push(b); }
  f32(x: number): void { const b = Buffer.alloc(4); b.writeFloatLE(x); this.push(b); }
  str(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  concat(): Buffer { return Buffer.concat(this.parts); }
}

function inferType(v: GgufValue): number {
  if (Array.isArray(v)) return 9;
  if (typeof v === 'string') return 8;
  if (typeof v === 'boolean') return 7;
  if (typeof v === 'bigint') return 10;
  if (Number.isInteger(v)) return (v as number) < 0 ? 5 : 4;
  return 6;
}

function writeValue(out: Bytes, v: GgufValue, type: number): void {
  switch (type) {
    case 2: { const b = Buffer.alloc(2); b.writeUInt16LE(v as number); out.push(b); break; }
    case 4: out.u32(v as number); break;
    case 5: out.i32(v as number); break;
    case 6: out.f32(v as number); break;
    case 7: out.push(Buffer.from([v ? 1 : 0])); break;
    case 8: out.str(v as string); break;
    case 10: out.u64(v as number); break;
    case 9: {
      const list = v as readonly GgufValue[];
      const item = list.length > 0 && list.every((x) => typeof x === 'number' && Number.isInteger(x)) ? 5 : inferType(list[0] ?? 0);
      out.u32(item);
      out.u64(list.length);
      for (const x of list) writeValue(out, x, item);
      break;
    }
    default: throw new Error(`gguf-writer: value type ${type} not supported`);
  }
}

export function ggufBytes(f: WFile): Buffer {
  const align = f.alignment ?? 32;
  const out = new Bytes();
  out.push(Buffer.from(f.magic ?? 'GGUF', 'latin1'));
  out.u32(f.version ?? 3);
  out.u64(f.tensors.length);
  out.u64(f.metadata.length);
  for (const [key, value, type] of f.metadata) {
    out.str(key);
    const t = type ?? inferType(value);
    out.u32(t);
    writeValue(out, value, t);
  }
  let offset = 0;
  const offsets: number[] = [];
  for (const t of f.tensors) {
    out.str(t.name);
    out.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) out.u64(d);
    out.u32(t.type);
    offset = Math.ceil(offset / align) * align;
    offsets.push(offset);
    out.u64(f.offsets?.[offsets.length - 1] ?? offset);
    offset += t.data.byteLength;
  }
  const header = out.concat();
  const dataStart = Math.ceil(header.length / align) * align;
  const file = Buffer.alloc(dataStart + offset);
  header.copy(file, 0);
  f.tensors.forEach((t, i) => file.set(t.data, dataStart + offsets[i]!));
  return file;
}

export function writeGguf(path: string, f: WFile): void {
  writeFileSync(path, ggufBytes(f));
}

const TYPE_IDS: Readonly<Record<string, number>> = { F32: 0, F16: 1, BF16: 30, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, q4_k: 12, q5_k: 13, q6_k: 14 };

export function ggufTypeId(type: string): number {
  const id = TYPE_IDS[type];
  if (id === undefined) throw new Error(`gguf-writer: unknown type ${type}`);
  return id;
}

/** The metadata entries of a parsed file, for rewriting it (types inferred; f32 values
 * stay f32, integers become u32/i32). */
export function metadataEntries(meta: GgufMetadata): [string, GgufValue][] {
  return [...meta.entries()].filter(([k]) => k !== 'general.alignment');
}

/** A GGUF file as writer input: its metadata and every tensor's bytes. */
export function readWFile(path: string): WFile {
  const h = readGgufHeader(path);
  const fd = openSync(path, 'r');
  try {
    const tensors = h.tensors.map((t): WTensor => {
      const data = new Uint8Array(t.nbytes);
      readSync(fd, data, 0, t.nbytes, t.offset);
      return { name: t.name, shape: [...t.shape], type: ggufTypeId(t.type), data };
    });
    return { metadata: metadataEntries(h.metadata), tensors };
  } finally {
    closeSync(fd);
  }
}
