// `deltaserve serve`: the OpenAI-compatible HTTP server. Prints the URL and a one-line
// model summary when ready; SIGINT/SIGTERM shut down gracefully (a second signal aborts
// in-flight requests at once).
import { parseArgs } from 'node:util';
import { Engine } from '../engine/engine.js';
import { startServer } from '../server/http.js';
import { DeltaserveError } from '../util/errors.js';
import { int, str } from './args.js';
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineOptions } from './engine-flags.js';

export const SERVE_HELP = `deltaserve serve [options]
  --host HOST               interface to bind (default 127.0.0.1)
  --port N                  port (default 8000; 0 = any free port, printed when ready)
  --api-key KEY             require "Authorization: Bearer KEY" on every route but /health
                            (default: $DELTASERVE_API_KEY; none = no auth)
  --served-model-name NAME  model id in the API (default: the model directory's name)
  --max-queue N             429 + Retry-After when more than N requests would wait (default 1024)
  --max-body-bytes N        413 for larger request bodies (default 8388608)
  --shutdown-grace-ms N     on SIGINT/SIGTERM, let in-flight requests finish for up to N ms,
                            then abort them (finish_reason "abort") (default 10000)
  --lenient                 ignore request fields the server does not implement
                            (default: a 400 naming the field)
${ENGINE_FLAGS_HELP}`;

export async function runServe(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv, options: {
      ...ENGINE_FLAGS, host: { type: 'string' }, port: { type: 'string' }, 'api-key': { type: 'string' },
      'served-model-name': { type: 'string' }, 'max-queue': { type: 'string' }, 'max-body-bytes': { type: 'string' },
      'shutdown-grace-ms': { type: 'string' }, lenient: { type: 'boolean' },
    },
  });
  const port = int(values, 'port', 0);
  if (port !== undefined && port > 65535) throw new DeltaserveError('bad_request', `--port must be at most 65535 (got ${port})`);
  const apiKey = str(values, 'api-key') ?? process.env['DELTASERVE_API_KEY'];
  const served = str(values, 'served-model-name');
  const maxQueue = int(values, 'max-queue', 0);
  const maxBody = int(values, 'max-body-bytes', 1);
  const grace = int(values, 'shutdown-grace-ms', 0);
  const opts = engineOptions(values);
  const engine = await Engine.load(opts);
  let server;
  try {
    server = await startServer(engine, {
      host: str(values, 'host') ?? '127.0.0.1', port: port ?? 8000,
      ...(apiKey ? { apiKey } : {}), ...(served ? { servedModelName: served } : {}),
      ...(maxQueue !== undefined ? { maxQueue } : {}), ...(maxBody !== undefined ? { maxBodyBytes: maxBody } : {}),
      ...(grace !== undefined ? { shutdownGraceMs: grace } : {}),
      ...(values.lenient ? { lenient: true } : {}),
    });
  } catch (e) {
    await engine.close();
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'EADDRINUSE' || err.code === 'EACCES' || err.code === 'EADDRNOTAVAIL') {
      throw new DeltaserveError('bad_request', `cannot listen on ${str(values, 'host') ?? '127.0.0.1'}:${port ?? 8000}: ${err.code}`);
    }
    throw e;
  }
  const cfg = engine.model.config;
  process.stdout.write(`deltaserve: serving ${server.modelName} at ${server.url}/v1\n`);
  process.stdout.write(`deltaserve: model ${cfg.modelType}, ${cfg.numLayers} layers, hidden ${cfg.hiddenSize}, vocab ${cfg.vocabSize}, ` +
    `context ${engine.maxContext}, MTP layers ${cfg.mtpLayers}, kernels ${opts.kernels ?? 'ref'}${apiKey ? ', API key required' : ''}\n`);

  let signals = 0;
  const stop = (sig: string): void => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`deltaserve: ${sig}: shutting down (in-flight requests have ${grace ?? 10_000} ms)\n`);
      void server.close().then(() => engine.close()).then(() => process.exit(0), (e: unknown) => {
        process.stderr.write(`deltaserve: shutdown failed: ${String(e)}\n`);
        process.exit(1);
      });
    } else {
      process.stderr.write(`deltaserve: ${sig} again: aborting in-flight requests\n`);
      void server.close(0);
    }
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
