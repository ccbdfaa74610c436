// Size limits on request bodies, checked right after JSON parsing and before any tokenizing,
// template rendering or grammar compilation, so the cost of preparing a request is bounded
// before it starts. Each limit is a `serve` flag; a request past one gets a 413 (sizes) or a
// 400 (counts, depth) whose message names the flag. The checks look only at well-known
// field names (every route rejects unknown fields anyway), so one check serves all routes.
// The walks over client JSON are iterative and hand the event loop back every few ms.
import { DeltaserveError } from '../../util/errors.js';
import { ApiError } from './errors.js';

export interface RequestLimits {
  /** Characters of prompt text in a request (messages, prompt, input, system, instructions). */
  readonly promptChars: number;
  /** Messages (or Responses input items) in a request. */
  readonly messages: number;
  /** Tool declarations in a request. */
  readonly tools: number;
  /** UTF-8 bytes of the `tools` array as JSON. */
  readonly toolsBytes: number;
  /** UTF-8 bytes of one JSON schema (response format, a tool's parameters) as JSON. */
  readonly schemaBytes: number;
  /** Values of one `enum` in a schema. */
  readonly enumValues: number;
  /** Nesting depth of arrays/objects in a request body (and in tool-call argument texts). */
  readonly jsonDepth: number;
  /** Milliseconds a request's prompt may take to render and tokenize (in a worker). */
  readonly prepareMs: number;
  /** Work units (schema nodes, alternatives, merge steps, automaton states) one grammar
   * compilation (a JSON schema, a forced tool's parameters) may spend; past it, a 400.
   * Counted, not timed: the same schema gets the same answer on any machine and load. */
  readonly grammarUnits: number;
}

/** Flag name and default of every limit (docs/operations.md "Limits and hardening" lists the same). */
export const LIMIT_FLAGS: Readonly<Record<keyof RequestLimits, { readonly flag: string; readonly def: number; readonly max: number }>> = {
  promptChars: { flag: 'max-prompt-chars', def: 1_048_576, max: 1 << 30 },
  messages: { flag: 'max-messages', def: 2048, max: 1 << 20 },
  tools: { flag: 'max-tools', def: 128, max: 1 << 16 },
  toolsBytes: { flag: 'max-tools-bytes', def: 262_144, max: 1 << 30 },
  schemaBytes: { flag: 'max-schema-bytes', def: 131_072, max: 1 << 30 },
  enumValues: { flag: 'max-enum', def: 1024, max: 1 << 20 },
  // recursion over client JSON (template filters, schema compilation) must stay far from
  // the JS stack limit (~10k frames), so the depth flag is capped well below it
  jsonDepth: { flag: 'max-json-depth', def: 64, max: 1000 },
  prepareMs: { flag: 'prepare-timeout-ms', def: 10_000, max: 3_600_000 },
  grammarUnits: { flag: 'max-grammar-units', def: 50_000, max: 100_000_000 },
};

export const DEFAULT_LIMITS: RequestLimits = Object.freeze(Object.fromEntries(
  Object.entries(LIMIT_FLAGS).map(([k, v]) => [k, v.def]),
) as unknown as RequestLimits);

/** Defaults overridden by `given`; each value must be an integer in [1, max]. */
export function resolveLimits(given: Partial<RequestLimits> = {}): RequestLimits {
  const out: Record<string, number> = { ...DEFAULT_LIMITS };
  for (const [key, spec] of Object.entries(LIMIT_FLAGS)) {
    const v = given[key as keyof RequestLimits];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < 1 || v > spec.max) {
      throw new DeltaserveError('bad_request', `--${spec.flag} must be an integer in [1, ${spec.max}] (got ${v})`);
    }
    out[key] = v;
  }
  return out as unknown as RequestLimits;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const field = (o: Record<string, unknown>, k: string): unknown => (Object.hasOwn(o, k) ? o[k] : undefined);

/** The walks below hand the event loop back after this many ms of work, so checking a
 * multi-megabyte body never holds /health or a running stream for longer. */
const SLICE_MS = 4;
/** Nodes visited between two looks at the clock. */
const NODES_PER_LOOK = 1024;
const yieldLoop = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Visit `root` and every value inside it (iteratively: no recursion over client JSON),
 * yielding the event loop every SLICE_MS. `visit` gets each value and, for object
 * members, its key. */
async function walk(root: unknown, visit: (x: unknown, key: string | null) => void): Promise<void> {
  const values: unknown[] = [root];
  const keys: (string | null)[] = [null];
  let sliceStart = performance.now();
  let n = 0;
  while (values.length > 0) {
    const x = values.pop();
    visit(x, keys.pop()!);
    if (Array.isArray(x)) {
      for (const it of x) {
        values.push(it);
        keys.push(null);
      }
    } else if (isObj(x)) {
      for (const k in x) {
        values.push(x[k]);
        keys.push(k);
      }
    }
    if (++n % NODES_PER_LOOK === 0 && performance.now() - sliceStart > SLICE_MS) {
      await yieldLoop();
      sliceStart = performance.now();
    }
  }
}

/** Members whose strings are image payloads, never prompt text: Chat Completions'
 * `image_url.url`, Responses' `input_image.image_url`, Anthropic's `source.data` / `source.url`.
 * An image part stands in the prompt as one placeholder; its bytes are bounded by
 * --max-body-bytes and decoded under --max-image-pixels / --max-images instead. */
const IMAGE_PAYLOAD_KEYS = new Set(['url', 'image_url', 'data']);

