// Prefix-cache persistence: the radix tree's snapshots and the KV pages they need, in
// one versioned file, so a restarted server hits on its first request.
//
// File (little-endian):  "DSPREFIX" | u32 version | u32 headerBytes | header JSON | body
//   header: { identity, pageSize, kvDim, kvLayers, mtpLayers, numLinear, convSize, ssmSize,
//             hidden, pages, entries: [{ tokens, pages, chunkedTo }], bodyBytes, bodySha256 }
//   body:   pages[i]: for every KV layer (target, then MTP): K rows then V rows
//           [pageSize, kvDim] f32; then entries[j]: for every linear layer conv [convSize]
//           and ssm [ssmSize] f32, then hidden [H] f32.
// `identity` names the model and everything that changes its numerics (the caller hashes
// it); a file whose identity, version, geometry, length or checksum differs is rejected
// whole and nothing is loaded. A save is planned here (planStore) and streamed to disk by
// store-writer.ts: a temporary file, fsynced and renamed into place, so a crash or a full
// disk mid-write leaves the previous file.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KvPool } from './kv-pool.js';
import type { PoolRange, PoolTensor } from './pool-storage.js';
import type { RadixCache } from './radix-cache.js';
import type { StatePool } from './state-pool.js';

// 2: entry tokens are cache keys (id·2 + 1 where the request's prefill ends a chunk, engine/prefix.ts)
export const STORE_VERSION = 2;
const MAGIC = 'DSPREFIX';
export const STORE_FILE = 'prefix-cache.bin';

interface Geometry {
  readonly pageSize: number;
  readonly kvDim: number;
  readonly kvLayers: number;
  readonly mtpLayers: number;
  readonly numLinear: number;
  readonly convSize: number;
  readonly ssmSize: number;
  readonly hidden: number;
}

interface Entry {
  readonly tokens: number[];
  readonly pages: number[]; // indices into the file's pages
  readonly chunkedTo: number;
}

interface Header extends Geometry {
  readonly identity: string;
  readonly pages: number;
  readonly entries: Entry[];
  readonly bodyBytes: number;
  readonly bodySha256: string;
}

export interface StoreResult {
  readonly snapshots: number;
  readonly bytes: number;
}

function geometry<T extends PoolTensor>(kv: KvPool<T>, state: StatePool<T>, hidden: number): Geometry {
  const v = state.view(0)[0];
  return {
    pageSize: kv.pageSize, kvDim: kv.layers.length + kv.mtpLayers.length > 0 ? kv.kvDim : 0,
    kvLayers: kv.layers.length, mtpLayers: kv.mtpLayers.length, numLinear: state.numLinear,
    convSize: v?.conv.length ?? 0, ssmSize: v?.ssm.length ?? 0, hidden,
  };
}

const pageFloats = (g: Geometry): number => 2 * (g.kvLayers + g.mtpLayers) * g.pageSize * g.kvDim;
const entryFloats = (g: Geometry): number => g.numLinear * (g.convSize + g.ssmSize) + g.hidden;

/** A save, planned: the file's head (magic, version, header JSON whose bodySha256 is a
 * placeholder of 64 characters at byte `digestAt`), the checksum's prefix (the entries as
 * JSON) and the body in file order, as ranges of pool tensors (read them back through the
 * pools' storage) and host rows (the snapshots' hidden). The ranges hold the snapshots'
 * bits while the cache evicts nothing (evicted pages and slots are reused): read them
 * before that. */
export interface StorePlan<T extends PoolTensor = Float32Array> {
  readonly file: string;
  readonly head: Buffer;
  readonly digestAt: number;
  readonly hashPrefix: string;
  readonly bodyBytes: number;
  readonly snapshots: number;
  pieces(): Generator<PoolRange<T> | Float32Array>;
}

const DIGEST_PLACEHOLDER = '0'.repeat(64);

