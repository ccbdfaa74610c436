// The turn pipeline's engine side (turn.ts): admission (queue limit, expected wait), one engine
// request per choice (seed + i for n > 1), logprob capture, and the per-choice latency / token
// metrics; collecting finished choices for non-streaming responses.
import type { Engine } from '../../engine/engine.js';
import type { GenerateRequest } from '../../engine/request-builder.js';
import type { Constraint } from '../../constrain/constraint.js';
import { generationBudget, leavesRoom, requestStopIds } from '../../engine/request-rules.js';
import type { GenerateEvent } from '../../engine/request.js';
import type { RequestRecord } from '../http/access-log.js';
import { ApiError } from '../http/errors.js';
import { LogprobCollector, type TokenLogprob } from './logprobs.js';
import type { ServerMetrics } from './metrics.js';
import type { CommonParams } from './validate.js';
import type { Call } from '../http/call.js';
import type { ServerContext } from '../context.js';

export type Done = Extract<GenerateEvent, { type: 'done' }>;

export interface Choice {
  readonly index: number;
  readonly promptIds: readonly number[];
  readonly events: AsyncIterableIterator<GenerateEvent>;
  readonly logprobs: LogprobCollector | null;
  /** Abort the engine request (safe at any time, also before iterating `events`). */
  readonly cancel: () => void;
}

/**
 * Admission of a request's choices (`n` per prompt; `maxTokens` as asked, undefined = up
 * to the context). They are queued when they can start within --max-queue-wait seconds
 * by the engine's estimate (admission.ts); otherwise, or when the queue holds
 * --max-queue requests, 503 with Retry-After (the estimated wait, at least 1 s) and an
 * error code naming the reason: `queue_full` or `pool_full`.
 */
export function admit(ctx: ServerContext, prompts: readonly (readonly number[])[], n: number, maxTokens: number | undefined): void {
  const { engine } = ctx;
  const reqs = prompts.flatMap((ids) => Array.from({ length: n }, () => ({
    promptTokens: ids.length, maxTokens: generationBudget(ids.length, engine.maxContext, maxTokens),
  })));
  const a = engine.admission(reqs);
  const seconds = (steps: number | undefined): number | null =>
    a.secondsPerStep === null || steps === undefined || !Number.isFinite(steps) ? null : steps * a.secondsPerStep;
  const retry = (s: number | null): Record<string, string> => ({ 'retry-after': String(Math.max(1, Math.ceil(s ?? 1))) });
  // queued requests that free slots take at the next step do not wait (requests now reach
  // admission one by one as the prepare pool finishes their prompts, between steps)
  const freeSlots = Math.max(0, a.maxRunning - a.running);
  const excess = Math.max(0, a.waiting + reqs.length - freeSlots) - ctx.maxQueue;
  if (excess > 0) {
    // there is room once `excess` of the queued requests have started
    const wait = seconds(a.steps[Math.min(excess, a.steps.length) - 1]);
    throw new ApiError(503, `the server is busy: ${a.waiting} requests are waiting (limit --max-queue ${ctx.maxQueue})${about(wait)}`,
      null, 'queue_full', 'server_error', retry(wait));
  }
  const start = Math.max(0, ...a.steps.slice(a.waiting));
  if (start === 0) return;
  const wait = seconds(start);
  if (ctx.maxQueueWait > 0 && (wait === null || wait <= ctx.maxQueueWait)) return;
  const why = a.blockedBy === 'slots'
    ? `all ${a.maxRunning} request slots are in use (--max-running)`
    : `the KV cache has ${a.freePages} of ${a.totalPages} pages free and ${a.waiting > 0 ? `${a.waiting} queued requests come first` : `the prompt needs ${a.pagesNeeded}`}`;
  const estimate = wait === null ? 'an unknown time' : `about ${Math.ceil(wait)} s`;
  throw new ApiError(503, `the server is momentarily full: ${why}; this request would wait ${estimate}, ` +
    `longer than --max-queue-wait ${ctx.maxQueueWait} s${about(wait)}`, null, 'pool_full', 'server_error', retry(wait));
}

const about = (wait: number | null): string => `; retry in ${Math.max(1, Math.ceil(wait ?? 1))} s`;

/** Ids that end generation (their token is not reported in logprobs). */
function stopIdsOf(engine: Engine, p: CommonParams): Set<number> {
  return requestStopIds(engine, p.request.ignoreEos ?? false, p.stopTokenIds);
}

/** Observe TTFT / inter-token latency while passing events through; count the finish. */
async function* instrumented(events: AsyncIterableIterator<GenerateEvent>, m: ServerMetrics, arrival: number,
  rec: RequestRecord | undefined): AsyncIterableIterator<GenerateEvent> {
  let last = -1;
  try {
    for await (const ev of events) {
      if (ev.type === 'delta' && ev.ids.length > 0) {
        const now = performance.now();
        if (last < 0) {
          m.ttft.observe((now - arrival) / 1000);
          if (rec && rec.ttftMs === null) rec.ttftMs = now - arrival;
        }
        else m.itl.observe((now - last) / 1000);
        last = now;
      } else if (ev.type === 'done') {
        m.finished.inc({ reason: ev.finishReason });
        m.promptTokens.inc({}, ev.usage.promptTokens);
        m.cachedTokens.inc({}, ev.usage.cachedTokens);
        m.generationTokens.inc({}, ev.usage.completionTokens);
        m.e2e.observe((performance.now() - arrival) / 1000);
        if (rec) recordDone(rec, ev);
        const spec = ev.spec;
        if (spec && spec.rounds > 0) {
          m.specRounds.inc({}, spec.rounds);
          m.specDrafted.inc({}, spec.drafted);
          m.specAccepted.inc({}, spec.accepted);
          m.acceptLen.observe((spec.accepted + spec.rounds) / spec.rounds);
        }
      }
      yield ev;
    }
  } finally {
    await events.return?.();
  }
}

