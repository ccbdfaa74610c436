// The request rules: the one place that decides what a generation request may ask for.
// Every numeric range and limit of a request (sampling parameters, max_tokens, n, stop
// strings, top logprobs, logit bias, prompts per request, thinking budget), the ids that end
// generation, and the length clamp (prompt + max_tokens within the context) live here.
// Routes and CLI flags map their input onto these definitions and keep only the *names*
// (`temperature`, `--temperature`, `max_completion_tokens`): the same value is accepted or
// refused the same way everywhere, with the message naming what the user wrote. The engine
// (request-builder.ts) applies the same rules once more to what reaches it directly.
import { DeltaserveError } from '../util/errors.js';
import type { SamplingParams } from './sampler.js';

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

/** The one table of numeric request parameters. Where an API legitimately differs from the
 * OpenAI range, the difference is its own entry here (anthropicTemperature). */
export const REQUEST_PARAMS = {
  temperature: p('temperature', 'temperature', false, 0, 2),
  /** Anthropic Messages API: temperature is [0, 1] there. */
  anthropicTemperature: p('temperature', 'temperature', false, 0, 1),
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
  /** Choices per prompt. */
  n: p('n', 'n', true, 1, 16),
  /** Most likely alternatives reported per token (chat `top_logprobs`, completions `logprobs`). */
  topLogprobs: p('top_logprobs', 'logprobs', true, 0, 20),
  /** One `logit_bias` entry's value. */
  logitBias: p('logit_bias', 'logit-bias', false, -100, 100),
} as const satisfies Record<string, NumericParam>;

export type RequestParamKey = keyof typeof REQUEST_PARAMS;

/** Counted limits of a request (not a value's range). */
export const REQUEST_LIMITS = {
  /** Stop strings per request. */
  stopStrings: 16,
  /** Prompts in one /v1/completions request (a list of prompts). */
  promptsPerRequest: 32,
  /** Anthropic `thinking.budget_tokens` minimum (Anthropic's API refuses smaller budgets;
   * so does this one, so clients tested here work there). */
  minThinkingBudget: 1024,
  /** /v1/completions `max_tokens` when not given (OpenAI's default). */
  completionsDefaultMaxTokens: 16,
} as const;

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
    if (max === Infinity && v < param.min) {
      return `${name} must be ${param.min === 1 ? 'a positive integer' : `an integer ≥ ${param.min}`} (got ${v})`;
    }
    if (v < param.min || v > max) return `${name} must be between ${param.min} and ${max} (got ${v})`;
    return null;
  }
  if (v > max || v < param.min || (param.minOpen === true && v === param.min)) {
    return `${name} must be in ${param.minOpen ? '(' : '['}${param.min}, ${max}] (got ${v})`;
  }
  return null;
}

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** Throws bad_request when `v` is not an acceptable value of `param` (named by its API field). */
export function checkParam(param: NumericParam, v: unknown, name = param.api, max = param.max): void {
  const problem = paramProblem(param, v, name, max);
  if (problem) bad(problem);
}

const SAMPLING_KEYS = ['temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'presencePenalty', 'frequencyPenalty'] as const;

/** Every sampling parameter within its range (errors name the API field). */
export function validateSampling(s: SamplingParams): void {
  for (const key of SAMPLING_KEYS) checkParam(REQUEST_PARAMS[key], s[key]);
}

/** Why a stop list holds too many strings, or null. `name` is the field as the client spelled it. */
export function stopCountProblem(count: number, name: string): string | null {
  const max = REQUEST_LIMITS.stopStrings;
  return count > max ? `${name} may hold at most ${max} strings (got ${count})` : null;
}

/** The stop strings of a request (`stop`: one string or a list): shape and count checked,
 * empty strings dropped. */
export function stopStrings(stop: unknown, name = 'stop'): string[] {
  if (stop === undefined || stop === null) return [];
  const list: unknown = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) bad(`${name} must be a string or an array of strings`);
  const problem = stopCountProblem(list.length, name);
  if (problem) bad(problem);
  return (list as string[]).filter((s) => s.length > 0);
}

/** What stop ids are derived from: the model's config and its tokenizer. */
export interface StopSource {
  readonly model: { readonly config: { readonly eosTokenIds: readonly number[] } };
  readonly tokenizer: { stopIds(): readonly number[] };
}

/** The ids that end generation for this model (eos ids of the config and the tokenizer). */
export function modelStopIds(src: StopSource): number[] {
  return [...new Set([...src.model.config.eosTokenIds, ...src.tokenizer.stopIds()])];
}

/** The ids that end a request's generation: the model's (unless `ignoreEos`) and the
 * request's own `stop_token_ids`. */
export function requestStopIds(src: StopSource, ignoreEos: boolean, extra: readonly number[] = []): Set<number> {
  const ids = new Set<number>(ignoreEos ? [] : modelStopIds(src));
  for (const id of extra) ids.add(id);
  return ids;
}

/** A prompt of `promptLength` tokens leaves room to generate at least one token. */
export function leavesRoom(promptLength: number, maxContext: number): boolean {
  return promptLength < maxContext;
}

/** The length clamp: tokens a request may generate, `maxTokens` (undefined = up to the
 * context) cut to the room the prompt leaves. */
export function generationBudget(promptLength: number, maxContext: number, maxTokens: number | undefined): number {
  return Math.min(maxTokens ?? Infinity, maxContext - promptLength);
}
