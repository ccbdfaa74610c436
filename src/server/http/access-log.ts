// One structured log line per HTTP request (the access log): id, route, status, token
// counts, time to first token, total time, finish reason, client abort. The generation
// code fills a RequestRecord as events pass; server.ts writes the line when the response
// closes. Prompt text is logged only when the server was started with logPrompts.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LogFields, Logger } from '../../util/log.js';

/** What the engine reported for one HTTP request (summed over its choices). */
export interface RequestRecord {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  /** ms from arrival to the first generated token of any choice. */
  ttftMs: number | null;
  /** One per finished choice, in finishing order. */
  finishReasons: string[];
  /** The error messages of choices that finished with an error. */
  errors: string[];
}

export function newRecord(): RequestRecord {
  return { promptTokens: 0, completionTokens: 0, cachedTokens: 0, ttftMs: null, finishReasons: [], errors: [] };
}

/** The client's `x-request-id` when it is a sane token (≤ 128 chars of [\w.:-]), else a new id. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  if (typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given)) return given;
  return `req-${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}

export interface AccessLogEntry {
  readonly id: string;
  readonly method: string;
  readonly route: string;
  readonly res: ServerResponse;
  readonly arrival: number;
  readonly record: RequestRecord;
  /** The parsed request body, when prompts may be logged. */
  readonly body?: unknown;
}

/** The prompt part of a body: chat `messages`, or `prompt` (completions, tokenize). */
function promptOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as Record<string, unknown>;
  return b['messages'] ?? b['prompt'] ?? b['input'];
}

const PROBES = new Set(['/health', '/metrics']);

export function logRequest(logger: Logger, e: AccessLogEntry, logPrompts: boolean): void {
  const r = e.record;
  const status = e.res.statusCode;
  const fields: LogFields = {
    id: e.id,
    method: e.method,
    route: e.route,
    status,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cached_tokens: r.cachedTokens,
    // prompt tokens prefilled again despite a prefix-cache hit (null: no hit)
    reprefill_tokens: r.cachedTokens > 0 ? r.promptTokens - r.cachedTokens : null,
    ttft_ms: r.ttftMs === null ? null : Math.round(r.ttftMs * 10) / 10,
    total_ms: Math.round((performance.now() - e.arrival) * 10) / 10,
    finish_reason: r.finishReasons.length === 0 ? null : r.finishReasons.length === 1 ? r.finishReasons[0] : r.finishReasons,
    client_abort: !e.res.writableFinished,
    ...(r.errors.length > 0 ? { error: r.errors.length === 1 ? r.errors[0] : r.errors } : {}),
    ...(logPrompts && promptOf(e.body) !== undefined ? { prompt: promptOf(e.body) } : {}),
  };
  // A generation that failed mid-stream (status 200 already sent) is an error too.
  // 503 is the draining server doing its job: a warning, not an error.
  // Successful probes (/health, /metrics) come every few seconds: debug.
  if ((status >= 500 && status !== 503) || r.finishReasons.includes('error')) logger.error('request', fields);
  else if (status >= 400) logger.warn('request', fields);
  else if (PROBES.has(e.route)) logger.debug('request', fields);
  else logger.info('request', fields);
}