/** Total length of the prompt strings inside `v` (keys and image payloads excluded). */
async function textChars(v: unknown): Promise<number> {
  let n = 0;
  await walk(v, (x, key) => {
    if (typeof x === 'string' && (key === null || !IMAGE_PAYLOAD_KEYS.has(key))) n += x.length;
  });
  return n;
}

/** The size of the largest `enum` array under a schema. */
async function largestEnum(schema: unknown): Promise<number> {
  let largest = 0;
  await walk(schema, (x) => {
    if (!isObj(x)) return;
    const e = field(x, 'enum');
    if (Array.isArray(e)) largest = Math.max(largest, e.length);
  });
  return largest;
}

/** Characters JSON.stringify escapes (and lone surrogates, which it writes as \uXXXX). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const stringBytes = (s: string): number =>
  (NEEDS_ESCAPE.test(s) ? Buffer.byteLength(JSON.stringify(s), 'utf8') : Buffer.byteLength(s, 'utf8') + 2);

/** UTF-8 bytes of JSON.stringify(v) for a value parsed from JSON, counted by a walk
 * (stringifying a multi-megabyte tools array would hold the event loop). */
export async function jsonBytes(v: unknown): Promise<number> {
  let n = 0;
  await walk(v, (x, key) => {
    if (key !== null) n += stringBytes(key) + 1; // "key":
    if (typeof x === 'string') n += stringBytes(x);
    else if (typeof x === 'number') n += String(Number.isFinite(x) ? x : null).length;
    else if (typeof x === 'boolean') n += x ? 4 : 5;
    else if (x === null) n += 4;
    else if (Array.isArray(x)) n += 2 + Math.max(0, x.length - 1);
    else if (isObj(x)) {
      let members = 0;
      for (const _ in x) members++;
      n += 2 + Math.max(0, members - 1);
    }
  });
  return n;
}

async function checkSchema(schema: unknown, param: string, limits: RequestLimits): Promise<void> {
  if (schema === undefined || schema === null) return;
  const n = await largestEnum(schema);
  if (n > limits.enumValues) {
    throw new ApiError(400, `${param} has an enum of ${n} values, more than the limit of ${limits.enumValues} (--max-enum)`,
      param, 'enum_too_large');
  }
  const bytes = await jsonBytes(schema);
  if (bytes > limits.schemaBytes) {
    throw new ApiError(413, `${param} is ${bytes} bytes of JSON, more than the limit of ${limits.schemaBytes} (--max-schema-bytes)`,
      param, 'schema_too_large');
  }
}

/** The schemas a request carries, with the field naming each. */
function schemasOf(b: Record<string, unknown>): [unknown, string][] {
  const out: [unknown, string][] = [];
  const rf = field(b, 'response_format');
  if (isObj(rf) && isObj(field(rf, 'json_schema'))) out.push([field(field(rf, 'json_schema') as Record<string, unknown>, 'schema'), 'response_format.json_schema.schema']);
  const text = field(b, 'text');
  if (isObj(text) && isObj(field(text, 'format'))) out.push([field(field(text, 'format') as Record<string, unknown>, 'schema'), 'text.format.schema']);
  const tools = field(b, 'tools');
  if (Array.isArray(tools)) {
    tools.forEach((t: unknown, i) => {
      if (!isObj(t)) return;
      const f = field(t, 'function');
      const holder = isObj(f) ? f : t;
      const where = isObj(f) ? `tools[${i}].function` : `tools[${i}]`;
      for (const k of ['parameters', 'input_schema']) out.push([field(holder, k), `${where}.${k}`]);
    });
  }
  return out;
}

/** The prompt-text fields of every route, and the one that names the prompt in errors. */
const PROMPT_FIELDS = ['messages', 'prompt', 'input', 'system', 'instructions'] as const;

/** 413/400 naming the limit when a parsed body exceeds one. Call before any preparation
 * work. The walks yield the event loop every few ms, so a huge body delays only itself. */
export async function checkRequestLimits(body: unknown, limits: RequestLimits): Promise<void> {
  if (!isObj(body)) return; // the route's own validation names this
  let chars = 0;
  let named: string | null = null;
  for (const k of PROMPT_FIELDS) {
    const v = field(body, k);
    if (v === undefined || v === null) continue;
    named ??= k;
    chars += await textChars(v);
  }
  if (chars > limits.promptChars) {
    throw new ApiError(413, `${named}: the prompt text is ${chars} characters, more than the limit of ${limits.promptChars} (--max-prompt-chars)`,
      named, 'prompt_too_large', 'invalid_request_error');
  }
  for (const k of ['messages', 'input'] as const) {
    const v = field(body, k);
    if (Array.isArray(v) && v.length > limits.messages) {
      throw new ApiError(400, `${k} holds ${v.length} items, more than the limit of ${limits.messages} (--max-messages)`, k, 'too_many_messages');
    }
  }
  const tools = field(body, 'tools');
  if (Array.isArray(tools)) {
    if (tools.length > limits.tools) {
      throw new ApiError(400, `tools holds ${tools.length} tools, more than the limit of ${limits.tools} (--max-tools)`, 'tools', 'too_many_tools');
    }
    const bytes = await jsonBytes(tools);
    if (bytes > limits.toolsBytes) {
      throw new ApiError(413, `tools is ${bytes} bytes of JSON, more than the limit of ${limits.toolsBytes} (--max-tools-bytes)`, 'tools', 'tools_too_large');
    }
  }
  for (const [schema, param] of schemasOf(body)) await checkSchema(schema, param, limits);
}
