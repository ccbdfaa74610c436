// Validate a GenerateRequest and turn it into an engine Request: render the chat
// template, tokenize, resolve sampling defaults; ranges, limits, stop ids and the length
// clamp are the request rules' (request-rules.ts).
import { randomInt } from 'node:crypto';
import { validateMessages, type ChatMessage, type RenderOptions } from '../tokenizer/chat.js';
import { encodeChat, type Place } from '../tokenizer/safe-chat.js';
import { promptOpensThinking, ReasoningSplitter } from '../tokenizer/reasoning.js';
import { messageEnds } from './message-ends.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { AnyModel } from '../model/model.js';
import { DeltaserveError } from '../util/errors.js';
import { Rng } from '../util/rng.js';
import type { TokenLogprob } from './sample-batch.js';
import { OutputText } from './output.js';
import type { LogitsAdjust } from './logits-adjust.js';
import { setPromptPoints } from './prefix.js';
import { Request } from './request.js';
import { checkParam, generationBudget, leavesRoom, REQUEST_PARAMS as P, requestStopIds, stopStrings, validateSampling } from './request-rules.js';
import { type SamplingParams, TokenHistory } from './sampler.js';

export interface GenerateRequest {
  /** Exactly one of prompt (raw text, no template), messages (chat) or promptIds. */
  readonly prompt?: string;
  readonly messages?: readonly ChatMessage[];
  readonly promptIds?: readonly number[];
  /** Token counts at which a message of the prompt ends (prefix-cache snapshot points;
   * chat requests get them from the template, callers passing promptIds may give them). */
  readonly messageBoundaries?: readonly number[];
  /** Chat only: enable_thinking for the template (default true). */
  readonly think?: boolean;
  readonly chatTemplateKwargs?: Record<string, unknown>;
  /** Default: up to the context length. */
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly topP?: number;
  readonly topK?: number;
  readonly minP?: number;
  readonly repetitionPenalty?: number;
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  /** Same seed ⇒ same output. Default: random. */
  readonly seed?: number;
  readonly stop?: string | readonly string[];
  readonly stopTokenIds?: readonly number[];
  readonly ignoreEos?: boolean;
  readonly signal?: AbortSignal;
  /** Called with the raw logits (before any sampling transform) of every emitted token's
   * position: exactly one call per generated token, in order — also when tokens come from
   * accepted speculative drafts. */
  readonly captureLogits?: (logits: Float32Array) => void;
  /** Logit bias and/or a constraint on the generated ids (see logits-adjust.ts). */
  readonly logitsAdjust?: LogitsAdjust;
  /** Log-probabilities of every emitted token (raw distribution, before temperature,
   * penalties and cuts) with the `top` most likely ids (REQUEST_PARAMS.topLogprobs), one onToken call per
   * generated token, in order. */
  readonly logprobs?: { readonly top: number; readonly onToken: (e: TokenLogprob) => void };
}

/** The parts of the engine a request is built against. */
export interface RequestContext {
  readonly model: AnyModel;
  readonly tokenizer: TextTokenizer;
  readonly maxContext: number;
}

/** Prompt tokens decoded to see whether the prompt ends with `<think>` (and whitespace). */
const THINK_TAIL_TOKENS = 8;

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** Token ids of the request's prompt, and where each message of a chat prompt ends
 * (prefix-cache split points the next turn of the conversation shares; message-ends.ts).
 * `place` adds the server's own text to a chat prompt (safe-chat.ts). */
export function promptOf(ctx: RequestContext, req: GenerateRequest, place?: Place): { ids: number[]; boundaries: number[] } {
  const ids = promptIdsOf(ctx, req, place);
  const given = req.messageBoundaries ?? [];
  if (!Array.isArray(given) || !given.every((b) => Number.isInteger(b))) bad('messageBoundaries must be a list of integers');
  if (req.messages === undefined) return { ids, boundaries: [...given] };
  return { ids, boundaries: [...new Set([...given, ...messageEnds(ctx.tokenizer, ids)])].sort((x, y) => x - y) };
}

