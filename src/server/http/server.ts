// The HTTP server (node:http): routing (routes.ts), Bearer auth (auth.ts), body and request-size limits (body.ts, limits.ts),
// time limits on receiving a request, per-request abort on client disconnect, error
// responses, graceful shutdown. The event loop only routes: prompts are rendered and
// tokenized in the prepare pool (../prepare-pool.ts); generation routes run the turn pipeline (../api/turn.ts). startServer() is the programmatic
// entry point (tests run it in-process); `deltaserve serve` wraps it.
import { DEFAULT_SERVER_IMAGES, type ServerImageOptions } from '../api/images.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { basename } from 'node:path';
import type { Engine } from '../../engine/engine.js';
import { DeltaserveError } from '../../util/errors.js';
import { type Logger, SILENT } from '../../util/log.js';
import { apiKeyDigest, authorized } from './auth.js';
import { logRequest, newRecord, type RequestRecord, requestIdOf } from './access-log.js';
import { applyCors, corsPolicy } from './cors.js';
import { answerClientError, type InFlight } from './client-errors.js';
import { inRouteDialect } from './error-dialect.js';
import { responsesKey } from '../api/responses-crypto.js';
import { ResponseStore } from '../api/responses-store.js';
import { readJsonBody } from './body.js';
import { ApiError, toApiError } from './errors.js';
import type { ServerContext } from '../context.js';
import { checkRequestLimits, type RequestLimits, resolveLimits } from './limits.js';
import { PreparePool } from '../../frontend/prepare-pool.js';
import { dialectPathOf, requestPath, route, type Route } from './routes.js';
import { TokenTexts } from '../api/logprobs.js';
import { ServerMetrics } from '../api/metrics.js';
import { metrics } from '../api/misc.js';
import { sendError, sendJson } from './respond.js';
import { StatsSampler, statsJson } from '../api/stats.js';
import { setGrammarBudget } from '../api/structured.js';
import { warmStructured } from '../api/structured-warm.js';
import { loadSamplingDefaults } from '../api/validate.js';
import { WebUi } from './webui.js';

export interface ServerOptions {
  /** Interface to bind (default 127.0.0.1). */
  readonly host?: string;
  /** Port (default 8000; 0 = an ephemeral port, see RunningServer.port). */
  readonly port?: number;
  /** When set, every request but those of the open routes (/health, the web UI pages,
   * /metrics with metricsNoAuth) and CORS preflights needs `Authorization: Bearer <apiKey>`
   * (or `x-api-key`); without it any other path, existing or not, is a 401. */
  readonly apiKey?: string;
  /** Model id in the API (default: the model directory's basename). */
  readonly servedModelName?: string;
  /** 503 + Retry-After when more than this many requests would wait in the engine queue (default 1024). */
  readonly maxQueue?: number;
  /** 503 + Retry-After when a request would wait longer than this many seconds for a state
   * slot and KV pages, by the engine's estimate (default 60; 0 = only start at once). */
  readonly maxQueueWait?: number;
  /** 413 for request bodies larger than this (default 8 MiB). */
  readonly maxBodyBytes?: number;
  /** close(): how long in-flight requests may run before they are aborted (default 10000). */
  readonly shutdownGraceMs?: number;
  /** CORS: origins allowed to call the API from a browser ('*' = any); none = CORS off. */
  readonly allowedOrigins?: readonly string[];
  /** /metrics needs no API key (for Prometheus scrapers). */
  readonly metricsNoAuth?: boolean;
  /** Access log (one line per request), errors and shutdown steps (default: silent). */
  readonly logger?: Logger;
  /** Include prompts (messages / prompt) in the access log (default false). */
  readonly logPrompts?: boolean;
  /** Ignore request fields the server does not implement (default: 400 naming the field). */
  readonly lenient?: boolean;
  /** Responses store: keep stored responses this many seconds (default 86400). */
  readonly responsesTtl?: number;
  /** Responses store: at most this many bytes of JSON in memory (default 64 MiB). */
  readonly responsesMaxBytes?: number;
  /** Keep stored responses (and the generated reasoning key) on disk in this directory
   * (`deltaserve serve` uses `<--prefix-cache-dir>/responses`); default: memory only. */
  readonly responsesDir?: string;
  /** Passphrase of the key sealing reasoning (`include: ["reasoning.encrypted_content"]`);
   * default: a key kept in responsesDir, else a random one per process. */
  readonly responsesKey?: string;
  /** Serve the web UI: chat at `/`, dashboard at `/dashboard` (default true; `--no-webui`). */
  readonly webui?: boolean;
  /** Request size limits and the prompt-preparation time budget (default: DEFAULT_LIMITS). */
  readonly limits?: Partial<RequestLimits>;
  /** Worker threads rendering and tokenizing prompts (default 2; 0 = on the event loop). */
  readonly prepareWorkers?: number;
  /** A client must send a request's headers and body within this many ms, else 408 and the
   * connection closes (default 60000, as nginx; 0 = no limit). */
  readonly requestTimeoutMs?: number;
  /** An idle keep-alive connection is closed after this many ms (default 65000). */
  readonly keepAliveTimeoutMs?: number;
  /** Image limits and http(s) image URL fetching (default: DEFAULT_SERVER_IMAGES, URLs off). */
  readonly images?: Partial<ServerImageOptions>;
}

