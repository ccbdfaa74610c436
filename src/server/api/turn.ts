// The turn pipeline: the one path every generation route takes. A dialect is a codec over it
// (chat.ts, completions.ts, messages.ts, responses.ts): `parse` turns the dialect's body into a
// TurnRequest, `render` writes the started turn's events as the dialect's JSON or SSE. The
// pipeline owns every stage between, so the four dialects cannot drift apart:
//
//   fields check → parse (normalize, common params, tools, format) → tool setup →
//   prompt (schemas compiled first, then the template or raw tokenizing) → constraint →
//   admit → start the choices → render → cancel whatever is left
//
// Invariant: a request the pipeline refuses (any stage up to admit) has started no engine work
// and sent nothing; once choices start, they are cancelled when render returns or throws.
import { DEFAULT_SERVER_IMAGES, type TurnImages } from './images.js';
import type { PreparedImage } from '../../vision/pipeline.js';
import type { ChatMessage } from '../../frontend/chat-template.js';
import { THINK_CLOSE } from '../../tokenizer/reasoning.js';
import { chatPrompt, toolSetup } from './chat-prompt.js';
import type { ServerContext } from '../context.js';
import type { Call } from '../http/call.js';
import { invalid } from '../http/errors.js';
import { compileConstraintSchemas, type OutputFormat, structuredConstraint } from './structured.js';
import { answerConstraint, type ThinkStart } from './thinking.js';
import type { FunctionTool, ToolChoice, ToolSetup } from './tools/types.js';
import type { Constraint } from '../../constrain/constraint.js';
import { admit, cancelAll, type Choice, startChoices } from './choices.js';
import { checkFields, type FieldRules } from './fields.js';
import { encodeRawPrompts, type RawPrompt } from './raw-prompts.js';
import { type Body, type CommonParams, commonParams, requireObject } from './validate.js';
import type { NumericParam } from '../../engine/request-rules.js';

/** A chat turn's prompt: messages through the chat template. */
export interface ChatPromptRequest {
  readonly kind: 'chat';
  readonly messages: readonly ChatMessage[];
  readonly think: boolean;
  readonly kwargs: Record<string, unknown>;
  /** The request field holding the messages (named in prompt errors). */
  readonly param: string;
  /** The image parts, each standing in its message as the sentinel (absent: none). */
  readonly images?: TurnImages;
}

/** Raw prompts (no template), each run `params.n` times. */
export interface RawPromptRequest {
  readonly kind: 'raw';
  readonly inputs: readonly RawPrompt[];
}

/** The tools of a request, in no dialect's syntax. */
export interface ToolRequest {
  readonly tools: readonly FunctionTool[];
  readonly choice: ToolChoice;
  readonly parallel: boolean;
}

/** What a codec's parse makes of a body. `Own` is what only its render reads. */
export interface TurnRequest<Own> {
  readonly prompt: ChatPromptRequest | RawPromptRequest;
  /** Sampling, length, stop, stream; `params.n` choices per prompt. */
  readonly params: CommonParams;
  readonly tools: ToolRequest | null;
  readonly format: OutputFormat;
  /** A reasoning budget in tokens and the field that gave it (null: none). */
  readonly thinkingBudget: { readonly tokens: number; readonly param: string } | null;
  /** Alternatives to capture per token (null: no logprobs). */
  readonly topLogprobs: number | null;
  readonly own: Own;
}

/** One prepared prompt. */
export interface TurnPrompt {
  readonly ids: number[];
  /** The prompt's text: a raw prompt's (echo), '' for a chat prompt (its text is the template's). */
  readonly text: string;
  /** The generation prompt opened a reasoning block. */
  readonly thinking: boolean;
  readonly thinkStart: ThinkStart;
  /** Where each message ends (prefix-cache snapshot points); null for raw prompts. */
  readonly boundaries: number[] | null;
  /** A chat prompt's images, one per pad run of `ids` (absent or empty: none). */
  readonly images?: readonly PreparedImage[];
}

/** A started turn: what render sees. Choice i·n + j runs prompt i. */
export interface Turn<Own> {
  readonly request: TurnRequest<Own>;
  /** The tools in the served model's call format (null: none offered). */
  readonly tools: ToolSetup | null;
  readonly prompts: readonly TurnPrompt[];
  readonly choices: readonly Choice[];
}

/** One API dialect over the pipeline. */
export interface Codec<Own> {
  /** The route's path, named in field errors. */
  readonly path: string;
  /** The body fields the route accepts (others are a 400 unless --lenient). */
  readonly fields: FieldRules;
  /** The body (an object whose fields were checked) → a turn request. Synchronous: every
   * refusal it can find without the tokenizer comes before any work is queued. */
  parse(ctx: ServerContext, b: Body): TurnRequest<Own>;
  /** The started turn's events → the dialect's JSON response or SSE stream. */
  render(ctx: ServerContext, call: Call, turn: Turn<Own>): Promise<void>;
}

