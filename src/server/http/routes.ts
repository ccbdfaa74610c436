// Routing: a request target's path (normalized: one spelling per route, so that no spelling
// reaches a route past its checks) and the route it names.
import { chatCompletions } from '../api/chat.js';
import { completions } from '../api/completions.js';
import { ApiError } from './errors.js';
import type { Call } from './call.js';
import type { ServerContext } from '../context.js';
import { countTokens, messages } from '../api/messages.js';
import { detokenize, getModel, listModels, tokenize, version } from '../api/misc.js';
import { deleteResponse, getResponse, responses } from '../api/responses.js';

export type Handler = (ctx: ServerContext, call: Call, arg: string) => Promise<void> | void;

export interface Route {
  readonly name: string;
  readonly method: 'GET' | 'POST' | 'DELETE';
  readonly handler: Handler;
  readonly promptParam: string;
  readonly open?: boolean;
}

const ROUTES: Record<string, Route> = {
  '/v1/chat/completions': { name: 'chat', method: 'POST', handler: chatCompletions, promptParam: 'messages' },
  '/v1/completions': { name: 'completions', method: 'POST', handler: completions, promptParam: 'prompt' },
  '/v1/responses': { name: 'responses', method: 'POST', handler: responses, promptParam: 'input' },
  '/v1/messages': { name: 'messages', method: 'POST', handler: messages, promptParam: 'messages' },
  '/v1/messages/count_tokens': { name: 'count_tokens', method: 'POST', handler: countTokens, promptParam: 'messages' },
  '/v1/models': { name: 'models', method: 'GET', handler: listModels, promptParam: 'model' },
  '/tokenize': { name: 'tokenize', method: 'POST', handler: tokenize, promptParam: 'prompt' },
  '/detokenize': { name: 'detokenize', method: 'POST', handler: detokenize, promptParam: 'tokens' },
  '/metrics': { name: 'metrics', method: 'GET', handler: () => undefined, promptParam: 'prompt' },
  '/metrics.json': { name: 'metrics_json', method: 'GET', handler: () => undefined, promptParam: 'prompt' },
  '/': { name: 'webui', method: 'GET', handler: () => undefined, promptParam: 'prompt', open: true },
  '/dashboard': { name: 'webui', method: 'GET', handler: () => undefined, promptParam: 'prompt', open: true },
  '/health': { name: 'health', method: 'GET', handler: () => undefined, promptParam: 'prompt', open: true },
  '/version': { name: 'version', method: 'GET', handler: version, promptParam: 'prompt' },
};
const MODEL_ROUTE: Route = { name: 'model', method: 'GET', handler: getModel, promptParam: 'model' };
const WEBUI_ASSET: Route = { name: 'webui', method: 'GET', handler: () => undefined, promptParam: 'prompt', open: true };
const RESPONSE_ROUTES: Record<string, Route> = {
  GET: { name: 'response_get', method: 'GET', handler: getResponse, promptParam: 'response_id' },
  DELETE: { name: 'response_delete', method: 'DELETE', handler: deleteResponse, promptParam: 'response_id' },
};

export function route(path: string, method: string | undefined, webui: boolean): { r: Route; arg: string } | null {
  if (!webui && (path === '/' || path === '/dashboard' || path.startsWith('/webui/'))) return null;
  if (webui && path.startsWith('/webui/')) return { r: WEBUI_ASSET, arg: '' };
  const r = ROUTES[path];
  if (r) return { r, arg: '' };
  if (path.startsWith('/v1/responses/') && path.length > '/v1/responses/'.length && !path.slice('/v1/responses/'.length).includes('/')) {
    let arg: string;
    try {
      arg = decodeURIComponent(path.slice('/v1/responses/'.length));
    } catch {
      throw new ApiError(400, 'malformed response id in the URL', 'response_id');
    }
    if (method !== 'GET' && method !== 'HEAD' && method !== 'DELETE') {
      throw new ApiError(405, '/v1/responses/{id} accepts GET and DELETE only', null, 'method_not_allowed', 'invalid_request_error', { allow: 'GET, DELETE' });
    }
    return { r: method === 'DELETE' ? RESPONSE_ROUTES['DELETE']! : RESPONSE_ROUTES['GET']!, arg };
  }
  if (path.startsWith('/v1/models/') && path.length > '/v1/models/'.length) {
    let arg: string;
    try {
      arg = decodeURIComponent(path.slice('/v1/models/'.length));
    } catch {
      throw new ApiError(400, 'malformed model id in the URL', 'model');
    }
    return { r: MODEL_ROUTE, arg };
  }
  return null;
}


const malformed = (why: string): ApiError => new ApiError(400, `malformed request URL: ${why}`, null, 'invalid_url');

/** A dot segment (`.`, `..`), percent-encoded or not. */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * The route path of a request target: the path of an absolute-form target
 * (`http://host/path`), query and fragment cut, runs of slashes collapsed (`//metrics` is
 * `/metrics`, never a host name), trailing slashes dropped. Dot segments are refused (400):
 * no client of this API sends them, and resolving them would give one route many spellings.
 * Percent-escapes are left as they are (no route name has one).
 */
export function requestPath(target: string): string {
  let path = target;
  if (/^https?:\/\//i.test(path)) path = path.replace(/^https?:\/\/[^/?#]*/i, '') || '/';
  path = path.split(/[?#]/, 1)[0]!;
  if (!path.startsWith('/')) throw malformed('the path must start with "/"');
  path = path.replace(/\/{2,}/g, '/');
  if (path.split('/').some((seg) => DOT_SEGMENT.test(seg))) throw malformed('"." and ".." path segments are not accepted');
  return path.replace(/\/+$/, '') || '/';
}

/** The route path of a target for choosing an error's dialect: null when it is malformed. */
export function dialectPathOf(target: string | undefined): string | null {
  try {
    return requestPath(target ?? '/');
  } catch {
    return null;
  }
}
