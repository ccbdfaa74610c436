// OpenAI chat-completions tool fields: `tools`, `tool_choice`, `parallel_tool_calls`, and the
// tool parts of `messages` (assistant `tool_calls`, `tool` role). Errors name the field.
import type { ChatToolCall } from '../../../frontend/chat-template.js';
import { invalid } from '../../http/errors.js';
import { checkJsonDepth } from '../../http/json-parse.js';
import { DEFAULT_LIMITS } from '../../http/limits.js';
import type { FunctionTool, JsonSchema, ToolChoice } from './types.js';

const NAME_RE = /^[a-zA-Z0-9_.:-]{1,64}$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One function declaration {name, description?, parameters?}; `param` names it in errors. */
export function functionTool(f: unknown, param: string): FunctionTool {
  if (!isObject(f)) throw invalid(param, `${param} must be an object`);
  const name = f['name'];
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw invalid(`${param}.name`, `${param}.name must be 1-64 letters, digits, "_", "-", "." or ":" (got ${JSON.stringify(name)})`);
  }
  const d = f['description'];
  if (d !== undefined && d !== null && typeof d !== 'string') throw invalid(`${param}.description`, `${param}.description must be a string`);
  const p = f['parameters'] ?? f['input_schema'] ?? { type: 'object', properties: {} };
  if (!isObject(p)) throw invalid(`${param}.parameters`, `${param}.parameters must be a JSON Schema object`);
  if (p['type'] !== undefined && p['type'] !== 'object') {
    throw invalid(`${param}.parameters`, `${param}.parameters must describe an object (type "object"), got type ${JSON.stringify(p['type'])}`);
  }
  return { name, ...(typeof d === 'string' ? { description: d } : {}), parameters: p as JsonSchema };
}

/** Reject duplicate names (a call could not be attributed). */
export function checkUniqueNames(tools: readonly FunctionTool[], param: string): void {
  const seen = new Set<string>();
  for (const t of tools) {
    if (seen.has(t.name)) throw invalid(param, `${param}: the function name "${t.name}" is declared twice`);
    seen.add(t.name);
  }
}

/** `tools`: [{type: "function", function: {...}}]. */
export function openAiTools(v: unknown): FunctionTool[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw invalid('tools', 'tools must be an array');
  const tools = v.map((t: unknown, i) => {
    if (!isObject(t) || t['type'] !== 'function') throw invalid(`tools[${i}].type`, `tools[${i}].type must be "function" (the only tool type served)`);
    return functionTool(t['function'], `tools[${i}].function`);
  });
  checkUniqueNames(tools, 'tools');
  return tools;
}

/** `tool_choice`: "auto" | "none" | "required" | {type: "function", function: {name}}. */
export function openAiToolChoice(v: unknown, tools: readonly FunctionTool[]): ToolChoice {
  if (v === undefined || v === null) return { kind: tools.length > 0 ? 'auto' : 'none' };
  if (v === 'auto' || v === 'none' || v === 'required') {
    if (v !== 'none' && tools.length === 0) throw invalid('tool_choice', `tool_choice "${v}" needs tools`);
    return { kind: v };
  }
  const name = isObject(v) && v['type'] === 'function' && isObject(v['function']) ? v['function']['name'] : undefined;
  if (typeof name !== 'string') {
    throw invalid('tool_choice', 'tool_choice must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}');
  }
  return namedChoice(name, tools, 'tool_choice');
}

export function namedChoice(name: string, tools: readonly FunctionTool[], param: string): ToolChoice {
  if (!tools.some((t) => t.name === name)) throw invalid(param, `${param} names the function "${name}", which is not among the tools`);
  return { kind: 'function', name };
}

/** `function.arguments` of an earlier call: a JSON object text (or an object); the text
 * nests at most `maxDepth` levels (--max-json-depth, like the request body). */
export function callArguments(v: unknown, param: string, maxDepth = DEFAULT_LIMITS.jsonDepth): Record<string, unknown> {
  let args = v ?? {};
  if (typeof args === 'string') {
    checkJsonDepth(args, maxDepth, param, param);
    try {
      args = args.trim() === '' ? {} : JSON.parse(args);
    } catch {
      throw invalid(param, `${param} must be a JSON object text (it does not parse)`);
    }
  }
  if (!isObject(args)) throw invalid(param, `${param} must be a JSON object`);
  return args;
}

/** An assistant message's `tool_calls` in the template's shape (arguments parsed). */
export function openAiHistoryCalls(v: unknown, i: number, maxDepth = DEFAULT_LIMITS.jsonDepth): ChatToolCall[] {
  if (!Array.isArray(v)) throw invalid(`messages[${i}].tool_calls`, `messages[${i}].tool_calls must be an array`);
  return v.map((c: unknown, j): ChatToolCall => {
    const param = `messages[${i}].tool_calls[${j}]`;
    if (!isObject(c) || !isObject(c['function'])) throw invalid(param, `${param} must be {"id", "type": "function", "function": {"name", "arguments"}}`);
    const f = c['function'];
    if (typeof f['name'] !== 'string') throw invalid(`${param}.function.name`, `${param}.function.name must be a string`);
    const id = c['id'];
    return { id: typeof id === 'string' ? id : '', type: 'function', function: { name: f['name'], arguments: callArguments(f['arguments'], `${param}.function.arguments`, maxDepth) } };
  });
}
