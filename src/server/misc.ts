// GET /v1/models, GET /v1/models/{id}, GET /metrics, POST /tokenize, POST /detokenize.
import { ApiError, invalid, toApiError } from './errors.js';
import { type Call, checkModel, type ServerContext } from './generation.js';
import { prepare } from './prepare-jobs.js';
import { packageInfo } from '../util/version.js';
import { sendJson, sendText } from './respond.js';
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
  sendJson(call.res, 200, { name, version: v, node: process.versions.node, kernels: ctx.engine.model.kernels.name });
}

export function metrics(ctx: ServerContext, call: Call, extra: Readonly<Record<string, [number, string]>>): void {
  sendText(call.res, 200, ctx.metrics.render(ctx.engine.stats(), extra), 'text/plain; version=0.0.4; charset=utf-8');
}

/** {prompt} (raw text) or {messages, add_generation_prompt?, chat_template_kwargs?} → {count, max_model_len, tokens}.
 * Rendering and tokenizing run in the prepare pool. */
export async function tokenize(ctx: ServerContext, call: Call): Promise<void> {
  const { engine } = ctx;
  const b = requireObject(call.body);
  checkModel(ctx, b);
  let tokens: number[];
  if (b['prompt'] !== undefined && b['prompt'] !== null) {
    if (typeof b['prompt'] !== 'string') throw invalid('prompt', 'prompt must be a string');
    tokens = (await prepare(ctx, { op: 'encode', texts: [b['prompt']] }, call.signal)).ids[0]!;
  } else if (b['messages'] !== undefined && b['messages'] !== null) {
    if (!engine.tokenizer.chatTemplate) throw invalid('messages', 'this model has no chat template');
    const kwargs = { ...(optObject(b, 'chat_template_kwargs') ?? {}) };
    const think = kwargs['enable_thinking'];
    if (think !== undefined && typeof think !== 'boolean') throw invalid('chat_template_kwargs.enable_thinking', 'chat_template_kwargs.enable_thinking must be a boolean');
    delete kwargs['enable_thinking'];
    const opts = { addGenerationPrompt: optBool(b, 'add_generation_prompt') ?? true, enableThinking: think !== false, extra: kwargs };
    try {
      tokens = (await prepare(ctx, { op: 'render', messages: b['messages'], opts }, call.signal)).ids;
    } catch (e) {
      throw toApiError(e, 'messages');
    }
  } else throw invalid('prompt', 'give prompt (a string) or messages');
  sendJson(call.res, 200, { count: tokens.length, max_model_len: engine.maxContext, tokens });
}

/** {tokens: [ids]} → {prompt: text}. */
export async function detokenize(ctx: ServerContext, call: Call): Promise<void> {
  const b = requireObject(call.body);
  checkModel(ctx, b);
  const ids = packedTokenIds(b['tokens'], 'tokens', ctx.engine.model.config.vocabSize);
  const { texts } = await prepare(ctx, { op: 'decode', ids: [ids] }, call.signal);
  sendJson(call.res, 200, { prompt: texts[0] });
}
