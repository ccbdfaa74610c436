// CORS for browser front-ends (`--allowed-origins`; off by default): allowed origins get
// Access-Control-Allow-Origin on every response, and preflights (OPTIONS with
// Access-Control-Request-Method) are answered here, before auth (browsers send no
// credentials on a preflight).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { inRouteDialect } from './error-dialect.js';
import { ApiError } from './errors.js';
import { sendError } from './respond.js';
import { dialectPathOf } from './routes.js';

export interface CorsPolicy {
  /** '*' allows any origin. */
  readonly any: boolean;
  readonly origins: ReadonlySet<string>;
}

/** Why `o` cannot be an allowed origin, or null. */
export function originProblem(o: string): string | null {
  if (o === '*' || /^https?:\/\/[^/\s]+$/.test(o)) return null;
  return `allowed origin "${o}" must be "*" or scheme://host[:port] with no path (e.g. https://app.example.com)`;
}

/** `*` or a list of origins (`https://app.example.com`); null = CORS off. Origins are
 * compared exactly (scheme, host and port), so they must have no path or trailing slash. */
export function corsPolicy(allowed: readonly string[] | undefined): CorsPolicy | null {
  if (!allowed || allowed.length === 0) return null;
  const list = allowed.map((o) => o.trim()).filter((o) => o.length > 0);
  for (const o of list) {
    const problem = originProblem(o);
    if (problem) throw new Error(problem);
  }
  return { any: list.includes('*'), origins: new Set(list) };
}

const ALLOW_METHODS = 'GET, POST, OPTIONS';
const EXPOSE_HEADERS = 'x-request-id, retry-after';
const DEFAULT_ALLOW_HEADERS = 'authorization, content-type, x-request-id, x-session-id';

/**
 * Apply the policy to one request. Returns true when the request was a preflight and has
 * been answered (204, or 403 for an origin that is not allowed).
 */
export function applyCors(policy: CorsPolicy | null, req: IncomingMessage, res: ServerResponse): boolean {
  if (!policy) return false;
  const origin = req.headers.origin;
  const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
  const allowed = origin !== undefined && (policy.any || policy.origins.has(origin));
  res.setHeader('vary', 'Origin');
  if (allowed) {
    res.setHeader('access-control-allow-origin', policy.any ? '*' : origin);
    res.setHeader('access-control-expose-headers', EXPOSE_HEADERS);
  }
  if (!preflight) return false;
  if (!allowed) {
    const e = new ApiError(403, `origin ${JSON.stringify(origin ?? null)} is not allowed (see --allowed-origins)`, null, 'origin_not_allowed');
    sendError(res, inRouteDialect(dialectPathOf(req.url), e));
    return true;
  }
  const asked = req.headers['access-control-request-headers'];
  res.writeHead(204, {
    'access-control-allow-methods': ALLOW_METHODS,
    'access-control-allow-headers': typeof asked === 'string' && asked.length > 0 ? asked : DEFAULT_ALLOW_HEADERS,
    'access-control-max-age': '600',
    'content-length': '0',
  });
  res.end();
  return true;
}
