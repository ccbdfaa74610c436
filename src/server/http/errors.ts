// HTTP API errors in OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}.
// Every failure a request can cause becomes an ApiError; anything else is a 500 that never
// leaks a stack trace to the client.
import { DeltaserveError } from '../../util/errors.js';

export { ApiError, type ErrorBody } from '../../util/api-error.js';
import { ApiError } from '../../util/api-error.js';

/** 400 invalid_request_error naming `param`. */
export function invalid(param: string | null, message: string, code: string | null = null): ApiError {
  return new ApiError(400, message, param, code);
}

/** The field an engine validation message starts with (`max_tokens must be …`, `messages[0].role …`). */
function paramOf(message: string, fallback: string | null): string | null {
  const m = /^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+)?) (?:must|may|=|is)/.exec(message);
  if (m?.[1]) return m[1].replace(/^prompt_ids/, 'prompt');
  return fallback;
}

/** Map any thrown value to an ApiError. `promptParam` names the prompt field of the route
 * ("messages" or "prompt") for prompt-level errors. */
export function toApiError(e: unknown, promptParam: string): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof DeltaserveError) {
    switch (e.code) {
      case 'prompt_too_long':
        return new ApiError(400, e.message, promptParam, 'context_length_exceeded');
      case 'bad_request':
        if (/prompt is empty|exactly one of|no chat template/.test(e.message)) return invalid(promptParam, e.message);
        if (/chat template failed/.test(e.message)) return invalid('messages', e.message);
        return invalid(paramOf(e.message, null), e.message);
      default:
        break;
    }
  }
  const msg = e instanceof Error ? e.message : String(e);
  return new ApiError(500, `internal error: ${msg}`, null, 'internal_error');
}
