// `deltaserve generate`: one prompt (streamed, or --json), or many from --batch-file.
// A prompt is one user message rendered with the model's chat template (as `ollama run`
// does); --raw sends it as plain text. Streamed text shows the reasoning dimmed on a
// terminal, or on stderr when stdout is not one (answer-view.ts).
import { ImageParts } from '../frontend/images.js';
import { formatPlan } from '../engine/memory-plan.js';
import { parseArgs } from 'node:util';
import { Engine } from '../engine/engine.js';
import type { GenerateRequest } from '../engine/request-builder.js';
import type { GenerateEvent } from '../engine/request.js';
import { topLogits } from '../model/probe.js';
import { DeltaserveError } from '../util/errors.js';
import { paramProblem, REQUEST_PARAMS, type RequestParamKey } from '../engine/request-rules.js';
import { type ArgValues, intList, json, num, param, readFlagFile, readFlagFileBytes, str } from './args.js';
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineOptions, reportKernels } from './engine-flags.js';
import { AnswerView, colorAllowed, type Sink } from './answer-view.js';

export const GENERATE_HELP = `deltaserve generate [options]
  --prompt TEXT | --messages JSON | --prompt-ids 1,2,3 | --batch-file FILE.jsonl
                            --prompt (and a batch line's "prompt") is one user message,
                            rendered with the model's chat template
  --image FILE              an image for the --prompt message (repeatable; JPEG, PNG, WebP, GIF;
                            a vision model: config.json with a vision_config)
  --raw                     send --prompt (and batch "prompt"s) as plain text, no template
  --max-tokens N            (default 256)
  --temperature T --top-p P --top-k K --min-p P --seed S
  --repetition-penalty R --presence-penalty P --frequency-penalty F
  --stop STRING             stop string (repeatable)
  --no-think                chat: render the template with enable_thinking=false
  --json                    print one JSON object {prompt_ids, output_ids, text, reasoning,
                            content, finish_reason, usage, ...}; text: the streamed output
                            shows reasoning dimmed (on stderr when stdout is not a terminal)
  --dump-logits             with --json: add last_logits and mtp_top for the prompt
${ENGINE_FLAGS_HELP}`;

type Done = Extract<GenerateEvent, { type: 'done' }>;

/** Request defaults from the flags; a batch-file line overrides them. */
function requestDefaults(v: ArgValues): Partial<GenerateRequest> {
  const d: Record<string, unknown> = {
    // range-checked once the context length is known (runGenerate)
    maxTokens: num(v, 'max-tokens') ?? 256,
    temperature: param(v, 'temperature'),
    topP: param(v, 'topP'),
    topK: param(v, 'topK'),
    minP: param(v, 'minP'),
    seed: param(v, 'seed'),
    repetitionPenalty: param(v, 'repetitionPenalty'),
    presencePenalty: param(v, 'presencePenalty'),
    frequencyPenalty: param(v, 'frequencyPenalty'),
    think: v['no-think'] ? false : undefined,
    stop: Array.isArray(v['stop']) ? v['stop'] : undefined,
  };
  for (const k of Object.keys(d)) if (d[k] === undefined) delete d[k];
  return d as Partial<GenerateRequest>;
}

/** One JSONL line (`prompt` | `messages` | `prompt_ids`, sampling keys; others ignored).
 * `chat`: a `prompt` is one user message (the chat template renders it). */
export function requestFromLine(line: Record<string, unknown>, defaults: Partial<GenerateRequest>, chat = false): GenerateRequest {
  const pick = (k: string): unknown => line[k];
  const r: Record<string, unknown> = { ...defaults };
  const map: [string, string][] = [['prompt', 'prompt'], ['messages', 'messages'], ['prompt_ids', 'promptIds'],
    ['max_tokens', 'maxTokens'], ['temperature', 'temperature'], ['top_p', 'topP'], ['top_k', 'topK'], ['min_p', 'minP'],
    ['seed', 'seed'], ['think', 'think'], ['stop', 'stop']];
  for (const [from, to] of map) {
    if (pick(from) === undefined) continue;
    const def = REQUEST_PARAMS[to as RequestParamKey] as (typeof REQUEST_PARAMS)[RequestParamKey] | undefined;
    const problem = def ? paramProblem(def, pick(from), from) : null;
    if (problem) throw new DeltaserveError('bad_request', problem);
    r[to] = pick(from);
  }
  return (chat ? asChat(r as GenerateRequest) : r) as GenerateRequest;
}