/** Plan writing the cache's snapshots, most recently used first while they fit in
 * `maxBytes` (LRU bound), to DIR/prefix-cache.bin. Copies nothing. */
export function planStore<T extends PoolTensor>(dir: string, identity: string, cache: RadixCache, kv: KvPool<T>, state: StatePool<T>,
  hidden: number, maxBytes: number): StorePlan<T> {
  const g = geometry(kv, state, hidden);
  const pageBytes = pageFloats(g) * 4;
  const entryBytes = entryFloats(g) * 4;
  const pageIndex = new Map<number, number>();
  const chosen: { entry: Entry; slot: number; hidden: Float32Array }[] = [];
  let bytes = 0;
  for (const s of cache.list().reverse()) {
    const fresh = new Set(s.pages.filter((p) => !pageIndex.has(p)));
    const cost = fresh.size * pageBytes + entryBytes + s.tokens.length * 8;
    if (bytes + cost > maxBytes) continue;
    bytes += cost;
    for (const p of fresh) pageIndex.set(p, pageIndex.size);
    chosen.push({ entry: { tokens: s.tokens, pages: s.pages.map((p) => pageIndex.get(p)!), chunkedTo: s.snap.chunkedTo }, slot: s.snap.slot, hidden: s.snap.hidden });
  }
  chosen.reverse(); // least recently used first: loading in file order restores the LRU order
  const pages = [...pageIndex.keys()];
  const entries = chosen.map((c) => c.entry);
  const bodyBytes = 4 * (pages.length * pageFloats(g) + chosen.length * entryFloats(g));
  const header: Header = {
    ...g, identity, pages: pages.length, entries, bodyBytes, bodySha256: DIGEST_PLACEHOLDER,
  };
  // padded with spaces to a multiple of 4 bytes: the body then loads as a Float32Array view
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const head = Buffer.alloc(16 + Math.ceil(json.length / 4) * 4, ' ');
  head.write(MAGIC, 0, 'latin1');
  head.writeUInt32LE(STORE_VERSION, 8);
  head.writeUInt32LE(head.length - 16, 12);
  json.copy(head, 16);
  const rows = g.pageSize * g.kvDim;
  return {
    file: join(dir, STORE_FILE), head, digestAt: head.indexOf(`"bodySha256":"${DIGEST_PLACEHOLDER}"`) + '"bodySha256":"'.length,
    hashPrefix: JSON.stringify(entries), bodyBytes, snapshots: chosen.length,
    *pieces() {
      for (const page of pages) {
        for (const l of [...kv.layers, ...kv.mtpLayers]) {
          yield { t: l.k, offset: page * rows, length: rows };
          yield { t: l.v, offset: page * rows, length: rows };
        }
      }
      for (const c of chosen) {
        // a slot is [layer][conv | ssm]: the file's order for its entry
        const t = state.slotTensor(c.slot);
        yield { t, offset: 0, length: t.length };
        yield c.hidden;
      }
    },
  };
}

/** sha256 over the entries (as JSON) and the body: a flipped bit anywhere but the
 * geometry fields (checked on their own) is caught. (A save computes the same digest as
 * it streams: StorePlan.hashPrefix, then the body.) */
function checksum(entries: readonly Entry[], body: Buffer): string {
  return createHash('sha256').update(JSON.stringify(entries)).update(body).digest('hex');
}

function entriesValid(h: Header): boolean {
  return Array.isArray(h.entries) && h.entries.every((e) => Array.isArray(e.tokens) && Array.isArray(e.pages) &&
    e.tokens.length > 0 && e.pages.length === Math.ceil(e.tokens.length / h.pageSize) &&
    e.pages.every((i) => Number.isInteger(i) && i >= 0 && i < h.pages) && e.tokens.every((t) => Number.isInteger(t)) &&
    Number.isInteger(e.chunkedTo) && e.chunkedTo >= 0 && e.chunkedTo <= e.tokens.length);
}