/** Add a finished choice to the access-log record (prompt tokens: the largest, since the
 * n choices of one prompt share it). */
function recordDone(rec: RequestRecord, d: Done): void {
  rec.promptTokens = Math.max(rec.promptTokens, d.usage.promptTokens);
  rec.cachedTokens = Math.max(rec.cachedTokens, d.usage.cachedTokens);
  rec.completionTokens += d.usage.completionTokens;
  rec.finishReasons.push(d.finishReason);
  if (d.error !== undefined) rec.errors.push(d.error);
}

/**
 * Start `n` choices for each prompt (choice index = prompt index · n + i). Invalid requests
 * throw (before anything is sent); if a later choice fails to start, the earlier ones are
 * aborted.
 */
export function startChoices(ctx: ServerContext, call: Call, prompts: readonly (readonly number[])[], p: CommonParams,
  topLogprobs: number | null, constraint: Constraint | null = null): Choice[] {
  const { engine } = ctx;
  const skip = topLogprobs !== null ? stopIdsOf(engine, p) : new Set<number>();
  const choices: Choice[] = [];
  try {
    prompts.forEach((promptIds, pi) => {
      for (let i = 0; i < p.n; i++) {
        const logprobs = topLogprobs !== null ? new LogprobCollector(topLogprobs, skip) : null;
        const req: GenerateRequest = {
          ...p.request,
          promptIds,
          signal: call.signal,
          ...(p.seed !== undefined ? { seed: p.seed + i } : {}),
          ...(logprobs ? { logprobs: { top: logprobs.top, onToken: logprobs.push } } : {}),
          // each choice's engine request starts its own matcher of the shared constraint
          ...(constraint || p.logitBias ? { logitsAdjust: { bias: p.logitBias, constraint } } : {}),
        };
        const raw = engine.generate(req);
        const events = instrumented(raw, ctx.metrics, call.arrival, call.record);
        choices.push({ index: pi * p.n + i, promptIds, events, logprobs, cancel: () => void raw.return?.() });
      }
    });
  } catch (e) {
    for (const c of choices) c.cancel();
    throw e;
  }
  return choices;
}

export interface Collected {
  readonly text: string;
  readonly done: Done;
  readonly logprobs: TokenLogprob[];
}

/** Run a choice to its end (non-streaming responses). */
export async function collect(c: Choice): Promise<Collected> {
  const logprobs: TokenLogprob[] = [];
  for await (const ev of c.events) {
    if (ev.type === 'delta') {
      if (c.logprobs) logprobs.push(...c.logprobs.take(ev.ids));
    } else return { text: ev.text, done: ev, logprobs };
  }
  throw new ApiError(500, 'a request ended without a done event', null, 'internal_error');
}

/** Run every choice to its end; a failed one raises its error (as a 500). */
export async function collectAll(choices: readonly Choice[]): Promise<Collected[]> {
  const results = await Promise.all(choices.map(collect));
  const err = results.find((r) => r.done.finishReason === 'error');
  if (err) throw failed(err.done);
  return results;
}

/** OpenAI usage object over a request's finished choices (prompt tokens counted once per prompt). */
export function usageOf(dones: readonly Done[], n: number): Record<string, unknown> {
  let prompt = 0;
  let cached = 0;
  let completion = 0;
  dones.forEach((d, i) => {
    completion += d.usage.completionTokens;
    if (i % n === 0) {
      prompt += d.usage.promptTokens;
      cached += d.usage.cachedTokens;
    }
  });
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } };
}

/** A short random id: `chatcmpl-…`, `cmpl-…`. */
export function responseId(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().replace(/-/g, '')}`;
}

/** Raise the engine's error message of a failed choice as a 500. */
export function failed(d: Done): ApiError {
  return new ApiError(500, `generation failed: ${d.error ?? 'unknown error'}`, null, 'generation_failed');
}

/** `model`, when given, must name the served model (404 model_not_found otherwise). */
export function checkModel(ctx: ServerContext, b: Record<string, unknown>): void {
  const m = b['model'];
  if (m === undefined || m === null) return;
  if (typeof m !== 'string') throw new ApiError(400, `model must be a string (got ${JSON.stringify(m)})`, 'model');
  if (m !== ctx.modelName) {
    throw new ApiError(404, `The model "${m}" does not exist; this server serves "${ctx.modelName}"`, 'model', 'model_not_found');
  }
}

/** 400 context_length_exceeded when a prompt leaves no room to generate. */
export function checkPromptLength(ctx: ServerContext, ids: readonly number[], param: string): void {
  if (!leavesRoom(ids.length, ctx.engine.maxContext)) {
    throw new ApiError(400, `${param}: the prompt is ${ids.length} tokens; this model's context length is ${ctx.engine.maxContext}, leaving no room to generate`,
      param, 'context_length_exceeded');
  }
}

/** Cancel every choice once the handler is done with them (no-op for finished ones). */
export function cancelAll(choices: readonly Choice[]): void {
  for (const c of choices) c.cancel();
}
