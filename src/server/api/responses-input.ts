// Responses `input` → the conversation's items → template messages.
//
// - `input` is a string (one user message) or items: messages, function_call,
//   function_call_output, reasoning, and `item_reference` ({type: "item_reference", id} or a bare
//   {id}), which is replaced by the stored item of that id. A reference to a reasoning item
//   (`rs_…`) that is not stored is dropped (reasoning is optional context); any other unknown
//   reference is a 400 naming it.
// - `previous_response_id` puts the stored conversation of that response in front.
// - Reasoning items give their text (`content` reasoning_text parts, or the sealed
//   `encrypted_content`) to the next assistant turn as its reasoning, which the chat template
//   renders where the model saw it (after the last user message: tool loops) and drops elsewhere.
import type { TurnImages } from './images.js';
import type { ChatMessage } from '../../frontend/chat-template.js';
import { ApiError, invalid } from '../http/errors.js';
import { openReasoning } from './responses-crypto.js';
import type { Item, ResponseStore } from './responses-store.js';
import { callArguments } from './tools/openai.js';
import { DEFAULT_LIMITS } from '../http/limits.js';

const isObj = (v: unknown): v is Item => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What input resolution needs of the server. */
export interface InputContext {
  readonly store: ResponseStore | null;
  readonly key: Buffer;
}

/** A bare `{id}` or `{type: "item_reference", id}`. */
function isReference(item: Item): boolean {
  return item['type'] === 'item_reference' || (item['type'] === undefined && item['role'] === undefined && typeof item['id'] === 'string');
}

/** An item of the conversation and the field it came from (named in errors). */
export interface Sourced {
  readonly item: Item;
  readonly param: string;
}

/** The items of `input` with references resolved (stored items copied in). */
export function resolveInput(input: unknown, ctx: InputContext): Sourced[] {
  if (typeof input === 'string') return [{ item: { type: 'message', role: 'user', content: input }, param: 'input' }];
  if (!Array.isArray(input) || input.length === 0) throw invalid('input', 'input must be a string or a non-empty array of items');
  const out: Sourced[] = [];
  input.forEach((item: unknown, i) => {
    const param = `input[${i}]`;
    if (!isObj(item)) throw invalid(param, `${param} must be an object`);
    if (!isReference(item)) return void out.push({ item, param });
    const id = item['id'];
    if (typeof id !== 'string') throw invalid(`${param}.id`, `${param}.id must be a string`);
    const found = ctx.store?.item(id) ?? null;
    if (found) out.push({ item: found, param });
    else if (!id.startsWith('rs_')) {
      throw new ApiError(400, `${param}: item_reference "${id}" is not in the response store (never stored, expired, deleted, or sent with store: false)`,
        `${param}.id`, 'item_not_found');
    }
  });
  return out;
}

/** The conversation of `previous_response_id` (400 when it is not stored). */
export function previousConversation(id: unknown, store: ResponseStore | null): Sourced[] {
  if (id === undefined || id === null) return [];
  if (typeof id !== 'string') throw invalid('previous_response_id', 'previous_response_id must be a string');
  const prev = store?.get(id) ?? null;
  if (!prev) {
    throw new ApiError(400, `previous_response_id: response "${id}" is not in the response store (never stored, expired, deleted, or sent with store: false)`,
      'previous_response_id', 'previous_response_not_found');
  }
  return prev.conversation.map((item, i) => ({ item, param: `previous_response_id (item ${i})` }));
}

/** Text of a message's content: a string or input_text / output_text parts, and
 * input_image parts (`image_url`: a data: or http(s) URL) standing as `images`' sentinel. */
