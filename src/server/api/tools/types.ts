// Function tools as the server sees them, independent of the API family that declared them
// (OpenAI chat `tools`, Responses `tools`, Anthropic `tools`).

import type { FunctionTool, ToolFormat } from '../../../frontend/tool-types.js';

export type { FunctionTool, JsonSchema, ToolFormat } from '../../../frontend/tool-types.js';

/** `auto`: the model may call; `none`: it may not (calls are not parsed); `required`: it must
 * call some tool; `function`: it must call that one. */
export type ToolChoice =
  | { readonly kind: 'auto' }
  | { readonly kind: 'none' }
  | { readonly kind: 'required' }
  | { readonly kind: 'function'; readonly name: string };

/** A call parsed out of the output: `arguments` is a JSON object text. */
export interface ParsedToolCall {
  readonly name: string;
  readonly arguments: string;
}

/** A request's tool setup (null tools = tools off). */
export interface ToolSetup {
  readonly tools: readonly FunctionTool[];
  readonly choice: ToolChoice;
  readonly parallel: boolean;
  readonly format: ToolFormat;
}

/** The assistant's earlier call in a history, API-neutral; arguments already parsed. */
export interface HistoryToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: Record<string, unknown>;
}

/** `call_` + 24 random hex digits (OpenAI ids look like this). */
export function toolCallId(prefix = 'call_'): string {
  return prefix + crypto.randomUUID().replace(/-/g, '').slice(0, 24);
}
