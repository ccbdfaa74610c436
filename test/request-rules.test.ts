// The request rules (src/engine/request-rules.ts) are the one definition of a request's
// ranges and limits: the engine's own check (engine.generate) and the server's (a 400 naming
// the field) refuse the same values with the same message and accept the same boundaries;
// the sampling check agrees with the table entry by entry; Anthropic's temperature range is
// its own entry, applied on /v1/messages only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../src/engine/engine.js';
import type { GenerateRequest } from '../src/engine/request-builder.js';
import {
  generationBudget, leavesRoom, paramProblem, REQUEST_LIMITS, REQUEST_PARAMS as P, stopStrings, validateSampling,
} from '../src/engine/request-rules.js';
import { GREEDY, type SamplingParams } from '../src/engine/sampler.js';
import { startServer, type RunningServer } from '../src/server/index.js';
import { DeltaserveError } from '../src/util/errors.js';
import { TINY_THINK } from './paths.js';
import { KERNELS, post } from './server-helpers.js';

let engine: Engine;
let server: RunningServer;
const ASK = [{ role: 'user', content: 'What is 12 + 30?' }];

before(async () => {
  // a short context keeps the length-clamp run (a prompt that fills it) quick
  engine = await Engine.load({ model: TINY_THINK(), kernels: KERNELS, maxRunning: 4, maxContext: 256 });
  server = await startServer(engine, { port: 0 });
});
after(async () => {
  await server.close();
  await engine.close();
});

/** The engine's refusal of a request, or null when it starts (then it is aborted). */
function engineProblem(req: GenerateRequest): string | null {
  try {
    const it = engine.generate(req);
    void it.return?.();
    return null;
  } catch (e) {
    assert.ok(e instanceof DeltaserveError, String(e));
    return e.message;
  }
}

const onToken = (): void => undefined;
const seventeen = Array.from({ length: REQUEST_LIMITS.stopStrings + 1 }, (_, i) => `s${i}`);
const sixteen = seventeen.slice(1);
const topMax = P.topLogprobs.max;

/** [API fields, the same request to the engine, the field the error names]. */
type Case = [api: Record<string, unknown>, engineReq: Partial<GenerateRequest>, field: string];
const REFUSED: Case[] = [
  [{ temperature: 2.5 }, { temperature: 2.5 }, 'temperature'],
  [{ temperature: -0.1 }, { temperature: -0.1 }, 'temperature'],
  [{ top_p: 0 }, { topP: 0 }, 'top_p'],
  [{ top_k: 1.5 }, { topK: 1.5 }, 'top_k'],
  [{ min_p: 1.5 }, { minP: 1.5 }, 'min_p'],
  [{ presence_penalty: 3 }, { presencePenalty: 3 }, 'presence_penalty'],
  [{ frequency_penalty: -3 }, { frequencyPenalty: -3 }, 'frequency_penalty'],
  [{ repetition_penalty: 0 }, { repetitionPenalty: 0 }, 'repetition_penalty'],
  [{ repetition_penalty: 11 }, { repetitionPenalty: 11 }, 'repetition_penalty'],
  [{ seed: 1.5 }, { seed: 1.5 }, 'seed'],
  [{ max_tokens: 2.5 }, { maxTokens: 2.5 }, 'max_tokens'],
  [{ stop: seventeen }, { stop: seventeen }, 'stop'],
  [{ logprobs: true, top_logprobs: topMax + 1 }, { logprobs: { top: topMax + 1, onToken } }, 'top_logprobs'],
];
const ACCEPTED: Case[] = [
  [{ temperature: P.temperature.max }, { temperature: P.temperature.max }, 'temperature'],
  [{ top_p: 1, min_p: 1, top_k: -1 }, { topP: 1, minP: 1, topK: -1 }, 'top_p'],
  [{ presence_penalty: -2, frequency_penalty: 2, repetition_penalty: 10 }, { presencePenalty: -2, frequencyPenalty: 2, repetitionPenalty: 10 }, 'presence_penalty'],
  [{ stop: sixteen }, { stop: sixteen }, 'stop'],
  [{ logprobs: true, top_logprobs: topMax }, { logprobs: { top: topMax, onToken } }, 'top_logprobs'],
];

test('the engine and the server refuse the same values with the same message, naming the field', async () => {
  for (const [api, req, field] of REFUSED) {
    const fromEngine = engineProblem({ prompt: 'hi', ...req });
    assert.ok(fromEngine !== null, `engine accepted ${JSON.stringify(api)}`);
    assert.ok(fromEngine.startsWith(field), fromEngine);
    const r = await post(`${server.url}/v1/chat/completions`, { messages: ASK, max_tokens: 1, ...api });
    assert.equal(r.status, 400, JSON.stringify(api));
    const err = r.json['error'] as { message: string; param: string };
    assert.equal(err.param, field);
    assert.equal(err.message, fromEngine, JSON.stringify(api));
  }
});

