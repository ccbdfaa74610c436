// Function tools as a chat prompt carries them, whatever API declared them (OpenAI chat
// `tools`, Responses `tools`, Anthropic `tools`), and the tags a model writes a call in.

/** How the model writes a call: Qwen3.5's XML style or Qwen3-Next's JSON style. */
export type ToolFormat = 'xml' | 'json';

/** JSON Schema object (only the keywords the code reads are typed). */
export type JsonSchema = Record<string, unknown>;

export interface FunctionTool {
  readonly name: string;
  readonly description?: string;
  /** JSON Schema of the arguments object ({type: "object", properties, required}). */
  readonly parameters: JsonSchema;
}

/** The tags around every call, in both formats. */
export const CALL_OPEN = '<tool_call>';
export const CALL_CLOSE = '</tool_call>';
