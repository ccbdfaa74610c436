// `deltaserve serve`: the OpenAI-compatible HTTP server. Prints the URL and a one-line
// model summary when ready; SIGINT/SIGTERM shut down gracefully (a second signal aborts
// in-flight requests at once).
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Engine } from '../engine/engine.js';
import { formatPlan, weightBytes } from '../engine/memory-plan.js';
import { isHubReference } from '../hub/resolve.js';
import { originProblem } from '../server/http/cors.js';
import { checkPrefixCacheDir } from '../engine/prefix-persist.js';
import { startServer } from '../server/http/server.js';
import { LIMIT_FLAGS, type RequestLimits, resolveLimits } from '../server/http/limits.js';
import { DeltaserveError } from '../util/errors.js';
import { hugePageHint, hugePageStatus } from '../util/huge-pages.js';
import { createLogger, isLogLevel, LOG_LEVELS, type Logger } from '../util/log.js';
import { type ArgValues, int, num, str } from './args.js';
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, emulationWarning, engineOptions, kernelsFields, kernelsLine } from './engine-flags.js';

const LIMIT_HELP_TEXT: Readonly<Record<keyof RequestLimits, string>> = {
  promptChars: '413 for prompt text (messages, prompt, input, system, instructions) longer than N characters',
  messages: '400 for more than N messages (or Responses input items)',
  tools: '400 for more than N tools',
  toolsBytes: '413 for a tools array larger than N bytes of JSON',
  schemaBytes: '413 for a JSON schema (response format, tool parameters) larger than N bytes',
  enumValues: '400 for a schema enum of more than N values',
  jsonDepth: '400 for request JSON nested deeper than N arrays/objects (at most 1000)',
  prepareMs: '413 when rendering and tokenizing a prompt takes longer than N ms',
  grammarUnits: '400 when compiling a grammar (JSON schema, forced tool calls) takes more than N work units',
};
const LIMITS_HELP = Object.entries(LIMIT_FLAGS).map(([k, v]) =>
  `  --${`${v.flag} N`.padEnd(24)}${LIMIT_HELP_TEXT[k as keyof RequestLimits]} (default ${v.def})`).join('\n');

export const SERVE_HELP = `deltaserve serve [options]
  --host HOST               interface to bind (default 127.0.0.1)
  --port N                  port (default 8000; 0 = any free port, printed when ready)
  --api-key KEY             require "Authorization: Bearer KEY" on every route but /health
                            (default: $DELTASERVE_API_KEY; none = no auth)
  --served-model-name NAME  model id in the API (default: the model directory's name)
  --max-queue N             503 + Retry-After when more than N requests would wait (default 1024)
  --max-images N            images in one request at most (default 16)
  --max-image-pixels N      pixels of one decoded image at most (default 89478485); the memory
                            plan keeps room for the vision tower's encode of the largest such image
  --allow-image-urls        fetch http(s) image URLs (20 MB, 10 s per image); default: data: URLs only
  --max-queue-wait SECONDS  503 + Retry-After when a request would wait longer than this for
                            memory (a state slot and KV pages for its prompt), estimated from
                            the recent output lengths (capped by max_tokens) and step time
                            (default 60; 0 = answer 503 unless it can start at once)
  --max-body-bytes N        413 for larger request bodies (default 8388608)
  --shutdown-grace-ms N     on SIGINT/SIGTERM, let in-flight requests finish for up to N ms,
                            then abort them (finish_reason "abort") (default 10000)
  --allowed-origins LIST    CORS: comma-separated browser origins allowed to call the API
                            (https://app.example.com,...; "*" = any); preflights answered (default: off)
  --metrics-no-auth         /metrics and /metrics.json need no API key (for Prometheus scrapers)
  --no-webui                do not serve the web UI (chat page at /, dashboard at /dashboard)
  --log-level LEVEL         ${LOG_LEVELS.join('|')} (default info): one line per request, errors, shutdown
  --log-format json|pretty  log lines on stderr (default: json unless stderr is a terminal)
  --log-prompts             include prompts in the request log lines (default: never)
  --lenient                 ignore request fields the server does not implement, and
                            JSON Schema assertions the grammar cannot enforce
                            (default: a 400 naming the field or keyword)
  --responses-ttl SECONDS   /v1/responses store: keep stored responses this long (default 86400)
  --responses-store-bytes N /v1/responses store: at most N bytes of responses, least recently
                            used dropped first (default 67108864); kept on disk in
                            <--prefix-cache-dir>/responses when that flag is given
  --responses-key KEY       passphrase of the key sealing reasoning.encrypted_content
                            (default: a key made once and kept in <--prefix-cache-dir>, else a
                            new key per process: blobs do not survive a restart)
  --request-timeout-ms N    a client must send a request's headers and body within N ms,
                            else 408 and the connection closes (default 60000; 0 = no limit)
  --keep-alive-timeout-ms N close keep-alive connections idle for N ms (default 65000)
  --prepare-workers N       worker threads rendering chat templates and tokenizing prompts
                            off the event loop (default 2; 0 = on the event loop)
${LIMITS_HELP}
  --max-grammar-ms N        deprecated, ignored (a warning): see --max-grammar-units
${ENGINE_FLAGS_HELP}`;

