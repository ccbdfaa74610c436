// Request-body validation for the OpenAI routes: typed field readers whose errors name the
// field (400 invalid_request_error, `param` set), and the sampling/length parameters shared
// by the routes; every range and limit is a rule of engine/request-rules.ts. `null` means
// "not given"; unknown fields are rejected in fields.ts.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { GenerateRequest } from '../../engine/request-builder.js';
import { type NumericParam, paramProblem, REQUEST_PARAMS as P, stopCountProblem } from '../../engine/request-rules.js';
import { invalid } from '../http/errors.js';

export type Body = Record<string, unknown>;

/** The parsed JSON body must be an object. */
export function requireObject(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid(null, 'the request body must be a JSON object');
  return body as Body;
}

function given(b: Body, key: string): boolean {
  return b[key] !== undefined && b[key] !== null;
}

export function optBool(b: Body, key: string): boolean | undefined {
  if (!given(b, key)) return undefined;
  const v = b[key];
  if (typeof v !== 'boolean') throw invalid(key, `${key} must be a boolean (got ${JSON.stringify(v)})`);
  return v;
}

export function optString(b: Body, key: string): string | undefined {
  if (!given(b, key)) return undefined;
  const v = b[key];
  if (typeof v !== 'string') throw invalid(key, `${key} must be a string (got ${JSON.stringify(v)})`);
  return v;
}

/** A request parameter checked by its one definition (shared with the CLI flags);
 * `key` is the field as sent (e.g. max_completion_tokens for max_tokens). */
export function optParam(b: Body, key: string, param: NumericParam, max?: number): number | undefined {
  if (!given(b, key)) return undefined;
  const problem = paramProblem(param, b[key], key, max);
  if (problem) throw invalid(key, problem);
  return b[key] as number;
}

export function optObject(b: Body, key: string): Body | undefined {
  if (!given(b, key)) return undefined;
  const v = b[key];
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw invalid(key, `${key} must be an object`);
  return v as Body;
}

/** Token ids: a non-empty array of integers in [0, vocab). */
export function tokenIds(v: unknown, param: string, vocab: number, allowEmpty = false): number[] {
  if (!Array.isArray(v)) throw invalid(param, `${param} must be an array of token ids`);
  if (v.length === 0 && !allowEmpty) throw invalid(param, `${param} must not be empty`);
  v.forEach((id: unknown, i) => {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab) {
      throw invalid(param, `${param}[${i}] = ${JSON.stringify(id)} is not a token id in [0, ${vocab})`);
    }
  });
  return v as number[];
}

/** Token ids (as tokenIds; an empty list is allowed) checked and packed in one loop into an
 * Int32Array, which the prepare pool hands to its worker without copying: for /detokenize,
 * whose list is bounded only by the body size (millions of ids). */
export function packedTokenIds(v: unknown, param: string, vocab: number): Int32Array {
  if (!Array.isArray(v)) throw invalid(param, `${param} must be an array of token ids`);
  const out = new Int32Array(v.length);
  for (let i = 0; i < v.length; i++) {
    const id: unknown = v[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocab) {
      throw invalid(param, `${param}[${i}] = ${JSON.stringify(id)} is not a token id in [0, ${vocab})`);
    }
    out[i] = id;
  }
  return out;
}

/** Server-wide defaults for fields a request leaves out (from the model's generation_config.json). */
export interface SamplingDefaults {
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
}

/** OpenAI's defaults (temperature 1, top_p 1), overridden by generation_config.json
 * (`do_sample: false` ⇒ greedy; its temperature / top_p / top_k when present). */
export function loadSamplingDefaults(modelDir: string): SamplingDefaults {
  const d = { temperature: 1, topP: 1, topK: 0 };
  const file = join(modelDir, 'generation_config.json');
  if (!existsSync(file)) return d;
  try {
    const g = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const n = (k: string): number | undefined => (typeof g[k] === 'number' && Number.isFinite(g[k]) ? g[k] : undefined);
    if (g['do_sample'] === false) return { temperature: 0, topP: 1, topK: 0 };
    return { temperature: n('temperature') ?? d.temperature, topP: n('top_p') ?? d.topP, topK: Math.max(0, Math.trunc(n('top_k') ?? 0)) };
  } catch {
    return d;
  }
}

