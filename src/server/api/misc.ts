// GET /v1/models, GET /v1/models/{id}, GET /metrics, POST /tokenize, POST /detokenize.
import { ApiError, invalid, toApiError } from '../http/errors.js';
import { checkModel } from './choices.js';
import type { Call } from '../http/call.js';
import type { ServerContext } from '../context.js';
import { prepare, type TokenizeInput } from '../../frontend/prepare-jobs.js';
import { packageInfo } from '../../util/version.js';
import { sendJson, sendJsonBytes, sendText } from '../http/respond.js';
import { optBool, optObject, packedTokenIds, requireObject } from './validate.js';

/** The model card shows no local paths (the model directory stays private). */
function modelCard(ctx: ServerContext): Record<string, unknown> {
  return { id: ctx.modelName, object: 'model', created: ctx.created, owned_by: 'deltaserve', max_model_len: ctx.engine.maxContext };
}

export function listModels(ctx: ServerContext, call: Call): void {
  sendJson(call.res, 200, { object: 'list', data: [modelCard(ctx)] });
}

export function getModel(ctx: ServerContext, call: Call, id: string): void {
  if (id !== ctx.modelName) throw new ApiError(404, `The model "${id}" does not exist; this server serves "${ctx.modelName}"`, 'model', 'model_not_found');
  sendJson(call.res, 200, modelCard(ctx));
}

/** GET /version: the package name and version, the Node version and the kernel backend. */
export function version(ctx: ServerContext, call: Call): void {
  const { name, version: v } = packageInfo();
  sendJson(call.res, 200, { name, version: v, node: process.versions.node, kernels: ctx.engine.info.kernels.name });
}

export function metrics(ctx: ServerContext, call: Call, extra: Readonly<Record<string, [number, string]>>): void {
  sendText(call.res, 200, ctx.metrics.render(ctx.engine.stats(), extra), 'text/plain; version=0.0.4; charset=utf-8');
}

/** {prompt} (raw text) or {messages, add_generation_prompt?, chat_template_kwargs?} → {count, max_model_len, tokens}.
 * Rendering, tokenizing and writing the JSON body run in the prepare pool. */
export async function tokenize(ctx: ServerContext, call: Call): Promise<void> {
  const { engine } = ctx;
  const b = requireObject(call.body);
  checkModel(ctx, b);
  let input: TokenizeInput;
  if (b['prompt'] !== undefined && b['prompt'] !== null) {
    if (typeof b['prompt'] !== 'string') throw invalid('prompt', 'prompt must be a string');
    input = { text: b['prompt'] };
  } else if (b['messages'] !== undefined && b['messages'] !== null) {
    if (!engine.tokenizer.chatTemplate) throw invalid('messages', 'this model has no chat template');
    const kwargs = { ...(optObject(b, 'chat_template_kwargs') ?? {}) };
    const think = kwargs['enable_thinking'];
    if (think !== undefined && typeof think !== 'boolean') throw invalid('chat_template_kwargs.enable_thinking', 'chat_template_kwargs.enable_thinking must be a boolean');
    delete kwargs['enable_thinking'];
    input = { messages: b['messages'], opts: { addGenerationPrompt: optBool(b, 'add_generation_prompt') ?? true, enableThinking: think !== false, extra: kwargs } };
  } else throw invalid('prompt', 'give prompt (a string) or messages');
  let body: Uint8Array;
  try {
    ({ body } = await prepare(ctx, { op: 'tokenize', input, maxModelLen: engine.maxContext }, call.signal));
  } catch (e) {
    throw toApiError(e, 'text' in input ? 'prompt' : 'messages');
  }
  sendJsonBytes(call.res, 200, body);
}

/** {tokens: [ids]} → {prompt: text}; decoding and writing the JSON body run in the prepare pool. */
export async function detokenize(ctx: ServerContext, call: Call): Promise<void> {
  const b = requireObject(call.body);
  checkModel(ctx, b);
  const ids = packedTokenIds(b['tokens'], 'tokens', ctx.engine.info.config.vocabSize);
  const { body } = await prepare(ctx, { op: 'detokenize', ids }, call.signal);
  sendJsonBytes(call.res, 200, body);
}