/** Why `buf` cannot be loaded, or its header. */
function parse(buf: Buffer, identity: string, g: Geometry): Header | string {
  if (buf.length < 16 || buf.toString('latin1', 0, 8) !== MAGIC) return 'not a deltaserve prefix-cache file';
  const version = buf.readUInt32LE(8);
  if (version !== STORE_VERSION) return `format version ${version}, this build reads ${STORE_VERSION}`;
  const hlen = buf.readUInt32LE(12);
  if (16 + hlen > buf.length) return 'truncated header';
  let h: Header;
  try {
    h = JSON.parse(buf.toString('utf8', 16, 16 + hlen)) as Header;
  } catch {
    return 'corrupt header';
  }
  if (h.identity !== identity) return 'written for another model or another numerics configuration';
  for (const k of Object.keys(g) as (keyof Geometry)[]) if (h[k] !== g[k]) return `${k} is ${String(h[k])}, this engine has ${g[k]}`;
  const body = buf.subarray(16 + hlen);
  if (!entriesValid(h)) return 'corrupt header (entries)';
  if (body.length !== h.bodyBytes || h.bodyBytes !== 4 * (h.pages * pageFloats(g) + h.entries.length * entryFloats(g))) return 'truncated body';
  if (checksum(h.entries, body) !== h.bodySha256) return 'checksum mismatch (corrupt file)';
  return h;
}

/** Load DIR/prefix-cache.bin into an empty-ish cache. Returns what was loaded, or the
 * reason nothing was (the file is then ignored). Entries that find no free page or state
 * slot are skipped. */
export function loadStore<T extends PoolTensor>(dir: string, identity: string, cache: RadixCache, kv: KvPool<T>, state: StatePool<T>,
  hidden: number): StoreResult | { readonly rejected: string } | null {
  const file = join(dir, STORE_FILE);
  if (!existsSync(file)) return null;
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch (e) {
    return { rejected: `cannot read ${file}: ${(e as Error).message}` };
  }
  const g = geometry(kv, state, hidden);
  const h = parse(buf, identity, g);
  if (typeof h === 'string') return { rejected: `${file}: ${h}` };
  const at0 = buf.byteOffset + buf.length - h.bodyBytes;
  const body = at0 % 4 === 0 ? new Float32Array(buf.buffer, at0, h.bodyBytes / 4) : new Float32Array(buf.buffer.slice(at0, at0 + h.bodyBytes));
  const pages = kv.alloc(Math.min(h.pages, kv.freePages));
  if (!pages || pages.length < h.pages) {
    if (pages) kv.release(pages);
    return { rejected: `${file}: needs ${h.pages} KV pages, ${kv.freePages} are free` };
  }
  let at = 0;
  const rows = g.pageSize * g.kvDim;
  for (const page of pages) {
    for (const l of [...kv.layers, ...kv.mtpLayers]) {
      kv.storage.write(l.k, page * rows, body.subarray(at, at + rows));
      kv.storage.write(l.v, page * rows, body.subarray(at + rows, at + 2 * rows));
      at += 2 * rows;
    }
  }
  let loaded = 0;
  for (const e of h.entries) {
    const slot = state.freeSlots > 0 ? state.alloc() : null;
    if (slot === null) break;
    const slotFloats = g.numLinear * (g.convSize + g.ssmSize);
    state.storage.write(state.slotTensor(slot), 0, body.subarray(at, at + slotFloats));
    at += slotFloats;
    const snapHidden = body.slice(at, at + g.hidden);
    at += g.hidden;
    if (cache.insert(e.tokens, e.pages.map((i) => pages[i]!), { slot, hidden: snapHidden, chunkedTo: e.chunkedTo })) loaded++;
  }
  kv.release(pages); // the tree keeps the pages its nodes and tails retained
  return { snapshots: loaded, bytes: buf.length };
}
