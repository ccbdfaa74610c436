// Errors node:http reports on a connection rather than a request ('clientError'): a request
// not received in full within --request-timeout-ms (408), a request line and headers past
// Node's header size limit (431: a 20,000-character response id lands here), unparsable
// HTTP (400). Each gets a JSON body in its route's dialect (error-dialect.ts) and the
// connection closes: through the request's own response when one is in flight and has sent
// nothing yet (its route is known), else written straight to the socket.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { inRouteDialect, rawErrorResponse } from './error-dialect.js';
import { ApiError } from './errors.js';
import { sendError } from './respond.js';
import { dialectPathOf } from './routes.js';

/** The request a connection is serving now, and its route path once known. */
export interface InFlight {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly route: () => string | null;
}

type ClientError = NodeJS.ErrnoException & { rawPacket?: Buffer };

function apiErrorOf(err: ClientError, requestTimeoutMs: number): ApiError {
  switch (err.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ApiError(408, `the request was not received in full within ${requestTimeoutMs} ms (--request-timeout-ms)`, null, 'request_timeout');
    case 'HPE_HEADER_OVERFLOW':
      return new ApiError(431, 'the request line and headers are too large (a URL or header of more than about 16 KB)', null, 'headers_too_large');
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ApiError(413, 'the chunk extensions of the request body are too large', null, 'request_too_large');
    default:
      return new ApiError(400, `malformed HTTP request (${err.code ?? 'parse error'})`, null, 'bad_http');
  }
}

/** The path of the request line at the start of `packet` (for the dialect), or null. */
function pathOfPacket(packet: Buffer | undefined): string | null {
  if (!packet) return null;
  const m = /^[A-Z]{3,7} (\S+)/.exec(packet.subarray(0, 64 * 1024).toString('latin1'));
  if (!m) return null;
  return dialectPathOf(m[1]);
}

/** Close the connection once what was written has been flushed. */
function closeAfterFlush(socket: Duplex): void {
  socket.end();
  if (socket.writableFinished) socket.destroy();
  else socket.once('finish', () => socket.destroy());
}

/** Answer a 'clientError' of node:http (the server's handler replaces node's own). */
export function answerClientError(err: ClientError, socket: Duplex, current: InFlight | undefined, requestTimeoutMs: number): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const e = apiErrorOf(err, requestTimeoutMs);
  if (current) {
    // a response already under way cannot be replaced: only cut it
    if (current.res.headersSent) {
      socket.destroy();
      return;
    }
    current.res.setHeader('connection', 'close');
    current.res.once('finish', () => closeAfterFlush(socket));
    sendError(current.res, inRouteDialect(current.route(), e));
    // the handler still reading the body learns of the end (node:http no longer will)
    current.req.on('error', () => undefined).destroy(e);
    return;
  }
  socket.write(rawErrorResponse(pathOfPacket(err.rawPacket), e));
  closeAfterFlush(socket);
}