function renderOptions(req: GenerateRequest, addGenerationPrompt: boolean): RenderOptions {
  return { addGenerationPrompt, enableThinking: req.think ?? true, ...(req.chatTemplateKwargs ? { extra: req.chatTemplateKwargs } : {}) };
}

/** Token ids of the request's prompt. */
export function promptIdsOf(ctx: RequestContext, req: GenerateRequest, place?: Place): number[] {
  const given = [req.prompt !== undefined, req.messages !== undefined, req.promptIds !== undefined].filter(Boolean).length;
  if (given !== 1) bad('give exactly one of prompt, messages or prompt_ids');
  if (req.promptIds !== undefined) {
    if (!Array.isArray(req.promptIds)) bad('prompt_ids must be an array of token ids');
    const v = ctx.model.config.vocabSize;
    req.promptIds.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= v) bad(`prompt_ids[${i}] = ${String(id)} is not a token id in [0, ${v})`);
    });
    return [...req.promptIds];
  }
  if (req.prompt !== undefined) {
    if (typeof req.prompt !== 'string') bad('prompt must be a string');
    return ctx.tokenizer.encode(req.prompt);
  }
  const messages = validateMessages(req.messages);
  const template = ctx.tokenizer.chatTemplate;
  if (!template) bad('this model has no chat template; send a raw prompt instead of messages');
  return encodeChat(ctx.tokenizer, template, messages, renderOptions(req, true), place);
}

/** The request's sampling parameters, defaults filled in (temperature 0: greedy), each
 * checked by the request rules. */
export function samplingOf(req: GenerateRequest): SamplingParams {
  const p: SamplingParams = {
    temperature: req.temperature ?? 0,
    topK: req.topK ?? 0,
    topP: req.topP ?? 1,
    minP: req.minP ?? 0,
    repetitionPenalty: req.repetitionPenalty ?? 1,
    presencePenalty: req.presencePenalty ?? 0,
    frequencyPenalty: req.frequencyPenalty ?? 0,
  };
  validateSampling(p);
  return p;
}

export function buildRequest(ctx: RequestContext, id: number, req: GenerateRequest): Request {
  const { ids: promptIds, boundaries } = promptOf(ctx, req);
  if (promptIds.length === 0) bad('the prompt is empty');
  if (!leavesRoom(promptIds.length, ctx.maxContext)) {
    throw new DeltaserveError('prompt_too_long',
      `prompt is ${promptIds.length} tokens; the context length is ${ctx.maxContext}, leaving no room to generate`);
  }
  if (req.maxTokens !== undefined && req.maxTokens !== null) checkParam(P.maxTokens, req.maxTokens);
  const budget = generationBudget(promptIds.length, ctx.maxContext, req.maxTokens);
  const sampling = samplingOf(req);
  const seed = req.seed ?? randomInt(2 ** 47);
  checkParam(P.seed, seed);
  const stopIds = requestStopIds(ctx, req.ignoreEos ?? false, req.stopTokenIds ?? []);
  const output = new OutputText((ids) => ctx.tokenizer.decode(ids), promptIds, stopIds, stopStrings(req.stop));
  const r = new Request(id, id, promptIds, budget, promptIds.length + budget,
    sampling, new Rng(seed), new Rng(BigInt(seed) ^ 0x5eed_d4a7n), new TokenHistory(promptIds), output);
  r.startsInReasoning = promptOpensThinking(ctx.tokenizer.decode(promptIds.slice(-THINK_TAIL_TOKENS)));
  r.reasoning = new ReasoningSplitter(r.startsInReasoning);
  r.captureLogits = req.captureLogits ?? null;
  r.adjust = req.logitsAdjust ?? null;
  if (req.logprobs) {
    const top = req.logprobs.top;
    checkParam(P.topLogprobs, top);
    r.topLogprobs = top;
    r.onLogprob = req.logprobs.onToken;
  }
  setPromptPoints(r, boundaries, ctx.model.layout.chunk);
  return r;
}
