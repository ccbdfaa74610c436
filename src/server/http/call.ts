// One HTTP request as a route handler sees it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestRecord } from './access-log.js';

/** One HTTP request being handled. */
export interface Call {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly body: unknown;
  /** Aborted when the client goes away or the server stops waiting at shutdown. */
  readonly signal: AbortSignal;
  /** performance.now() at arrival. */
  readonly arrival: number;
  /** Token counts / TTFT / finish reasons for the access log (filled by startChoices). */
  readonly record?: RequestRecord;
}
