// Reasoning as an opaque blob (Responses `include: ["reasoning.encrypted_content"]`): the
// reasoning text sealed with AES-256-GCM under a server key, so a stateless client can hand it
// back on the next turn and only this server (or one sharing its key) can read it, and nobody
// can alter it unnoticed.
//
// Key: `--responses-key` (any string; its SHA-256 is the key), else a random key kept in
// `<dir>/responses.key` (created 0600 on first use) when the server has a cache directory, else
// a random key for this process (blobs then do not survive a restart).
// Blob: base64url(version byte 1 | 12-byte IV | 16-byte tag | ciphertext of the JSON {t, m}).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
export const KEY_FILE = 'responses.key';

/** The sealing key: from a passphrase, a key file in `dir` (made when missing), or random. */
export function responsesKey(passphrase: string | undefined, dir: string | undefined): Buffer {
  if (passphrase !== undefined && passphrase.length > 0) return createHash('sha256').update(passphrase).digest();
  if (dir === undefined) return randomBytes(32);
  const file = join(dir, KEY_FILE);
  if (existsSync(file)) {
    const hex = readFileSync(file, 'utf8').trim();
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${file} is not a 64-hex-digit key; delete it to make a new one`);
    return Buffer.from(hex, 'hex');
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

/** What a blob holds: the reasoning text and the model that wrote it. */
export interface SealedReasoning {
  readonly text: string;
  readonly model: string;
}

export function sealReasoning(key: Buffer, r: SealedReasoning): string {
  const iv = randomBytes(IV_BYTES);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([c.update(JSON.stringify({ t: r.text, m: r.model }), 'utf8'), c.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, c.getAuthTag(), body]).toString('base64url');
}

/** The reasoning of a blob, or null when it is not one of this key's blobs (forged, altered,
 * truncated, or sealed under another key). */
export function openReasoning(key: Buffer, blob: string): SealedReasoning | null {
  const raw = Buffer.from(blob, 'base64url');
  if (raw.length < 1 + IV_BYTES + TAG_BYTES || raw[0] !== VERSION) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', key, raw.subarray(1, 1 + IV_BYTES));
    d.setAuthTag(raw.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
    const text = Buffer.concat([d.update(raw.subarray(1 + IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
    const o = JSON.parse(text) as { t?: unknown; m?: unknown };
    return typeof o.t === 'string' && typeof o.m === 'string' ? { text: o.t, model: o.m } : null;
  } catch {
    return null;
  }
}
