// POST /v1/chat/completions with stream: true, read as server-sent events. Deltas of
// reasoning_content, content and tool_calls go to the callbacks as they arrive; the usage
// chunk (stream_options.include_usage) and its `speculative` field (MTP accept length)
// end up in the result with the times measured here.
import { apiKey, askForKey, authHeaders, errorOf } from '../shared/api.js';
import type { MessageStats, ToolCall } from './types.js';

export interface StreamCallbacks {
  onReasoning(text: string): void;
  onContent(text: string): void;
  /** The tool calls so far (arguments grow as fragments arrive). */
  onToolCalls(calls: ToolCall[]): void;
}

interface Chunk {
  choices?: { delta?: { content?: string | null; reasoning_content?: string | null;
    tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[] }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
  speculative?: { accept_length: number } | null;
  error?: { message?: string };
}

/** Stream one answer. Resolves with its stats when the stream ends; an abort through
 * `signal` resolves with what arrived (finish_reason "stopped"); server errors reject. */
export async function streamChat(body: Record<string, unknown>, signal: AbortSignal, cb: StreamCallbacks): Promise<MessageStats> {
  const sent = performance.now();
  const stats: MessageStats = {};
  let first = 0;
  let last = 0;
  const calls: { id: string; name: string; arguments: string }[] = [];
  const seen = (): void => {
    last = performance.now();
    if (first === 0) first = last;
  };
  const handle = (c: Chunk): void => {
    if (c.error) throw new Error(c.error.message ?? 'the server reported an error mid-stream');
    for (const ch of c.choices ?? []) {
      const d = ch.delta ?? {};
      if (d.reasoning_content) {
        seen();
        cb.onReasoning(d.reasoning_content);
      }
      if (d.content) {
        seen();
        cb.onContent(d.content);
      }
      for (const t of d.tool_calls ?? []) {
        seen();
        const call = (calls[t.index] ??= { id: '', name: '', arguments: '' });
        if (t.id) call.id = t.id;
        if (t.function?.name) call.name += t.function.name;
        if (t.function?.arguments) call.arguments += t.function.arguments;
        cb.onToolCalls(calls.map((x) => ({ ...x })));
      }
      if (ch.finish_reason) stats.finish_reason = ch.finish_reason;
    }
    if (c.usage) {
      stats.prompt_tokens = c.usage.prompt_tokens;
      stats.completion_tokens = c.usage.completion_tokens;
      stats.cached_tokens = c.usage.prompt_tokens_details?.cached_tokens ?? 0;
    }
    if (c.speculative) stats.accept_length = c.speculative.accept_length;
  };
  try {
    let res: Response;
    // a 401 (no key yet, or a wrong one) asks for the API key and sends again
    for (;;) {
      res = await fetch('/v1/chat/completions', {
        method: 'POST', signal, headers: { 'content-type': 'application/json', ...authHeaders() },
        body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
      });
      if (res.status !== 401) break;
      await res.body?.cancel();
      await askForKey(apiKey() ? 'That key was not accepted.' : 'This server needs an API key.');
    }
    if (!res.ok || !res.body) throw await errorOf(res);
    await readEvents(res.body, (data) => handle(JSON.parse(data) as Chunk));
  } catch (e) {
    if (!signal.aborted) throw e;
    stats.finish_reason = 'stopped';
  }
  if (first > 0) {
    stats.ttft_ms = first - sent;
    const n = stats.completion_tokens;
    if (n !== undefined && n > 1 && last > first) stats.tokens_per_second = (n - 1) / ((last - first) / 1000);
  }
  return stats;
}

/** Call `onData` with each `data:` payload of an SSE body up to `[DONE]`. The body is read
 * to its end even after `[DONE]`: cancelling it there would abort a request the server has
 * already finished (and count it as a client abort in its logs and metrics). */
async function readEvents(body: ReadableStream<Uint8Array>, onData: (data: string) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let ended = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    if (ended) continue;
    buf += decoder.decode(value, { stream: true });
    let end: number;
    while (!ended && (end = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (data === '[DONE]') ended = true;
      else if (data !== '') onData(data);
    }
  }
}