export interface CommonParams {
  /** Engine request fields (sampling, limits, stop); no prompt, seed or signal yet. */
  readonly request: Omit<GenerateRequest, 'prompt' | 'messages' | 'promptIds' | 'signal' | 'seed'>;
  readonly seed: number | undefined;
  readonly n: number;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** Extra stop ids requested (besides the model's eos ids). */
  readonly stopTokenIds: readonly number[];
  /** `logit_bias`: additive biases by token id (null = none). */
  readonly logitBias: ReadonlyMap<number, number> | null;
}

/** OpenAI `logit_bias`: {"token id": bias in REQUEST_PARAMS.logitBias's range}. */
export function logitBias(b: Body, vocab: number): Map<number, number> | null {
  const o = optObject(b, 'logit_bias');
  if (!o) return null;
  const out = new Map<number, number>();
  for (const [k, v] of Object.entries(o)) {
    const id = Number(k);
    if (!/^\d+$/.test(k) || id >= vocab) throw invalid('logit_bias', `logit_bias: "${k}" is not a token id in [0, ${vocab})`);
    if (paramProblem(P.logitBias, v, k) !== null) {
      throw invalid('logit_bias', `logit_bias["${k}"] must be a number in [${P.logitBias.min}, ${P.logitBias.max}] (got ${JSON.stringify(v)})`);
    }
    out.set(id, v as number);
  }
  return out.size > 0 ? out : null;
}

/** Sampling, length, stop, n, stream: the fields the routes share, each checked by its rule
 * in engine/request-rules.ts. `temperature`: the route's rule (Anthropic's is [0, 1]). */
export function commonParams(b: Body, maxContext: number, vocab: number, defaults: SamplingDefaults, maxTokensKeys: readonly string[],
  temperature: NumericParam = P.temperature): CommonParams {
  let maxTokens: number | undefined;
  for (const key of maxTokensKeys) {
    const v = optParam(b, key, P.maxTokens, maxContext);
    if (v !== undefined && maxTokens === undefined) maxTokens = v;
  }
  const topK = optParam(b, 'top_k', P.topK);
  const stop = b['stop'];
  let stopList: string[] | undefined;
  if (stop !== undefined && stop !== null) {
    if (typeof stop === 'string') stopList = [stop];
    else if (Array.isArray(stop) && stop.every((s) => typeof s === 'string')) stopList = stop as string[];
    else throw invalid('stop', 'stop must be a string or an array of strings');
    const tooMany = stopCountProblem(stopList.length, 'stop');
    if (tooMany) throw invalid('stop', tooMany);
  }
  const stopTokenIds = given(b, 'stop_token_ids') ? tokenIds(b['stop_token_ids'], 'stop_token_ids', vocab, true) : [];
  const streamOptions = optObject(b, 'stream_options');
  const stream = optBool(b, 'stream') ?? false;
  const iu = streamOptions?.['include_usage'];
  if (iu !== undefined && iu !== null && typeof iu !== 'boolean') {
    throw invalid('stream_options.include_usage', 'stream_options.include_usage must be a boolean');
  }
  const includeUsage = iu === true;
  const request: CommonParams['request'] = {
    temperature: optParam(b, 'temperature', temperature) ?? defaults.temperature,
    topP: optParam(b, 'top_p', P.topP) ?? defaults.topP,
    topK: topK === undefined ? defaults.topK : Math.max(0, topK),
    minP: optParam(b, 'min_p', P.minP) ?? 0,
    presencePenalty: optParam(b, 'presence_penalty', P.presencePenalty) ?? 0,
    frequencyPenalty: optParam(b, 'frequency_penalty', P.frequencyPenalty) ?? 0,
    repetitionPenalty: optParam(b, 'repetition_penalty', P.repetitionPenalty) ?? 1,
    ignoreEos: optBool(b, 'ignore_eos') ?? false,
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(stopList ? { stop: stopList } : {}),
    ...(stopTokenIds.length > 0 ? { stopTokenIds } : {}),
  };
  return {
    request,
    seed: optParam(b, 'seed', P.seed),
    n: optParam(b, 'n', P.n) ?? 1,
    stream,
    includeUsage: stream && includeUsage,
    stopTokenIds,
    logitBias: logitBias(b, vocab),
  };
}
