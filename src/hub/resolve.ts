// `--model org/name[@revision][:QUANT]`: a model by name. An existing path is used as is;
// otherwise the Hugging Face cache is searched (offline-safe), and if the snapshot is not
// complete there the files are downloaded from the hub into that same cache layout, so
// other tools share them. Offline (HF_HUB_OFFLINE=1, or the hub unreachable) the error
// names the missing file and where it looked.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { BUILTIN_MODEL_NAME } from '../model/builtin.js';
import { DeltaserveError } from '../util/errors.js';
import {
  type RepoRef, cachedCommit, describeRef, hubCacheDir, linkSnapshotFile, parseRepoRef, repoCacheDir, snapshotDir, writeRef,
} from './cache.js';
import { type HubClient, type HubFile, HubUnreachable, downloadBlob, fetchRepoInfo } from './download.js';

export { parseRepoRef };

export interface ResolveOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Progress notes (default: stderr). */
  readonly log?: (line: string) => void;
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);

/** True when `spec` names a hub repository rather than a local path. */
export function isHubReference(spec: string): boolean {
  return !existsSync(spec) && !looksLikePath(spec) && parseRepoRef(spec) !== null;
}

/** A spec that can only mean a local path, even when it does not exist: absolute or
 * explicitly relative (`./`, `../`, `~`), a Windows path, a model file name, the built-in
 * model's name, or `dir/name` where `dir` is a local directory. (`org/name` otherwise
 * reads as a hub repository.) */
export function looksLikePath(spec: string): boolean {
  if (isAbsolute(spec) || /^(\.{1,2}|~)([/\\]|$)/.test(spec) || spec.includes('\\') || /^[A-Za-z]:[/\\]/.test(spec)) return true;
  if (/\.(gguf|safetensors|json)$/i.test(spec) || spec === BUILTIN_MODEL_NAME) return true;
  const parent = dirname(spec);
  return parent !== '.' && existsSync(parent);
}

/** The error for a local path that does not exist (no network is tried for it). */
function missingPath(spec: string): DeltaserveError {
  const abs = resolve(spec);
  const what = /\.gguf$/i.test(spec) ? 'model file' : 'model directory';
  const builtin = basename(spec) === basename(BUILTIN_MODEL_NAME)
    ? ` (the built-in model: leave the model out, or pass BUILTIN_MODEL from 'deltaserve')` : '';
  return new DeltaserveError('bad_config', `${what} not found: ${abs}${spec !== abs ? ` ("${spec}" from ${process.cwd()})` : ''}${builtin}`);
}

/** A local model path for `spec` (a directory, or a .gguf file for `:QUANT` references). */
export async function resolveModelPath(spec: string, o: ResolveOptions = {}): Promise<string> {
  if (existsSync(spec)) return spec;
  const ref = looksLikePath(spec) ? null : parseRepoRef(spec);
  if (!ref) throw missingPath(spec); // a local path: never looked up on the hub
  const env = o.env ?? process.env;
  const log = o.log ?? ((l: string) => process.stderr.write(`deltaserve: ${l}\n`));
  const repoDir = repoCacheDir(hubCacheDir(env), ref);
  const commit = cachedCommit(repoDir, ref.revision);
  const cached = commit ? checkSnapshot(snapshotDir(repoDir, commit), ref) : { missing: 'refs/' + ref.revision, path: null };
  if (cached.path) return cached.path;
  const where = commit ? snapshotDir(repoDir, commit) : repoDir;
  const offline = (reason: string): never => {
    throw new DeltaserveError('bad_config',
      `model ${describeRef(ref)} (no local directory of that name) is not in the Hugging Face cache and ${reason}: ` +
      `missing ${cached.missing} (looked in ${where})`);
  };
  if (TRUE.has((env['HF_HUB_OFFLINE'] ?? '').toLowerCase())) offline('HF_HUB_OFFLINE is set');
  const client: HubClient = { endpoint: (env['HF_ENDPOINT'] ?? 'https://huggingface.co').replace(/\/+$/, ''), token: env['HF_TOKEN'] || undefined };
  try {
    return await download(client, ref, repoDir, log);
  } catch (e) {
    if (e instanceof HubUnreachable) offline(e.message);
    throw e;
  }
}