function hubName(model: string | undefined): string | undefined {
  return model !== undefined && isHubReference(model) ? model : undefined;
}

export async function runServe(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: {
      ...ENGINE_FLAGS, host: { type: 'string' }, port: { type: 'string' }, 'api-key': { type: 'string' },
      'served-model-name': { type: 'string' }, 'max-queue': { type: 'string' },
      'max-queue-wait': { type: 'string' }, 'max-body-bytes': { type: 'string' },
      'max-images': { type: 'string' }, 'max-image-pixels': { type: 'string' }, 'allow-image-urls': { type: 'boolean' },
      'shutdown-grace-ms': { type: 'string' }, 'allowed-origins': { type: 'string', multiple: true },
      'metrics-no-auth': { type: 'boolean' }, 'log-level': { type: 'string' }, 'log-format': { type: 'string' },
      'log-prompts': { type: 'boolean' },
      lenient: { type: 'boolean' }, 'responses-ttl': { type: 'string' }, 'responses-store-bytes': { type: 'string' },
      'responses-key': { type: 'string' }, 'no-webui': { type: 'boolean' },
      'request-timeout-ms': { type: 'string' }, 'keep-alive-timeout-ms': { type: 'string' },
      'prepare-workers': { type: 'string' }, 'max-grammar-ms': { type: 'string' },
      ...Object.fromEntries(Object.values(LIMIT_FLAGS).map((v) => [v.flag, { type: 'string' as const }])),
    },
  });
  const log = loggerOf(values);
  if (values['max-grammar-ms'] !== undefined) {
    // deprecated: a wall-clock limit made acceptance depend on the machine's load
    log.warn('--max-grammar-ms is deprecated and ignored: the compile limit is --max-grammar-units (counted work, the same answer on any machine); grammars compile in the prepare workers');
  }
  const origins = allowedOrigins(values);
  const port = int(values, 'port', 0);
  if (port !== undefined && port > 65535) throw new DeltaserveError('bad_request', `--port must be at most 65535 (got ${port})`);
  const keyFlag = str(values, 'api-key');
  if (keyFlag !== undefined && keyFlag.trim() === '') {
    throw new DeltaserveError('bad_request', '--api-key is empty: give a key, or leave the flag out to serve without authentication');
  }
  // an empty DELTASERVE_API_KEY (compose passes "${DELTASERVE_API_KEY:-}") means none
  const apiKey = keyFlag ?? (process.env['DELTASERVE_API_KEY'] || undefined);
  const limits = limitFlags(values);
  resolveLimits(limits); // range errors before the model loads
  const requestTimeout = int(values, 'request-timeout-ms', 0);
  const keepAlive = int(values, 'keep-alive-timeout-ms', 1);
  const prepareWorkers = int(values, 'prepare-workers', 0);
  // a model by name is served under that name (not its snapshot directory's)
  const served = str(values, 'served-model-name') ?? hubName(str(values, 'model'));
  const maxQueue = int(values, 'max-queue', 0);
  const maxQueueWait = num(values, 'max-queue-wait');
  const maxBody = int(values, 'max-body-bytes', 1);
  const grace = int(values, 'shutdown-grace-ms', 0);
  const opts = engineOptions(values);
  const responsesTtl = num(values, 'responses-ttl');
  if (responsesTtl !== undefined && !(responsesTtl > 0)) throw new DeltaserveError('bad_request', `--responses-ttl must be a number of seconds > 0 (got ${responsesTtl})`);
  const responsesBytes = int(values, 'responses-store-bytes', 0);
  const responsesKey = str(values, 'responses-key');
  const maxImages = int(values, 'max-images', 0);
  const maxImagePixels = int(values, 'max-image-pixels', 1);
  const images = {
    ...(maxImages !== undefined ? { maxImages } : {}), ...(maxImagePixels !== undefined ? { maxImagePixels } : {}),
    allowUrls: values['allow-image-urls'] === true,
  };
  // the engine's memory plan reserves the tower's encode of the largest image this allows
  const engine = await Engine.load({ ...opts, ...(maxImagePixels !== undefined ? { maxImagePixels } : {}) });
  let server;
  try {
    server = await startServer(engine, {
      host: str(values, 'host') ?? '127.0.0.1', port: port ?? 8000,
      ...(apiKey ? { apiKey } : {}), ...(served ? { servedModelName: served } : {}),
      ...(maxQueue !== undefined ? { maxQueue } : {}), ...(maxQueueWait !== undefined ? { maxQueueWait } : {}),
      ...(maxBody !== undefined ? { maxBodyBytes: maxBody } : {}),
      ...(grace !== undefined ? { shutdownGraceMs: grace } : {}),
      ...(origins ? { allowedOrigins: origins } : {}),
      metricsNoAuth: values['metrics-no-auth'] === true, logger: log, logPrompts: values['log-prompts'] === true,
      ...(values.lenient ? { lenient: true } : {}), limits,
      ...(responsesTtl !== undefined ? { responsesTtl } : {}), ...(responsesBytes !== undefined ? { responsesMaxBytes: responsesBytes } : {}),
      ...(responsesKey !== undefined ? { responsesKey } : {}),
      ...responsesDirOf(opts.prefixCacheDir, log),
      webui: values['no-webui'] !== true,
      ...(requestTimeout !== undefined ? { requestTimeoutMs: requestTimeout } : {}),
      ...(keepAlive !== undefined ? { keepAliveTimeoutMs: keepAlive } : {}),
      ...(prepareWorkers !== undefined ? { prepareWorkers } : {}),
      images,
    });
  } catch (e) {
    await engine.close();
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') {
      throw new DeltaserveError('bad_request', `cannot listen on ${str(values, 'host') ?? '127.0.0.1'}:${port ?? 8000}: ${err.code}`);
    }
    throw e;
  }
  const cfg = engine.info.config;
  process.stdout.write(`deltaserve: serving ${server.modelName} at ${server.url}/v1\n`);
  process.stdout.write(`deltaserve: model ${cfg.modelType}, ${cfg.numLayers} layers, hidden ${cfg.hiddenSize}, vocab ${cfg.vocabSize}, ` +
    `context ${engine.maxContext}, MTP layers ${cfg.mtpLayers}${apiKey ? ', API key required' : ''}, kernels ${kernelsLine(engine.info.kernels, opts.kernels)}\n`);
  const emulation = emulationWarning(engine.info.kernels);
  if (emulation) process.stderr.write(`deltaserve: ${emulation}\n`);
  if (engine.memoryPlan) process.stdout.write(`deltaserve: ${formatPlan(engine.memoryPlan)}\n`);
  const pages = hugePageStatus();
  const pageHint = hugePageHint(pages, engine.info.kernels.name, engine.memoryPlan?.weightBytes ?? weightBytes(engine.info.weights));
  if (pageHint) process.stdout.write(`deltaserve: ${pageHint}\n`);
  if (values['no-webui'] !== true) process.stdout.write(`deltaserve: chat at ${server.url}/, dashboard at ${server.url}/dashboard\n`);
  log.info('ready', { url: `${server.url}/v1`, model: server.modelName, ...kernelsFields(engine.info.kernels, opts.kernels), node: process.version, cors: origins ?? null,
    metrics_no_auth: values['metrics-no-auth'] === true, transparent_huge_pages: pages.thp, api_key: apiKey ? 'required' : 'none' });

  let signals = 0;
  const stop = (sig: string): void => {
    signals++;
    if (signals === 1) {
      log.info(`${sig}: shutting down (in-flight requests have ${grace ?? 10_000} ms)`, { signal: sig });
      void server.close().then(() => engine.close()).then(() => {
        log.info('shutdown: done', { signal: sig });
        process.exit(0);
      }, (e: unknown) => {
        log.error('shutdown failed', { err: e });
        process.exit(1);
      });
    } else {
      log.warn(`${sig} again: aborting in-flight requests`, { signal: sig });
      void server.close(0);
    }
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/** The request-limit flags given (checked again, with their ranges, by the server). */
function limitFlags(v: ArgValues): Partial<RequestLimits> {
  const out: Partial<Record<keyof RequestLimits, number>> = {};
  for (const [k, spec] of Object.entries(LIMIT_FLAGS)) {
    const n = int(v, spec.flag, 1);
    if (n !== undefined) out[k as keyof RequestLimits] = n;
  }
  return out;
}

function loggerOf(v: ArgValues): Logger {
  const level = str(v, 'log-level') ?? 'info';
  if (!isLogLevel(level)) throw new DeltaserveError('bad_request', `--log-level must be one of ${LOG_LEVELS.join(', ')} (got "${level}")`);
  const format = str(v, 'log-format');
  if (format !== undefined && format !== 'json' && format !== 'pretty') {
    throw new DeltaserveError('bad_request', `--log-format must be json or pretty (got "${format}")`);
  }
  return createLogger({ level, ...(format ? { format } : {}) });
}

/** --allowed-origins a,b (repeatable): each must be "*" or scheme://host[:port]. */
function allowedOrigins(v: ArgValues): string[] | undefined {
  const raw = v['allowed-origins'];
  if (!Array.isArray(raw)) return undefined;
  const list = raw.flatMap((x) => String(x).split(',')).map((o) => o.trim()).filter((o) => o.length > 0);
  for (const o of list) {
    const problem = originProblem(o);
    if (problem) throw new DeltaserveError('bad_request', `--allowed-origins: ${problem}`);
  }
  return list;
}

/** Stored Responses go beside the prefix cache (`<dir>/responses`); a read-only cache
 * directory keeps them in memory only. */
function responsesDirOf(prefixCacheDir: string | undefined, log: Logger): { responsesDir?: string } {
  if (prefixCacheDir === undefined) return {};
  if (checkPrefixCacheDir(prefixCacheDir).kind === 'read-only') {
    log.warn(`--prefix-cache-dir ${prefixCacheDir} is read-only: stored Responses are kept in memory only`);
    return {};
  }
  return { responsesDir: join(prefixCacheDir, 'responses') };
}