test('both accept the boundary values of the table', async () => {
  for (const [api, req] of ACCEPTED) {
    assert.equal(engineProblem({ prompt: 'hi', maxTokens: 1, ...req }), null, JSON.stringify(req));
    const r = await post(`${server.url}/v1/chat/completions`, { messages: ASK, max_tokens: 1, ...api });
    assert.equal(r.status, 200, `${JSON.stringify(api)}: ${JSON.stringify(r.json)}`);
  }
});

test("Anthropic's temperature is [0, 1] on /v1/messages only (its own entry in the table)", async () => {
  const ask = (temperature: number): Promise<{ status: number; json: Record<string, unknown> }> =>
    post(`${server.url}/v1/messages`, { max_tokens: 1, messages: ASK, temperature });
  const over = await ask(1.5);
  assert.equal(over.status, 400);
  const message = (over.json['error'] as { message: string }).message;
  assert.equal(message, paramProblem(P.anthropicTemperature, 1.5, 'temperature'));
  assert.match(message, /temperature must be in \[0, 1\]/);
  assert.equal((await ask(P.anthropicTemperature.max)).status, 200);
  const chat = await post(`${server.url}/v1/chat/completions`, { messages: ASK, max_tokens: 1, temperature: 1.5 });
  assert.equal(chat.status, 200);
});

test('completions: `logprobs` and the prompt-list limit come from the table', async () => {
  const url = `${server.url}/v1/completions`;
  const over = await post(url, { prompt: 'hi', max_tokens: 1, logprobs: topMax + 1 });
  assert.equal(over.status, 400);
  assert.equal((over.json['error'] as { message: string }).message, paramProblem(P.topLogprobs, topMax + 1, 'logprobs'));
  const prompts = Array.from({ length: REQUEST_LIMITS.promptsPerRequest + 1 }, () => 'hi');
  const many = await post(url, { prompt: prompts, max_tokens: 1 });
  assert.equal(many.status, 400);
  assert.match((many.json['error'] as { message: string }).message, new RegExp(`at most ${REQUEST_LIMITS.promptsPerRequest} prompts`));
});

test('validateSampling refuses exactly what the table refuses, with the same message', () => {
  const keys = ['temperature', 'topK', 'topP', 'minP', 'repetitionPenalty', 'presencePenalty', 'frequencyPenalty'] as const;
  const probes = [-3, -2, -1, -0.5, 0, 0.5, 1, 1.5, 2, 2.5, 10, 11, 1 << 30, NaN];
  for (const key of keys) {
    for (const v of probes) {
      const s: SamplingParams = { ...GREEDY, [key]: v };
      const expected = paramProblem(P[key], v, P[key].api);
      if (expected === null) assert.doesNotThrow(() => validateSampling(s), `${key} = ${v}`);
      else assert.throws(() => validateSampling(s), (e: Error) => e.message === expected, `${key} = ${v}`);
    }
  }
});

test('stop strings: one string or a list, at most the limit, empty strings dropped', () => {
  assert.deepEqual(stopStrings('x'), ['x']);
  assert.deepEqual(stopStrings(['a', '', 'b']), ['a', 'b']);
  assert.deepEqual(stopStrings(undefined), []);
  assert.equal(stopStrings(sixteen).length, REQUEST_LIMITS.stopStrings);
  assert.throws(() => stopStrings(seventeen, 'stop_sequences'), /stop_sequences may hold at most 16 strings \(got 17\)/);
  assert.throws(() => stopStrings([1]), /stop must be a string or an array of strings/);
});

test('the length clamp: the prompt must leave room; max_tokens is cut to the room left', async () => {
  assert.equal(leavesRoom(4095, 4096), true);
  assert.equal(leavesRoom(4096, 4096), false);
  assert.equal(generationBudget(4000, 4096, undefined), 96);
  assert.equal(generationBudget(4000, 4096, 500), 96);
  assert.equal(generationBudget(10, 4096, 5), 5);
  // the engine applies the same clamp: a request asking for more ends at the context
  const room = 3;
  const promptIds = new Array<number>(engine.maxContext - room).fill(10);
  const done = await engine.complete({ promptIds, maxTokens: 500, ignoreEos: true });
  assert.equal(done.outputIds.length, generationBudget(promptIds.length, engine.maxContext, 500));
  assert.equal(done.outputIds.length, room);
  assert.equal(done.finishReason, 'length');
});

test('max_tokens: an integer ≥ 1, bounded by the context where the caller passes it', () => {
  assert.equal(paramProblem(P.maxTokens, 0, 'max_tokens'), 'max_tokens must be a positive integer (got 0)');
  assert.equal(paramProblem(P.maxTokens, 5000, 'max_tokens', 4096), 'max_tokens must be between 1 and 4096 (got 5000)');
  assert.equal(paramProblem(P.maxTokens, 5000, 'max_tokens'), null);
});