export interface RunningServer {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly modelName: string;
  /** Requests being handled right now. */
  readonly inFlight: number;
  /** Stop accepting, let in-flight requests finish for up to `graceMs` (default: the
   * option), abort the rest (they end with finish_reason "abort"), close every connection.
   * The engine is left open (the caller owns it). Idempotent; calling it again with
   * graceMs 0 while closing cuts the grace period short. */
  close(graceMs?: number): Promise<void>;
}

/** The time limits of the HTTP server, checked. */
function timeLimits(opts: ServerOptions): { requestTimeout: number; keepAliveTimeout: number } {
  const requestTimeout = opts.requestTimeoutMs ?? 60_000;
  const keepAliveTimeout = opts.keepAliveTimeoutMs ?? 65_000;
  if (!Number.isInteger(requestTimeout) || requestTimeout < 0) {
    throw new DeltaserveError('bad_config', `--request-timeout-ms must be an integer ≥ 0 (got ${requestTimeout})`);
  }
  if (!Number.isInteger(keepAliveTimeout) || keepAliveTimeout < 1) {
    throw new DeltaserveError('bad_config', `--keep-alive-timeout-ms must be an integer ≥ 1 (got ${keepAliveTimeout})`);
  }
  return { requestTimeout, keepAliveTimeout };
}

/** The prepare pool (null: prepare on the event loop), its workers ready. */
async function startPreparePool(engine: Engine, opts: ServerOptions, limits: RequestLimits, log: Logger): Promise<PreparePool | null> {
  const n = opts.prepareWorkers ?? 2;
  if (!Number.isInteger(n) || n < 0 || n > 64) throw new DeltaserveError('bad_config', `--prepare-workers must be an integer in [0, 64] (got ${n})`);
  const data = engine.info.frontend.workerData();
  if (n === 0 || data === null) return null;
  const pool = new PreparePool(data, n, limits.prepareMs, log);
  try {
    await pool.ready();
  } catch (e) {
    await pool.close();
    throw e;
  }
  return pool;
}

/** The Responses store and reasoning key of a server's options. */
function responsesConfig(opts: ServerOptions, log: Logger): ServerContext['responses'] {
  const ttl = opts.responsesTtl ?? 86_400;
  const maxBytes = opts.responsesMaxBytes ?? 64 * 1024 * 1024;
  if (!(ttl > 0) || !Number.isFinite(ttl)) throw new DeltaserveError('bad_config', `--responses-ttl must be a number of seconds > 0 (got ${ttl})`);
  if (!(maxBytes >= 0) || !Number.isFinite(maxBytes)) throw new DeltaserveError('bad_config', `responses store size must be ≥ 0 bytes (got ${maxBytes})`);
  const dir = opts.responsesDir;
  try {
    return { store: new ResponseStore({ maxBytes, ttlSeconds: ttl, ...(dir !== undefined ? { dir } : {}), log }), key: responsesKey(opts.responsesKey, dir) };
  } catch (e) {
    throw new DeltaserveError('bad_config', `responses store ${dir ?? ''}: ${(e as Error).message}`);
  }
}

