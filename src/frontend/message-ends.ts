// Where the messages of a chat prompt end, in tokens: the prefix cache's split points
// (prefix.ts). A chat template closes every rendered message with the same tokens (ChatML:
// `<|im_end|>\n`); that marker is learned once per template by rendering two one-message
// conversations, and a message ends right after each occurrence of it in the prompt.
// Being a function of the tokens before it, a message end is found at the same place in
// every request that shares those tokens — turn 1 and turn 2 of a conversation agree on
// every split of their common prefix, whatever the number of messages (O(prompt) per request,
// no re-rendering of message prefixes). The system + tools preamble ends with the marker too.
import { renderChat } from './chat-template.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';

/** Longest marker accepted (ChatML's is 2 tokens). */
const MAX_MARKER = 4;

const learned = new WeakMap<TextTokenizer, { template: string; marker: readonly number[] | null }>();

/** The tokens that end every rendered message under the tokenizer's chat template, or null
 * when the template has none (no template, renders fail, or the common ending does not start
 * with a special token — text could then merge into it differently from one prompt to another). */
export function messageEndMarker(tok: TextTokenizer): readonly number[] | null {
  const template = tok.chatTemplate;
  if (!template) return null;
  const known = learned.get(tok);
  if (known && known.template === template) return known.marker;
  const marker = learnMarker(tok, template);
  learned.set(tok, { template, marker });
  return marker;
}

function learnMarker(tok: TextTokenizer, template: string): readonly number[] | null {
  let a: number[];
  let b: number[];
  try {
    const render = (content: string): number[] => tok.encode(renderChat(template, [{ role: 'user', content }], { addGenerationPrompt: false }));
    a = render('a');
    b = render('b c');
  } catch {
    return null;
  }
  let n = 0;
  while (n < Math.min(a.length, b.length, MAX_MARKER) && a[a.length - 1 - n] === b[b.length - 1 - n]) n++;
  // the marker starts where the contents differ, so it starts right after the content
  if (n === 0 || n === Math.min(a.length, b.length)) return null;
  const marker = a.slice(a.length - n);
  return tok.specialIds.has(marker[0]!) ? marker : null;
}

/** Positions in `ids` right after each occurrence of `marker`, at or after `from` (ascending). */
export function markerEnds(ids: readonly number[], marker: readonly number[], from = 0): number[] {
  const out: number[] = [];
  const m = marker.length;
  for (let i = Math.max(0, from - m); i + m <= ids.length; i++) {
    let hit = true;
    for (let j = 0; j < m && hit; j++) hit = ids[i + j] === marker[j];
    if (hit && i + m >= from) out.push(i + m);
  }
  return out;
}

/** Where each message of a chat prompt (its rendered token ids) ends. */
export function messageEnds(tok: TextTokenizer, ids: readonly number[]): number[] {
  const marker = messageEndMarker(tok);
  return marker ? markerEnds(ids, marker) : [];
}

/** The tokens a template appends after a generated message's last token to close it (the
 * rest of the marker when `ids` ends inside it, e.g. `\n` after `<|im_end|>`), or null when
 * `ids` does not end with a proper prefix of the marker. */
export function markerRest(tok: TextTokenizer, ids: readonly number[]): number[] | null {
  const marker = messageEndMarker(tok);
  if (!marker) return null;
  for (let k = marker.length; k >= 1; k--) {
    if (ids.length >= k && marker.slice(0, k).every((t, j) => ids[ids.length - k + j] === t)) return marker.slice(k);
  }
  return null;
}