/** A text prompt as one user message (other requests unchanged). */
function asChat(req: GenerateRequest): GenerateRequest {
  if (typeof req.prompt !== 'string') return req;
  const { prompt, ...rest } = req;
  return { ...rest, messages: [{ role: 'user', content: prompt }] };
}

function jsonResult(done: Done): Record<string, unknown> {
  return {
    prompt_ids: done.promptIds, output_ids: done.outputIds, text: done.text, reasoning: done.reasoning, content: done.content,
    finish_reason: done.finishReason,
    usage: { prompt_tokens: done.usage.promptTokens, completion_tokens: done.usage.completionTokens },
    cached_tokens: done.usage.cachedTokens,
    spec: {
      rounds: done.spec?.rounds ?? 0, drafted: done.spec?.drafted ?? 0, accepted: done.spec?.accepted ?? 0,
      accept_len_mean: done.spec && done.spec.rounds > 0 ? (done.spec.accepted + done.spec.rounds) / done.spec.rounds : null,
    },
    ...(done.error ? { error: done.error } : {}),
  };
}

export async function runGenerate(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: {
      ...ENGINE_FLAGS, prompt: { type: 'string' }, messages: { type: 'string' }, 'prompt-ids': { type: 'string' },
      'batch-file': { type: 'string' }, 'max-tokens': { type: 'string' }, temperature: { type: 'string' },
      'top-p': { type: 'string' }, 'top-k': { type: 'string' }, 'min-p': { type: 'string' }, seed: { type: 'string' },
      'repetition-penalty': { type: 'string' }, 'presence-penalty': { type: 'string' }, 'frequency-penalty': { type: 'string' },
      stop: { type: 'string', multiple: true }, 'no-think': { type: 'boolean' }, json: { type: 'boolean' },
      'dump-logits': { type: 'boolean' }, raw: { type: 'boolean' }, image: { type: 'string', multiple: true },
    },
  });
  const imageFiles = (values.image ?? []) as string[];
  if (imageFiles.length > 0 && (values.prompt === undefined || values.raw)) {
    throw new DeltaserveError('bad_request', '--image goes with --prompt (a chat message; not --raw, --messages, --prompt-ids or --batch-file)');
  }
  const images = imageFiles.map((f) => ({ file: f, bytes: new Uint8Array(readFlagFileBytes('image', f)) }));
  const defaults = requestDefaults(values);
  const batchText = str(values, 'batch-file') !== undefined ? readFlagFile('batch-file', str(values, 'batch-file')!) : undefined;
  // a user error in the inputs is reported before the model loads
  if ([values.prompt, values.messages, values['prompt-ids'], values['batch-file']].every((v) => v === undefined)) {
    throw new DeltaserveError('bad_request', 'give one of --prompt, --messages, --prompt-ids or --batch-file');
  }
  if (values.raw && values.prompt === undefined && values['batch-file'] === undefined) {
    throw new DeltaserveError('bad_request', '--raw applies to --prompt and --batch-file prompts only');
  }
  const opts = engineOptions(values);
  const engine = await Engine.load(opts);
  reportKernels(engine.info.kernels, opts.kernels);
  if (engine.memoryPlan) process.stderr.write(`deltaserve: ${formatPlan(engine.memoryPlan)}\n`);
  try {
    // --max-tokens obeys the rule of the API's max_tokens: at most the context length.
    param(values, 'maxTokens', engine.maxContext);
    const batchFile = str(values, 'batch-file');
    const chat = !values.raw && templated(engine, values);
    if (batchFile) await runBatchFile(engine, batchFile, batchText!, defaults, chat);
    else await runSingle(engine, values, defaults, chat, images);
  } finally {
    await engine.close();
  }
}

/** Whether text prompts get the chat template: a model without one gets plain text (said once). */
function templated(engine: Engine, v: ArgValues): boolean {
  if (engine.tokenizer.chatTemplate) return true;
  if (v['prompt'] !== undefined || v['batch-file'] !== undefined) {
    process.stderr.write('deltaserve: this model has no chat template: prompts are sent as plain text\n');
  }
  return false;
}

