// The Responses store (`store: true`): finished responses by id, with the conversation each one
// ends, so `previous_response_id` can continue it and `item_reference` inputs can name its items.
//
// Bounded: at most `maxBytes` of JSON, least recently used dropped first; an entry expires
// `ttlSeconds` after it was stored. With a directory (beside the prefix cache) every entry is
// also a file `<dir>/<id>.json`, written atomically, so a restarted server finds its
// conversations again; expired or evicted entries lose their file too. A failing disk never
// fails a request: the entry stays in memory and the error is logged. Entries hold user
// input: files are 0600 in a 0700 directory (modes left by older versions are fixed at load).
import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../util/log.js';

export type Item = Record<string, unknown>;

export interface StoredResponse {
  readonly id: string;
  /** The response object as it was returned. */
  readonly response: Item;
  /** The whole conversation in Responses items: the earlier turns, this request's input
   * (references resolved) and this response's output items. */
  readonly conversation: readonly Item[];
  /** Date.now() when stored. */
  readonly storedAt: number;
}

export interface StoreOptions {
  readonly maxBytes: number;
  readonly ttlSeconds: number;
  /** Keep entries on disk here too (made when missing; made 0700: the store's own directory). */
  readonly dir?: string;
  readonly log?: Logger;
}

interface Entry {
  readonly value: StoredResponse;
  readonly bytes: number;
}

const ID_RE = /^[A-Za-z0-9_-]{1,128}$/;
export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

/** Restrict `path` to `mode` if it grants more (group or others). */
function restrict(path: string, mode: number): void {
  if ((statSync(path).mode & 0o777 & ~mode) !== 0) chmodSync(path, mode);
}

export class ResponseStore {
  /** Insertion order is recency order: the first entry is the least recently used. */
  private readonly entries = new Map<string, Entry>();
  /** Item id → id of the newest stored response whose conversation holds it. */
  private readonly items = new Map<string, string>();
  private bytes = 0;

  constructor(private readonly opts: StoreOptions) {
    if (opts.dir !== undefined) this.load(opts.dir);
  }

  /** Bytes held (JSON text of every entry). */
  get size(): number {
    return this.bytes;
  }

  get count(): number {
    return this.entries.size;
  }

  put(value: StoredResponse): void {
    const text = JSON.stringify(value);
    this.remove(value.id);
    this.insert(value, text.length);
    this.sweep();
    if (this.entries.has(value.id)) this.write(value.id, text);
  }

  /** A live entry (refreshes its recency), or null when unknown or expired. */
  get(id: string): StoredResponse | null {
    const e = this.entries.get(id);
    if (!e) return null;
    if (this.expired(e.value)) {
      this.remove(id);
      return null;
    }
    this.entries.delete(id);
    this.entries.set(id, e);
    return e.value;
  }

  delete(id: string): boolean {
    const live = this.get(id) !== null;
    this.remove(id);
    return live;
  }

  /** An item of a stored conversation by its id, or null. */
  item(id: string): Item | null {
    const owner = this.items.get(id);
    const r = owner === undefined ? null : this.get(owner);
    return r?.conversation.find((it) => it['id'] === id) ?? null;
  }

  private expired(v: StoredResponse): boolean {
    return Date.now() - v.storedAt > this.opts.ttlSeconds * 1000;
  }

  private insert(value: StoredResponse, bytes: number): void {
    this.entries.set(value.id, { value, bytes });
    this.bytes += bytes;
    for (const it of value.conversation) if (typeof it['id'] === 'string') this.items.set(it['id'], value.id);
  }

  private remove(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.entries.delete(id);
    this.bytes -= e.bytes;
    for (const it of e.value.conversation) if (typeof it['id'] === 'string' && this.items.get(it['id']) === id) this.items.delete(it['id']);
    if (this.opts.dir !== undefined) this.unlink(id);
  }

  /** Drop expired entries, then the least recently used until the bytes fit. */
  private sweep(): void {
    for (const [id, e] of this.entries) if (this.expired(e.value)) this.remove(id);
    for (const id of this.entries.keys()) {
      if (this.bytes <= this.opts.maxBytes) break;
      this.remove(id);
    }
  }

  private write(id: string, text: string): void {
    const dir = this.opts.dir;
    if (dir === undefined) return;
    const file = join(dir, `${id}.json`);
    try {
      writeFileSync(`${file}.tmp`, text, { mode: FILE_MODE });
      restrict(`${file}.tmp`, FILE_MODE); // a leftover temporary file keeps its old mode
      renameSync(`${file}.tmp`, file);
    } catch (e) {
      this.opts.log?.warn('responses store: cannot write to disk (kept in memory)', { id, err: e });
    }
  }

  private unlink(id: string): void {
    try {
      rmSync(join(this.opts.dir!, `${id}.json`), { force: true });
    } catch (e) {
      this.opts.log?.warn('responses store: cannot remove a file', { id, err: e });
    }
  }

  /** Read the entries of an earlier run, oldest first (so recency follows storage time). */
  private load(dir: string): void {
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    restrict(dir, DIR_MODE);
    const found: { value: StoredResponse; bytes: number }[] = [];
    for (const name of readdirSync(dir)) {
      if (!name.endsWith('.json') || !ID_RE.test(name.slice(0, -5))) continue;
      try {
        const text = readFileSync(join(dir, name), 'utf8');
        restrict(join(dir, name), FILE_MODE);
        const v = JSON.parse(text) as StoredResponse;
        if (v.id !== name.slice(0, -5) || typeof v.storedAt !== 'number' || !Array.isArray(v.conversation)) throw new Error('not a stored response');
        found.push({ value: v, bytes: text.length });
      } catch (e) {
        this.opts.log?.warn('responses store: skipping an unreadable file', { file: name, err: e });
      }
    }
    found.sort((a, b) => a.value.storedAt - b.value.storedAt);
    for (const f of found) this.insert(f.value, f.bytes);
    this.sweep();
  }
}

/** The Responses state of a server: its store and the key that seals reasoning. */
export interface ResponsesConfig {
  readonly store: ResponseStore;
  readonly key: Buffer;
}