export async function startServer(engine: Engine, opts: ServerOptions = {}): Promise<RunningServer> {
  const host = opts.host ?? '127.0.0.1';
  const maxBody = opts.maxBodyBytes ?? 8 * 1024 * 1024;
  const maxQueueWait = opts.maxQueueWait ?? 60;
  if (!(maxQueueWait >= 0) || !Number.isFinite(maxQueueWait)) {
    throw new DeltaserveError('bad_config', `--max-queue-wait must be a number of seconds ≥ 0 (got ${maxQueueWait})`);
  }
  if (opts.apiKey !== undefined && opts.apiKey.trim() === '') {
    throw new DeltaserveError('bad_config', '--api-key is empty: give a key, or leave the flag out to serve without authentication');
  }
  const key = opts.apiKey !== undefined ? apiKeyDigest(opts.apiKey) : null;
  const cors = corsPolicy(opts.allowedOrigins);
  const log = opts.logger ?? SILENT;
  const limits = resolveLimits(opts.limits);
  setGrammarBudget(limits.grammarUnits);
  const times = timeLimits(opts);
  const pool = await startPreparePool(engine, opts, limits, log);
  const ctx: ServerContext = {
    engine,
    modelName: opts.servedModelName ?? basename(engine.info.modelDir),
    created: Math.floor(Date.now() / 1000),
    metrics: new ServerMetrics(),
    defaults: loadSamplingDefaults(engine.info.modelDir),
    maxQueue: opts.maxQueue ?? 1024,
    maxQueueWait,
    texts: new TokenTexts(engine.tokenizer),
    lenient: opts.lenient ?? false,
    responses: responsesConfig(opts, log),
    limits,
    ...(pool ? { prepare: pool } : {}),
    images: { ...DEFAULT_SERVER_IMAGES, ...(opts.images ?? {}) },
  };
  const webui = opts.webui === false ? null : new WebUi();
  const sampler = new StatsSampler(engine, ctx.metrics);
  sampler.start();
  const inflight = new Map<number, { ctl: AbortController; done: Promise<void> }>();
  /** The request each connection is serving (for errors node:http reports on the connection). */
  const serving = new WeakMap<object, InFlight>();
  let nextId = 0;
  let draining = false;
  const started = Date.now();

  async function serve(req: IncomingMessage, res: ServerResponse, ctl: AbortController, arrival: number, rec: RequestRecord,
    seen: { route: string; body?: unknown }): Promise<void> {
    const path = requestPath(req.url ?? '/');
    seen.route = path;
    // Without the key a client learns nothing of the routes: every path and method but the
    // open routes' gets 401 before 404 / 405 / a malformed id. Answered before the key:
    // malformed URLs (400, they name no route), shutdown (503), and the open routes.
    let found: { r: Route; arg: string } | null = null;
    let routeError: unknown = null;
    try {
      found = route(path, req.method, webui !== null);
    } catch (e) {
      routeError = e;
    }
    res.once('finish', () => ctx.metrics.httpRequests.inc({ route: found?.r.name ?? 'unknown', status: String(res.statusCode) }));
    if (draining) throw new ApiError(503, 'the server is shutting down', null, 'shutting_down', 'server_error', { connection: 'close' });
    const open = found !== null && (found.r.open === true || ((found.r.name === 'metrics' || found.r.name === 'metrics_json') && opts.metricsNoAuth === true));
    if (!open && key && !authorized(req, key)) {
      throw new ApiError(401, 'missing or incorrect API key: send "Authorization: Bearer <key>"', null, 'invalid_api_key',
        'invalid_request_error', { 'www-authenticate': 'Bearer' });
    }
    if (routeError !== null) throw routeError;
    if (!found) throw new ApiError(404, `no route for ${req.method} ${path}`, null, 'not_found');
    const { r, arg } = found;
    if (req.method !== r.method && !(req.method === 'HEAD' && r.method === 'GET')) {
      throw new ApiError(405, `${path} accepts ${r.method} only`, null, 'method_not_allowed', 'invalid_request_error', { allow: r.method });
    }
    if (r.name === 'health') return sendJson(res, 200, { status: 'ok' });
    if (r.name === 'webui') return webui!.serve(req, res, path);
    if (r.name === 'metrics_json') return statsJson(ctx, sampler, { req, res, body: undefined, signal: ctl.signal, arrival });
    if (r.name === 'metrics') {
      return metrics(ctx, { req, res, body: undefined, signal: ctl.signal, arrival }, {
        uptime_seconds: [(Date.now() - started) / 1000, 'Seconds since the server started.'],
      });
    }
    const body = r.method === 'POST' ? await readJsonBody(req, maxBody, limits.jsonDepth) : undefined;
    seen.body = body;
    if (r.method === 'POST') await checkRequestLimits(body, limits);
    try {
      await r.handler(ctx, { req, res, body, signal: ctl.signal, arrival, record: rec }, arg);
    } catch (e) {
      const err = toApiError(e, r.promptParam);
      if (err.status >= 500 && !(e instanceof ApiError)) log.error('request failed', { id: res.getHeader('x-request-id'), route: path, err: e });
      throw err;
    }
  }

  const server = createServer({
    // headers and body within requestTimeout (408 and close otherwise), checked every
    // connectionsCheckingInterval; a slow-body client cannot hold a connection open
    requestTimeout: times.requestTimeout,
    headersTimeout: times.requestTimeout,
    keepAliveTimeout: times.keepAliveTimeout,
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(times.requestTimeout / 4) || 1000)),
  }, (req, res) => {
    const arrival = performance.now();
    const ctl = new AbortController();
    const requestId = requestIdOf(req);
    const rec = newRecord();
    // The access log's route: the raw path until routing names it.
    const seen: { route: string; body?: unknown } = { route: (req.url ?? '/').split('?')[0]!.slice(0, 200) };
    res.setHeader('x-request-id', requestId);
    serving.set(req.socket, { req, res, route: () => dialectPathOf(req.url) });
    // The access line is written once the response has closed AND the handler is done (an
    // aborted stream learns its finish reason after the close).
    let pending = 2;
    const settle = (): void => {
      if (--pending === 0) logRequest(log, { id: requestId, method: req.method ?? '?', route: seen.route, res, arrival, record: rec, body: seen.body }, opts.logPrompts === true);
    };
    // The client went away before the response ended: abort its engine requests.
    res.once('close', () => {
      if (serving.get(req.socket)?.res === res) serving.delete(req.socket);
      if (!res.writableEnded) ctl.abort();
      settle();
    });
    if (draining) res.setHeader('connection', 'close');
    if (applyCors(cors, req, res)) return settle();
    const id = nextId++;
    ctx.metrics.inFlight++;
    const done = serve(req, res, ctl, arrival, rec, seen).catch((e: unknown) => {
      const err = inRouteDialect(dialectPathOf(req.url), toApiError(e, 'prompt'));
      if (err.status >= 500 && !(e instanceof ApiError)) log.error('request failed', { id: requestId, route: seen.route, err: e });
      if (err.status === 413) res.setHeader('connection', 'close');
      if (!res.headersSent) sendError(res, err);
      else if (!res.writableEnded) res.end();
    }).finally(() => {
      ctx.metrics.inFlight--;
      inflight.delete(id);
      settle();
    });
    inflight.set(id, { ctl, done });
  });
  // Idle connections stay open longer than clients keep them (undici/fetch: 4 s, most others
  // less) by default, so a client never sends a request on a connection being closed.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => answerClientError(err, socket, serving.get(socket), times.requestTimeout));
  // an Expect header other than 100-continue (node's own answer has no body)
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    res.setHeader('connection', 'close');
    sendError(res, inRouteDialect(dialectPathOf(req.url), new ApiError(417, `Expect: ${String(req.headers.expect).slice(0, 64)} is not supported (only 100-continue)`, null, 'expectation_failed')));
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 8000, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    sampler.stop();
    await pool?.close();
    throw e;
  }
  const port = (server.address() as AddressInfo).port;
  // the grammar tables the first structured request would build, in the background
  const warm = warmStructured(ctx);
  const urlHost = host.includes(':') ? `[${host}]` : host;

  let closing: Promise<void> | null = null;
  let cutGrace = (): void => undefined;
  const settled = (): Promise<unknown> => Promise.all([...inflight.values()].map((e) => e.done));
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms).unref());
  const close = (graceMs = opts.shutdownGraceMs ?? 10_000): Promise<void> => {
    if (closing) {
      if (graceMs <= 0) cutGrace();
      return closing;
    }
    closing = (async () => {
      // Draining: keep listening so that /health (and every route) answers 503 and a load
      // balancer moves traffic away, while in-flight requests finish.
      draining = true;
      sampler.stop();
      warm.stop();
      server.closeIdleConnections();
      log.info('shutdown: draining', { in_flight: inflight.size, grace_ms: graceMs });
      const graceOver = await Promise.race([settled().then(() => false), sleep(graceMs).then(() => true),
        new Promise<boolean>((r) => (cutGrace = () => r(true)))]);
      if (graceOver && inflight.size > 0) log.warn('shutdown: aborting in-flight requests', { in_flight: inflight.size });
      for (const e of inflight.values()) e.ctl.abort();
      await Promise.race([settled(), sleep(5_000)]);
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      await pool?.close();
      log.info('shutdown: server closed');
    })();
    return closing;
  };

  return {
    url: `http://${urlHost}:${port}`, host, port, modelName: ctx.modelName,
    get inFlight() {
      return inflight.size;
    },
    close,
  };
}
