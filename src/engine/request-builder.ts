// Validate an EngineRequest (prompt ids, split points, sampling, constraint) and turn it
// into an engine Request: resolve sampling defaults; ranges, limits, stop ids and the length
// clamp are the request rules' (request-rules.ts). Prompts given as text or chat messages
// are the frontend's (frontend/prompt.ts); the engine never renders a template.
import { randomInt } from 'node:crypto';
import { checkPromptIds, type PromptInput } from '../frontend/prompt.js';
import { promptOpensThinking } from '../tokenizer/reasoning.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import type { AnyModel } from '../model/model.js';
import { DeltaserveError } from '../util/errors.js';
import { Rng } from '../util/rng.js';
import type { TokenLogprob } from './sample-batch.js';
import { OutputText } from './output.js';
import type { LogitsAdjust } from './logits-adjust.js';
import { setPromptPoints } from './prefix.js';
import { Request } from './request.js';
import type { VisionEngine } from './vision.js';
import type { PreparedImage } from '../vision/pipeline.js';
import { checkParam, generationBudget, leavesRoom, REQUEST_PARAMS as P, requestStopIds, stopStrings, validateSampling } from './request-rules.js';
import { type SamplingParams, TokenHistory } from './sampler.js';

/** What the engine takes: prompt token ids with their split points, sampling, limits and a
 * constraint (`logitsAdjust`). */
export interface EngineRequest extends RequestParams {
  readonly promptIds: readonly number[];
  /** Token counts at which a message of the prompt ends (prefix-cache snapshot points). */
  readonly messageBoundaries?: readonly number[];
}

/** A request as the library takes it: the prompt as text, chat messages or ids (the
 * frontend builds ids and split points of the first two, frontend/prompt.ts), and the
 * engine's parameters. */
export type GenerateRequest = PromptInput & RequestParams;

/** Everything of a request but its prompt. */
export interface RequestParams {
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
  /** Decoded, preprocessed images, one per <|image_pad|> run of the prompt ids, in order
   * (frontend.withPrompt makes them from chat image parts). */
  readonly visionImages?: readonly PreparedImage[];
}

/** The parts of the engine a request is built against. */
export interface RequestContext {
  readonly model: AnyModel;
  readonly tokenizer: TextTokenizer;
  readonly maxContext: number;
  /** The vision tower (null: a text-only model, which refuses images). */
  readonly vision: VisionEngine | null;
}

/** Prompt tokens decoded to see whether the prompt ends with `<think>` (and whitespace). */
const THINK_TAIL_TOKENS = 8;

function bad(message: string): never {
  throw new DeltaserveError('bad_request', message);
}

/** The prompt ids and split points of an EngineRequest, checked. */
function promptIdsOf(ctx: RequestContext, req: EngineRequest): { ids: number[]; boundaries: number[] } {
  checkPromptIds(req.promptIds, ctx.model.config.vocabSize);
  const given = req.messageBoundaries ?? [];
  if (!Array.isArray(given) || !given.every((b) => Number.isInteger(b))) bad('messageBoundaries must be a list of integers');
  return { ids: [...req.promptIds], boundaries: [...given] };
}

/** The request's sampling parameters, defaults filled in (temperature 0: greedy), each
 * checked by the request rules. */
export function samplingOf(req: RequestParams): SamplingParams {
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

export function buildRequest(ctx: RequestContext, id: number, req: EngineRequest): Request {
  const { ids: promptIds, boundaries } = promptIdsOf(ctx, req);
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
  r.seeded = req.seed !== undefined && req.seed !== null;
  r.captureLogits = req.captureLogits ?? null;
  r.adjust = req.logitsAdjust ?? null;
  if (req.logprobs) {
    const top = req.logprobs.top;
    checkParam(P.topLogprobs, top);
    r.topLogprobs = top;
    r.onLogprob = req.logprobs.onToken;
  }
  const images = req.visionImages ?? [];
  if (images.length > 0) {
    if (!ctx.vision) bad('this model is text-only (no vision tower: its config.json has no vision_config, or a GGUF was loaded without --mmproj); images are not accepted');
    r.vision = ctx.vision.requestVision(promptIds, images);
  }
  setPromptPoints(r, boundaries, ctx.model.layout.chunk);
  return r;
}
