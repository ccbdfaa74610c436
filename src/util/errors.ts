// Errors a user can cause carry a code and a message naming the thing at fault.

export type ErrorCode =
  | 'bad_config'
  | 'bad_checkpoint'
  | 'missing_tensor'
  | 'bad_tokenizer'
  | 'bad_request'
  | 'prompt_too_long'
  | 'internal';

export class DeltaserveError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.name = 'DeltaserveError';
    this.code = code;
  }
}

export function fail(code: ErrorCode, message: string): never {
  throw new DeltaserveError(code, message);
}

/** Internal invariant check (not user-caused). */
export function assert(cond: unknown, message: string): asserts cond {
  if (!cond) throw new DeltaserveError('internal', `invariant violated: ${message}`);
}
