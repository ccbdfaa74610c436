// The grammars a chat answer is constrained to, built from compiled schemas: a JSON value, a
// forced tool call in the model's call format, and the reasoning prefix in front of either.
import { lit, push } from './frames.js';
import { type Stack, type State, val } from './matcher.js';
import { deref, type ObjectNode } from './nodes.js';
import { compileSchema, type Schema } from './schema.js';

/** How the model writes a tool call: Hermes-style JSON or Qwen3-Coder-style XML. */
export type ToolCallFormat = 'json' | 'xml';

/** A tool a forced call may name, with its compiled parameters schema. */
export interface CallableTool {
  readonly name: string;
  readonly params: Schema;
}

/** A JSON value of schema `s`, then the end. */
export const valueGrammar = (s: Schema): Stack[] => [val(s, null)];

/** Any JSON object at the top (`json_object`). */
export const anyObjectGrammar = (): Stack[] => valueGrammar(compileSchema({ type: 'object' }));

/** The forced call of one of `tools` in `format`. Empty when none can be written (XML calls
 * write named parameters: parameters admitting no object leave nothing to write — the caller
 * reports the schema at fault). */
export function toolCallGrammar(tools: readonly CallableTool[], format: ToolCallFormat): Stack[] {
  return tools.flatMap((t) => callStacks(t, format));
}

/** The forced call of `tool` in the model's format (XML: one stack per object alternative
 * of its parameters). */
function callStacks(tool: CallableTool, format: ToolCallFormat): Stack[] {
  if (format === 'json') {
    return [lit(`<tool_call>\n{"name":${JSON.stringify(tool.name)},"arguments":`, val(tool.params, lit('}\n</tool_call>', null)))];
  }
  return objectAlternatives(tool.params).map((o) => lit(`<tool_call>\n<function=${tool.name}>\n`,
    push({ t: 'obj', o, xml: true, ph: 'key', i: 0, seen: [], count: 0 }, lit('</function>\n</tool_call>', null))));
}

/** The object alternatives of a parameters schema (XML calls write named parameters only;
 * an explicit stack: unions may be wide and nested). */
function objectAlternatives(s0: Schema): ObjectNode[] {
  const out: ObjectNode[] = [];
  const todo: Schema[] = [s0];
  const seen = new Set<number>();
  while (todo.length > 0) {
    const s = deref(todo.pop()!);
    if (seen.has(s.id)) continue;
    seen.add(s.id);
    if (s.k === 'object') out.push(s);
    else if (s.k === 'any') out.push(emptyParams());
    else if (s.k === 'anyOf') for (let i = s.alts.length - 1; i >= 0; i--) todo.push(s.alts[i]!); // in order
  }
  return out;
}
let empty: ObjectNode | null = null;
const emptyParams = (): ObjectNode => (empty ??= compileSchema({ type: 'object', properties: {} }) as ObjectNode);

/** The grammar's start: optional reasoning (up to `</think>`), a little whitespace, then the body. */
export function withThinkPrefix(body: readonly Stack[], thinking: boolean): State {
  return body.map((b) => {
    const afterThink = push({ t: 'ws', left: thinking ? 2 : 0 }, b);
    return thinking ? push({ t: 'think', m: 0 }, afterThink) : afterThink;
  });
}
