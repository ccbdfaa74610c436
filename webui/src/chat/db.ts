// Conversations in IndexedDB (database "deltaserve", store "conversations", key id), and
// the JSON export / import format {format: "deltaserve-conversations", version: 1, conversations}.
import type { AssistantMessage, Conversation, Message, MessageStats } from './types.js';

const DB = 'deltaserve';
const STORE = 'conversations';

function request<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error ?? new Error('IndexedDB request failed'));
  });
}

export class ConversationStore {
  private constructor(private readonly db: IDBDatabase) {}

  static async open(): Promise<ConversationStore> {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => {
      if (!r.result.objectStoreNames.contains(STORE)) r.result.createObjectStore(STORE, { keyPath: 'id' });
    };
    return new ConversationStore(await request(r));
  }

  private store(mode: IDBTransactionMode): IDBObjectStore {
    return this.db.transaction(STORE, mode).objectStore(STORE);
  }

  /** Every conversation, most recently updated first. */
  async list(): Promise<Conversation[]> {
    const all = await request(this.store('readonly').getAll() as IDBRequest<Conversation[]>);
    return all.sort((a, b) => b.updated - a.updated);
  }

  async put(c: Conversation): Promise<void> {
    await request(this.store('readwrite').put(c));
  }

  async delete(id: string): Promise<void> {
    await request(this.store('readwrite').delete(id));
  }
}

export function newConversation(): Conversation {
  const now = Date.now();
  return { id: crypto.randomUUID(), title: 'New chat', created: now, updated: now, messages: [] };
}

export function exportJson(list: readonly Conversation[]): string {
  return JSON.stringify({ format: 'deltaserve-conversations', version: 1, conversations: list }, null, 2);
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkMessage(m: unknown, where: string): Message {
  if (!isObj(m) || typeof m['role'] !== 'string' || typeof m['content'] !== 'string') {
    throw new Error(`${where} must be an object with a role and a text content`);
  }
  if (m['role'] === 'assistant') return assistantOf(m, where);
  if (m['role'] === 'user') return userOf(m['content'], m['images'], where);
  if (m['role'] === 'tool' && typeof m['tool_call_id'] === 'string') {
    return { role: 'tool', tool_call_id: m['tool_call_id'], name: String(m['name'] ?? ''), content: m['content'] };
  }
  throw new Error(`${where}.role must be user, assistant or tool (with tool_call_id)`);
}

/** A user message of a file; its images must be data: image URLs (the page shows them). */
function userOf(content: string, images: unknown, where: string): Message {
  if (images === undefined) return { role: 'user', content };
  if (!Array.isArray(images)) throw new Error(`${where}.images must be a list`);
  return {
    role: 'user', content,
    images: images.map((im: unknown, k) => {
      if (!isObj(im) || typeof im['url'] !== 'string' || !/^data:image\/[\w.+-]+;base64,/.test(im['url'])) {
        throw new Error(`${where}.images[${k}] must be {url: "data:image/...;base64,...", name}`);
      }
      return { url: im['url'], name: typeof im['name'] === 'string' ? im['name'] : `image ${k + 1}` };
    }),
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** An assistant message of a file, keeping only fields of the right types (the page
 * renders them: a stats value that is not a number would not format). */
function assistantOf(m: Record<string, unknown>, where: string): Message {
  const out: AssistantMessage = { role: 'assistant', content: m['content'] as string, reasoning: str(m['reasoning']) ?? '' };
  if (Array.isArray(m['tool_calls'])) {
    out.tool_calls = m['tool_calls'].map((c: unknown, i) => {
      const o = isObj(c) ? c : {};
      if (typeof o['id'] !== 'string' || typeof o['name'] !== 'string' || typeof o['arguments'] !== 'string') {
        throw new Error(`${where}.tool_calls[${i}] must have string id, name and arguments`);
      }
      return { id: o['id'], name: o['name'], arguments: o['arguments'] };
    });
  }
  if (isObj(m['stats'])) {
    const stats: Record<string, number | string> = {};
    for (const [k, v] of Object.entries(m['stats'])) {
      if (k === 'finish_reason' ? typeof v === 'string' : typeof v === 'number' && Number.isFinite(v)) stats[k] = v as number | string;
    }
    out.stats = stats as MessageStats;
  }
  const error = str(m['error']);
  if (error !== undefined) out.error = error;
  const schema = str(m['schema']);
  if (schema !== undefined) out.schema = schema;
  return out;
}

/** Conversations of an export file (or a bare list of them); each gets a fresh id so an
 * import never overwrites a conversation. Throws a message naming the first problem. */
export function parseImport(text: string): Conversation[] {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (e) {
    throw new Error(`the file is not JSON: ${(e as Error).message}`);
  }
  const list = Array.isArray(data) ? data : isObj(data) ? data['conversations'] : undefined;
  if (!Array.isArray(list)) throw new Error('expected {"conversations": [...]} or a list of conversations');
  return list.map((c: unknown, i) => {
    if (!isObj(c) || !Array.isArray(c['messages'])) throw new Error(`conversations[${i}] must have a messages list`);
    const now = Date.now();
    return {
      id: crypto.randomUUID(),
      title: typeof c['title'] === 'string' && c['title'].trim() !== '' ? c['title'] : `Imported chat ${i + 1}`,
      created: typeof c['created'] === 'number' ? c['created'] : now,
      updated: now,
      messages: c['messages'].map((m: unknown, j) => checkMessage(m, `conversations[${i}].messages[${j}]`)),
      ...(Number.isInteger(c['imagesFrom']) && (c['imagesFrom'] as number) > 0 ? { imagesFrom: c['imagesFrom'] as number } : {}),
    };
  });
}
