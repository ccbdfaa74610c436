// Reading a request body: the byte limit (413 before reading when the declared length is
// past it, else as soon as the received bytes are), a client that goes away, and JSON bodies
// parsed chunk by chunk as they arrive (json-stream.ts), so a multi-megabyte body costs the
// event loop one chunk's work at a time instead of one long JSON.parse at the end.
import type { IncomingMessage } from 'node:http';
import { ApiError } from './errors.js';
import { JsonBodyParser } from './json-stream.js';

function tooLarge(limit: number): ApiError {
  return new ApiError(413, `the request body is larger than the limit of ${limit} bytes`, null, 'request_too_large');
}

/** Feed each received chunk to `onChunk`; resolves at the end of the body, rejects with 413
 * past `limit` bytes (reading stops) or when the client closes the connection. */
function receive(req: IncomingMessage, limit: number, onChunk: (b: Buffer) => void): Promise<void> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    let size = 0;
    req.on('data', (b: Buffer) => {
      size += b.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.pause();
        reject(tooLarge(limit));
      } else onChunk(b);
    });
    req.on('end', () => resolve());
    req.on('error', reject);
    req.on('aborted', () => reject(new ApiError(400, 'the client closed the connection', null, 'client_closed')));
    // closed before the end of the body, whatever closed it (a no-op once resolved)
    req.on('close', () => {
      if (!req.complete) reject(new ApiError(400, 'the connection closed before the whole request body arrived', null, 'client_closed'));
    });
  });
}

/** The body parsed as JSON while it arrives: 413 past `limit` bytes; 400 when empty, not
 * JSON, or nested deeper than `maxDepth` (after an error the rest is received unparsed). */
export async function readJsonBody(req: IncomingMessage, limit: number, maxDepth: number): Promise<unknown> {
  const parser = new JsonBodyParser(maxDepth);
  await receive(req, limit, (b) => parser.push(b));
  return parser.end();
}
