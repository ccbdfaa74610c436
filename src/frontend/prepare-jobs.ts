// The work of preparing a prompt — placing tools, chat-template rendering and tokenizing —
// as plain functions over a tokenizer. The prepare pool runs them in worker threads; the same
// functions run inline when no pool is configured, so both paths give the same ids.
import type { ChatMessage, RenderOptions } from './chat-template.js';
import { validateMessages } from './chat-template.js';
import { promptOf } from './prompt.js';
import { encodeChat, type Place } from './safe-chat.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { DeltaserveError } from '../util/errors.js';
import { type GrammarJob, type GrammarResult, runGrammarJob } from '../constrain/compile-job.js';
import { registerIdnaHostnames } from '../constrain/idna/index.js';
import { inlineTools, templateHandlesTools, templateTools } from './tool-prompt.js';
import type { FunctionTool, ToolFormat } from './tool-types.js';

/** The tools of a chat turn, as the template will see them. */
export interface ChatTools {
  /** Tools the model may call (none when tool_choice is "none"). */
  readonly offered: readonly FunctionTool[];
  /** The served model's call format (for templates that do not render tools). */
  readonly format: ToolFormat;
  /** parallel_tool_calls, passed to templates that render tools (null: the request has no tools). */
  readonly parallel: boolean | null;
}

export type PrepareJob =
  /** A chat turn's prompt ids and message boundaries (prompt.ts promptOf). */
  | { readonly op: 'chat'; readonly messages: readonly ChatMessage[]; readonly think: boolean; readonly kwargs: Record<string, unknown>;
    readonly tools: ChatTools;
    /** The sentinel standing for each image in the message texts (frontend/images.ts). */
    readonly imageSentinel?: string }
  /** Raw texts (no template, added tokens matched: the client wrote the whole prompt). */
  | { readonly op: 'encode'; readonly texts: readonly string[] }
  /** Texts of token-id lists (special tokens kept). */
  | { readonly op: 'decode'; readonly ids: readonly (readonly number[])[] }
  /** POST /tokenize's response body: the ids of a raw text, or of the template's rendering
   * of `messages` (generation prompt optional). */
  | { readonly op: 'tokenize'; readonly input: TokenizeInput; readonly maxModelLen: number }
  /** POST /detokenize's response body. The ids travel as an Int32Array whose buffer the pool
   * transfers to the worker instead of copying it (the list is bounded only by the body size). */
  | { readonly op: 'detokenize'; readonly ids: Int32Array }
  /** A JSON schema compiled to a grammar table (constrain/compile-job.ts). */
  | GrammarJob;

export type TokenizeInput = { readonly text: string } | { readonly messages: unknown; readonly opts: RenderOptions };

export type PrepareResult =
  | { readonly op: 'chat'; readonly ids: number[]; readonly boundaries: number[] }
  | { readonly op: 'encode'; readonly ids: number[][] }
  | { readonly op: 'decode'; readonly texts: string[] }
  /** A whole JSON response body as UTF-8 (made in the worker, transferred: the event loop
   * neither copies millions of ids nor stringifies them). */
  | { readonly op: 'tokenize' | 'detokenize'; readonly body: Uint8Array }
  | GrammarResult;

/** What a job needs of the engine: the tokenizer, the vocabulary size, the context length. */
export interface PrepareContext {
  readonly tokenizer: TextTokenizer;
  readonly vocabSize: number;
  readonly maxContext: number;
}

/** Places the tools of a chat turn into its protected template input: handed to a template
 * that renders them (with parallel_tool_calls), else written into the messages as text
 * (tool-prompt.ts) — which for thousands of tools is megabytes of text, so it is done here,
 * off the event loop. The tool tags this writes are the server's own (matched as added
 * tokens); the tools themselves are client text, protected. */
