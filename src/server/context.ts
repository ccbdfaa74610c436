// What every route sees of the server: the engine, the served model's name, metrics, request
// defaults and limits, the Responses store and the prepare pool. startServer (http/server.ts)
// builds one per server; every handler and the turn pipeline (api/turn.ts) read it, none writes it.
import type { Engine } from '../engine/engine.js';
import type { RequestLimits } from './http/limits.js';
import type { TokenTexts } from './api/logprobs.js';
import type { ServerMetrics } from './api/metrics.js';
import type { ResponsesConfig } from './api/responses-store.js';
import type { SamplingDefaults } from './api/validate.js';
import type { PreparePool } from '../frontend/prepare-pool.js';
import type { ServerImageOptions } from './api/images.js';

/** What every route sees of the server. */
export interface ServerContext {
  readonly engine: Engine;
  readonly modelName: string;
  readonly created: number;
  readonly metrics: ServerMetrics;
  readonly defaults: SamplingDefaults;
  readonly maxQueue: number;
  /** Seconds a request may be expected to wait for memory before it gets a 503 instead. */
  readonly maxQueueWait: number;
  readonly texts: TokenTexts;
  /** --lenient: ignore unknown request fields instead of a 400. */
  readonly lenient?: boolean;
  /** The Responses store and reasoning key (absent: responses are not kept). */
  readonly responses?: ResponsesConfig;
  /** Request size limits (default: DEFAULT_LIMITS). */
  readonly limits?: RequestLimits;
  /** Worker threads that render and tokenize prompts (none: on the event loop). */
  readonly prepare?: PreparePool;
  /** Image limits and URL fetching (absent: the defaults, URLs off). */
  readonly images?: ServerImageOptions;
}
