// One definition of every numeric request parameter (its type and range), shared by the
// CLI flags (`deltaserve generate --temperature`) and the HTTP API fields (`temperature`):
// the same value is accepted or refused the same way, with the same message, naming the
// flag or the field.

export interface NumericParam {
  /** API field name (snake_case). */
  readonly api: string;
  /** CLI flag name (without --). */
  readonly flag: string;
  readonly integer: boolean;
  readonly min: number;
  /** `Infinity` for "bounded by the context" (pass the bound to paramProblem). */
  readonly max: number;
  /** min itself is refused. */
  readonly minOpen?: boolean;
}

const p = (api: string, flag: string, integer: boolean, min: number, max: number, minOpen = false): NumericParam =>
  ({ api, flag, integer, min, max, ...(minOpen ? { minOpen } : {}) });

export const REQUEST_PARAMS = {
  temperature: p('temperature', 'temperature', false, 0, 2),
  topP: p('top_p', 'top-p', false, 0, 1, true),
  /** -1 and 0 both mean "off". */
  topK: p('top_k', 'top-k', true, -1, 1 << 30),
  minP: p('min_p', 'min-p', false, 0, 1),
  presencePenalty: p('presence_penalty', 'presence-penalty', false, -2, 2),
  frequencyPenalty: p('frequency_penalty', 'frequency-penalty', false, -2, 2),
  repetitionPenalty: p('repetition_penalty', 'repetition-penalty', false, 0, 10, true),
  seed: p('seed', 'seed', true, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER),
  /** Bounded by the context length (the caller passes it). */
  maxTokens: p('max_tokens', 'max-tokens', true, 1, Infinity),
} as const satisfies Record<string, NumericParam>;

export type RequestParamKey = keyof typeof REQUEST_PARAMS;

/**
 * Why `v` is not an acceptable value of `param`, or null when it is. `name` is what the user
 * wrote (`temperature`, `--temperature`, `max_completion_tokens`); `max` overrides an
 * unbounded maximum (the context length for max_tokens).
 */
export function paramProblem(param: NumericParam, v: unknown, name: string, max = param.max): string | null {
  const kind = param.integer ? 'an integer' : 'a number';
  if (typeof v !== 'number' || !Number.isFinite(v) || (param.integer && !Number.isInteger(v))) {
    return `${name} must be ${kind} (got ${JSON.stringify(v)})`;
  }
  if (param.integer) {
    if (v < param.min || v > max) return `${name} must be between ${param.min} and ${max} (got ${v})`;
    return null;
  }
  if (v > max || v < param.min || (param.minOpen === true && v === param.min)) {
    return `${name} must be in ${param.minOpen ? '(' : '['}${param.min}, ${max}] (got ${v})`;
  }
  return null;
}