function toolPlacer(template: string | undefined, job: Extract<PrepareJob, { op: 'chat' }>): Place {
  return (input, protect) => {
    const { format, parallel } = job.tools;
    const offered = protect(job.tools.offered);
    if (templateHandlesTools(template)) {
      const extra = { ...input.opts.extra };
      if (offered.length > 0) extra['tools'] = templateTools(offered);
      if (parallel !== null) extra['parallel_tool_calls'] = parallel;
      return { messages: input.messages, opts: { ...input.opts, extra } };
    }
    const history = input.messages.some((m) => m.role === 'tool' || (m.tool_calls?.length ?? 0) > 0);
    return offered.length > 0 || history ? { messages: inlineTools(input.messages, offered, format), opts: input.opts } : input;
  };
}

const jsonBody = (v: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(v));

function tokenizeIds(tokenizer: TextTokenizer, input: TokenizeInput): number[] {
  if ('text' in input) return tokenizer.encode(input.text);
  const template = tokenizer.chatTemplate;
  if (!template) throw new DeltaserveError('bad_request', 'this model has no chat template; send a raw prompt instead of messages');
  return encodeChat(tokenizer, template, validateMessages(input.messages), input.opts);
}

export function runPrepareJob(ctx: PrepareContext, job: PrepareJob): PrepareResult {
  switch (job.op) {
    case 'chat': {
      const place = toolPlacer(ctx.tokenizer.chatTemplate, job);
      const images = job.imageSentinel !== undefined ? { images: { sentinel: job.imageSentinel, inputs: [] } } : {};
      const { ids, boundaries } = promptOf(ctx, { messages: job.messages, think: job.think, chatTemplateKwargs: job.kwargs, ...images }, place);
      return { op: 'chat', ids, boundaries };
    }
    case 'encode':
      return { op: 'encode', ids: job.texts.map((t) => ctx.tokenizer.encode(t)) };
    case 'decode':
      return { op: 'decode', texts: job.ids.map((ids) => ctx.tokenizer.decode(ids)) };
    case 'tokenize': {
      const tokens = tokenizeIds(ctx.tokenizer, job.input);
      return { op: 'tokenize', body: jsonBody({ count: tokens.length, max_model_len: job.maxModelLen, tokens }) };
    }
    case 'detokenize':
      return { op: 'detokenize', body: jsonBody({ prompt: ctx.tokenizer.decode(plainArray(job.ids)) }) };
    case 'grammar':
      registerIdnaHostnames(); // a worker compiles hostnames as the event loop does
      return runGrammarJob(job);
  }
}

/** The buffers a job or a result hands to the other thread instead of copying them (they
 * are unusable on the sending side afterwards). */
export function transferablesOf(x: PrepareJob | PrepareResult): ArrayBuffer[] {
  if (x.op === 'detokenize' && 'ids' in x) return [x.ids.buffer as ArrayBuffer];
  if ((x.op === 'tokenize' || x.op === 'detokenize') && 'body' in x) return [x.body.buffer as ArrayBuffer];
  return [];
}

/** An Int32Array as a plain array (a loop: Array.from over a typed array is far slower). */
function plainArray(a: Int32Array): number[] {
  const out = new Array<number>(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]!;
  return out;
}

/** Where prepare jobs run: a prepare pool's worker threads, else `inline` on the calling
 * thread (the server's context satisfies this). */
export interface PrepareHost {
  readonly prepare?: { run(job: PrepareJob, signal?: AbortSignal): Promise<PrepareResult> } | undefined;
  readonly engine: { readonly info: { readonly frontend: { run(job: PrepareJob): PrepareResult } } };
}

/** Run a job in the prepare pool, or inline when there is none. */
export async function prepare<K extends PrepareJob['op']>(host: PrepareHost, job: Extract<PrepareJob, { op: K }>,
  signal?: AbortSignal): Promise<Extract<PrepareResult, { op: K }>> {
  const r = host.prepare ? await host.prepare.run(job, signal) : host.engine.info.frontend.run(job);
  return r as Extract<PrepareResult, { op: K }>;
}