async function runSingle(engine: Engine, v: ArgValues, defaults: Partial<GenerateRequest>, chat: boolean,
  images: readonly { readonly file: string; readonly bytes: Uint8Array }[] = []): Promise<void> {
  const messages = json(v, 'messages');
  const given: GenerateRequest = {
    ...defaults,
    ...(str(v, 'prompt') !== undefined ? { prompt: str(v, 'prompt')! } : {}),
    ...(messages !== undefined ? { messages: messages as GenerateRequest['messages'] } : {}),
    ...(intList(v, 'prompt-ids') !== undefined ? { promptIds: intList(v, 'prompt-ids')! } : {}),
  };
  const req = withImages(chat ? asChat(given) : given, images);
  // images are decoded here (a bad one is an error naming its file); text prompts pass as given
  const prepared: GenerateRequest = images.length > 0 ? await engine.info.frontend.withPrompt(req) : req;
  if (!v['json']) return streamText(engine, prepared);
  const done = await engine.complete(engine.info.frontend.withPromptIds(prepared));
  const out = jsonResult(done);
  if (v['dump-logits']) {
    const probe = await engine.info.probePrompt(done.promptIds, done.outputIds[0]);
    out['last_logits'] = Array.from(probe.lastLogits);
    out['mtp_top'] = probe.mtpLogits ? topLogits(probe.mtpLogits, 10) : null;
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

/** The chat request with the images placed before the user's text (as Qwen's examples do). */
function withImages(req: GenerateRequest, images: readonly { readonly file: string; readonly bytes: Uint8Array }[]): GenerateRequest {
  if (images.length === 0) return req;
  const parts = new ImageParts();
  const head = images.map((im) => parts.add(im.bytes, `--image ${im.file}`)).join('');
  const messages = (req.messages ?? []).map((m, i, all) => (i === all.length - 1 ? { ...m, content: head + m.content } : m));
  return { ...req, messages, images: parts };
}

/** Prompt and generated token counts with the prefill (to the first token) and decode rates. */
function speedLine(prompt: number, generated: number, t0: number, first: number, end: number): string {
  const s = (ms: number): string => (ms / 1000).toFixed(2);
  const head = `${prompt} prompt tokens, ${generated} generated in ${s(end - t0)} s`;
  if (first === 0) return head;
  const decode = generated > 1 ? `, decode ${((generated - 1) * 1000 / (end - first)).toFixed(2)} tok/s` : '';
  return `${head}: first token after ${s(first - t0)} s (prefill ${(prompt * 1000 / (first - t0)).toFixed(1)} tok/s)${decode}`;
}

/** Stream the answer: content on stdout, reasoning dimmed there on a terminal, else on stderr. */
async function streamText(engine: Engine, req: GenerateRequest): Promise<void> {
  const out: Sink = { write: (t) => void process.stdout.write(t), isTTY: process.stdout.isTTY === true };
  const err: Sink = { write: (t) => void process.stderr.write(t), isTTY: process.stderr.isTTY === true };
  const view = new AnswerView({ content: out, reasoning: out.isTTY ? out : err, color: colorAllowed() });
  const t0 = performance.now();
  let first = 0;
  for await (const ev of engine.generate(engine.info.frontend.withPromptIds(req))) {
    if (ev.type === 'delta') {
      if (first === 0 && ev.ids.length > 0) first = performance.now();
      view.push(ev.reasoning, ev.content);
    } else {
      view.end();
      if (ev.finishReason === 'error') process.stderr.write(`deltaserve: the answer stopped with an error: ${ev.error}\n`);
      process.stderr.write(`deltaserve: ${speedLine(ev.usage.promptTokens, ev.usage.completionTokens, t0, first, performance.now())}\n`);
    }
  }
}

async function runBatchFile(engine: Engine, file: string, text: string, defaults: Partial<GenerateRequest>, chat: boolean): Promise<void> {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
  const results = lines.map(async (line, i): Promise<Record<string, unknown>> => {
    try {
      const parsed = JSON.parse(line) as unknown;
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new DeltaserveError('bad_request', 'expected a JSON object');
      return jsonResult(await engine.complete(engine.info.frontend.withPromptIds(requestFromLine(parsed as Record<string, unknown>, defaults, chat))));
    } catch (e) {
      return { error: `${file} line ${i + 1}: ${(e as Error).message}` };
    }
  });
  for (const r of results) process.stdout.write(JSON.stringify(await r) + '\n');
}
