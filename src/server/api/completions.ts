// POST /v1/completions: raw prompts (no chat template) given as a string, a list of
// strings, token ids or a list of token-id lists; n choices per prompt; echo; legacy
// `logprobs` (int: top alternatives per token); SSE streaming. A codec over the turn pipeline
// (turn.ts) with raw prompts (raw-prompts.ts): no template, no constraint.
import { REQUEST_LIMITS, REQUEST_PARAMS } from '../../engine/request-rules.js';
import type { ServerContext } from '../context.js';
import type { Call } from '../http/call.js';
import { sendJson } from '../http/respond.js';
import { SseStream } from '../http/sse.js';
import { checkModel, type Choice, collectAll, type Done, failed, responseId, usageOf } from './choices.js';
import { COMMON_FIELDS, type FieldRules } from './fields.js';
import { completionLogprobs, type TokenLogprob } from './logprobs.js';
import { rawPrompts } from './raw-prompts.js';
import { type Codec, runTurn, type Turn, type TurnPrompt, turnParams } from './turn.js';
import { optBool, optParam } from './validate.js';

interface CompletionsOwn {
  /** Prefix each choice's text (and logprobs) with its prompt. */
  readonly echo: boolean;
}

const FIELDS: FieldRules = { ...COMMON_FIELDS, prompt: true, max_tokens: true, echo: true, best_of: (v) => v === 1 };

export const completionsCodec: Codec<CompletionsOwn> = {
  path: '/v1/completions',
  fields: FIELDS,
  parse(ctx, b) {
    checkModel(ctx, b);
    const inputs = rawPrompts(ctx.engine.info.config.vocabSize, b['prompt']);
    const p = turnParams(ctx, b, ['max_tokens']);
    const params = p.request.maxTokens === undefined ? { ...p, request: { ...p.request, maxTokens: REQUEST_LIMITS.completionsDefaultMaxTokens } } : p;
    const echo = optBool(b, 'echo') ?? false;
    const logprobs = optParam(b, 'logprobs', REQUEST_PARAMS.topLogprobs) ?? null;
    return { prompt: { kind: 'raw', inputs }, params, tools: null, format: { kind: 'text' }, thinkingBudget: null, topLogprobs: logprobs, own: { echo } };
  },
  render(ctx, call, turn) {
    const head = { id: responseId('cmpl'), created: Math.floor(Date.now() / 1000), model: ctx.modelName };
    return turn.request.params.stream ? streamCompletions(ctx, call, turn, head) : respondCompletions(ctx, call, turn, head);
  },
};

/** POST /v1/completions. */
export const completions = (ctx: ServerContext, call: Call): Promise<void> => runTurn(ctx, call, completionsCodec);

/** The prompt a choice ran (choice i·n + j runs prompt i). */
const promptOf = (turn: Turn<CompletionsOwn>, c: Choice): TurnPrompt => turn.prompts[Math.floor(c.index / turn.request.params.n)]!;

async function respondCompletions(ctx: ServerContext, call: Call, turn: Turn<CompletionsOwn>, head: Record<string, unknown>): Promise<void> {
  const { echo } = turn.request.own;
  const results = await collectAll(turn.choices);
  sendJson(call.res, 200, {
    ...head, object: 'text_completion',
    choices: results.map((r, i) => {
      const c = turn.choices[i]!;
      const prefix = echo ? promptOf(turn, c).text : '';
      return {
        index: c.index, text: prefix + r.text,
        logprobs: turn.request.topLogprobs !== null ? completionLogprobs(r.logprobs, ctx.texts, 0, echo ? promptOf(turn, c).ids : []) : null,
        finish_reason: r.done.finishReason,
      };
    }),
    usage: usageOf(results.map((r) => r.done), turn.request.params.n),
  });
}

async function streamCompletions(ctx: ServerContext, call: Call, turn: Turn<CompletionsOwn>, head: Record<string, unknown>): Promise<void> {
  const { echo } = turn.request.own;
  const { includeUsage, n } = turn.request.params;
  const wantLogprobs = turn.request.topLogprobs !== null;
  const sse = new SseStream(call.res);
  const base = { ...head, object: 'text_completion' };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (index: number, text: string, logprobs: unknown, finish: string | null): void => {
    sse.send({ ...base, choices: [{ index, text, logprobs, finish_reason: finish }], ...usageNull });
  };
  const dones = await Promise.all(turn.choices.map(async (c): Promise<Done | null> => {
    let offset = 0;
    const lp = (entries: TokenLogprob[], promptIds: number[] = []): unknown => {
      return wantLogprobs ? completionLogprobs(entries, ctx.texts, offset, promptIds) : null;
    };
    if (echo) {
      const pr = promptOf(turn, c);
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
