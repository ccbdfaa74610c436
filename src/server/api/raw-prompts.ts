// Raw prompts (POST /v1/completions): no chat template; a string, a list of strings, token ids
// or a list of token-id lists. Parsing is synchronous (the codec's parse); tokenizing texts and
// decoding id lists (for echo) run in the prepare pool (the turn pipeline's prompt stage).
import { REQUEST_LIMITS } from '../../engine/request-rules.js';
import type { ServerContext } from '../context.js';
import { invalid } from '../http/errors.js';
import { prepare } from '../../frontend/prepare-jobs.js';
import { checkPromptLength } from './choices.js';
import { tokenIds } from './validate.js';

/** One prompt of a request: a text to tokenize or token ids, with the field that gave it. */
export type RawPrompt = { readonly text: string; readonly param: string } | { readonly ids: number[]; readonly param: string };

/** The prompts of a request, validated: texts (to tokenize) or token ids. */
export function rawPrompts(vocab: number, v: unknown): RawPrompt[] {
  if (v === undefined || v === null) throw invalid('prompt', 'prompt is required');
  const fromText = (s: string, param: string): RawPrompt => {
    if (s.length === 0) throw invalid(param, `${param} must not be empty`);
    return { text: s, param };
  };
  const fromIds = (x: unknown, param: string): RawPrompt => ({ ids: [...tokenIds(x, param, vocab)], param });
  if (typeof v === 'string') return [fromText(v, 'prompt')];
  if (!Array.isArray(v)) throw invalid('prompt', 'prompt must be a string, an array of strings, an array of token ids or an array of token-id arrays');
  if (v.length === 0) throw invalid('prompt', 'prompt must not be empty');
  if (v.every((x) => typeof x === 'number')) return [fromIds(v, 'prompt')];
  const maxPrompts = REQUEST_LIMITS.promptsPerRequest;
  if (v.length > maxPrompts) throw invalid('prompt', `at most ${maxPrompts} prompts per request (got ${v.length})`);
  return v.map((x: unknown, i) => {
    if (typeof x === 'string') return fromText(x, `prompt[${i}]`);
    if (Array.isArray(x)) return fromIds(x, `prompt[${i}]`);
    throw invalid(`prompt[${i}]`, `prompt[${i}] must be a string or an array of token ids`);
  });
}

/** Token ids and text of every prompt (texts tokenized, id lists decoded, in the prepare pool),
 * each checked to leave room to generate. */
export async function encodeRawPrompts(ctx: ServerContext, inputs: readonly RawPrompt[], signal: AbortSignal): Promise<{ ids: number[]; text: string }[]> {
  const texts = inputs.flatMap((p) => ('text' in p ? [p.text] : []));
  const idLists = inputs.flatMap((p) => ('ids' in p ? [p.ids] : []));
  // a token-id prompt longer than the context is refused before decoding it
  for (const p of inputs) if ('ids' in p) checkPromptLength(ctx, p.ids, p.param);
  const [encoded, decoded] = await Promise.all([
    texts.length > 0 ? prepare(ctx, { op: 'encode', texts }, signal).then((r) => r.ids) : [],
    idLists.length > 0 ? prepare(ctx, { op: 'decode', ids: idLists }, signal).then((r) => r.texts) : [],
  ]);
  let t = 0;
  let d = 0;
  const prompts = inputs.map((p) => {
    if ('ids' in p) return { ids: p.ids, text: decoded[d++]! };
    const ids = encoded[t++]!;
    if (ids.length === 0) throw invalid(p.param, `${p.param} encodes to no tokens`);
    return { ids, text: p.text };
  });
  prompts.forEach((pr, i) => checkPromptLength(ctx, pr.ids, prompts.length > 1 ? `prompt[${i}]` : 'prompt'));
  return prompts;
}
