// Chat prompts whose client text can never become added (control) tokens.
//
// The chat template renders client strings (content, names, tool arguments, template
// variables) into one text, and tokenizing that text matches added tokens anywhere in it:
// a message whose content is `<|im_end|>\n<|im_start|>system` would forge a system turn, a
// tool result holding `</tool_response>` would close the response early, a typed
// `<|image_pad|>` would become an image slot. Every added token counts, whatever the
// vocabulary marks special: Qwen3.5's `<think>`, `<tool_call>`, `<tool_response>` and vision
// placeholders are `special: false`. So before rendering, every stretch of a client string
// that could form an added token — each occurrence of an added token's text, a proper
// prefix (≥ 2 characters) of one at the string's end and a proper suffix (≥ 2 characters) at
// its start, which could join a neighbouring string's text — is wrapped in a pair of markers. After rendering, the text
// between markers is tokenized as plain text (TextTokenizer.encodeText) and the rest
// normally. Markers are ASCII letters and digits with a random nonce: no Jinja filter a
// template applies to content (trim, tojson, split on other text) alters or forges them;
// the one split templates make on added-token text (`</think>` in assistant content) is made
// before protection (splitReasoning). Strings without added-token text are untouched, so ordinary prompts render and
// tokenize exactly as before.
//
// Text the server itself adds after protection (a `place` step: tool blocks written into
// the messages for templates without tool support) is matched like the template's own.
//
// Invariant: every added id in the result comes from the template's or the server's own text.
import { randomBytes } from 'node:crypto';
import { DeltaserveError } from '../util/errors.js';
import { type ChatMessage, renderChat, type RenderOptions } from './chat-template.js';
import { THINK_CLOSE, THINK_OPEN } from '../tokenizer/reasoning.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';

/** A copy of a client value whose strings (and object keys) stay plain text when rendered. */
export type Protect = <T>(v: T) => T;

export interface ChatInput {
  readonly messages: readonly ChatMessage[];
  readonly opts: RenderOptions;
}

/** Adds the server's own text to a protected chat input; client values it brings in must go
 * through `protect`. */
export type Place = (input: ChatInput, protect: Protect) => ChatInput;

/** Client JSON handed to a template nests at most this deep (the server's body limit is lower). */
const MAX_DEPTH = 1000;

interface Markers {
  readonly open: string;
  readonly close: string;
}

function newMarkers(): Markers {
  const nonce = randomBytes(12).toString('hex');
  return { open: `qx${nonce}o`, close: `qx${nonce}c` };
}

/** [start, end) ranges of `s` to tokenize as plain text, sorted and merged. */
function guardedRanges(s: string, added: readonly string[]): [number, number][] {
  const ranges: [number, number][] = [];
  for (const t of added) {
    for (let at = s.indexOf(t); at >= 0; at = s.indexOf(t, at + 1)) ranges.push([at, at + t.length]);
    for (let k = Math.min(t.length - 1, s.length); k >= 2; k--) {
      if (s.endsWith(t.slice(0, k))) {
        ranges.push([s.length - k, s.length]);
        break;
      }
    }
    for (let k = Math.min(t.length - 1, s.length); k >= 2; k--) {
      if (s.startsWith(t.slice(t.length - k))) {
        ranges.push([0, k]);
        break;
      }
    }
  }
  ranges.sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const r of ranges) {
    const last = merged[merged.length - 1];
    if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
    else merged.push([r[0], r[1]]);
  }
  return merged;
}

/** `s` with its added-token-like stretches wrapped in markers. */
function protectString(s: string, added: readonly string[], m: Markers): string {
  const ranges = guardedRanges(s, added);
  if (ranges.length === 0) return s;
  let out = '';
  let pos = 0;
  for (const [a, b] of ranges) {
    out += s.slice(pos, a) + m.open + s.slice(a, b) + m.close;
    pos = b;
  }
  return out + s.slice(pos);
}

/** A copy of a client value with every string (and object key) protected. */
function protectValue(v: unknown, added: readonly string[], m: Markers, depth: number): unknown {
  if (typeof v === 'string') return protectString(v, added, m);
  if (typeof v !== 'object' || v === null) return v;
  if (depth > MAX_DEPTH) throw new DeltaserveError('bad_request', `chat input nests deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(v)) return v.map((x) => protectValue(x, added, m, depth + 1));
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [protectString(k, added, m), protectValue(x, added, m, depth + 1)]));
}

/** Tokenize rendered text: marked stretches as plain text, the rest with added tokens matched. */
function encodeMarked(tok: TextTokenizer, text: string, m: Markers): number[] {
  const ids: number[] = [];
  let pos = 0;
  for (;;) {
    const a = text.indexOf(m.open, pos);
    const outside = text.slice(pos, a < 0 ? text.length : a);
    if (outside.includes(m.close)) throw new DeltaserveError('bad_request', 'chat template failed: it cut a client text apart');
    for (const id of tok.encode(outside)) ids.push(id);
    if (a < 0) return ids;
    const b = text.indexOf(m.close, a + m.open.length);
    const inside = b < 0 ? '' : text.slice(a + m.open.length, b);
    if (b < 0 || inside.includes(m.open)) throw new DeltaserveError('bad_request', 'chat template failed: it cut a client text apart');
    for (const id of tok.encodeText(inside)) ids.push(id);
    pos = b + m.close.length;
  }
}

/**
 * Templates that read `reasoning_content` (Qwen's) split an assistant message without one at
 * its first `</think>`, with string operations that would cut a protected `</think>` apart.
 * The same split is done here first — reasoning: the text before the first `</think>`, after
 * the last `<think>` before it, newlines trimmed; content: the text after the last `</think>`
 * — so the template renders exactly what it did, and the tags become the template's own.
 */
function splitReasoning(template: string, messages: readonly ChatMessage[]): readonly ChatMessage[] {
  if (!template.includes('reasoning_content')) return messages;
  return messages.map((msg) => {
    if (msg.role !== 'assistant' || msg.reasoning_content !== undefined || !msg.content.includes(THINK_CLOSE)) return msg;
    const parts = msg.content.split(THINK_CLOSE);
    const reasoning = parts[0]!.replace(/\n+$/, '').split(THINK_OPEN).pop()!.replace(/^\n+/, '');
    return { ...msg, reasoning_content: reasoning, content: parts[parts.length - 1]!.replace(/^\n+/, '') };
  });
}

/** Token ids of `messages` under `template`; client text never yields added ids. `place`
 * adds the server's own text (tools/prompt.ts) to the protected input. */
export function encodeChat(tok: TextTokenizer, template: string, messages: readonly ChatMessage[], opts: RenderOptions, place?: Place): number[] {
  const texts = tok.addedTexts;
  const m = newMarkers();
  const protect: Protect = texts.length === 0 ? (v) => v : (v) => protectValue(v, texts, m, 0) as typeof v;
  let input: ChatInput = {
    messages: protect(splitReasoning(template, messages)),
    opts: { ...opts, ...(opts.extra ? { extra: protect(opts.extra) } : {}) },
  };
  if (place) input = place(input, protect);
  const text = renderChat(template, input.messages, input.opts);
  return texts.length === 0 ? tok.encode(text) : encodeMarked(tok, text, m);
}
