// Structured output requests: OpenAI `response_format` (json_object / json_schema), and forced
// tool calls (`tool_choice` required or a named function), turned into a per-choice grammar
// constraint for the engine. With thinking on, the reasoning is free and the constraint
// starts after `</think>`.
import { modelStopIds } from '../../engine/request-rules.js';
import { invalid } from '../errors.js';
import type { ConstraintFactory, ServerContext } from '../generation.js';
import type { FunctionTool, ToolSetup } from '../tools/types.js';
import { type Stack, type State, val } from './matcher.js';
import { GrammarConstraint, MaskCache, tokenVocab } from './mask.js';
import { compileSchema, type Schema, SchemaError } from './schema.js';

export type OutputFormat =
  | { readonly kind: 'text' }
  | { readonly kind: 'json_object' }
  | { readonly kind: 'json_schema'; readonly name: string; readonly schema: unknown };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Compile, mapping schema errors to a 400 naming `param`. */
export function compileOrThrow(schema: unknown, param: string): Schema {
  try {
    return compileSchema(schema, param);
  } catch (e) {
    if (e instanceof SchemaError) throw invalid(param, `invalid JSON schema: ${e.message}`, 'invalid_schema');
    throw e;
  }
}

/** A json_schema format {name, schema, strict?, description?} at `param` (OpenAI's nesting). */
export function jsonSchemaFormat(o: Record<string, unknown>, param: string): OutputFormat {
  const name = o['name'];
  if (typeof name !== 'string' || !/^[a-zA-Z0-9_-]{1,64}$/.test(name)) {
    throw invalid(`${param}.name`, `${param}.name must be 1-64 letters, digits, "_" or "-"`);
  }
  const strict = o['strict'];
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') throw invalid(`${param}.strict`, `${param}.strict must be a boolean`);
  const schema = o['schema'] ?? {};
  compileOrThrow(schema, `${param}.schema`);
  return { kind: 'json_schema', name, schema };
}

/** OpenAI chat `response_format`: {type: "text" | "json_object" | "json_schema", json_schema?}. */
export function openAiResponseFormat(v: unknown, param: string): OutputFormat {
  if (v === undefined || v === null) return { kind: 'text' };
  if (!isObj(v)) throw invalid(param, `${param} must be an object`);
  switch (v['type']) {
    case 'text':
      return { kind: 'text' };
    case 'json_object':
      return { kind: 'json_object' };
    case 'json_schema': {
      const js = v['json_schema'];
      if (!isObj(js)) throw invalid(`${param}.json_schema`, `${param}.json_schema must be an object {name, schema, strict}`);
      return jsonSchemaFormat(js, `${param}.json_schema`);
    }
    default:
      throw invalid(`${param}.type`, `${param}.type must be "text", "json_object" or "json_schema" (got ${JSON.stringify(v['type'])})`);
  }
}

/** Compiled grammars by their source text, with their mask caches (shared across requests). */
interface Compiled {
  readonly start: State;
  readonly cache: MaskCache;
}
const compiled = new Map<string, Compiled>();

function grammarFor(key: string, build: () => State): Compiled {
  let g = compiled.get(key);
  if (g) {
    compiled.delete(key);
    compiled.set(key, g);
    return g;
  }
  g = { start: build(), cache: new MaskCache() };
  if (compiled.size >= 32) compiled.delete(compiled.keys().next().value!);
  compiled.set(key, g);
  return g;
}

const push = (f: Stack['f'], next: Stack | null): Stack => ({ f, next });
const lit = (text: string, next: Stack | null): Stack => push({ t: 'lit', text, i: 0 }, next);

/** A grammar forcing one call of one of `tools`, in the model's call format. */
export function forcedCallState(tools: readonly FunctionTool[], format: ToolSetup['format']): State {
  return tools.map((t) => callStack(t, format));
}

/** The forced call of `tool` in the model's format. */
function callStack(tool: FunctionTool, format: ToolSetup['format']): Stack {
  const params = compileOrThrow(tool.parameters, `tools.${tool.name}.parameters`);
  if (format === 'json') {
    return lit(`<tool_call>\n{"name":${JSON.stringify(tool.name)},"arguments":`, val(params, lit('}\n</tool_call>', null)));
  }
  const props = params.k === 'object' ? params.props : [];
  return lit(`<tool_call>\n<function=${tool.name}>\n`,
    push({ t: 'obj', props, extra: null, xml: true, ph: 'key', i: 0, id: params.id }, lit('</function>\n</tool_call>', null)));
}

/** The grammar's start: optional reasoning (up to `</think>`), a little whitespace, then the body. */
function withPrefix(body: readonly Stack[], thinking: boolean): State {
  return body.map((b) => {
    const afterThink = push({ t: 'ws', left: thinking ? 2 : 0 }, b);
    return thinking ? push({ t: 'think', m: 0 }, afterThink) : afterThink;
  });
}

/** A constraint factory for the request, or null when its output is free. Forced tool calls
 * take precedence over a response format. */
export function structuredConstraint(ctx: ServerContext, format: OutputFormat, tools: ToolSetup | null, thinking: boolean): ConstraintFactory | null {
  let key: string;
  let body: () => Stack[];
  const choice = tools?.choice;
  if (tools && (choice?.kind === 'required' || choice?.kind === 'function')) {
    const forced = choice.kind === 'function' ? tools.tools.filter((t) => t.name === choice.name) : tools.tools;
    key = `tools:${tools.format}:${JSON.stringify(forced)}`;
    body = () => [...forcedCallState(forced, tools.format)] as Stack[];
  } else if (format.kind === 'json_object') {
    key = 'json_object'; // any JSON object at the top
    body = () => [val(compileSchema({ type: 'object' }), null)];
  } else if (format.kind === 'json_schema') {
    key = `schema:${JSON.stringify(format.schema)}`;
    body = () => [val(compileOrThrow(format.schema, 'response_format.json_schema.schema'), null)];
  } else return null;
  const g = grammarFor(`${thinking ? 'think' : 'plain'}:${key}`, () => withPrefix(body(), thinking));
  const { engine } = ctx;
  const stops = modelStopIds(engine);
  const vocab = tokenVocab(engine.tokenizer, ctx.texts, engine.sampleVocab, stops);
  return () => new GrammarConstraint(vocab, g.start, g.cache).allowed;
}
