// A chat turn's prompt for the HTTP routes: the frontend's (frontend/chat-prompt.ts), with
// its errors as API errors naming the messages field, and the prompt checked against the
// context length.
import { chatPrompt as frontendChatPrompt, type ChatPrompt, promptOpensThinking, thinkStartOf } from '../frontend/chat-prompt.js';
import type { ChatMessage } from '../frontend/chat-template.js';
import { invalid, toApiError } from './errors.js';
import { checkPromptLength, type ServerContext } from './generation.js';
import type { FunctionTool, ToolChoice, ToolSetup } from './tools/types.js';
import { toolSetup as frontendToolSetup } from '../frontend/chat-prompt.js';

export { type ChatPrompt, promptOpensThinking, thinkStartOf };

/** Tools of a request in the served model's call format (null when there are none). */
export function toolSetup(ctx: ServerContext, tools: readonly FunctionTool[], choice: ToolChoice, parallel: boolean): ToolSetup | null {
  return frontendToolSetup(ctx.engine.info.frontend, tools, choice, parallel);
}

/** Render and tokenize (in the prepare pool: `signal` abandons the work when the client goes
 * away); `param` names the messages field in errors. */
export async function chatPrompt(ctx: ServerContext, messages: readonly ChatMessage[], think: boolean, kwargs: Record<string, unknown>,
  tools: ToolSetup | null, param = 'messages', signal?: AbortSignal): Promise<ChatPrompt> {
  let prompt: ChatPrompt;
  try {
    prompt = await frontendChatPrompt(ctx, messages, think, kwargs, tools, signal);
  } catch (e) {
    throw toApiError(e, param);
  }
  if (prompt.ids.length === 0) throw invalid(param, 'the rendered prompt is empty');
  checkPromptLength(ctx, prompt.ids, param);
  return prompt;
}
