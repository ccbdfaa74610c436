// Structured output requests: OpenAI `response_format` (json_object / json_schema), and forced
// tool calls (`tool_choice` required or a named function), turned into a per-choice grammar
// constraint for the engine. With thinking on, the reasoning is free and the constraint
// starts after `</think>`.
import { createHash } from 'node:crypto';
import { modelStopIds } from '../../engine/request-rules.js';
import { invalid } from '../http/errors.js';
import { LIMIT_FLAGS } from '../http/limits.js';
import type { ServerContext } from '../context.js';
import type { FunctionTool, ToolSetup } from './tools/types.js';
import { prepare } from '../../frontend/prepare-jobs.js';
import { CompileBudgetError } from '../../constrain/compile-budget.js';
import { compileWithin } from '../../constrain/compile-job.js';
import type { Constraint } from '../../constrain/constraint.js';
import { anyObjectGrammar, toolCallGrammar, valueGrammar, withThinkPrefix } from '../../constrain/grammars.js';
import { grammarConstraint } from '../../constrain/grammar-matcher.js';
import { registerIdnaHostnames } from '../../constrain/idna/index.js';
import type { Stack, State } from '../../constrain/matcher.js';
import { lazyTokenVocab, MaskCache, type TokenVocab } from '../../constrain/mask.js';
import { type Schema, SchemaError } from '../../constrain/schema.js';
import type { Lazy } from '../../constrain/steps.js';
import { fromTable } from '../../constrain/table.js';

export type OutputFormat =
  | { readonly kind: 'text' }
  | { readonly kind: 'json_object' }
  /** `param`: the request field holding the schema (named by its errors). */
  | { readonly kind: 'json_schema'; readonly name: string; readonly schema: unknown; readonly param?: string };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A short key for a schema's text (compiled grammars are cached by it). */
export const schemaHash = (text: string): string => createHash('sha256').update(text).digest('base64url');

/** Compile, mapping schema errors to a 400 naming `param`. Compiled trees are cached by
 * the hash of the schema's text (compiling is pure: the same text gives an equivalent tree). */
const compiledSchemas = new Map<string, Schema>();

/** Work units one compilation may spend (--max-grammar-units). */
let grammarUnits = LIMIT_FLAGS.grammarUnits.def;
/** Set the compile budget (the server's --max-grammar-units). */
export function setGrammarBudget(units: number): void {
  grammarUnits = units;
}

const cacheKey = (schema: unknown, param: string, lenient: boolean): string => `${lenient ? 'l' : 's'}:${param}:${schemaHash(JSON.stringify(schema))}`;

function remember(key: string, s: Schema): Schema {
  if (compiledSchemas.size >= 64) compiledSchemas.delete(compiledSchemas.keys().next().value!);
  compiledSchemas.set(key, s);
  return s;
}

const refused = (param: string, message: string): Error => invalid(param, `invalid JSON schema: ${message}`, 'invalid_schema');

/** Compile on the calling thread (cached; the same units budget as in a worker). */
export function compileOrThrow(schema: unknown, param: string, lenient = false): Schema {
  registerIdnaHostnames(); // the server checks hostname A-labels (idempotent)
  const key = cacheKey(schema, param, lenient);
  const hit = compiledSchemas.get(key);
  if (hit) return hit;
  try {
    return remember(key, compileWithin(schema, param, lenient, grammarUnits).value);
  } catch (e) {
    if (e instanceof SchemaError || e instanceof CompileBudgetError) throw refused(param, e.message);
    throw e;
  }
}

/** Compile in a prepare worker (inline without a pool) and cache the tree: the event loop
 * only rebuilds an accepted grammar from its table, and a refused one costs it nothing. */
export async function compileOffLoop(ctx: ServerContext, schema: unknown, param: string, lenient: boolean, signal?: AbortSignal): Promise<Schema> {
  registerIdnaHostnames(); // before fromTable rebuilds a hostname string node
  const key = cacheKey(schema, param, lenient);
  const hit = compiledSchemas.get(key);
  if (hit) return hit;
  if (!ctx.prepare) return compileOrThrow(schema, param, lenient);
  const r = await prepare(ctx, { op: 'grammar', schema, param, lenient, units: grammarUnits }, signal);
  if ('error' in r) throw refused(param, r.error);
  return remember(key, fromTable(r.table));
}

