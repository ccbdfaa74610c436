// The prompt of a chat turn, shared by every chat-style API: the chat template over the
// messages, with tools either handed to the template (templates that render them) or written
// into the messages (templates that do not; see tools/prompt.ts) — both in the prepare pool
// (prepare-jobs.ts).
import type { ChatMessage } from '../tokenizer/chat.js';
import { promptOpensThinking, THINK_CLOSE, THINK_OPEN } from '../tokenizer/reasoning.js';
import { invalid, toApiError } from './http/errors.js';
import { checkPromptLength } from './api/choices.js';
import type { ServerContext } from './context.js';
import { type ChatTools, prepare } from './prepare-jobs.js';
import { toolFormatFor } from './tools/prompt.js';
import type { ThinkStart } from './thinking.js';
import type { FunctionTool, ToolChoice, ToolSetup } from './tools/types.js';

export interface ChatPrompt {
  readonly ids: number[];
  /** The generation prompt opened a reasoning block (`<think>\n`). */
  readonly thinking: boolean;
  /** Where each message ends: prefix-cache snapshot points the next turn will share. */
  readonly boundaries: number[];
  /** Where the prompt leaves the reasoning block (see thinking.ts). */
  readonly thinkStart: ThinkStart;
}

export { promptOpensThinking };

/** `open` when the prompt ends inside a reasoning block, `closed` when it ends right after
 * one (a template's thinking-off form), `none` otherwise. */
export function thinkStartOf(decodeTail: string): ThinkStart {
  const t = decodeTail.trimEnd();
  return t.endsWith(THINK_OPEN) ? 'open' : t.endsWith(THINK_CLOSE) ? 'closed' : 'none';
}

/** Tools of a request in the served model's call format (null when there are none). */
export function toolSetup(ctx: ServerContext, tools: readonly FunctionTool[], choice: ToolChoice, parallel: boolean): ToolSetup | null {
  if (tools.length === 0) return null;
  return { tools, choice, parallel, format: toolFormatFor(ctx.engine.tokenizer.chatTemplate, ctx.engine.model.config.modelType) };
}

/** Render and tokenize (in the prepare pool: `signal` abandons the work when the client goes
 * away); `param` names the messages field in errors. */
export async function chatPrompt(ctx: ServerContext, messages: readonly ChatMessage[], think: boolean, kwargs: Record<string, unknown>,
  tools: ToolSetup | null, param = 'messages', signal?: AbortSignal): Promise<ChatPrompt> {
  const { engine } = ctx;
  const template = engine.tokenizer.chatTemplate;
  const placed: ChatTools = {
    offered: tools && tools.choice.kind !== 'none' ? tools.tools : [],
    format: tools?.format ?? toolFormatFor(template, engine.model.config.modelType),
    parallel: tools ? tools.parallel : null,
  };
  let ids: number[];
  let boundaries: number[];
  try {
    ({ ids, boundaries } = await prepare(ctx, { op: 'chat', messages, think, kwargs, tools: placed }, signal));
  } catch (e) {
    throw toApiError(e, param);
  }
  if (ids.length === 0) throw invalid(param, 'the rendered prompt is empty');
  checkPromptLength(ctx, ids, param);
  const tail = engine.tokenizer.decode(ids.slice(-8));
  return { ids, boundaries, thinking: promptOpensThinking(tail), thinkStart: thinkStartOf(tail) };
}