async function download(client: HubClient, ref: RepoRef, repoDir: string, log: (l: string) => void): Promise<string> {
  const info = await fetchRepoInfo(client, ref);
  const files = selectFiles(info.files, ref);
  const total = files.reduce((n, f) => n + (f.size ?? 0), 0);
  log(`fetching ${describeRef(ref)} (commit ${info.commit.slice(0, 12)}, ${files.length} files, ${(total / 1e9).toFixed(2)} GB) from ${client.endpoint} into ${repoDir}`);
  for (const f of files) {
    const key = await downloadBlob(client, ref, info.commit, f, repoDir);
    linkSnapshotFile(repoDir, info.commit, f.path, key);
  }
  writeRef(repoDir, ref.revision, info.commit);
  const snap = checkSnapshot(snapshotDir(repoDir, info.commit), ref);
  if (!snap.path) throw new DeltaserveError('bad_config', `model ${describeRef(ref)}: the repository has no ${snap.missing}`);
  return snap.path;
}

/** Files deltaserve needs from a repository listing. */
export function selectFiles(files: readonly HubFile[], ref: RepoRef): HubFile[] {
  if (ref.quant) {
    const picked = ggufMatches(files.map((f) => f.path), ref.quant);
    if (picked.length === 0) {
      const have = files.filter((f) => f.path.endsWith('.gguf')).map((f) => f.path);
      throw new DeltaserveError('bad_config',
        `model ${describeRef(ref)}: no .gguf file matches "${ref.quant}" (files: ${have.length > 0 ? have.join(', ') : 'none'})`);
    }
    return files.filter((f) => picked.includes(f.path));
  }
  return files.filter((f) => !f.path.includes('/') && /\.(json|jinja|safetensors|txt)$/.test(f.path));
}

/** .gguf paths whose file name carries `quant` as a whole token (split parts all kept;
 * vision projectors skipped); only the first base name when several match. */
function ggufMatches(paths: readonly string[], quant: string): string[] {
  const q = quant.toLowerCase();
  const hits = paths.filter((p) => {
    const file = p.split('/').pop()!.toLowerCase();
    if (!file.endsWith('.gguf') || file.includes('mmproj')) return false;
    const i = file.indexOf(q);
    return i >= 0 && !/[a-z0-9]/.test(file[i - 1] ?? '') && !/[a-z0-9]/.test(file[i + q.length] ?? '');
  }).sort();
  const base = (p: string): string => p.replace(/-\d{5}-of-\d{5}\.gguf$/, '.gguf');
  return hits.filter((p) => base(p) === base(hits[0] ?? ''));
}

/** A complete snapshot's model path, or the first missing file. */
function checkSnapshot(dir: string, ref: RepoRef): { path: string | null; missing: string } {
  if (!existsSync(dir)) return { path: null, missing: 'config.json' };
  if (ref.quant) {
    const all = listFiles(dir);
    const picked = ggufMatches(all, ref.quant);
    return picked.length > 0 ? { path: join(dir, picked[0]!), missing: '' } : { path: null, missing: `a .gguf file matching ${ref.quant}` };
  }
  for (const f of ['config.json', 'tokenizer.json']) if (!existsSync(join(dir, f))) return { path: null, missing: f };
  const index = join(dir, 'model.safetensors.index.json');
  if (existsSync(index)) {
    const map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map?: Record<string, string> }).weight_map ?? {};
    for (const shard of new Set(Object.values(map))) if (!existsSync(join(dir, shard))) return { path: null, missing: shard };
    return { path: dir, missing: '' };
  }
  if (!readdirSync(dir).some((f) => f.endsWith('.safetensors'))) return { path: null, missing: 'model.safetensors' };
  return { path: dir, missing: '' };
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, prefix))) {
    const rel = prefix ? `${prefix}/${e}` : e;
    let isDir = false;
    try {
      isDir = statSync(join(dir, rel)).isDirectory();
    } catch {
      continue; // a dangling link (blob removed): not a usable file
    }
    if (isDir) out.push(...listFiles(dir, rel));
    else out.push(rel);
  }
  return out;
}