/** The schemas a request's constraint compiles (forced tools' parameters, else the format's). */
function constraintSchemas(format: OutputFormat, tools: ToolSetup | null): [unknown, string][] {
  const choice = tools?.choice;
  if (tools && (choice?.kind === 'required' || choice?.kind === 'function')) {
    const forced = choice.kind === 'function' ? tools.tools.filter((t) => t.name === choice.name) : tools.tools;
    return forced.map((t) => [t.parameters, toolParam(t)]);
  }
  return format.kind === 'json_schema' ? [[format.schema, formatParam(format)]] : [];
}
const toolParam = (t: FunctionTool): string => `tools.${t.name}.parameters`;
const formatParam = (f: Extract<OutputFormat, { kind: 'json_schema' }>): string => f.param ?? 'response_format.json_schema.schema';

/** Compile a request's schemas off the event loop (a 400 naming the first refused one), so
 * structuredConstraint finds them compiled. Call before preparing the prompt. */
export async function compileConstraintSchemas(ctx: ServerContext, format: OutputFormat, tools: ToolSetup | null, signal?: AbortSignal): Promise<void> {
  const lenient = ctx.lenient ?? false;
  await Promise.all(constraintSchemas(format, tools).map(([schema, param]) => compileOffLoop(ctx, schema, param, lenient, signal)));
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
  // compiled off the event loop by compileConstraintSchemas (a 400 naming `${param}.schema`)
  return { kind: 'json_schema', name, schema, param: `${param}.schema` };
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


/** A grammar forcing one call of one of `tools`, in the model's call format. */
export function forcedCallState(tools: readonly FunctionTool[], format: ToolSetup['format'], lenient = false): State {
  const stacks = toolCallGrammar(tools.map((t) => ({ name: t.name, params: compileOrThrow(t.parameters, toolParam(t), lenient) })), format);
  // XML calls write named parameters: parameters admitting no object leave nothing to write
  // (a dead end at the first token); the client's schema is at fault, so a 400
  if (stacks.length === 0) {
    const param = tools.length === 1 ? toolParam(tools[0]!) : 'tools';
    throw invalid(param, `invalid JSON schema: ${param} admits no JSON object, so no forced call can be written (a tool's arguments are an object)`, 'invalid_schema');
  }
  return stacks;
}

/** The request's constraint, or null when its output is free. Forced tool calls take
 * precedence over a response format. */
export function structuredConstraint(ctx: ServerContext, format: OutputFormat, tools: ToolSetup | null, thinking: boolean): Constraint | null {
  let key: string;
  let body: () => Stack[];
  const lenient = ctx.lenient ?? false;
  const choice = tools?.choice;
  if (tools && (choice?.kind === 'required' || choice?.kind === 'function')) {
    const forced = choice.kind === 'function' ? tools.tools.filter((t) => t.name === choice.name) : tools.tools;
    key = `tools:${tools.format}:${schemaHash(JSON.stringify(forced))}`;
    body = () => [...forcedCallState(forced, tools.format, lenient)] as Stack[];
  } else if (format.kind === 'json_object') {
    key = 'json_object'; // any JSON object at the top
    body = anyObjectGrammar;
  } else if (format.kind === 'json_schema') {
    key = `schema:${schemaHash(JSON.stringify(format.schema))}`;
    body = () => valueGrammar(compileOrThrow(format.schema, formatParam(format), lenient));
  } else return null;
  const g = grammarFor(`${thinking ? 'think' : 'plain'}:${lenient ? 'lenient:' : ''}${key}`, () => withThinkPrefix(body(), thinking));
  return grammarConstraint(lazyVocabFor(ctx).get(), g.start, g.cache);
}

/** The server's walkable vocabulary (built on first use, or advanced by the warm-up). */
export function lazyVocabFor(ctx: Pick<ServerContext, 'engine' | 'texts'>): Lazy<TokenVocab> {
  const { engine } = ctx;
  return lazyTokenVocab(engine.tokenizer, ctx.texts, engine.sampleVocab, modelStopIds(engine));
}
