// Talking to a Hugging Face hub endpoint (HF_ENDPOINT, default https://huggingface.co):
// the revision API (`/api/models/{repo}/revision/{rev}?blobs=true` → commit sha and files
// with sizes and LFS sha256) and resolve URLs (`/{repo}/resolve/{commit}/{path}`), with an
// optional bearer token (HF_TOKEN). Large (LFS) files download into
// blobs/{sha256}.incomplete, resume from where they stopped (HTTP Range), and are checked
// against the size and sha256 the hub lists before they are renamed into place.
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { DeltaserveError } from '../util/errors.js';
import type { DownloadProgress } from './progress.js';
import { type RepoRef, describeRef, repoId } from './cache.js';

export interface HubClient {
  readonly endpoint: string;
  readonly token: string | undefined;
}

export interface HubFile {
  readonly path: string;
  readonly size: number | null;
  /** sha256 of an LFS file (the blob key), null for small git files. */
  readonly sha256: string | null;
}

export interface RepoInfo {
  readonly commit: string;
  readonly files: readonly HubFile[];
}

/** The network could not be reached (as opposed to an HTTP error answer). */
export class HubUnreachable extends Error {}

function bad(message: string): never {
  throw new DeltaserveError('bad_config', message);
}

async function hubFetch(client: HubClient, url: string, headers: Record<string, string> = {}): Promise<Response> {
  try {
    return await fetch(url, { headers: { ...headers, ...(client.token ? { authorization: `Bearer ${client.token}` } : {}) }, redirect: 'follow' });
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    throw new HubUnreachable(`cannot reach ${client.endpoint} (${cause?.code ?? cause?.message ?? (e as Error).message})`);
  }
}

function httpError(res: Response, what: string, client: HubClient): never {
  if (res.status === 401 || res.status === 403) {
    bad(`${what}: the hub answered ${res.status} (gated or private repository?${client.token ? ' HF_TOKEN was sent' : ' set HF_TOKEN'})`);
  }
  if (res.status === 404) bad(`${what}: not found on ${client.endpoint} (404: unknown repository, revision or file)`);
  bad(`${what}: the hub answered HTTP ${res.status}`);
}

/** The commit of `ref.revision` and the repository's files. */
export async function fetchRepoInfo(client: HubClient, ref: RepoRef): Promise<RepoInfo> {
  const url = `${client.endpoint}/api/models/${repoId(ref)}/revision/${encodeURIComponent(ref.revision)}?blobs=true`;
  const res = await hubFetch(client, url);
  if (!res.ok) httpError(res, `model ${describeRef(ref)}`, client);
  const json = await res.json() as { sha?: unknown; siblings?: unknown };
  if (typeof json.sha !== 'string' || !/^[0-9a-f]{40}$/.test(json.sha) || !Array.isArray(json.siblings)) {
    bad(`model ${describeRef(ref)}: unexpected answer from ${url} (no commit sha or file list)`);
  }
  const files = (json.siblings as Record<string, unknown>[]).map((s): HubFile => {
    const lfs = s['lfs'] as { sha256?: unknown; size?: unknown } | undefined;
    const size = typeof lfs?.size === 'number' ? lfs.size : typeof s['size'] === 'number' ? s['size'] : null;
    return { path: String(s['rfilename']), size, sha256: typeof lfs?.sha256 === 'string' ? lfs.sha256 : null };
  });
  return { commit: json.sha, files };
}

/** sha256 of the first `bytes` of a file. */
function hashPrefix(path: string, bytes: number): ReturnType<typeof createHash> {
  const h = createHash('sha256');
  const fd = openSync(path, 'r');
  try {
    const buf = new Uint8Array(1 << 20);
    for (let pos = 0; pos < bytes;) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, bytes - pos), pos);
      if (n <= 0) break;
      h.update(buf.subarray(0, n));
      pos += n;
    }
  } finally {
    closeSync(fd);
  }
  return h;
}

/** Download `file` of `commit` into blobs/, counting its bytes in `progress`; returns the
 * blob key (etag). */
export async function downloadBlob(client: HubClient, ref: RepoRef, commit: string, file: HubFile, repoDir: string,
  progress: DownloadProgress): Promise<string> {
  const url = `${client.endpoint}/${repoId(ref)}/resolve/${commit}/${file.path.split('/').map(encodeURIComponent).join('/')}`;
  const blobs = join(repoDir, 'blobs');
  mkdirSync(blobs, { recursive: true });
  const what = `${repoId(ref)}: ${file.path}`;
  if (!file.sha256) {
    // a small git file: fetched whole, keyed by its content hash
    const res = await hubFetch(client, url);
    if (!res.ok) httpError(res, what, client);
    const body = new Uint8Array(await res.arrayBuffer());
    if (file.size !== null && body.byteLength !== file.size) bad(`${what}: got ${body.byteLength} bytes, the hub lists ${file.size}`);
    progress.add(body.byteLength);
    const key = createHash('sha256').update(body).digest('hex');
    writeFileSync(join(blobs, key), body);
    return key;
  }
  const blob = join(blobs, file.sha256);
  if (existsSync(blob) && (file.size === null || statSync(blob).size === file.size)) {
    progress.have(statSync(blob).size);
    return file.sha256;
  }
  const tmp = `${blob}.incomplete`;
  let have = existsSync(tmp) ? statSync(tmp).size : 0;
  if (file.size !== null && have > file.size) {
    rmSync(tmp);
    have = 0;
  }
  const res = await hubFetch(client, url, have > 0 ? { range: `bytes=${have}-` } : {});
  if (res.status === 416 && file.size !== null && have === file.size) {
    await res.body?.cancel();
    progress.have(have);
  } else {
    if (!res.ok) httpError(res, what, client);
    if (res.status !== 206) have = 0; // the server ignored the range: start over
    progress.have(have);
    try {
      await appendBody(res, tmp, have, progress);
    } catch (e) {
      const kept = existsSync(tmp) ? statSync(tmp).size : 0;
      bad(`${what}: download interrupted (${(e as Error).message}); ${kept} bytes kept in ${tmp}, run again to resume`);
    }
  }
  const size = statSync(tmp).size;
  if (file.size !== null && size !== file.size) bad(`${what}: downloaded ${size} bytes, the hub lists ${file.size} (kept ${tmp} to resume)`);
  const digest = hashPrefix(tmp, size).digest('hex');
  if (digest !== file.sha256) {
    rmSync(tmp);
    bad(`${what}: sha256 ${digest} does not match the hub's ${file.sha256} (corrupt download removed; run again)`);
  }
  renameSync(tmp, blob);
  return file.sha256;
}

/** Write the response body to `path` from byte `from` (truncating anything after it). */
async function appendBody(res: Response, path: string, from: number, progress: DownloadProgress): Promise<void> {
  const fd = openSync(path, from > 0 ? 'r+' : 'w');
  let pos = from;
  try {
    if (!res.body) return;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (let off = 0; off < chunk.byteLength;) off += writeSync(fd, chunk, off, chunk.byteLength - off, pos + off);
      pos += chunk.byteLength;
      progress.add(chunk.byteLength);
    }
  } finally {
    closeSync(fd);
  }
}
