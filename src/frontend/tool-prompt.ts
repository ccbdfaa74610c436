// Tools on the prompt side: which call format the model writes, and how tools, earlier calls
// and tool results reach a chat template.
//
// A template that handles tools itself (it reads `tools` / `tool_calls`, as Qwen's do) gets
// them as template variables and message fields. A template without tool support (e.g.
// tiny-think's) gets the same information written into plain messages: the tool list appended
// to the system message, earlier calls appended to the assistant's text in the model's
// format, tool results as a user turn of `<tool_response>` blocks (Qwen's convention).
import type { ChatMessage } from './chat-template.js';
import { CALL_CLOSE, CALL_OPEN, type FunctionTool, type ToolFormat } from './tool-types.js';

/** The template's own format wins (`<function=` ⇒ XML, a JSON `<tool_call>` ⇒ JSON); a
 * template silent about tools follows the model type (Qwen3-Next: JSON, Qwen3.5: XML). */
export function toolFormatFor(template: string | null | undefined, modelType: string): ToolFormat {
  if (template?.includes('<function=')) return 'xml';
  if (template?.includes(CALL_OPEN)) return 'json';
  return modelType === 'qwen3_next' ? 'json' : 'xml';
}

/** Does the template render `tools` and tool calls itself? */
export function templateHandlesTools(template: string | null | undefined): boolean {
  return typeof template === 'string' && /\btools\b/.test(template) && template.includes('tool_call');
}

/** The OpenAI shape templates iterate: [{type: "function", function: {name, description, parameters}}]. */
export function templateTools(tools: readonly FunctionTool[]): Record<string, unknown>[] {
  return tools.map((t) => ({
    type: 'function',
    function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.parameters },
  }));
}

/** A call as the model writes it (the text between and including the call tags). */
export function callText(name: string, args: Record<string, unknown>, format: ToolFormat): string {
  if (format === 'json') return `${CALL_OPEN}\n${JSON.stringify({ name, arguments: args })}\n${CALL_CLOSE}`;
  const params = Object.entries(args).map(([k, v]) => `<parameter=${k}>\n${typeof v === 'string' ? v : JSON.stringify(v)}\n</parameter>\n`);
  return `${CALL_OPEN}\n<function=${name}>\n${params.join('')}</function>\n${CALL_CLOSE}`;
}

function toolsInstructions(tools: readonly FunctionTool[], format: ToolFormat): string {
  const list = templateTools(tools).map((t) => JSON.stringify(t)).join('\n');
  const example = format === 'json'
    ? `${CALL_OPEN}\n{"name": <function-name>, "arguments": <args-json-object>}\n${CALL_CLOSE}`
    : `${CALL_OPEN}\n<function=example_function_name>\n<parameter=example_parameter>\nvalue\n</parameter>\n</function>\n${CALL_CLOSE}`;
  return `# Tools\n\nYou may call one or more functions to assist with the user query.\n\n` +
    `The functions you can call are listed in <tools></tools> tags:\n<tools>\n${list}\n</tools>\n\n` +
    `To call a function, reply with:\n${example}`;
}

/** Messages for a template without tool support: tools, calls and results as plain text. */
export function inlineTools(messages: readonly ChatMessage[], tools: readonly FunctionTool[], format: ToolFormat): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (tools.length > 0) {
    const text = toolsInstructions(tools, format);
    const first = messages[0];
    if (first?.role === 'system') out.push({ role: 'system', content: `${first.content}\n\n${text}` });
    else out.push({ role: 'system', content: text });
  }
  messages.forEach((m, i) => {
    if (i === 0 && tools.length > 0 && m.role === 'system') return;
    if (m.role === 'tool') {
      const block = `<tool_response>\n${m.content}\n</tool_response>`;
      const prev = out[out.length - 1];
      if (prev?.role === 'user' && messages[i - 1]?.role === 'tool') prev.content += `\n${block}`;
      else out.push({ role: 'user', content: block });
      return;
    }
    if (m.role === 'assistant' && m.tool_calls && m.tool_calls.length > 0) {
      const calls = m.tool_calls.map((c) => callText(c.function.name, c.function.arguments, format)).join('\n');
      out.push({ role: 'assistant', content: m.content ? `${m.content}\n\n${calls}` : calls });
      return;
    }
    out.push({ ...m });
  });
  return out;
}
