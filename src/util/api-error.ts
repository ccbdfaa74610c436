// An error a request can cause, with the HTTP status, the field at fault and the code the
// client sees (OpenAI's JSON shape: {"error": {"message", "type", "param", "code"}}). Below
// the server so that the prompt frontend's worker pool can answer with one (503 while
// shutting down, 413 when a prompt exhausts a worker); server/http/errors.ts re-exports it.

export interface ErrorBody {
  readonly error: { readonly message: string; readonly type: string; readonly param: string | null; readonly code: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type: string = status >= 500 ? 'server_error' : 'invalid_request_error',
    /** Extra response headers (Retry-After, WWW-Authenticate, ...). */
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  body(): ErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}
