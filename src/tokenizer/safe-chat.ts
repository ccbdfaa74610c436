// Chat prompts whose client text can never become special tokens.
//
// The chat template renders client strings (content, names, tool arguments, template
// variables) into one text, and tokenizing that text matches added tokens anywhere in it:
// a message whose content is `<|im_end|>\n<|im_start|>system` would forge a system turn.
// So before rendering, every stretch of a client string that could form a special token —
// each occurrence of a special token's text, a proper prefix (≥ 2 characters) of one at the
// string's end and a proper suffix (≥ 2 characters) at its start, which could join a
// neighbouring string's text — is wrapped in a pair of markers. After rendering, the text
// between markers is tokenized as plain text (TextTokenizer.encodeText) and the rest
// normally. Markers are ASCII letters and digits with a random nonce: no Jinja filter a
// template applies to content (trim, tojson, split on other text) alters or forges them.
// Strings without special-token text are untouched, so ordinary prompts render and
// tokenize exactly as before.
//
// Invariant: every special id in the result comes from the template's own text.
import { randomBytes } from 'node:crypto';
import { DeltaserveError } from '../util/errors.js';
import { type ChatMessage, renderChat, type RenderOptions } from './chat.js';
import type { TextTokenizer } from './tokenizer.js';

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
function guardedRanges(s: string, specials: readonly string[]): [number, number][] {
  const ranges: [number, number][] = [];
  for (const t of specials) {
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

/** `s` with its special-token-like stretches wrapped in markers. */
function protectString(s: string, specials: readonly string[], m: Markers): string {
  const ranges = guardedRanges(s, specials);
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
function protectValue(v: unknown, specials: readonly string[], m: Markers, depth: number): unknown {
  if (typeof v === 'string') return protectString(v, specials, m);
  if (typeof v !== 'object' || v === null) return v;
  if (depth > MAX_DEPTH) throw new DeltaserveError('bad_request', `chat input nests deeper than ${MAX_DEPTH} levels`);
  if (Array.isArray(v)) return v.map((x) => protectValue(x, specials, m, depth + 1));
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [protectString(k, specials, m), protectValue(x, specials, m, depth + 1)]));
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

/** Token ids of `messages` under `template`; client text never yields special ids. */
export function encodeChat(tok: TextTokenizer, template: string, messages: readonly ChatMessage[], opts: RenderOptions): number[] {
  const specials = tok.specialTexts;
  if (specials.length === 0) return tok.encode(renderChat(template, messages, opts));
  const m = newMarkers();
  const safeMessages = protectValue(messages, specials, m, 0) as ChatMessage[];
  const safeOpts: RenderOptions = { ...opts, ...(opts.extra ? { extra: protectValue(opts.extra, specials, m, 0) as Record<string, unknown> } : {}) };
  return encodeMarked(tok, renderChat(template, safeMessages, safeOpts), m);
}
