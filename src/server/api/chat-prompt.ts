// A chat turn's prompt for the HTTP routes: the request's tools in the served model's call
// format, the frontend's prompt (frontend/chat-prompt.ts) with its errors as API errors
// naming the messages field, and the prompt checked against the context length.
import { chatPrompt as frontendChatPrompt, type ChatPrompt, promptOpensThinking, thinkStartOf } from '../../frontend/chat-prompt.js';
import type { ChatMessage } from '../../frontend/chat-template.js';
import type { ChatTools } from '../../frontend/prepare-jobs.js';
import type { ImageLimits } from '../../frontend/images.js';
import type { PromptImages } from '../../frontend/prompt.js';
import { invalid, toApiError } from '../http/errors.js';
import { checkPromptLength } from './choices.js';
import type { ServerContext } from '../context.js';
import type { FunctionTool, ToolChoice, ToolSetup } from './tools/types.js';

export { type ChatPrompt, promptOpensThinking, thinkStartOf };

/** Tools of a request in the served model's call format (null when there are none). */
export function toolSetup(ctx: ServerContext, tools: readonly FunctionTool[], choice: ToolChoice, parallel: boolean): ToolSetup | null {
  if (tools.length === 0) return null;
  return { tools, choice, parallel, format: ctx.engine.info.frontend.toolFormat };
}

/** How a turn's tools reach the template: none offered under tool_choice "none". */
function chatTools(ctx: ServerContext, tools: ToolSetup | null): ChatTools {
  return {
    offered: tools && tools.choice.kind !== 'none' ? tools.tools : [],
    format: tools?.format ?? ctx.engine.info.frontend.toolFormat,
    parallel: tools ? tools.parallel : null,
  };
}

/** Render and tokenize (in the prepare pool: `signal` abandons the work when the client goes
 * away); `param` names the messages field in errors. */
export async function chatPrompt(ctx: ServerContext, messages: readonly ChatMessage[], think: boolean, kwargs: Record<string, unknown>,
  tools: ToolSetup | null, param = 'messages', signal?: AbortSignal, images?: PromptImages, limits?: ImageLimits): Promise<ChatPrompt> {
  let prompt: ChatPrompt;
  try {
    prompt = await frontendChatPrompt(ctx, messages, think, kwargs, chatTools(ctx, tools), signal, images, limits);
  } catch (e) {
    throw toApiError(e, param);
  }
  if (prompt.ids.length === 0) throw invalid(param, 'the rendered prompt is empty');
  checkPromptLength(ctx, prompt.ids, param);
  return prompt;
}
