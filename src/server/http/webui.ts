// The web UI's static files: the chat page at `/`, the dashboard at `/dashboard`, their
// bundled scripts and styles under `/webui/`. They are built by `npm run build`
// (scripts/build-webui.mjs → build/webui/) and read into memory once at server start, with a
// gzip copy each. Every response carries a strict Content-Security-Policy (scripts and
// styles from this origin only, no inline script, fetches to this origin only) and
// nosniff. HTML revalidates by ETag; content-hashed assets are cached for a year.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { ApiError } from './errors.js';

/** Where `npm run build` writes the web UI (relative to dist/src/server/http/ or src/server/http/). */
export const WEBUI_DIR = fileURLToPath(new URL('../../../../build/webui/', import.meta.url));

export const WEBUI_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data: blob:", "connect-src 'self'",
  "font-src 'self'", "manifest-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
};

/** Bundles named NAME-HASH.ext by the build never change: cache them for a year. */
const HASHED = /-[A-Za-z0-9]{8}\.(js|css)$/;

interface Asset {
  readonly body: Buffer;
  readonly gzip: Buffer | null;
  readonly type: string;
  readonly etag: string;
  readonly cacheControl: string;
}

function assetOf(file: string, name: string): Asset {
  const body = readFileSync(file);
  const gz = body.length > 512 ? gzipSync(body, { level: 9 }) : null;
  return {
    body,
    gzip: gz && gz.length < body.length ? gz : null,
    type: TYPES[extname(name)] ?? 'application/octet-stream',
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
    cacheControl: HASHED.test(name) ? 'public, max-age=31536000, immutable' : 'no-cache',
  };
}

/** URL path → file: `/` index.html, `/dashboard` dashboard.html, `/webui/NAME` the files of assets/. */
function loadAssets(dir: string): Map<string, Asset> | null {
  const pages: [string, string][] = [['/', 'index.html'], ['/dashboard', 'dashboard.html']];
  if (!pages.every(([, f]) => existsSync(join(dir, f)))) return null;
  const map = new Map<string, Asset>(pages.map(([url, f]) => [url, assetOf(join(dir, f), f)]));
  const assets = join(dir, 'assets');
  if (existsSync(assets)) {
    for (const name of readdirSync(assets)) {
      const file = join(assets, name);
      if (/^[\w.-]+$/.test(name) && statSync(file).isFile()) map.set(`/webui/${name}`, assetOf(file, name));
    }
  }
  return map;
}

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': WEBUI_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
};

export class WebUi {
  private readonly assets: Map<string, Asset> | null;

  constructor(dir = WEBUI_DIR) {
    this.assets = loadAssets(dir);
  }

  /** Whether the build's files were found. */
  get built(): boolean {
    return this.assets !== null;
  }

  /** Answer GET/HEAD for a web UI path (`/`, `/dashboard`, `/webui/…`); 404 for unknown files. */
  serve(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (!this.assets) {
      throw new ApiError(404, 'the web UI is not built in this installation: run `npm run build` (or start with --no-webui)', null, 'webui_not_built');
    }
    const a = this.assets.get(path);
    if (!a) throw new ApiError(404, `no web UI file ${path}`, null, 'not_found');
    const headers: Record<string, string> = {
      ...SECURITY_HEADERS, 'content-type': a.type, 'cache-control': a.cacheControl, etag: a.etag,
      vary: [res.getHeader('vary'), 'Accept-Encoding'].filter((v) => v !== undefined).join(', '),
    };
    const match = req.headers['if-none-match'];
    if (typeof match === 'string' && match.split(',').some((t) => t.trim() === a.etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    const gzip = a.gzip !== null && /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    const body = gzip ? a.gzip! : a.body;
    if (gzip) headers['content-encoding'] = 'gzip';
    headers['content-length'] = String(body.length);
    res.writeHead(200, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }
}
