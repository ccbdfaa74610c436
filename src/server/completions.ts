// POST /v1/completions: raw prompts (no chat template) given as a string, a list of
// strings, token ids or a list of token-id lists; n choices per prompt; echo; legacy
// `logprobs` (int: top alternatives per token); SSE streaming.
import { invalid, toApiError } from './errors.js';
import {
  admit, type Call, cancelAll, checkModel, checkPromptLength, type Choice, collect, failed, type Done, responseId,
  type ServerContext, startChoices, usageOf,
} from './generation.js';
import { completionLogprobs, type TokenLogprob } from './logprobs.js';
import { sendJson } from './respond.js';
import { SseStream } from './sse.js';
import { checkFields, COMMON_FIELDS } from './fields.js';
import { prepare } from '../frontend/prepare-jobs.js';
import { REQUEST_LIMITS, REQUEST_PARAMS } from '../engine/request-rules.js';
import { commonParams, optBool, optParam, requireObject, tokenIds } from './validate.js';


type PromptInput = { readonly text: string; readonly param: string } | { readonly ids: number[]; readonly param: string };

/** The prompts of a request, validated: texts (to tokenize) or token ids. */
function promptInputs(vocab: number, v: unknown): PromptInput[] {
  if (v === undefined || v === null) throw invalid('prompt', 'prompt is required');
  const fromText = (s: string, param: string): PromptInput => {
    if (s.length === 0) throw invalid(param, `${param} must not be empty`);
    return { text: s, param };
  };
  const fromIds = (x: unknown, param: string): PromptInput => ({ ids: [...tokenIds(x, param, vocab)], param });
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

/** Token ids and text of every prompt in the request (texts tokenized in the prepare pool). */
async function promptsOf(ctx: ServerContext, v: unknown, signal: AbortSignal): Promise<{ ids: number[]; text: string }[]> {
  const inputs = promptInputs(ctx.engine.info.config.vocabSize, v);
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
  return inputs.map((p) => {
    if ('ids' in p) return { ids: p.ids, text: decoded[d++]! };
    const ids = encoded[t++]!;
    if (ids.length === 0) throw invalid(p.param, `${p.param} encodes to no tokens`);
    return { ids, text: p.text };
  });
}

export async function completions(ctx: ServerContext, call: Call): Promise<void> {
  const { engine } = ctx;
  const b = requireObject(call.body);
  checkFields(b, { ...COMMON_FIELDS, prompt: true, max_tokens: true, echo: true, best_of: (v) => v === 1 }, ctx.lenient ?? false, '/v1/completions');
  checkModel(ctx, b);
  const prompts = await promptsOf(ctx, b['prompt'], call.signal);
  const p = commonParams(b, engine.maxContext, engine.info.config.vocabSize, ctx.defaults, ['max_tokens']);
  const params = p.request.maxTokens === undefined ? { ...p, request: { ...p.request, maxTokens: REQUEST_LIMITS.completionsDefaultMaxTokens } } : p;
  const echo = optBool(b, 'echo') ?? false;
  const logprobs = optParam(b, 'logprobs', REQUEST_PARAMS.topLogprobs) ?? null;
  prompts.forEach((pr, i) => checkPromptLength(ctx, pr.ids, prompts.length > 1 ? `prompt[${i}]` : 'prompt'));
  admit(ctx, prompts.map((pr) => pr.ids), p.n, params.request.maxTokens);
  let choices: Choice[];
  try {
    choices = startChoices(ctx, call, prompts.map((pr) => pr.ids), params, logprobs);
  } catch (e) {
    throw toApiError(e, 'prompt');
  }
  const head = { id: responseId('cmpl'), created: Math.floor(Date.now() / 1000), model: ctx.modelName };
  const promptOf = (c: Choice): { ids: number[]; text: string } => prompts[Math.floor(c.index / p.n)]!;
  try {
    if (p.stream) await streamCompletions(ctx, call, choices, head, echo, logprobs !== null, p.includeUsage, p.n, promptOf);
    else {
      const results = await Promise.all(choices.map(collect));
      const err = results.find((r) => r.done.finishReason === 'error');
      if (err) throw failed(err.done);
      sendJson(call.res, 200, {
        ...head, object: 'text_completion',
        choices: results.map((r, i) => {
          const c = choices[i]!;
          const prefix = echo ? promptOf(c).text : '';
          return {
            index: c.index, text: prefix + r.text,
            logprobs: logprobs !== null ? completionLogprobs(r.logprobs, ctx.texts, 0, echo ? promptOf(c).ids : []) : null,
            finish_reason: r.done.finishReason,
          };
        }),
        usage: usageOf(results.map((r) => r.done), p.n),
      });
    }
  } finally {
    cancelAll(choices);
  }
}

async function streamCompletions(ctx: ServerContext, call: Call, choices: Choice[], head: Record<string, unknown>, echo: boolean,
  wantLogprobs: boolean, includeUsage: boolean, n: number, promptOf: (c: Choice) => { ids: number[]; text: string }): Promise<void> {
  const sse = new SseStream(call.res);
  const base = { ...head, object: 'text_completion' };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (index: number, text: string, logprobs: unknown, finish: string | null): void => {
    sse.send({ ...base, choices: [{ index, text, logprobs, finish_reason: finish }], ...usageNull });
  };
  const dones = await Promise.all(choices.map(async (c): Promise<Done | null> => {
    let offset = 0;
    const lp = (entries: TokenLogprob[], promptIds: number[] = []): unknown => {
      return wantLogprobs ? completionLogprobs(entries, ctx.texts, offset, promptIds) : null;
    };
    if (echo) {
      const pr = promptOf(c);
      chunk(c.index, pr.text, lp([], pr.ids), null);
      offset += pr.text.length;
    }
    for await (const ev of c.events) {
      if (ev.type === 'delta') {
        const entries = c.logprobs ? c.logprobs.take(ev.ids) : [];
        if (ev.text || entries.length > 0) chunk(c.index, ev.text, lp(entries), null);
        offset += ev.text.length;
        continue;
      }
      chunk(c.index, '', null, ev.finishReason);
      if (ev.finishReason === 'error') sse.send(failed(ev).body());
      return ev;
    }
    return null;
  }));
  if (includeUsage && dones.every((d) => d !== null)) sse.send({ ...base, choices: [], usage: usageOf(dones as Done[], n) });
  sse.done();
}