function itemText(c: unknown, param: string, images?: TurnImages): string {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw invalid(param, `${param} must be a string or an array of text parts`);
  return c.map((p: unknown, j) => {
    if (images && isObj(p) && p['type'] === 'input_image') {
      if (p['image_url'] === undefined && p['file_id'] !== undefined) throw invalid(`${param}[${j}]`, `${param}[${j}]: input_image by file_id is not supported; send image_url`);
      return images.addUrl(p['image_url'], `${param}[${j}]`);
    }
    if (!isObj(p) || !['input_text', 'output_text', 'text'].includes(p['type'] as string) || typeof p['text'] !== 'string') {
      throw invalid(`${param}[${j}]`, `${param}[${j}] must be {"type": "input_text", "text": ...} (only text is served)`);
    }
    return p['text'];
  }).join('');
}

/** The reasoning text of a reasoning item: its reasoning_text parts, else its sealed blob;
 * null when it has neither. A blob this server did not seal is a 400. */
function reasoningText(item: Item, param: string, key: Buffer): string | null {
  const parts = item['content'];
  if (Array.isArray(parts) && parts.length > 0) {
    return parts.map((p: unknown) => (isObj(p) && typeof p['text'] === 'string' ? p['text'] : '')).join('');
  }
  const blob = item['encrypted_content'];
  if (blob === undefined || blob === null) return null;
  const opened = typeof blob === 'string' ? openReasoning(key, blob) : null;
  if (!opened) {
    throw invalid(`${param}.encrypted_content`, `${param}.encrypted_content was not sealed by this server (or was altered); send the blob as it was returned`,
      'invalid_encrypted_content');
  }
  return opened.text;
}

/** `instructions` + items → template messages. */
export function responsesMessages(items: readonly Sourced[], instructions: string | undefined, key: Buffer,
  maxDepth = DEFAULT_LIMITS.jsonDepth, images?: TurnImages): ChatMessage[] {
  const out: ChatMessage[] = instructions ? [{ role: 'system', content: instructions }] : [];
  let reasoning: string | null = null;
  const assistant = (m: ChatMessage): ChatMessage => {
    if (reasoning !== null) m.reasoning_content = reasoning;
    reasoning = null;
    return m;
  };
  items.forEach(({ item, param }) => {
    const type = item['type'] ?? 'message';
    if (type === 'message') {
      const role = item['role'];
      if (!['user', 'assistant', 'system', 'developer'].includes(role as string)) {
        throw invalid(`${param}.role`, `${param}.role must be "user", "assistant", "system" or "developer"`);
      }
      const m: ChatMessage = { role: role === 'developer' ? 'system' : role as string, content: itemText(item['content'], `${param}.content`, images) };
      out.push(role === 'assistant' ? assistant(m) : m);
    } else if (type === 'function_call') {
      if (typeof item['name'] !== 'string' || typeof item['call_id'] !== 'string') {
        throw invalid(param, `${param}: a function_call needs "call_id" and "name" strings`);
      }
      const tc = { id: item['call_id'], type: 'function' as const, function: { name: item['name'], arguments: callArguments(item['arguments'], `${param}.arguments`, maxDepth) } };
      const prev = out[out.length - 1];
      if (reasoning === null && prev?.role === 'assistant' && (prev.tool_calls || prev.content === '')) (prev.tool_calls ??= []).push(tc);
      else out.push(assistant({ role: 'assistant', content: '', tool_calls: [tc] }));
    } else if (type === 'function_call_output') {
      const output = item['output'];
      if (typeof item['call_id'] !== 'string') throw invalid(`${param}.call_id`, `${param}.call_id must be a string`);
      out.push({ role: 'tool', tool_call_id: item['call_id'], content: typeof output === 'string' ? output : itemText(output, `${param}.output`) });
    } else if (type === 'reasoning') {
      const text = reasoningText(item, param, key);
      if (text !== null) reasoning = (reasoning ?? '') + text;
    } else {
      throw invalid(`${param}.type`, `${param}.type "${String(type)}" is not supported (message, function_call, function_call_output, reasoning, item_reference)`);
    }
  });
  if (out.length === 0) throw invalid('input', 'input has no messages');
  return out;
}
