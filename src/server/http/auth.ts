// API-key authentication: the key is compared as a SHA-256 digest in constant time, so neither
// its length nor its prefix leaks through response timing.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The digest a request's key is compared with. */
export const apiKeyDigest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** `Authorization: Bearer KEY`, or `x-api-key: KEY` (Anthropic's clients). */
export function authorized(req: IncomingMessage, key: Buffer): boolean {
  const h = req.headers.authorization ?? '';
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  if (m !== null && timingSafeEqual(apiKeyDigest(m[1]!), key)) return true;
  const x = req.headers['x-api-key'];
  return typeof x === 'string' && x.length > 0 && timingSafeEqual(apiKeyDigest(x.trim()), key);
}
