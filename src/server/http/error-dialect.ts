// Every error is JSON in its route's dialect: Anthropic's {"type": "error", "error": {"type",
// "message"}} for /v1/messages and every path under it (count_tokens, unknown ones), OpenAI's
// {"error": {"message", "type", "param", "code"}} for every other path (unknown or
// malformed ones included). Errors met before
// a request exists (unparsable HTTP, headers too large, a request line or body too slow) are
// written straight to the socket, in the dialect of the request line when it was received.
import { STATUS_CODES } from 'node:http';
import { ApiError, type ErrorBody } from './errors.js';

const ANTHROPIC_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error', 401: 'authentication_error', 403: 'permission_error', 404: 'not_found_error', 405: 'invalid_request_error',
  408: 'invalid_request_error', 417: 'invalid_request_error', 413: 'request_too_large', 429: 'rate_limit_error', 431: 'request_too_large', 503: 'overloaded_error',
};

/** An ApiError rendered in Anthropic's error shape (same status and headers). */
export class AnthropicError extends ApiError {
  constructor(e: ApiError) {
    super(e.status, e.message, e.param, e.code, ANTHROPIC_TYPES[e.status] ?? 'api_error', e.headers);
  }

  override body(): ErrorBody {
    return { type: 'error', error: { type: this.type, message: this.message } } as unknown as ErrorBody;
  }
}

/** Does `path` (normalized, routes.ts) speak Anthropic's dialect? */
export function isAnthropicPath(path: string | null): boolean {
  return path !== null && (path === '/v1/messages' || path.startsWith('/v1/messages/'));
}

/** `e` in the dialect of the route at `path` (null: unknown path, OpenAI's). */
export function inRouteDialect(path: string | null, e: ApiError): ApiError {
  return isAnthropicPath(path) && !(e instanceof AnthropicError) ? new AnthropicError(e) : e;
}

/** A whole HTTP/1.1 response for `e` that closes the connection (written to a raw socket). */
export function rawErrorResponse(path: string | null, e: ApiError): string {
  const err = inRouteDialect(path, e);
  const body = JSON.stringify(err.body());
  return `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? 'Error'}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}
