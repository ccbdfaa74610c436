// Writing plain (non-streaming) responses.
import type { ServerResponse } from 'node:http';
import type { ApiError } from './errors.js';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A JSON body already encoded (by a prepare worker). */
export function sendJsonBytes(res: ServerResponse, status: number, body: Uint8Array): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.byteLength });
  res.end(body);
}

export function sendText(res: ServerResponse, status: number, text: string, contentType: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export function sendError(res: ServerResponse, e: ApiError): void {
  sendJson(res, e.status, e.body(), e.headers);
}
