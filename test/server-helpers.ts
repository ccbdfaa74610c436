// Helpers for the server tests: raw JSON posts, SSE reading with early disconnect, waiting
// for the engine to drain.
import type { Engine } from '../src/engine/engine.js';

export const KERNELS = (process.env['DELTASERVE_TEST_KERNELS'] ?? 'wasm') as 'ref' | 'wasm';

export interface JsonResponse {
  status: number;
  headers: Headers;
  json: Record<string, unknown>;
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  const res = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { raw: text };
  }
  return { status: res.status, headers: res.headers, json };
}

export interface SseResult {
  status: number;
  events: Record<string, unknown>[];
  sawDone: boolean;
}

/** POST and read the SSE stream; `stopAfter` events: disconnect then (abort the fetch). */
export async function postStream(url: string, body: unknown, stopAfter = Infinity, headers: Record<string, string> = {}): Promise<SseResult> {
  const ctl = new AbortController();
  const res = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: ctl.signal,
  }).catch((e: Error) => {
    throw new Error(`fetch failed: ${String((e as { cause?: unknown }).cause ?? e)}`);
  });
  const events: Record<string, unknown>[] = [];
  let sawDone = false;
  if (!res.body) return { status: res.status, events, sawDone };
  const decoder = new TextDecoder();
  let buf = '';
  try {
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(part, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of block.split('\n')) {
          if (!line.startsWith('data: ')) continue;
          const data = line.slice(6);
          if (data === '[DONE]') sawDone = true;
          else events.push(JSON.parse(data) as Record<string, unknown>);
        }
        if (events.length >= stopAfter) {
          ctl.abort();
          return { status: res.status, events, sawDone };
        }
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e;
  }
  return { status: res.status, events, sawDone };
}

/** Wait until the engine runs nothing, then check pool integrity. Without a prefix cache
 * no KV page or state slot may remain in use; with one, cached prefixes keep theirs. */
export async function drained(engine: Engine, ms = 10_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    const s = engine.stats();
    const cached = s.prefixCache !== null;
    if (s.running === 0 && s.waiting === 0 && (cached || (s.kvPages.used === 0 && s.stateSlots.used === 0))) break;
    if (Date.now() - t0 > ms) throw new Error(`engine did not drain: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  engine.checkIntegrity();
}

type Chunk = { choices: { index: number; delta: { content?: string; reasoning_content?: string }; finish_reason: string | null }[] };

/** Concatenate streamed chat deltas per choice index. */
export function joinChat(events: readonly Record<string, unknown>[]): { content: string; reasoning: string; finish: string | null }[] {
  const out: { content: string; reasoning: string; finish: string | null }[] = [];
  for (const ev of events as unknown as Chunk[]) {
    for (const c of ev.choices ?? []) {
      const o = (out[c.index] ??= { content: '', reasoning: '', finish: null });
      o.content += c.delta.content ?? '';
      o.reasoning += c.delta.reasoning_content ?? '';
      if (c.finish_reason) o.finish = c.finish_reason;
    }
  }
  return out;
}