/** Run one generation request through `codec`. */
export async function runTurn<Own>(ctx: ServerContext, call: Call, codec: Codec<Own>): Promise<void> {
  const b = requireObject(call.body);
  checkFields(b, codec.fields, ctx.lenient ?? false, codec.path);
  const request = codec.parse(ctx, b);
  const tools = toolsOf(ctx, request.tools);
  const prompts = await preparePrompts(ctx, request, tools, call.signal);
  const constraint = turnConstraint(ctx, request, tools, prompts);
  const { params } = request;
  admit(ctx, prompts.map((p) => p.ids), params.n, params.request.maxTokens);
  const boundaries = prompts.length === 1 ? prompts[0]!.boundaries : null;
  const images = prompts.length === 1 && (prompts[0]!.images?.length ?? 0) > 0 ? { visionImages: prompts[0]!.images! } : {};
  const started = boundaries !== null ? { ...params, request: { ...params.request, messageBoundaries: boundaries, ...images } } : params;
  const choices = startChoices(ctx, call, prompts.map((p) => p.ids), started, request.topLogprobs, constraint);
  try {
    await codec.render(ctx, call, { request, tools, prompts, choices });
  } finally {
    cancelAll(choices);
  }
}

/** The common parameters of a body against the served model (`maxTokensKeys`: the dialect's
 * names for the length limit, first given wins; `temperature`: the dialect's range). */
export function turnParams(ctx: ServerContext, b: Body, maxTokensKeys: readonly string[], temperature?: NumericParam): CommonParams {
  const { engine } = ctx;
  return commonParams(b, engine.maxContext, engine.info.config.vocabSize, ctx.defaults, maxTokensKeys, temperature);
}

/** The tools of a request in the served model's call format (null: none). */
function toolsOf(ctx: ServerContext, t: ToolRequest | null): ToolSetup | null {
  return t ? toolSetup(ctx, t.tools, t.choice, t.parallel) : null;
}

/** A chat turn's prompt alone, through the pipeline's tool and prompt stages (POST
 * /v1/messages/count_tokens counts it; nothing is generated). */
export async function chatTurnPrompt(ctx: ServerContext, prompt: ChatPromptRequest, tools: ToolRequest | null, signal: AbortSignal): Promise<TurnPrompt> {
  return renderChatPrompt(ctx, prompt, toolsOf(ctx, tools), signal);
}

async function renderChatPrompt(ctx: ServerContext, p: ChatPromptRequest, tools: ToolSetup | null, signal: AbortSignal): Promise<TurnPrompt> {
  const opts = ctx.images ?? DEFAULT_SERVER_IMAGES;
  const images = p.images && p.images.count > 0 ? await p.images.resolve(opts, signal) : undefined;
  const c = await chatPrompt(ctx, p.messages, p.think, p.kwargs, tools, p.param, signal, images, opts);
  return { ids: c.ids, text: '', thinking: c.thinking, thinkStart: c.thinkStart, boundaries: c.boundaries, images: c.images };
}

/** The prompt stage: a chat turn's schemas are compiled off the event loop first (a refused
 * schema costs no template run), then the template renders; raw prompts are tokenized. */
async function preparePrompts(ctx: ServerContext, request: TurnRequest<unknown>, tools: ToolSetup | null, signal: AbortSignal): Promise<TurnPrompt[]> {
  const p = request.prompt;
  if (p.kind === 'raw') {
    const raw = await encodeRawPrompts(ctx, p.inputs, signal);
    return raw.map((r) => ({ ...r, thinking: false, thinkStart: 'none', boundaries: null }));
  }
  await compileConstraintSchemas(ctx, request.format, tools, signal);
  return [await renderChatPrompt(ctx, p, tools, signal)];
}

/** The constraint stage: for a chat turn, the structured output (forced tool calls or the
 * format), then the reasoning budget, then the closed-reasoning mask (thinking.ts); raw
 * prompts are unconstrained. */
function turnConstraint(ctx: ServerContext, request: TurnRequest<unknown>, tools: ToolSetup | null, prompts: readonly TurnPrompt[]): Constraint | null {
  if (request.prompt.kind === 'raw') return null;
  const prompt = prompts[0]!;
  const budget = request.thinkingBudget;
  if (budget !== null && prompt.thinking && ctx.engine.tokenizer.tokenToId(THINK_CLOSE) === undefined) {
    throw invalid(budget.param, `${budget.param} needs a model whose vocabulary has a "</think>" token`);
  }
  const structured = structuredConstraint(ctx, request.format, tools, prompt.thinking);
  return answerConstraint(ctx, structured, prompt.thinkStart, budget?.tokens ?? null);
}
